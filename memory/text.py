"""The one text module: words, stems, stop words, negation and cue-word lists.

Every layer that reads text goes through here, so that what counts as a word, a negation or
an outcome cue is written down once. All vocabulary in this module is generic English: no
list may hold a word or phrase taken from one scenario's wording (a cue that only works
because a scenario happens to say it would make every measurement on that scenario a
measurement of the lexicon, not of the memory).

Contents:

- words and stems: `words` (raw lower-case words, apostrophes kept), `stems` (content-word
  stems for overlap scores), `word_counts` (content-word counts for text similarity),
  `terms` and `normalize_term` (normalized content terms of fact conditions),
  `split_sentences`, `trim`;
- negation: `NEGATORS` (words that flip the cue after them), `split_negation` (what a text
  affirms and what it denies), `affirmed_clauses` (only the clauses stated as present),
  `all_clear` and `read_as_found` (the sentence of an observation line that reports a look
  which found nothing wrong, and the line without it);
- outcome cues: `SUCCESS_CUES`, `FAILURE_CUES`, `PARTIAL_CUES`, `SYMPTOM_NOUNS`;
- causal cues: `CHANGE_WORDS`, `CAUSAL_CUE` (a sentence tracing a symptom to an earlier change).

The three tokenizers (`stems`, `word_counts`, `terms`) keep their own stop-word lists: each
list was measured with its tokenizer, and merging them changes results.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from typing import Iterable, Sequence

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


# Generic English function words of three or more letters (`word_counts` drops shorter words).
COUNT_STOP_WORDS = frozenset("the and for with from that this was were are has had have not but its into than then "
                             "after since all any per our out one two off via".split())
_COUNT_WORD = re.compile(r"[a-z][a-z0-9_\-]{2,}")


def word_counts(text: str) -> Counter[str]:
    """Content words of a text with their counts (lowercase, 3+ characters, no stop words)."""
    return Counter(t for t in _COUNT_WORD.findall(text.lower()) if t not in COUNT_STOP_WORDS)


# Generic English function words (a standard English stop list), plus "per", "via", "still".
TERM_STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers him his how i if in into is it its
    itself just me more most my no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their them then there these they
    this those through to too under until up very was we were what when where which while
    who whom why will with would you your yours per via still only""".split()
)
_TERM_WORD = re.compile(r"[a-z][a-z0-9]*", re.ASCII)


# Generic English words for when something happened (normalized like `terms`): a lesson's
# condition names what was seen, not the day it was seen.
TIME_WORDS = frozenset("yesterday today tomorrow tonight morning afternoon evening night overnight hour minute "
                       "second day week month year ago earlier later recently monday tuesday wednesday thursday "
                       "friday saturday sunday".split())


