"""Change records: what an episode's fix changed, where and when (pure functions of an episode).

An episode *made a change* when it decided or acted and the problem then went away
(SUCCESS or PARTIAL) or it recorded explicit actions. Its change record says:

- ``kind``: which sort of thing changed — ``version`` (a release, rollback, upgrade, pin),
  ``capacity`` (a size, limit or count raised or lowered), ``parameter`` (a timeout, TTL,
  threshold or other value set), ``configuration`` (a setting, flag, policy, rule or key),
  ``schedule`` (when something runs) or ``component`` (something added, removed, replaced or
  moved). The kind is the word class with most matches in the change text (`CHANGE_KINDS`,
  generic English); ``component`` when none matches.
- ``what``: the change's most specific terms (identifiers, numbers, rare words), for display.
- ``where``: the episode's subject (service), ``at``: when the episode ended.
- ``stopgap``: what the fix said it left in place only until a proper fix ("fitted the loan
  pump until a replacement arrives", "the right valve is on back-order"; `PROVISIONAL`, generic
  English), read from the outcome's whole text; empty for a change meant to last.

The change text is the episode's own: its actions, the closing outcome sentence of its
summary (what the fix did) and its corrections. `entity_terms` reads the terms an incident's
symptoms can share with a change: normalized words and numbers, compound names split into
their parts (``lru_cache`` → ``lru``, ``cache``), a service's own name left out by the caller.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Callable, Iterable, Sequence

from memory.episodes import Episode, Outcome
from memory.text import TERM_STOP_WORDS, normalize_term, split_sentences

# Generic English word classes of a change (regexes over lower-case text, word-bounded).
CHANGE_KINDS: dict[str, str] = {
    "version": r"versions?|releases?|released|rolled back|roll(?:ed)? ?back|rollbacks?|revert(?:ed|s)?|upgrade[sd]?|"
               r"downgrade[sd]?|pinned|pin|bump(?:ed)?|image|tag|v?\d+\.\d+(?:\.\d+)*",
    "capacity": r"raised|increased|lowered|decreased|reduced|doubled|halved|scaled|resized|sizes?|limits?|capacity|"
                r"quotas?|replicas?|max\w*|pools?|memory|threads?|connections?|workers?|"
                # "min" and what it sizes (minReplicas, min_pool, minimum), not "minutes" or "minor"
                r"min(?:imum|imal|ima|_\w+|[a-z]*(?:size|count|replicas|pool|idle|heap|threads?|workers?|conn\w*))?",
    "parameter": r"timeouts?|ttls?|thresholds?|intervals?|retr(?:y|ies)|backoff|rates?|delays?|values?|"
                 r"set (?:to|from)|from \d[\w.%]* to \d[\w.%]*",
    "configuration": r"config\w*|settings?|flags?|options?|keys?|policy|policies|rules?|env\w*|variables?|"
                     r"enabled|disabled|toggled",
    "schedule": r"schedul\w*|cron\w*|nightly|hourly|daily|weekly|window|moved (?:the )?(?:job|run)|rescheduled",
}
_KIND_PATTERNS = {kind: re.compile(rf"\b(?:{words})\b") for kind, words in CHANGE_KINDS.items()}
_TOKEN = re.compile(r"[a-z0-9][a-z0-9_.%\-]*[a-z0-9%]|[a-z0-9]")
_PARTS = re.compile(r"[_\-./]+")
_NUMBER = re.compile(r"^v?\d[\d.%]*$")
TERM_LENGTH = 6  # terms are normalized words cut to six letters ("rolled", "rolling" → "roll")
# Generic English words of time, frequency and amount (they date or size a thing, never name it)
# and of symptoms, outcomes and their reports in general (every incident has them: a report that the
# metrics are back to baseline names nothing that was changed).
GENERIC_WORDS = frozenset("""since ago now never ever already yet soon later earlier today tonight yesterday tomorrow
    morning afternoon evening night day days week weeks month months year years hour hours minute minutes second
    seconds time times every many much few less least several some none whole half usual usually again once twice
    first last next previous recent recently new old same other another
    error errors failure failures fail fails failed failing alert alerts incident incidents issue issues problem
    problems symptom symptoms fixed fix fixes works worked working started start starts began begin begins
    took take takes made make makes got get gets went goes came come comes gave give put kept keep keeps left
    brought found find saw seen held told said seemed
    resolved resolve recovered normal baseline cleared clear green healthy confirmed verified verification passed
    gone closing closed metrics dashboards stayed returned within applied""".split())


# Generic English for a fix meant to hold only until a proper one is in place: a stopgap ("fitted the
# loan pump until a replacement arrives", "the right valve is on back-order", "left the limit raised
# for now"). What was meant to be temporary and stayed is a standing suspect when trouble touching it follows.
PROVISIONAL = re.compile(
    r"\b(?:temporar(?:y|ily)|stop-?gaps?|interim|makeshift|provisional(?:ly)?|for now|for the time being|"
    r"short[- ]term|as an? (?:temporary |quick )?(?:workaround|bodge)|"
    r"until (?:a|an|the|our|its|their)\s+(?:[\w\-]+\s+){0,2}?(?:replacement|proper|genuine|permanent|real|"
    r"new one|new part|right one|right part)s?\b|"
    r"until (?:things|it|they|everything|traffic|the [\w\-]+) (?:is|are|has|have|gets?|settles?|calms?)"
    r"(?: been| down| back)? ?(?:stable|settled|down|fixed|repaired|replaced|normal|over)\b|"
    r"(?:on|put on|placed on|still on) (?:an? )?(?:[\w\-]+ )?(?:order|back-?order)\b|back-?ordered|out of stock|"
    r"(?:was|were|ran|are|is) out of (?:the |our |its |their )?(?:usual|normal|standard|proper|genuine|right)\b|"
    r"left (?:[\w\-]+ ){0,4}?(?:in place|in|on|at [\w.%]+(?: [\w\-]+)?) (?:until|for now|for the rest of|"
    r"for the time being))",
    re.IGNORECASE)


def stopgap_sentences(ep: Episode) -> tuple[str, ...]:
    """The sentences of an episode's actions and whole fix that say it left something in place only for
    now (`PROVISIONAL`); none when the change was meant to last."""
    return _stopgaps(tuple(t for t in (*ep.actions, fix_text(ep, whole=True)) if t))


@lru_cache(maxsize=16384)
def _stopgaps(texts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(s for text in texts if PROVISIONAL.search(text) for s in split_sentences(text) if PROVISIONAL.search(s))


def stopgap_terms(ep: Episode) -> frozenset[str]:
    """Terms of what an episode's change left in place as a stopgap (`stopgap_sentences`), its service's
    name left out."""
    return _terms_of(stopgap_sentences(ep)) - name_terms(ep.subject)


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
    if not (ep.decisions or ep.actions) or ep.outcome not in (Outcome.SUCCESS, Outcome.PARTIAL):
        return ""
    if ep.outcome_text and whole:
        return ep.outcome_text
    parts = ep.summary.split(" → ")
    return parts[-1] if len(parts) > 1 else ""


def made_change(ep: Episode) -> bool:
    """Whether an episode made a change that stayed: explicit actions, or a decision that worked."""
    return bool(ep.actions) or (bool(ep.decisions) and ep.outcome in (Outcome.SUCCESS, Outcome.PARTIAL))


def change_kind(text: str) -> str:
    """The word class of `CHANGE_KINDS` with most matches in `text`; ``component`` when none."""
    lowered = text.lower()
    counts = {kind: len(pattern.findall(lowered)) for kind, pattern in _KIND_PATTERNS.items()}
    best = max(counts, key=lambda kind: counts[kind])
    return best if counts[best] else "component"


def change_record(ep: Episode, *, limit: int = 5) -> ChangeRecord | None:
    """The change an episode made (None when it made none); see the module docstring."""
    if not made_change(ep):
        return None
    text = " ".join([*ep.actions, fix_text(ep), *ep.corrections]).strip()
    return ChangeRecord(ep.id, change_kind(text), " ".join(specific_words(" ".join([*ep.actions, fix_text(ep)]),
                                                                          ep.subject)[:limit]), ep.subject, ep.end, text,
                        " ".join(stopgap_sentences(ep)))


_WORD_AS_WRITTEN = re.compile(r"[A-Za-z0-9][\w.%\-]*[\w%]|[0-9]")


_THE_CHANGE_ITSELF = frozenset({"change", "changes", "changed"})  # the act of changing, not a thing changed


def specific_words(text: str, subject: str | None = None) -> list[str]:
    """The words of `text` that name something, as written: numbers, versions, identifiers
    (digits, underscores, dots or inner capitals) first, then other words of six letters or more."""
    own = name_terms(subject)
    words = [w for w in dict.fromkeys(_WORD_AS_WRITTEN.findall(text))
             if w.lower() not in TERM_STOP_WORDS and w.lower() not in GENERIC_WORDS
             and w.lower() not in _THE_CHANGE_ITSELF and not entity_terms(w) <= own]
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
        self.documents = [episode_terms(ep) for ep in episodes]
        self.n = len(self.documents)
        self.compared = compared  # documents that are the two sides being compared: not evidence of a common term
        self.df: dict[str, int] = {}

    def weight(self, term: str) -> float:
        """Scaled IDF of `term` (1.0 for a term no episode holds)."""
        df = self.df.get(term)
        if df is None:
            df = self.df[term] = max(0, sum(1 for doc in self.documents if term in doc) - self.compared)
        n = self.n - self.compared + self.background
        return max(0.0, math.log((n + 1) / (df + 1)) / math.log(n + 1)) ** 2

    def overlap(self, a: frozenset[str], b: frozenset[str]) -> tuple[float, tuple[str, ...]]:
        """Summed weight of the terms `a` and `b` share, and those terms (heaviest first)."""
        shared = sorted(a & b, key=lambda t: (-self.weight(t), t))
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


def incident_terms(ep: Episode, chain: Sequence[Episode] = (), *,
                   keep: Callable[[str], bool] = lambda observation: True) -> frozenset[str]:
    """Terms of the incident a change resolved: the observations of its attempts (those `keep` accepts)
    and its subject's name."""
    return _terms_of(tuple(o for other in (*chain, ep) for o in other.observations if keep(o))) | name_terms(ep.subject)


def change_terms(ep: Episode, chain: Sequence[Episode] = ()) -> frozenset[str]:
    """Terms of the change `ep` made: its actions and what its fix did (a diagnosis is not a change)."""
    return _terms_of(tuple(t for t in (*ep.actions, fix_text(ep)) if t)) - name_terms(ep.subject)


@lru_cache(maxsize=16384)
def _terms_of(texts: tuple[str, ...]) -> frozenset[str]:
    return frozenset().union(*(entity_terms(t) for t in texts)) if texts else frozenset()
