"""Outcome detection: how an episode ended, read from its entries (never from ground truth).

Outcomes are detected in this order of precedence:

1. structured status: the last outcome entry whose metadata holds a status-like key
   (``status``, ``state``, ``result``, ``conclusion``, ``verdict``, ``outcome``, at any
   depth) with a known value: success/passed/ok/green → SUCCESS, failure/failed/error/red →
   FAILURE, partial/degraded/flaky/unstable → PARTIAL;
2. a correction after a decision ⇒ FAILURE of that attempt;
3. outcome text, then correction text, through the cue words of the lexicon (`memory.lexicon`,
   groups ``success_cues``, ``failure_cues``, ``partial_cues``, ``symptom_nouns``, ``negators``); the last
   clause (split at ``; . : !`` and "but") that holds a cue decides: success cues only →
   SUCCESS, failure cues only → FAILURE, partial cues or both → PARTIAL. A negator ("not",
   "no", "no longer", "never", "without", "n't", …) among the three words before a cue flips
   success ↔ failure ("not fixed", "did not help", "no longer failing"); a negated symptom
   noun is a success cue ("no errors", "no more failures"). A success clause
   undercut by "but" and a clause without a success cue ("green, but stale prices
   reported") is a FAILURE, or PARTIAL when that clause holds a partial cue. What describes
   the state before the fix holds no cue: a past-perfect relative clause ("whose regulator had
   failed"), a cue word used as an adjective ("the failed disk"), what a new thing does
   ("added a check that fails the deploy on …"), and a failure clause before a later action
   whose result is reported after it, or that says what was or had been wrong ("the seal was
   broken, so … Replaced the seal; pressure holds at 4 bar"; "the volume was degraded. Moved
   leadership off it"), and a past-perfect verb ("had gone live", "had been carrying"). "no-reads"
   is a noun, not a negation, and so are "no work on the pump" and "the regression pipeline"
   (``cue_nouns``); "no … work needed" says what was not needed;
4. an outcome report with no cue at all after a decision or action in the same episode
   (a change reported without any problem) ⇒ SUCCESS, marked as such in the evidence;
5. nothing ⇒ UNKNOWN.

Every word the rules read is a group of the `Lexicon` the classifier is given (default: the
shipped `DEFAULT_LEXICON`); the patterns are compiled once per lexicon (`patterns`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from memory.episodes.model import Outcome
from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.text import trim, words
from memory.timeline import Entry, Kind


class OutcomeVerdict(NamedTuple):
    """A detected outcome and what it was detected from."""

    outcome: Outcome  # detected outcome
    evidence: str  # metadata status or text cue, with the source text


_CLAUSES = re.compile(r"[;.!?:]\s+|[;!?]|\bbut\b|\n")
# "added an alert that fires when the queue passes 1,000", "a check that stops the deploy when fewer than …":
# what a new thing does, not how the attempt ended
_DESCRIBED = re.compile(r"\b(?:a|an)\s+(?:[\w-]+\s+){0,3}?(?:that|which)\s.*$")
# "`egressctl creds reload --all` brought the ratio down": a command in backticks before the action's verb
_LEADING_CODE = re.compile(r"^\s*`[^`]*`\s*")
_FLIP = {Outcome.SUCCESS: Outcome.FAILURE, Outcome.FAILURE: Outcome.SUCCESS, Outcome.PARTIAL: Outcome.PARTIAL}


class Patterns(NamedTuple):
    """The classifier's words, compiled from one lexicon (see the module docstring)."""

    status_keys: tuple[str, ...]  # metadata keys holding a structured status
    status_values: dict[str, Outcome]  # a structured status value → its outcome
    negators: frozenset[str]  # a negator among the three words before a cue flips it
    negated_symptom: re.Pattern[str]  # "no errors", "zero alerts": a success cue
    earlier_state: re.Pattern[str]  # a past-perfect relative clause: the state before the fix
    attributive: re.Pattern[str]  # a cue word used as an adjective ("the failed disk")
    not_needed: re.Pattern[str]  # after a negated cue: what was not needed
    negator_compound: re.Pattern[str]  # "no-reads", "non-zero": a noun or adjective, not a negation
    cue_nouns: re.Pattern[str]  # a cue word that is a noun ("no work on the pump"): no outcome
    past_perfect: re.Pattern[str]  # "had gone live", "had been carrying": what came before the fix
    found_state: re.Pattern[str]  # a clause stating what was or had been wrong ...
    action_start: re.Pattern[str]  # ... before a later clause reporting the next action
    conditional: re.Pattern[str]  # what something does from now on under a condition ("now fails if ...")
    cues: tuple[tuple[Outcome, re.Pattern[str]], ...]  # failure, partial and success cues


