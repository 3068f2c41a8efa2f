"""The one text module: words, stems, negation, looks and causal cues.

Every layer that reads text goes through here, so that what counts as a word, a negation or
a causal cue is read one way. The words themselves are data in `memory.lexicon`, each group
with where it came from; this module holds only how they combine. The readers of negation,
looks and causal cues take a `Lexicon` (default: the shipped `DEFAULT_LEXICON`) and compile
its groups once per lexicon (`patterns`); the tokenizers' stop words and the words for when
and for a look are read from the shipped lexicon (terms are compared across stored records).

Contents:

- words and stems: `words` (raw lower-case words, apostrophes kept), `stems` (content-word
  stems for overlap scores), `word_counts` (content-word counts for text similarity),
  `terms` and `normalize_term` (normalized content terms of fact conditions),
  `split_sentences`, `trim`;
- negation: `NEGATORS` (words that flip the cue after them), `split_negation` (what a text
  affirms and what it denies), `affirmed_clauses` (only the clauses stated as present),
  `all_clear` and `read_as_found` (the sentence of an observation line that reports a look
  which found nothing wrong, and the line without it);
- outcome cues: the lexicon's ``success_cues``, ``failure_cues``, ``partial_cues``, ``symptom_nouns``
  (read by `memory.episodes.outcomes`);
- causal cues: `causal_cue` (a sentence tracing a symptom to an earlier change; `CAUSAL_CUE` for the
  shipped lexicon), `causal_sentences`.

The three tokenizers (`stems`, `word_counts`, `terms`) keep their own stop-word lists: each
list was measured with its tokenizer, and merging them changes results.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import NamedTuple

from memory.lexicon import DEFAULT_LEXICON, Lexicon

# -- words and stems ------------------------------------------------------------------------

# Function words of `stems` (lexicon group ``stop_words``); words of two letters or fewer are dropped there anyway.
STOP_WORDS = DEFAULT_LEXICON.word_set("stop_words")
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
    return frozenset(
        word.lower()[:STEM_LENGTH]
        for word in _STEM_WORD.findall(text.replace("_", " "))
        if word.lower() not in STOP_WORDS and len(word) > 2
    )


# Function words of three or more letters (`word_counts` drops shorter words; group ``count_stop_words``).
COUNT_STOP_WORDS = DEFAULT_LEXICON.word_set("count_stop_words")
_COUNT_WORD = re.compile(r"[a-z][a-z0-9_\-]{2,}")


def word_counts(text: str) -> Counter[str]:
    """Content words of a text with their counts (lowercase, 3+ characters, no stop words)."""
    return Counter(t for t in _COUNT_WORD.findall(text.lower()) if t not in COUNT_STOP_WORDS)


# The stop list of `terms` (group ``term_stop_words``).
TERM_STOP_WORDS = DEFAULT_LEXICON.word_set("term_stop_words")
_TERM_WORD = re.compile(r"[a-z][a-z0-9]*", re.ASCII)


# Words for when something happened (normalized like `terms`; group ``time_words``): a lesson's
# condition names what was seen, not the day it was seen.
TIME_WORDS = DEFAULT_LEXICON.word_set("time_words")


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

# Negators that flip an outcome cue among the words before it (group ``negators``, shipped lexicon;
# `memory.episodes.outcomes` reads the group of the lexicon it is given).
NEGATORS = DEFAULT_LEXICON.word_set("negators")


class Patterns(NamedTuple):
    """What the negation, look and causal-cue readers match, compiled from one lexicon's groups."""

    negation: re.Pattern[str]  # a negation or contrast marker: what follows it in a clause is denied
    nominal: re.Pattern[str]  # a word for the normal state: such a clause reports a symptom's absence
    nominal_reference: re.Pattern[str]  # "normal" as the yardstick of a comparison ("its normal level")
    verdict: re.Pattern[str]  # a verdict that something is normal ("as expected"), not a trend ("unchanged")
    clause: re.Pattern[str]  # clause breaks: punctuation and contrastive conjunctions
    scope_end: re.Pattern[str]  # a conjunction that starts another statement (ends a negation's scope)
    pronoun: re.Pattern[str]  # a negation cue that is a whole phrase of its own ("nothing")
    looked: re.Pattern[str]  # a report of having looked at something
    contrast: re.Pattern[str]  # a contrast after a look: what follows is what it found wrong
    found_wrong: re.Pattern[str]  # something a look found wrong
    causal_cue: re.Pattern[str]  # a sentence tracing a symptom to an earlier change (see `_causal_cue`)


