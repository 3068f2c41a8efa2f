"""How the cause scorer reads a sentence: references to a past change, clearings, the failing service named.

`referring` tells whether a sentence refers to a recent past change or incident ("the last cache
fix", "since the pump job", "yesterday's hotfix"); `names_subject` whether such a reference names
the failing service; `exonerated` splits a sentence that clears its subject ("X was not involved").
The words are groups of the `Lexicon` given (default: the shipped `DEFAULT_LEXICON`); `patterns`
compiles them once per lexicon. `memory.graph.causes` weighs what they find.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.text import causal_cue, mentions, split_negation, split_sentences


class Patterns(NamedTuple):
    """What the scorer reads in a sentence, compiled from one lexicon's groups."""

    # a definite or dated reference to a change or an incident ("the last cache fix", "since the
    # kernel-patch change", "yesterday's hotfix", "the earlier outage"); a release or rollout is a change
    # of its own, not the fix of an earlier incident (group ``change_nouns``)
    past_reference: re.Pattern[str]
    # work dated by a connective ("the day after the valve work", "since the pump job", "during last
    # month's coolant flush"); without the connective "the work" or "the job" is too often something else
    work_reference: re.Pattern[str]
    # a change dated months or years back ("last oil change 14 months ago"): far beyond the look-back of
    # the cause rules (`GraphConfig.cause_window_s`, 14 days), so not one of the changes they rank
    long_ago: re.Pattern[str]
    attached: re.Pattern[str]  # what a reference is attached to after its noun ("the fix to billing")
    undo: re.Pattern[str]  # a fix that undoes an earlier change (its shared terms then count as evidence)
    change_word: re.Pattern[str]  # a change word of the causal cue (the rest of a dated reference describes the change)
    change_verbs: re.Pattern[str]  # past-tense verbs of a change (with the causal cue: "was replaced on Monday")
    # a sentence clearing its subject ("X was not involved", "X had nothing to do with it")
    exoneration: re.Pattern[str]
    causal_cue: re.Pattern[str]  # `memory.text.causal_cue`


@lru_cache(maxsize=8)
def patterns(lexicon: Lexicon = DEFAULT_LEXICON) -> Patterns:
    """The scorer's patterns compiled from `lexicon` (once per lexicon)."""
    lx, i = lexicon, re.IGNORECASE
    return Patterns(
        re.compile(
            rf"\b(?:{lx['reference_determiners']})\s+((?:[\w\-]+\s+){{0,4}}?)(?:{lx['change_nouns']})\b"
            rf"(?!\s+(?:{lx['not_a_past_change']}))",
            i,
        ),
        re.compile(
            rf"\b(?:{lx['work_connectives']})\s+(?:{lx['work_determiners']})\s+((?:[\w\-]+\s+){{0,3}}?)"
            rf"(?:{lx['work_nouns']})\b(?!\s+(?:{lx['not_work']}))",
            i,
        ),
        re.compile(rf"\b(?:{lx['long_ago_counts']})\s+(?:months|years)\s+ago\b|\ba year ago\b", i),
        re.compile(rf"\s+(?:[\w\-]+\s+){{0,2}}?(?:{lx['attached_prepositions']})\s+((?:the\s+)?[\w\-.]+)", i),
        re.compile(rf"\b(?:{lx['undo']})\b", i),
        re.compile(rf"\b(?:{lx['change_words']})\b", i),
        re.compile(rf"\b(?:{lx['change_verbs']}|(?:{lx['receiving_verbs']}) (?:{lx['determiners']}) new)\b", i),
        re.compile(
            rf"^(?P<subject>.{{1,120}}?)\s+(?:(?:{lx['be_forms']})\s+(?:not|never)\s+"
            rf"(?:{lx['exonerating_predicates']})\b|(?:{lx['have_forms']})\s+nothing to do with\b)",
            i,
        ),
        causal_cue(lx),
    )


PAST_REFERENCE = patterns().past_reference  # of the shipped lexicon


@lru_cache(maxsize=65536)
def exonerated(sentence: str, lexicon: Lexicon = DEFAULT_LEXICON) -> tuple[str, str] | None:
    """(affirmed, denied) of a sentence that clears its subject ("the payments retry change was not
    involved", "X had nothing to do with it"), or None: the subject is denied and what follows the
    clearing predicate is read as usual."""
    found = patterns(lexicon).exoneration.match(sentence.strip())
    if found is None:
        return None
    rest = split_negation(sentence.strip()[found.end() :], lexicon)
    return rest[0], " ".join(part for part in (found.group("subject"), rest[1]) if part)


@lru_cache(maxsize=65536)  # the scorer reads a principal's recent sentences again for every new incident
def referring(sentence: str, lexicon: Lexicon = DEFAULT_LEXICON) -> bool:
    """Whether a sentence refers to a recent past change or incident; one dated months or years
    ago (`Patterns.long_ago`) does not."""
    p = patterns(lexicon)
    if p.long_ago.search(sentence):
        return False
    if p.past_reference.search(sentence) or p.work_reference.search(sentence):
        return True
    return bool(p.causal_cue.search(sentence)) and bool(p.change_verbs.search(sentence))


@lru_cache(maxsize=65536)
def not_referring(observation: str, lexicon: Lexicon = DEFAULT_LEXICON) -> bool:
    """Whether an earlier incident's observation tells what that incident was, not what caused it:
    a sentence referring to a yet earlier change describes that change, and two incidents that
    both refer to past changes in the same words share no symptom by it."""
    return not any(referring(s, lexicon) for s in split_sentences(observation))


def names_subject(
    sentence: str, reference: re.Match[str], subject: str | None, lexicon: Lexicon = DEFAULT_LEXICON
) -> bool:
    """Whether a past reference (a `Patterns.past_reference` or ``work_reference`` match in `sentence`) names the
    failing service: before its noun ("the billing fix") or attached after it ("the fix to billing")."""
    if mentions(reference.group(1), subject):
        return True
    after = patterns(lexicon).attached.match(sentence, reference.end())
    return after is not None and mentions(after.group(1), subject)


def forget_cached_text() -> None:
    """Empty this module's caches keyed by text (an erasure: `memory.retrieval.text_caches`)."""
    exonerated.cache_clear()
    referring.cache_clear()
    not_referring.cache_clear()