def _cue_pattern(cues: Sequence[str]) -> re.Pattern[str]:
    ordered = sorted(cues, key=len, reverse=True)  # multi-word phrases before their words
    return re.compile(r"\b(?:" + "|".join(ordered) + r")\b")


@lru_cache(maxsize=8)
def patterns(lexicon: Lexicon = DEFAULT_LEXICON) -> Patterns:
    """The classifier's patterns compiled from `lexicon` (once per lexicon)."""
    lx = lexicon
    values = {
        **dict.fromkeys(lx.words("status_success"), Outcome.SUCCESS),
        **dict.fromkeys(lx.words("status_failure"), Outcome.FAILURE),
        **dict.fromkeys(lx.words("status_partial"), Outcome.PARTIAL),
    }
    return Patterns(
        lx.words("status_keys"),
        values,
        lx.word_set("negators"),
        re.compile(rf"\b(?:{lx['symptom_negators']})\s+(?:[\w-]+\s+){{0,2}}?(?:{lx['symptom_nouns']})\b"),
        # "the alternator, whose regulator had failed" / "the test that had been failing"
        re.compile(rf"\b(?:{lx['relative_pronouns']})\s+(?:[\w-]+\s+){{0,3}}?had\s+(?:been\s+)?[\w-]+(?:ed|en|ing)\b"),
        re.compile(rf"\b(?:{lx['attributive_determiners']})\s+(?:{lx['fault_adjectives']})\s+(?=[a-z])"),
        re.compile(rf"\s+(?:was\s+|were\s+)?(?:{lx['not_needed']})\b"),
        re.compile(rf"\b(?:{lx['negator_prefixes']})-(?=[a-z0-9])"),
        re.compile(rf"\b(?:{lx['cue_nouns']})\b"),
        re.compile(rf"\b(?:{lx['past_perfect']})\b"),
        # "the seal was broken", "found the job still reading the old path" ...
        re.compile(rf"\b(?:{lx['found_state']})\b"),
        # ... then "Replaced the seal", "Re-seated the card", "Took the node out of the pool"
        re.compile(rf"^\s*(?:{lx['action_start']})\b"),
        # "the planner now fails loudly if input covers less than 95%": a behaviour from now on, no outcome
        re.compile(rf"\b(?:{lx['from_now_on']})\s+(?:[\w-]+\s+){{0,4}}?(?:{lx['conditions']})\b.*$"),
        tuple(
            (outcome, _cue_pattern(lx.words(group)))
            for outcome, group in (
                (Outcome.FAILURE, "failure_cues"),
                (Outcome.PARTIAL, "partial_cues"),
                (Outcome.SUCCESS, "success_cues"),
            )
        ),
    )


def _blank(text: str, match: re.Match[str]) -> str:
    """`text` with the match replaced by spaces, so later patterns cannot reuse its words."""
    return text[: match.start()] + " " * len(match.group(0)) + text[match.end() :]


def _clause_cues(clause: str, p: Patterns) -> list[tuple[Outcome, str]]:
    found: list[tuple[Outcome, str]] = []
    masked = p.negator_compound.sub(lambda m: " " * len(m.group(0)), clause)
    for pattern in (p.earlier_state, p.attributive, _DESCRIBED, p.conditional, p.cue_nouns, p.past_perfect):
        for match in pattern.finditer(clause):
            masked = _blank(masked, match)
    for match in p.negated_symptom.finditer(masked):
        found.append((Outcome.SUCCESS, match.group(0)))
        masked = _blank(masked, match)
    for polarity, pattern in p.cues:
        for match in pattern.finditer(masked):
            before = words(masked[: match.start()])[-3:]
            negated = any(word in p.negators or word.endswith("n't") for word in before)
            if negated and p.not_needed.match(masked, match.end()):
                masked = _blank(masked, match)
                continue
            phrase = " ".join(before[-1:] + [match.group(0)]) if negated else match.group(0)
            found.append((_FLIP[polarity] if negated else polarity, phrase))
            masked = _blank(masked, match)
    return found


def _clause_verdict(cues: list[tuple[Outcome, str]]) -> Outcome:
    kinds = {polarity for polarity, _ in cues}
    if Outcome.PARTIAL in kinds or kinds == {Outcome.SUCCESS, Outcome.FAILURE}:
        return Outcome.PARTIAL
    return kinds.pop() if kinds else Outcome.UNKNOWN


