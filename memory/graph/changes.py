"""Change records: what an episode's fix changed, where and when (pure functions of an episode).

An episode *made a change* when it decided or acted and the problem then went away
(SUCCESS or PARTIAL) or it recorded explicit actions. Its change record says:

- ``kind``: which sort of thing changed — ``version`` (a release, rollback, upgrade, pin),
  ``capacity`` (a size, limit or count raised or lowered), ``parameter`` (a timeout, TTL,
  threshold or other value set), ``configuration`` (a setting, flag, policy, rule or key),
  ``schedule`` (when something runs) or ``component`` (something added, removed, replaced or
  moved). The kind is the word class with most matches in the change text (lexicon groups
  ``change_kind_<kind>``); ``component`` when none matches.
- ``what``: the change's most specific terms (identifiers, numbers, rare words), for display.
- ``where``: the episode's subject (service), ``at``: when the episode ended.
- ``stopgap``: what the fix said it left in place only until a proper fix ("fitted the loan
  pump until a replacement arrives", "the right valve is on back-order"; `provisional`, lexicon
  groups ``stopgap_*``, ``on_order``, ``out_of_*``, ``left_*``), read from the outcome's whole text;
  empty for a change meant to last.

The change text is the episode's own: its actions, the closing outcome sentence of its
summary (what the fix did) and its corrections. `entity_terms` reads the terms an incident's
symptoms can share with a change: normalized words and numbers, compound names split into
their parts (``lru_cache`` → ``lru``, ``cache``), a service's own name left out by the caller.

The words are the `Lexicon`'s a caller passes (default: the shipped `DEFAULT_LEXICON`); the terms
leave out the shipped lexicon's ``term_stop_words``, ``generic_words`` and ``the_change_itself``.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from itertools import repeat

from memory.episodes import Episode, Outcome
from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.text import TERM_STOP_WORDS, normalize_term, split_sentences

CHANGE_KIND_NAMES = ("version", "capacity", "parameter", "configuration", "schedule")  # ties go to the first


@lru_cache(maxsize=8)
def kind_patterns(lexicon: Lexicon = DEFAULT_LEXICON) -> dict[str, re.Pattern[str]]:
    """Each change kind → the pattern of its words (lexicon group ``change_kind_<kind>``)."""
    return {kind: re.compile(rf"\b(?:{lexicon[f'change_kind_{kind}']})\b") for kind in CHANGE_KIND_NAMES}


_TOKEN = re.compile(r"[a-z0-9][a-z0-9_.%\-]*[a-z0-9%]|[a-z0-9]")
_PARTS = re.compile(r"[_\-./]+")
_NUMBER = re.compile(r"^v?\d[\d.%]*$")
TERM_LENGTH = 6  # terms are normalized words cut to six letters ("rolled", "rolling" → "roll")
# Words that never name the thing a change changed: time, frequency, amount, symptoms, outcomes and
# their reports in general (group ``generic_words``).
GENERIC_WORDS = DEFAULT_LEXICON.word_set("generic_words")


@lru_cache(maxsize=8)
def provisional(lexicon: Lexicon = DEFAULT_LEXICON) -> re.Pattern[str]:
    """A fix meant to hold only until a proper one is in place: a stopgap ("fitted the loan pump until a
    replacement arrives", "the right valve is on back-order", "left the limit raised for now"). What was
    meant to be temporary and stayed is a standing suspect when trouble touching it follows."""
    lx = lexicon
    return re.compile(
        rf"\b(?:{lx['stopgap_words']}|"
        rf"until (?:{lx['stopgap_until_determiners']})\s+(?:[\w\-]+\s+){{0,2}}?(?:{lx['stopgap_until_proper']})s?\b|"
        rf"until (?:{lx['stopgap_until_subjects']}) (?:{lx['stopgap_until_verbs']})"
        rf"(?: (?:{lx['stopgap_until_particles']}))? ?(?:{lx['stopgap_until_states']})\b|"
        rf"(?:{lx['on_order']}) (?:an? )?(?:[\w\-]+ )?(?:{lx['order_nouns']})\b|{lx['out_of_supply']}|"
        rf"(?:{lx['out_of_verbs']}) out of (?:(?:{lx['out_of_determiners']}) )?(?:{lx['usual_supply']})\b|"
        rf"left (?:[\w\-]+ ){{0,4}}?(?:{lx['left_in_place']}) (?:{lx['left_until']}))",
        re.IGNORECASE,
    )


PROVISIONAL = provisional()  # of the shipped lexicon


def stopgap_sentences(ep: Episode, lexicon: Lexicon = DEFAULT_LEXICON) -> tuple[str, ...]:
    """The sentences of an episode's actions and whole fix that say it left something in place only for
    now (`provisional`); none when the change was meant to last."""
    return _stopgaps(tuple(t for t in (*ep.actions, fix_text(ep, whole=True)) if t), lexicon)


@lru_cache(maxsize=16384)
def _stopgaps(texts: tuple[str, ...], lexicon: Lexicon = DEFAULT_LEXICON) -> tuple[str, ...]:
    stopgap = provisional(lexicon)
    return tuple(s for text in texts if stopgap.search(text) for s in split_sentences(text) if stopgap.search(s))


def stopgap_terms(ep: Episode, lexicon: Lexicon = DEFAULT_LEXICON) -> frozenset[str]:
    """Terms of what an episode's change left in place as a stopgap (`stopgap_sentences`), its service's
    name left out."""
    return _terms_of(stopgap_sentences(ep, lexicon)) - name_terms(ep.subject)


@dataclass(frozen=True)
class ChangeRecord:
    """What one episode's fix changed."""

    episode_id: str  # the episode that made the change
    kind: str  # version, capacity, parameter, configuration, schedule or component
    what: str  # the change's most specific terms, space-separated (for display)
    where: str | None  # the service or subject changed
    at: datetime  # when the change was in place (the episode's end)
    text: str  # the change text the record was read from
    stopgap: str = ""  # the sentences saying what it left in place only for now ("" when meant to last)


@lru_cache(maxsize=65536)
def entity_terms(text: str) -> frozenset[str]:
    """Terms of `text` a symptom and a change can share: words (normalized, cut) and numbers.

    A compound token (``db.pool.max``, ``restrict-egress``, ``lru_cache``) gives its parts;
    a version or number (``v2.14.0``, ``60%``) is kept whole as well.
    """
    out: set[str] = set()
    for token in _TOKEN.findall(text.lower()):
        if _NUMBER.match(token):
            if len(token) >= 2:
                out.add(token.rstrip("."))
            continue
        for part in _PARTS.split(token):
            if len(part) >= 3 and part not in TERM_STOP_WORDS and part not in GENERIC_WORDS and not part.isdigit():
                out.add(normalize_term(part)[:TERM_LENGTH])
    return frozenset(out)


def is_value(term: str) -> bool:
    """Whether an entity term is a number or version (``60%``, ``v2.14.0``, ``512``), not a word."""
    return bool(_NUMBER.match(term))


def name_terms(name: str | None) -> frozenset[str]:
    """The terms of a service or subject name (left out when its own incident is compared)."""
    return entity_terms(name) if name else frozenset()


def fix_text(ep: Episode, whole: bool = False) -> str:
    """What an episode's fix did: the closing outcome sentence of its summary when the fix worked
    (SUCCESS or PARTIAL), else '' (a failed attempt's outcome tells what did not help, not what changed).

    With `whole`, the outcome entry's whole text where the summary trims it (`Episode.outcome_text`).
    The terms a change shares with later symptoms are read from the summary's part, where a report
    says first what was done: the rest of a long report (readings, results, who did what) shares
    words with later incidents by chance. What a report says was left only for now often comes
    last, so stopgaps are read from the whole text (`stopgap_sentences`).
    """
    if not (ep.decisions or ep.actions) or ep.outcome not in _WORKED:
        return ""
    if ep.outcome_text and whole:
        return ep.outcome_text
    parts = ep.summary.split(" → ")
    return parts[-1] if len(parts) > 1 else ""


def made_change(ep: Episode) -> bool:
    """Whether an episode made a change that stayed: explicit actions, or a decision that worked."""
    return bool(ep.actions) or (bool(ep.decisions) and ep.outcome in _WORKED)


_WORKED = frozenset({Outcome.SUCCESS, Outcome.PARTIAL})  # outcomes of a fix that worked


def change_kind(text: str, lexicon: Lexicon = DEFAULT_LEXICON) -> str:
    """The change kind (`kind_patterns`) with most matches in `text`; ``component`` when none."""
    lowered = text.lower()
    counts = {kind: len(pattern.findall(lowered)) for kind, pattern in kind_patterns(lexicon).items()}
    best = max(counts, key=lambda kind: counts[kind])
    return best if counts[best] else "component"


def change_record(ep: Episode, *, limit: int = 5, lexicon: Lexicon = DEFAULT_LEXICON) -> ChangeRecord | None:
    """The change an episode made (None when it made none), read with `lexicon`; see the module docstring."""
    if not made_change(ep):
        return None
    text = " ".join([*ep.actions, fix_text(ep), *ep.corrections]).strip()
    return ChangeRecord(
        ep.id,
        change_kind(text, lexicon),
        " ".join(specific_words(" ".join([*ep.actions, fix_text(ep)]), ep.subject)[:limit]),
        ep.subject,
        ep.end,
        text,
        " ".join(stopgap_sentences(ep, lexicon)),
    )


_WORD_AS_WRITTEN = re.compile(r"[A-Za-z0-9][\w.%\-]*[\w%]|[0-9]")


_THE_CHANGE_ITSELF = DEFAULT_LEXICON.word_set("the_change_itself")  # the act of changing, not a thing changed


def specific_words(text: str, subject: str | None = None) -> list[str]:
    """The words of `text` that name something, as written: numbers, versions, identifiers
    (digits, underscores, dots or inner capitals) first, then other words of six letters or more."""
    own = name_terms(subject)
    words = [
        w
        for w in dict.fromkeys(_WORD_AS_WRITTEN.findall(text))
        if w.lower() not in TERM_STOP_WORDS
        and w.lower() not in GENERIC_WORDS
        and w.lower() not in _THE_CHANGE_ITSELF
        and not entity_terms(w) <= own
    ]
    named = [w for w in words if re.search(r"\d|_|\.|[a-z][A-Z]", w)]
    return named + [w for w in words if w not in named and len(w) >= 6]


class TermWeights:
    """Inverse document frequency of terms over a set of episodes, scaled to [0, 1] and squared.

    A term found in one episode weighs about 1, a term found in every episode 0; squaring
    keeps a term that a fifth of the episodes hold from counting like a name (0.25, not 0.5,
    over 25 episodes). The documents are the episodes' observations, summaries and corrections.
    Document frequencies are counted for the terms asked about only.
    """

    background = 10  # documents assumed to hold none of the terms: a short history does not make every term common

    def __init__(self, episodes: Iterable[Episode], *, compared: int = 0) -> None:
        self.episodes = list(episodes)
        self.n = len(self.episodes)
        self.compared = compared  # documents that are the two sides being compared: not evidence of a common term
        self.df: dict[str, int] = {}
        self._documents: list[frozenset[str]] | None = None  # read on the first weight asked for (few are)
        self._weights: dict[str, float] = {}

    @property
    def documents(self) -> list[frozenset[str]]:
        """Each episode's terms (`episode_terms`), in order."""
        if self._documents is None:
            held = _EPISODE_TERMS.get  # most are known: the same recent episodes are weighed for every incident
            self._documents = [held(ep.id) or episode_terms(ep) for ep in self.episodes]
        return self._documents

    def weight(self, term: str) -> float:
        """Scaled IDF of `term` (1.0 for a term no episode holds)."""
        found = self._weights.get(term)
        if found is not None:
            return found
        df = self.df.get(term)
        if df is None:
            df = self.df[term] = max(0, sum(map(operator.contains, self.documents, repeat(term))) - self.compared)
        n = self.n - self.compared + self.background
        found = self._weights[term] = max(0.0, math.log((n + 1) / (df + 1)) / math.log(n + 1)) ** 2
        return found

    def overlap(self, a: frozenset[str], b: frozenset[str]) -> tuple[float, tuple[str, ...]]:
        """Summed weight of the terms `a` and `b` share, and those terms (heaviest first)."""
        both = a & b
        if not both:
            return 0, ()
        shared = sorted(both, key=lambda t: (-self.weight(t), t))
        return sum(self.weight(t) for t in shared), tuple(shared)


_EPISODE_TERMS: dict[str, frozenset[str]] = {}  # episode id → its terms (ids are content addresses)
_EPISODE_TERMS_MAX = 65536


def episode_terms(ep: Episode) -> frozenset[str]:
    """Every term of an episode's observations, summary and corrections."""
    found = _EPISODE_TERMS.get(ep.id)
    if found is None:
        if len(_EPISODE_TERMS) >= _EPISODE_TERMS_MAX:
            _EPISODE_TERMS.clear()
        found = _EPISODE_TERMS[ep.id] = _terms_of((*ep.observations, ep.summary, *ep.corrections))
    return found


def incident_terms(
    ep: Episode, chain: Sequence[Episode] = (), *, keep: Callable[[str], bool] = lambda observation: True
) -> frozenset[str]:
    """Terms of the incident a change resolved: the observations of its attempts (those `keep` accepts)
    and its subject's name."""
    return _terms_of(tuple(o for other in (*chain, ep) for o in other.observations if keep(o))) | name_terms(ep.subject)


def change_terms(ep: Episode, chain: Sequence[Episode] = ()) -> frozenset[str]:
    """Terms of the change `ep` made: its actions and what its fix did (a diagnosis is not a change)."""
    return _terms_of(tuple(t for t in (*ep.actions, fix_text(ep)) if t)) - name_terms(ep.subject)


@lru_cache(maxsize=16384)
def _terms_of(texts: tuple[str, ...]) -> frozenset[str]:
    return frozenset().union(*(entity_terms(t) for t in texts)) if texts else frozenset()


def forget_cached_text() -> None:
    """Empty this module's caches keyed by text (an erasure: `memory.retrieval.text_caches`)."""
    provisional.cache_clear()
    _stopgaps.cache_clear()
    entity_terms.cache_clear()
    _terms_of.cache_clear()
