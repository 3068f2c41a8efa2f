"""The one text module: words, stems, stop words, negation and cue-word lists.

Every layer that reads text goes through here, so that what counts as a word, a negation or
an outcome cue is written down once. All vocabulary in this module is generic English: no
list may hold a word or phrase taken from one scenario's wording (a cue that only works
because a scenario happens to say it would make every measurement on that scenario a
measurement of the lexicon, not of the memory).

Contents:

- words and stems: `words` (raw lower-case words, apostrophes kept), `stems` (content-word
  stems for overlap scores), `split_sentences`, `trim`;
- negation: `NEGATORS` (words that flip the cue after them), `split_negation` (what a text
  affirms and what it denies);
- outcome cues: `SUCCESS_CUES`, `FAILURE_CUES`, `PARTIAL_CUES`, `SYMPTOM_NOUNS`.
"""

from __future__ import annotations

import re
from functools import lru_cache

# -- words and stems ------------------------------------------------------------------------

# Generic English function words, plus a few very common adverbs and numerals that carry no
# topic. Used by `stems`; words of two letters or fewer are dropped there anyway.
STOP_WORDS = frozenset(
    "a an the and or but if then than of in on at to for from by with without into onto over under "
    "is are was were be been being it its this that these those there here as so such not no nor "
    "we our you your they their he she his her i me my do does did done have has had having "
    "after before during while when where which who whom what why how all any each some more most "
    "very can could should would may might must will shall about up down out off per via also just "
    "only still again same other another new old one two three".split()
)
STEM_LENGTH = 6  # word stems: the first six letters ("exhausted" ~ "exhaustion")

_STEM_WORD = re.compile(r"[a-z][a-z0-9]+", re.I)
_WORD = re.compile(r"[a-z0-9']+")  # apostrophes kept: "didn't" is one (negating) word
_SENTENCE = re.compile(r"(?<=[.;!?])\s+|\n")


def words(lowered: str) -> list[str]:
    """Words of an already lower-cased text, in order (digits and apostrophes kept)."""
    return _WORD.findall(lowered)


@lru_cache(maxsize=65536)
def stems(text: str) -> frozenset[str]:
    """Content-word stems of `text` (lower-cased, stop words dropped, truncated)."""
    return frozenset(word.lower()[:STEM_LENGTH] for word in _STEM_WORD.findall(text.replace("_", " "))
                     if word.lower() not in STOP_WORDS and len(word) > 2)


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`: split after ``. ; ! ?`` followed by space, and at line breaks."""
    return _SENTENCE.split(text)


def trim(text: str, limit: int) -> str:
    """Whitespace-collapsed `text`, cut at a word boundary to at most `limit` characters."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] if " " in text[: limit - 1] else text[: limit - 1]
    return cut.rstrip(" ,;:") + "…"


# -- negation -------------------------------------------------------------------------------

# Generic English negators. A negator among the few words before an outcome cue flips it
# ("not fixed", "did not help", "no longer failing"); "longer" completes "no longer".
NEGATORS = frozenset({"not", "no", "never", "without", "nor", "neither", "cannot", "none", "zero", "hardly",
                      "didn't", "doesn't", "don't", "isn't", "wasn't", "aren't", "weren't", "hasn't", "haven't",
                      "won't", "can't", "couldn't", "longer"})

# Generic English negation and contrast markers: what follows them in a clause is denied.
_NEGATION = re.compile(r"\b(?:not|never|no|none|without|rather than|instead of|isn't|wasn't|aren't|weren't|"
                       r"doesn't|didn't|no longer)\b", re.I)
# Generic English words for "in its normal state": such a clause reports a symptom's absence.
_NOMINAL = re.compile(r"\b(?:quiet|normal|healthy|idle|unchanged|nominal|fine|ok|green|steady|stable|"
                      r"within limits|as usual)\b", re.I)
# Clause breaks: punctuation and generic English contrastive conjunctions.
_CLAUSE = re.compile(r"[.;:!?,]\s+|\s+(?:but|while|whereas|although)\s+|\n")


def split_negation(text: str) -> tuple[str, str]:
    """Split text into what it affirms and what it denies, clause by clause.

    Within a clause (split at punctuation and contrastive conjunctions) the words after a
    negation cue ("not", "no", "without", "rather than", …) are denied, the words before it
    affirmed; a clause that reports a normal state ("quiet", "healthy", "idle", …) is denied
    as a whole: "database idle, no lock waits" reports the absence of those symptoms.
    """
    affirmed, denied = [], []
    for clause in _CLAUSE.split(text):
        if not clause.strip():
            continue
        if _NOMINAL.search(clause):
            denied.append(clause)
            continue
        match = _NEGATION.search(clause)
        if match:
            affirmed.append(clause[: match.start()])
            denied.append(clause[match.end():])
        else:
            affirmed.append(clause)
    return " ".join(part.strip() for part in affirmed if part.strip()), " ".join(
        part.strip() for part in denied if part.strip())


# -- outcome cues ---------------------------------------------------------------------------
# Regexes over lower-case text, matched on word boundaries. Generic English words and phrases
# for "it worked", "it did not work" and "it half worked"; none is taken from a scenario.

# Generic English for a problem that went away or an attempt that worked.
SUCCESS_CUES = (
    "resolved", "fixed", "recovered", "restored", "cleared", "gone", "stopped", "passed", "passes",
    "confirmed", "succeeded", "succeeds?", "successful(?:ly)?", "green", "healthy", "back to", "returned to",
    "normal", "stable", "works?", "working", "helped", "helps?", "improved", "improvement",
    "finished", "finish(?:es)?", "completed?", "completes", "solved", "mitigated",
    "pass", "stops?", "under control",
)
# Generic English for a problem that stayed, came back, or was only covered up or put off.
FAILURE_CUES = (
    "persists?", "persisted", "persisting", "still", "continues?", "continued", "continuing", "unchanged",
    "failed", "fails", "failing", "ongoing", "worse", "worsened", "regress(?:ed|ion)?", "recurr(?:ed|ing|s)?",
    "broken", "remains?", "remained", "no change", "changed nothing", "nothing changed", "no effect",
    "no difference", "stopped working", "not resolved", "keeps? failing", "mask(?:s|ed|ing)?",
    "only (?:delay|postpone|allow|shift|move)\\w*", "postpone[sd]?", "(?:shows?|showed) the same",
)
# Generic English for an improvement short of a fix.
PARTIAL_CUES = (
    "partial(?:ly)?", "degraded", "somewhat", "mostly", "some improvement", "improved but", "reduced",
    "fewer", "only some", "in part", "slightly", "a bit",
)
# Generic nouns for a symptom; negated ("no errors", "zero alerts") they report success.
SYMPTOM_NOUNS = ("errors?|failures?|timeouts?|exceptions?|alerts?|spikes?|5xx|incidents?|issues?|problems?|alarms?"
                 "|crash(?:es)?|restarts?|kills?|leaks?")