def _clauses(lowered: str) -> list[tuple[str, bool]]:
    """Non-empty clauses of a lower-cased text, each with whether "but" introduced it."""
    clauses: list[tuple[str, bool]] = []
    position, but = 0, False
    for match in _CLAUSES.finditer(lowered):
        clauses.append((lowered[position : match.start()], but))
        position, but = match.end(), match.group(0).strip() == "but"
    clauses.append((lowered[position:], but))
    return [(c, b) for c, b in clauses if c.strip()]


def classify_text(text: str, lexicon: Lexicon = DEFAULT_LEXICON) -> OutcomeVerdict:
    """Outcome of one outcome or correction text through the cue words of `lexicon`."""
    p = patterns(lexicon)
    clauses = _clauses(text.lower())
    acted = False  # whether a later clause reported an action (see `Patterns.found_state`)
    reported = False  # whether a later action was followed by what came of it
    for index in range(len(clauses) - 1, -1, -1):
        clause = clauses[index][0]
        cues = _clause_cues(clause, p)
        if not cues:
            if p.action_start.match(_LEADING_CODE.sub("", clause)):
                acted, reported = True, reported or index < len(clauses) - 1
            continue
        verdict = _clause_verdict(cues)
        if verdict in (Outcome.FAILURE, Outcome.PARTIAL) and (reported or (acted and p.found_state.search(clause))):
            continue  # the fault the later action addressed, not how the attempt ended (see `Patterns.found_state`)
        shown = ", ".join(f"'{phrase}'" for _, phrase in cues)
        later = clauses[index + 1] if index + 1 < len(clauses) else None
        if verdict == Outcome.SUCCESS and later is not None and later[1]:
            return OutcomeVerdict(Outcome.FAILURE, f"text cue {shown} undercut by 'but {trim(later[0].strip(), 60)}'")
        return OutcomeVerdict(verdict, f"text cue {shown}")
    return OutcomeVerdict(Outcome.UNKNOWN, "no outcome cue")


def _structured_status(metadata: Any, p: Patterns) -> str | None:
    if isinstance(metadata, Mapping):
        for key in p.status_keys:
            value = metadata.get(key)
            if isinstance(value, str) and value.strip().lower() in p.status_values:
                return value.strip().lower()
        for value in metadata.values():
            found = _structured_status(value, p)
            if found is not None:
                return found
    elif isinstance(metadata, list):
        for value in metadata:
            found = _structured_status(value, p)
            if found is not None:
                return found
    return None


def _quote(text: str, limit: int = 100) -> str:
    return f'"{trim(text, limit)}"'


def detect_outcome(entries: Sequence[Entry], lexicon: Lexicon = DEFAULT_LEXICON) -> OutcomeVerdict:
    """Detect an episode's outcome from its entries (see the module docstring), with the words of `lexicon`."""
    p = patterns(lexicon)
    outcomes = [e for e in entries if e.kind == Kind.OUTCOME]
    for entry in reversed(outcomes):
        status = _structured_status(entry.metadata, p)
        if status is not None:
            return OutcomeVerdict(
                p.status_values[status], f"structured status '{status}' on outcome {_quote(entry.text)}"
            )
    first_decision = next((i for i, e in enumerate(entries) if e.kind == Kind.DECISION), None)
    if first_decision is not None:
        corrections = [e for e in entries[first_decision:] if e.kind == Kind.CORRECTION]
        if corrections:
            return OutcomeVerdict(Outcome.FAILURE, f"correction after the decision: {_quote(corrections[-1].text)}")
    for kind in (Kind.OUTCOME, Kind.CORRECTION):
        for entry in reversed([e for e in entries if e.kind == kind]):
            verdict = classify_text(entry.text, lexicon)
            if verdict.outcome != Outcome.UNKNOWN:
                return OutcomeVerdict(verdict.outcome, f"{verdict.evidence} in {kind.value} {_quote(entry.text)}")
    changed = next((i for i, e in enumerate(entries) if e.kind in (Kind.DECISION, Kind.ACTION)), None)
    if changed is not None:
        report = next((e for e in reversed(entries[changed:]) if e.kind == Kind.OUTCOME), None)
        if report is not None:
            return OutcomeVerdict(Outcome.SUCCESS, f"outcome after a change with no problem cue: {_quote(report.text)}")
    return OutcomeVerdict(Outcome.UNKNOWN, "no outcome signal")