@lru_cache(maxsize=8)
def patterns(lexicon: Lexicon = DEFAULT_LEXICON) -> Patterns:
    """The readers' patterns compiled from `lexicon` (once per lexicon)."""
    lx = lexicon
    return Patterns(
        negation=re.compile(rf"\b(?:{lx['negation']})\b", re.I),
        # "normal" after a determiner, possessive or comparing word ("3.7× its normal level", "against a
        # normal 100%", "slower than normal", "above normal") is a yardstick; "back to normal" and
        # "pressure normal" stay reports
        nominal=re.compile(rf"\b(?:{lx['normal_state']})\b", re.I),
        nominal_reference=re.compile(
            rf"\b(?:{lx['yardstick_before']})\s+(?:{lx['yardstick_words']})\b"
            rf"|\b(?:{lx['yardstick_adverbs']})\s+(?:[a-z]+\s+){{0,2}}(?=(?:{lx['yardstick_after']}))"
            # "about 40 normally", "12 ms normally": a value, and perhaps its unit, before the adverb
            rf"|\d[\w.,%/]*\s+(?:[a-z%/]+\s+)?(?:{lx['yardstick_adverbs']})\b"
            # "a set that normally lasts a year": what is expected of a thing, not a report of its state
            rf"|\b(?:{lx['expectation_before']})\s+(?:{lx['yardstick_adverbs']})\b",
            re.I,
        ),
        verdict=re.compile(rf"\b(?:{lx['normal_verdicts']})\b", re.I),
        clause=re.compile(rf"[.;:!?,]\s+|\s+(?:{lx['clause_conjunctions']})\s+|\n"),
        # "the exchanger gave no cooling *and* the milk arrived warm": the milk arriving warm is affirmed
        scope_end=re.compile(rf"\s+(?:{lx['scope_ends']})\s+", re.I),
        pronoun=re.compile(lx["negating_pronouns"], re.I),
        # not inside a name ("payments.confirm"), and "a field that is checked" describes, it reports no look
        looked=re.compile(rf"(?<![\w.-])(?<!\bis )(?<!\bare )(?:{lx['look_reports']})(?![\w-]|\.\w)", re.I),
        contrast=re.compile(rf"\b(?:{lx['contrast']})\b", re.I),
        found_wrong=re.compile(rf"\b(?:{lx['found_wrong']})\b", re.I),
        causal_cue=_causal_cue(lx),
    )


def _reports_normal(clause: str, p: Patterns) -> bool:
    """Whether a clause reports a normal state (`Patterns.nominal`), not counting "normal" used as a yardstick."""
    return bool(p.nominal.search(p.nominal_reference.sub(" ", clause)))


def _bare_verdict(clause: str, p: Patterns) -> bool:
    """Whether a clause says nothing but that something is normal ("as expected", "all fine"); one that gives a
    value ("normal is 12") says what normal is."""
    return (
        bool(p.verdict.search(clause))
        and not terms(p.nominal.sub(" ", clause))
        and not any(c.isdigit() for c in clause)
    )


def _clauses(text: str, p: Patterns) -> list[tuple[str, bool]]:
    """The clauses of `text` (split at punctuation and contrastive conjunctions), each with whether
    it reports a normal state: it says so itself ("pressure normal"), or it is the label of a
    report whose status does ("borehole pump checked: running, pressure normal" reports the
    pump normal, though the label has no such word)."""
    out: list[tuple[str, bool]] = []
    for line in text.split("\n"):
        label, colon, status = line.partition(": ")
        statuses = [(c, _reports_normal(c, p)) for c in p.clause.split(status) if c.strip()] if colon else []
        heads = [c for c in p.clause.split(label if colon else line) if c.strip()]
        reported = any(normal for _, normal in statuses)
        last = len(heads) - 1
        normal = [(reported and i == last) or _reports_normal(c, p) for i, c in enumerate(heads)]
        # a clause that is only a verdict ("..., as expected", "..., all normal") reports the clause before it
        normal = [n or (i < last and normal[i + 1] and _bare_verdict(heads[i + 1], p)) for i, n in enumerate(normal)]
        out += list(zip(heads, normal))
        out += statuses
    return out


@lru_cache(maxsize=65536)  # the cause scorer and the lessons read the same recent lines for every new episode
def split_negation(text: str, lexicon: Lexicon = DEFAULT_LEXICON) -> tuple[str, str]:
    """Split text into what it affirms and what it denies, clause by clause.

    Within a clause (split at punctuation and contrastive conjunctions) the words after a
    negation cue ("not", "no", "without", "rather than", …) are denied, up to a conjunction
    that starts another statement ("and", "so", "because", …); the words before the cue and
    after that conjunction are affirmed; a clause that reports a normal state ("quiet", "healthy", "idle", …) is denied
    as a whole: "database idle, no lock waits" reports the absence of those symptoms, and so
    is the label of a report whose status does ("pump checked: running, pressure normal").
    """
    p = patterns(lexicon)
    affirmed, denied = [], []
    for clause, normal in _clauses(text, p):
        if normal:
            denied.append(clause)
            continue
        while (match := p.negation.search(clause)) is not None:
            affirmed.append(clause[: match.start()])
            end = _scope_end(clause, match, p)
            denied.append(clause[match.end() : end.start() if end else len(clause)])
            clause = clause[end.end() :] if end else ""
        affirmed.append(clause)
    return " ".join(part.strip() for part in affirmed if part.strip()), " ".join(
        part.strip() for part in denied if part.strip()
    )