@lru_cache(maxsize=1 << 16)  # a site's vocabulary is small: its texts repeat the same words
def normalize_term(word: str) -> str:
    """Lower-cased word with a light, documented suffix strip (-ing, -ed, -es after a sibilant, -s)."""
    word = word.lower()
    if word.endswith("ing") and len(word) >= 7:
        return word[:-3]
    if word.endswith("ed") and len(word) >= 6:
        return word[:-2]
    if word.endswith(("sses", "ches", "shes", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) >= 4:
        return word[:-1]
    return word


@lru_cache(maxsize=8192)  # the graph rules and lessons read the same recent texts for every new episode
def terms(text: str) -> frozenset[str]:
    """Normalized content terms of a text: alphabetic words of 3+ letters, no stop words."""
    found = set(_TERM_WORD.findall(text.lower()))  # each distinct word once
    return frozenset(normalize_term(w) for w in found if len(w) >= 3 and w not in TERM_STOP_WORDS)


_WRITTEN_WORD = re.compile(r"[a-z][a-z0-9]*", re.ASCII | re.IGNORECASE)  # `_TERM_WORD`, for text not lower-cased


def term_wording(text: str) -> dict[str, str]:
    """Each term of a text (as `terms` normalizes it) → the word the text first wrote for it, as written."""
    wording: dict[str, str] = {}
    for match in _WRITTEN_WORD.finditer(text):
        word = match.group()
        if len(word) >= 3 and word.lower() not in TERM_STOP_WORDS:
            wording.setdefault(normalize_term(word), word)
    return wording


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
_NEGATION = re.compile(r"\b(?:not|never|no|none|nothing|nobody|neither|nor|without|rather than|instead of|isn't|"
                       r"wasn't|aren't|weren't|doesn't|didn't|hasn't|haven't|hadn't|no longer)\b", re.I)
# Generic English words for "in its normal state": such a clause reports a symptom's absence.
_NOMINAL = re.compile(r"\b(?:quiet|normal|healthy|idle|unchanged|nominal|fine|ok|green|steady|stable|"
                      r"within limits|as usual)\b", re.I)
# "Normal" as the yardstick of a comparison, not a report of a normal state: after a determiner,
# possessive or comparing word ("3.7× its normal level", "against a normal 100%", "slower than
# normal", "above normal"). Generic English; "back to normal" and "pressure normal" stay reports.
# Where the words came from: the PetShop importer's dashboard lines (scenarios/importers/petshop.py,
# "its normal level", "against a normal 100%"; the project's own wording, so this rule reads text the
# project writes) and, as general English, "than normal" in held-out files in other domains. The
# word list is English determiners and comparison words, none taken from one file alone.
_NOMINAL_REFERENCE = re.compile(r"\b(?:its|their|his|her|our|the|a|an|than|above|below|over|under|against|versus|vs\.?|"
                                r"from|beyond|past|exceed(?:s|ed|ing)?)\s+(?:normal|nominal)\b", re.I)
# Clause breaks: punctuation and generic English contrastive conjunctions.
_CLAUSE = re.compile(r"[.;:!?,]\s+|\s+(?:but|while|whereas|although)\s+|\n")
# Where a negation's scope ends inside a clause: a conjunction that starts another statement
# ("the exchanger gave no cooling *and* the milk arrived warm": the milk arriving warm is affirmed).
_SCOPE_END = re.compile(r"\s+(?:and|so|because|until|then)\s+", re.I)
_PRONOUN = re.compile(r"nothing|none|nobody", re.I)  # negation cues that are a whole phrase of their own


def _reports_normal(clause: str) -> bool:
    """Whether a clause reports a normal state (`_NOMINAL`), not counting "normal" used as a yardstick."""
    return bool(_NOMINAL.search(_NOMINAL_REFERENCE.sub(" ", clause)))


def _clauses(text: str) -> list[tuple[str, bool]]:
    """The clauses of `text` (split at punctuation and contrastive conjunctions), each with whether
    it reports a normal state: it says so itself ("pressure normal"), or it is the label of a
    report whose status does ("borehole pump checked: running, pressure normal" reports the
    pump normal, though the label has no such word)."""
    out: list[tuple[str, bool]] = []
    for line in text.split("\n"):
        label, colon, status = line.partition(": ")
        statuses = [(c, _reports_normal(c)) for c in _CLAUSE.split(status) if c.strip()] if colon else []
        heads = [c for c in _CLAUSE.split(label if colon else line) if c.strip()]
        reported = any(normal for _, normal in statuses)
        last = len(heads) - 1
        out += [(c, (reported and i == last) or _reports_normal(c)) for i, c in enumerate(heads)]
        out += statuses
    return out


def split_negation(text: str) -> tuple[str, str]:
    """Split text into what it affirms and what it denies, clause by clause.

    Within a clause (split at punctuation and contrastive conjunctions) the words after a
    negation cue ("not", "no", "without", "rather than", …) are denied, up to a conjunction
    that starts another statement ("and", "so", "because", …); the words before the cue and
    after that conjunction are affirmed; a clause that reports a normal state ("quiet", "healthy", "idle", …) is denied
    as a whole: "database idle, no lock waits" reports the absence of those symptoms, and so
    is the label of a report whose status does ("pump checked: running, pressure normal").
    """
    affirmed, denied = [], []
    for clause, normal in _clauses(text):
        if normal:
            denied.append(clause)
            continue
        while (match := _NEGATION.search(clause)) is not None:
            affirmed.append(clause[: match.start()])
            end = _scope_end(clause, match)
            denied.append(clause[match.end(): end.start() if end else len(clause)])
            clause = clause[end.end():] if end else ""
        affirmed.append(clause)
    return " ".join(part.strip() for part in affirmed if part.strip()), " ".join(
        part.strip() for part in denied if part.strip())


def _scope_end(clause: str, negation: re.Match[str]) -> re.Match[str] | None:
    """The conjunction that ends a negation's scope in `clause`, or None when it runs to the end.

    A particle needs a denied word before it ("not so bad" is one idiom); a cue that is a
    phrase of its own ends at the next conjunction ("did nothing and the milk arrived warm").
    """
    end = _SCOPE_END.search(clause, negation.end())
    if _PRONOUN.fullmatch(negation.group()):
        return end
    while end is not None and not clause[negation.end(): end.start()].strip():
        end = _SCOPE_END.search(clause, end.end())
    return end


# Generic English for a report of having looked at something ("softener checked", "re-checked today",
# "verified", "on inspection"): such a sentence reports what the look found. Not inside a name
# ("payments.confirm"), and not the bare "check", which is as often an order or a plan as a report.
_LOOKED = re.compile(r"(?<![\w.-])(?<!\bis )(?<!\bare )(?:checked|re-?checked|verified|inspected|on inspection|tested|"
                     r"confirm(?:s|ed)?)(?![\w-]|\.\w)", re.I)  # "a field that is checked" describes, it reports no look
# Generic English contrast: what follows it in a look's sentence is what the look found wrong ("checked, but …").
_CONTRAST = re.compile(r"\b(?:but|yet|however|although|though|except)\b", re.I)
# Generic English for something a look found wrong.
_FOUND_WRONG = re.compile(r"\b(?:trip(?:s|ped)?|fail(?:s|ed|ing|ure|ures)?|fault(?:s|y|ed)?|broken|dead|stuck|blocked|"
                          r"clogged|choked|jammed|empty|leak(?:s|ed|ing)?|overdue|missing|damaged|worn|cracked|burnt|"
                          r"burned|corroded|loose|seized|silent|wrong|bad|abnormal|errors?|alarms?)\b", re.I)


@lru_cache(maxsize=1)
def looked_terms() -> frozenset[str]:
    """The terms of the words for a look themselves (a correction that says "check X" shares them)."""
    return terms(" ".join(["checked", "rechecked", "re-checked", "check", "checks", "verified", "inspected",
                           "inspection", "tested", "confirm", "confirms", "confirmed"]))


def all_clear(line: str) -> str:
    """The sentence of an observation line that reports a look which found nothing wrong ("" when none).

    It is the first sentence that names a look (`_LOOKED`: "Softener checked: salt level full,
    hardness zero"; "Load wet. We checked the drain first.") and affirms nothing found wrong
    (`_FOUND_WRONG`; "checked the pump: tripped" is a symptom, "checked the logs: no errors" is
    not), with no contrast after the look ("checked, but the valve was left shut"). The line's
    other sentences are read as they are.
    """
    start, end = _all_clear_span(line)
    return line[start:end]


def read_as_found(line: str) -> str:
    """An observation line without its all-clear sentence (`all_clear`)."""
    start, end = _all_clear_span(line)
    return line[:start] + " " + line[end:] if end > start else line


@lru_cache(maxsize=8192)  # the reasoner reads each observation line once per candidate
def _all_clear_span(line: str) -> tuple[int, int]:
    """Where `all_clear`'s sentence starts and ends in the line ((0, 0) when there is none)."""
    found = _LOOKED.search(line)
    if found is None:
        return 0, 0
    start = max((m.end() for m in _SENTENCE.finditer(line, 0, found.start())), default=0)
    after = _SENTENCE.search(line, found.end())
    end = after.start() if after else len(line)
    sentence = line[start:end]
    found_wrong = _FOUND_WRONG.search(split_negation(sentence)[0]) or _CONTRAST.search(line, found.end(), end)
    return (0, 0) if found_wrong else (start, end)


@lru_cache(maxsize=8192)
def affirmed_clauses(text: str) -> str:
    """The clauses of `text` that state something as present: no negation cue, no normal-state report.

    Stricter than `split_negation`: "the proxy has not been touched in weeks" affirms nothing
    about the proxy (the words before "not" are its subject, not a symptom), so a clause with a
    negation cue is dropped whole, and so is a sentence that reports a look which found nothing
    wrong (`all_clear`). Used where a detail must be *present* to count (lesson
    conditions, incident closeness); corrections, which reject one thing and affirm another,
    are read with `split_negation`.
    """
    lines = [read_as_found(line) for line in text.split("\n")]
    kept = [clause for clause, normal in _clauses("\n".join(lines)) if not normal and not _NEGATION.search(clause)]
    return " ".join(clause.strip() for clause in kept)


# A run of ASCII digits that starts a token: at the start of a line or after whitespace or ASCII
# punctuation. No term holds it (a term starts with a letter, `_TERM_WORD`) and no clause or negation
# rule reads digits, so two lines that differ only in such numbers have the same terms.
_FREE_NUMBER = re.compile(r"(?<![^\s!-/:-@\[-`{-~])[0-9]+")


def observed_terms(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """``(terms(text), terms(affirmed_clauses(text)))``, read line by line.

    Words never span a line and clauses are split at line breaks, so both are the unions of
    their lines'. A line is read once per shape: its free numbers (`_FREE_NUMBER`) are set to
    0 first, so an alert that repeats with other figures is read once.
    """
    lines = _FREE_NUMBER.sub("0", text).split("\n")  # a line break is whitespace: the same as per line
    if len(lines) == 1:
        return _line_terms(lines[0])
    read = [_line_terms(line) for line in lines]
    return frozenset().union(*(seen for seen, _ in read)), frozenset().union(*(affirmed for _, affirmed in read))


@lru_cache(maxsize=1 << 16)  # line shapes of a site's alerts are few
def _line_terms(line: str) -> tuple[frozenset[str], frozenset[str]]:
    return terms(line), terms(affirmed_clauses(line))


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
                 "|crash(?:es)?|restarts?|kills?|leaks?|trips?|jams?|faults?|outages?|complaints?|stops?|stoppages?"
                 "|breakdowns?")


# -- causal cues ----------------------------------------------------------------------------

# Generic English nouns and verbs for a change someone made.
CHANGE_WORDS = (r"(?:fix|fixes|fixed|change|changes|changed|hotfix|workaround|remediation|mitigation|adjustment|moved|switched|"
                r"replaced|raised|lowered|introduced|added|removed|upgraded|migrated|installed|fitted|swapped|"
                r"repaired|serviced|recalibrated|reconfigured|adjusted|updated|patched|rebuilt|went in|put in|set to|set at|"
                r"turned up|turned down|"
                r"repair|repairs|replacement|upgrade|overhaul|installation|retrofit|recalibration)")
# Generic English ways to trace a symptom to an earlier change: a causal connective before a
# change ("since the change", "caused by the config change"), a reference to an earlier fix, change
# or incident ("the earlier fix", "last week's change", "yesterday's hotfix"), or a change
# dated in the past ("was raised two days ago", "got a new valve last week", "was set to 40 on the 3rd",
# "the worker pool raised to 32 yesterday").
CAUSAL_CUE = re.compile(
    r"\b(?:caused by|because of|due to|triggered by|introduced (?:by|in|with)|added (?:by|in|with)|since|after|"
    rf"following|started with)\b(?:\W+\w+){{0,5}}?\W+{CHANGE_WORDS}\b"
    r"|\b(?:last|previous|earlier|recent|(?:yesterday|today|tonight|this (?:morning|afternoon|evening|week))'s)\b"
    r"(?:\W+\w+){0,3}?\W+(?:fix|fixes|change|changes|hotfix|workaround|incident)\b"
    rf"|\b(?:was|were|got|been)\s+(?:{CHANGE_WORDS}\b|(?:a|an|the|its|their)\s+new\b(?!\s+(?:{SYMPTOM_NOUNS})\b))"
    r"(?:\W+\w+){0,6}?\W+"
    r"(?:yesterday|last|earlier|ago|on (?:the )?\d{1,2}(?:st|nd|rd|th)|on (?:mon|tues|wednes|thurs|fri|satur|sun)day)\b"
    rf"|(?<!n't )(?<!not )(?<!never )\b{CHANGE_WORDS}\s+(?:[\w\-]+\s+){{0,6}}?(?:yesterday|last (?:week|night)|\d+ days ago|"
    r"earlier today)\b",
    re.IGNORECASE)


def similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """Cosine similarity of the content-word counts (`word_counts`) of two sets of texts."""
    ca, cb = word_counts(" ".join(a)), word_counts(" ".join(b))
    if not ca or not cb:
        return 0.0
    dot = sum(ca[w] * cb[w] for w in ca.keys() & cb.keys())
    return dot / math.sqrt(sum(v * v for v in ca.values()) * sum(v * v for v in cb.values()))


def mentions(sentence: str, name: str | None) -> bool:
    """Whether `sentence` names `name` as a whole word (case-insensitive)."""
    return bool(name) and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", sentence, re.IGNORECASE) is not None


def causal_sentences(texts: Iterable[str]) -> list[str]:
    """The sentences of `texts` that carry a causal cue (`CAUSAL_CUE`), in order."""
    return [s for text in texts for s in split_sentences(text) if CAUSAL_CUE.search(s)]