def _scope_end(clause: str, negation: re.Match[str], p: Patterns) -> re.Match[str] | None:
    """The conjunction that ends a negation's scope in `clause`, or None when it runs to the end.

    A particle needs a denied word before it ("not so bad" is one idiom); a cue that is a
    phrase of its own ends at the next conjunction ("did nothing and the milk arrived warm").
    """
    end = p.scope_end.search(clause, negation.end())
    if p.pronoun.fullmatch(negation.group()):
        return end
    while end is not None and not clause[negation.end() : end.start()].strip():
        end = p.scope_end.search(clause, end.end())
    return end


@lru_cache(maxsize=1)
def looked_terms() -> frozenset[str]:
    """The terms of the words for a look themselves (a correction that says "check X" shares them)."""
    return terms(" ".join(DEFAULT_LEXICON.words("look_words")))


def all_clear(line: str, lexicon: Lexicon = DEFAULT_LEXICON) -> str:
    """The sentence of an observation line that reports a look which found nothing wrong ("" when none).

    It is the first sentence that names a look (lexicon group ``look_reports``: "Softener checked: salt
    level full, hardness zero"; "Load wet. We checked the drain first.") and affirms nothing found wrong
    (``found_wrong``; "checked the pump: tripped" is a symptom, "checked the logs: no errors" is
    not), with no contrast after the look ("checked, but the valve was left shut"). The line's
    other sentences are read as they are.
    """
    start, end = _all_clear_span(line, lexicon)
    return line[start:end]


def read_as_found(line: str, lexicon: Lexicon = DEFAULT_LEXICON) -> str:
    """An observation line without its all-clear sentence (`all_clear`)."""
    start, end = _all_clear_span(line, lexicon)
    return line[:start] + " " + line[end:] if end > start else line


@lru_cache(maxsize=8192)  # the reasoner reads each observation line once per candidate
def _all_clear_span(line: str, lexicon: Lexicon = DEFAULT_LEXICON) -> tuple[int, int]:
    """Where `all_clear`'s sentence starts and ends in the line ((0, 0) when there is none)."""
    p = patterns(lexicon)
    found = p.looked.search(line)
    if found is None:
        return 0, 0
    start = max((m.end() for m in _SENTENCE.finditer(line, 0, found.start())), default=0)
    after = _SENTENCE.search(line, found.end())
    end = after.start() if after else len(line)
    sentence = line[start:end]
    found_wrong = p.found_wrong.search(split_negation(sentence, lexicon)[0]) or p.contrast.search(
        line, found.end(), end
    )
    return (0, 0) if found_wrong else (start, end)


@lru_cache(maxsize=8192)
def affirmed_clauses(text: str, lexicon: Lexicon = DEFAULT_LEXICON) -> str:
    """The clauses of `text` that state something as present: no negation cue, no normal-state report.

    Stricter than `split_negation`: "the proxy has not been touched in weeks" affirms nothing
    about the proxy (the words before "not" are its subject, not a symptom), so a clause with a
    negation cue is dropped whole, and so is a sentence that reports a look which found nothing
    wrong (`all_clear`). Used where a detail must be *present* to count (lesson
    conditions, incident closeness); corrections, which reject one thing and affirm another,
    are read with `split_negation`.
    """
    p = patterns(lexicon)
    lines = [read_as_found(line, lexicon) for line in text.split("\n")]
    kept = [clause for clause, normal in _clauses("\n".join(lines), p) if not normal and not p.negation.search(clause)]
    return " ".join(clause.strip() for clause in kept)


# A run of ASCII digits that starts a token: at the start of a line or after whitespace or ASCII
# punctuation. No term holds it (a term starts with a letter, `_TERM_WORD`) and no clause or negation
# rule reads digits, so two lines that differ only in such numbers have the same terms.
_FREE_NUMBER = re.compile(r"(?<![^\s!-/:-@\[-`{-~])[0-9]+")


def observed_terms(text: str, lexicon: Lexicon = DEFAULT_LEXICON) -> tuple[frozenset[str], frozenset[str]]:
    """``(terms(text), terms(affirmed_clauses(text)))``, read line by line.

    Words never span a line and clauses are split at line breaks, so both are the unions of
    their lines'. A line is read once per shape: its free numbers (`_FREE_NUMBER`) are set to
    0 first, so an alert that repeats with other figures is read once.
    """
    lines = _FREE_NUMBER.sub("0", text).split("\n")  # a line break is whitespace: the same as per line
    if len(lines) == 1:
        return _line_terms(lines[0], lexicon)
    read = [_line_terms(line, lexicon) for line in lines]
    return frozenset().union(*(seen for seen, _ in read)), frozenset().union(*(affirmed for _, affirmed in read))


@lru_cache(maxsize=1 << 16)  # line shapes of a site's alerts are few
def _line_terms(line: str, lexicon: Lexicon = DEFAULT_LEXICON) -> tuple[frozenset[str], frozenset[str]]:
    return terms(line), terms(affirmed_clauses(line, lexicon))


# -- causal cues ----------------------------------------------------------------------------


def _causal_cue(lx: Lexicon) -> re.Pattern[str]:
    """Ways to trace a symptom to an earlier change: a causal connective before a change word ("since
    the change", "caused by the config change"), a reference to an earlier fix, change or incident
    ("the earlier fix", "last week's change", "yesterday's hotfix"), or a change dated in the past ("was
    raised two days ago", "got a new valve last week", "was set to 40 on the 3rd", "the worker pool
    raised to 32 yesterday"). Groups: ``causal_connectives``, ``change_words``, ``past_markers``,
    ``referred_changes``, ``change_auxiliaries``, ``determiners``, ``symptom_nouns``, ``dated_past``,
    ``recent_dates``."""
    change = f"(?:{lx['change_words']})"
    return re.compile(
        rf"\b(?:{lx['causal_connectives']})\b(?:\W+\w+){{0,5}}?\W+{change}\b"
        rf"|\b(?:{lx['past_markers']})\b(?:\W+\w+){{0,3}}?\W+(?:{lx['referred_changes']})\b"
        rf"|\b(?:{lx['change_auxiliaries']})\s+(?:{change}\b|(?:{lx['determiners']})\s+new\b"
        rf"(?!\s+(?:{lx['symptom_nouns']})\b))(?:\W+\w+){{0,6}}?\W+(?:{lx['dated_past']})\b"
        rf"|(?<!n't )(?<!not )(?<!never )\b{change}\s+(?:[\w\-]+\s+){{0,6}}?(?:{lx['recent_dates']})\b",
        re.IGNORECASE,
    )


def causal_cue(lexicon: Lexicon = DEFAULT_LEXICON) -> re.Pattern[str]:
    """The causal-cue pattern of `lexicon` (see `_causal_cue`)."""
    return patterns(lexicon).causal_cue


CAUSAL_CUE = causal_cue()  # of the shipped lexicon


def similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """Cosine similarity of the content-word counts (`word_counts`) of two sets of texts."""
    (ca, na), (cb, nb) = _counted(" ".join(a)), _counted(" ".join(b))
    if not ca or not cb:
        return 0.0
    dot = sum(ca[w] * cb[w] for w in ca.keys() & cb.keys())
    return dot / math.sqrt(na * nb)


@lru_cache(maxsize=16384)  # the graph rules compare a principal's recent incidents with every new one
def _counted(text: str) -> tuple[Counter[str], int]:
    """`word_counts` of a text and the sum of their squares (read only: the result is shared)."""
    counts = word_counts(text)
    return counts, sum(v * v for v in counts.values())


def mentions(sentence: str, name: str | None) -> bool:
    """Whether `sentence` names `name` as a whole word (case-insensitive)."""
    if not name:
        return False
    if name.isascii() and sentence.isascii() and name.lower() not in sentence.lower():
        return False  # ASCII text cannot match the pattern without holding the name's letters in either case
    return _name_pattern(name).search(sentence) is not None


@lru_cache(maxsize=4096)  # a site names few services
def _name_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])", re.IGNORECASE)


def causal_sentences(texts: Iterable[str], lexicon: Lexicon = DEFAULT_LEXICON) -> list[str]:
    """The sentences of `texts` that carry a causal cue (`causal_cue`), in order."""
    cue = causal_cue(lexicon)
    return [s for text in texts for s in split_sentences(text) if cue.search(s)]


def forget_cached_text() -> None:
    """Empty this module's caches keyed by text (an erasure: `memory.retrieval.text_caches`)."""
    stems.cache_clear()
    normalize_term.cache_clear()
    terms.cache_clear()
    split_negation.cache_clear()
    _all_clear_span.cache_clear()
    affirmed_clauses.cache_clear()
    _line_terms.cache_clear()
    _counted.cache_clear()
    _name_pattern.cache_clear()
