"""Incidents: a past problem as one unit of experience.

An incident is the episodes that worked on one problem: the attempt that opened it (the one
with observations) and every later attempt linked to it by RETRY_OF / LEARNED_FROM. Recall
hands an incident over whole, so that "tried X: no change; the review said it was Y; Y fixed
it" reaches the reader together: a failed attempt is never separated from its lesson.

Everything here is a pure function of the graph and an episode lookup.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, Protocol

import networkx as nx

from memory.episodes import Episode, Outcome
from memory.facts import affirmed_lines
from memory.graph import EdgeType, later_attempts
from memory.lexicon import DEFAULT_LEXICON, Lexicon

_EARLIER = {EdgeType.RETRY_OF.value, EdgeType.LEARNED_FROM.value}


@dataclass(frozen=True)
class Attempt:
    """One attempt at an incident: what was tried and how it went."""

    episode_id: str  # the attempt's episode
    choice: str | None  # the structured choice tried (None when the episode decided nothing)
    outcome: str  # SUCCESS, FAILURE, PARTIAL or UNKNOWN
    verdict: str  # what the outcome was detected from (an outcome text or status)
    corrections: tuple[str, ...]  # corrections received after it


@dataclass(frozen=True)
class Incident:
    """A past problem with its symptoms, attempts in order, corrections and final fix."""

    opener: str  # id of the episode that opened it
    situation: str  # its situation label
    subject: str | None  # the service or subject it concerned, when known
    symptoms: tuple[str, ...]  # observations of the opening episode
    attempts: tuple[Attempt, ...]  # every attempt, oldest first
    resolution: str | None  # the choice that fixed it, when one did

    @property
    def episode_ids(self) -> tuple[str, ...]:
        """Ids of the incident's episodes, oldest first."""
        return tuple(a.episode_id for a in self.attempts)

    @property
    def corrections(self) -> tuple[str, ...]:
        """Every correction received during the incident, in order."""
        return tuple(text for a in self.attempts for text in a.corrections)

    @property
    def failed(self) -> tuple[str, ...]:
        """Choices that were tried and did not fix it, in order, each once."""
        tried = [a.choice for a in self.attempts if a.choice and a.outcome != Outcome.SUCCESS.value]
        return tuple(c for c in dict.fromkeys(tried) if c != self.resolution)

    def story(self) -> str:
        """The incident in one line: "tried X: <outcome>; correction: …; Y fixed it"."""
        parts = []
        for attempt in self.attempts:
            if attempt.choice:
                verdict = "fixed it" if attempt.outcome == Outcome.SUCCESS.value else attempt.outcome.lower()
                parts.append(f"tried {attempt.choice}: {verdict}")
            parts.extend(f"correction: {text}" for text in attempt.corrections)
        if self.resolution:
            parts.append(f"resolved by {self.resolution}")
        elif any(a.choice for a in self.attempts):
            parts.append("not resolved")
        return "; ".join(parts)


def opener_of(G: nx.MultiDiGraph, episode_id: str) -> str:
    """The episode that opened the incident `episode_id` belongs to (following RETRY_OF back)."""
    seen, node = {episode_id}, episode_id
    while node in G:
        earlier = sorted(v for _, v, d in G.out_edges(node, data=True) if d.get("type") in _EARLIER and v not in seen)
        if not earlier:
            break
        node = earlier[0]
        seen.add(node)
    return node


def incident_of(G: nx.MultiDiGraph, episode_id: str, lookup: Callable[[str], Episode | None]) -> Incident | None:
    """The incident an episode belongs to, or None for an unknown episode."""
    opener = lookup(opener_of(G, episode_id))
    if opener is None:
        return None
    members, frontier = {opener.id: opener}, [opener.id]
    while frontier:
        found = [lookup(n) for node in frontier for n in later_attempts(G, node) if n not in members]
        frontier = []
        for episode in found:
            if episode is not None and episode.id not in members:
                members[episode.id] = episode
                frontier.append(episode.id)
    ordered = sorted(members.values(), key=lambda e: (e.first_seq, e.id))
    attempts = tuple(
        Attempt(e.id, e.choices[-1] if e.choices else None, e.outcome.value, e.outcome_evidence, tuple(e.corrections))
        for e in ordered
    )
    fixed = [e for e in ordered if e.outcome is Outcome.SUCCESS and e.choices]
    return Incident(
        opener=opener.id,
        situation=opener.situation,
        subject=opener.subject,
        symptoms=tuple(opener.observations),
        attempts=attempts,
        resolution=fixed[0].choices[-1] if fixed else None,
    )


@lru_cache(maxsize=4096)  # every recall weighs its query, and the same incidents come back for similar queries
def lines_affirmed(lines: tuple[str, ...], lexicon: Lexicon) -> tuple[frozenset[str], ...]:
    """`memory.facts.affirmed_lines` of observation lines, kept for the lines read most recently."""
    return tuple(affirmed_lines(lines, lexicon))


def closeness(
    query: Sequence[str],
    symptoms: Sequence[str],
    rarity: Callable[[str], float],
    *,
    ignore: Collection[str] = (),
    lexicon: Lexicon = DEFAULT_LEXICON,
) -> float:
    """How close a past incident's symptoms are to the current ones, in [0, 1], negation-aware.

    Both sides are reduced to the terms their observation lines affirm (a denied or normal-state
    clause does not count), `ignore` removed (e.g. service names: where it happened, not what),
    and compared by a weighted overlap (weights: `separation_in` or `rarity_in`)
    ``Σ_shared w / sqrt(Σ_query w · Σ_past w)``: a shared rare detail counts for more than a phrase
    every incident uses. The lines are read with `lexicon` (the memory's).
    """
    ignored = set(ignore)
    now = set().union(*lines_affirmed(tuple(query), lexicon)) - ignored if query else set()
    then = set().union(*lines_affirmed(tuple(symptoms), lexicon)) - ignored if symptoms else set()
    if not now or not then:
        return 0.0
    shared = sum(rarity(t) for t in now & then)
    return shared / math.sqrt(sum(rarity(t) for t in now) * sum(rarity(t) for t in then))


class TermRecord(Protocol):
    """What weighing terms reads of a principal's evidence: an `EvidenceLog`, or `memory.state.TermCounts`."""

    def __len__(self) -> int: ...

    def frequency(self, term: str) -> int:
        """How many items hold `term`."""
        ...

    def resolutions_with(self, term: str) -> dict[str, int]:
        """Choice → how many SUCCESS items holding `term` confirmed it."""
        ...

    def confirmed(self) -> set[str]:
        """Choices some SUCCESS item confirmed."""
        ...


class Weighed(NamedTuple):
    """What weighs a recalled unit for the current problem (`memory.retrieval.units`)."""

    closeness: float  # `closeness`
    credit: float  # its credit as a precedent
    telling: float  # `telling`
    telling_terms: tuple[str, ...]  # the terms that told it apart, most telling first
    why: str  # the above in words


def telling(
    now: Collection[str],
    incident: Incident,
    log: TermRecord | None,
    rarity: Callable[[str], float],
    *,
    ignore: Collection[str] = (),
    lexicon: Lexicon = DEFAULT_LEXICON,
) -> tuple[float, tuple[str, ...]]:
    """How much of what the current observations share with an exception told it apart, in [0, 1], and the terms.

    An *exception* is an incident whose first answers failed before another fixed it ("it looked like M; it
    was Y"). Of the terms both the current observations (`now`: the terms they affirm, `affirmed_lines`, read
    once by the caller for every unit) and its symptoms affirm (`ignore` left out), a term
    tells it apart as far as the principal's record ties it to Y rather than to the answers that failed
    there: ``(n_Y − n_F) / (n_Y + n_F)`` (0 when negative), where ``n_c`` counts the incidents fixed by ``c``
    whose observations hold the term. The share is that, weighted by rarity, over all the shared terms: a
    round that shows again the detail only that exception had scores high; one that shares only the
    symptoms the mimic's own incidents show scores 0. Any other incident: 0.
    """
    answer, failed = incident.resolution, incident.failed
    if not answer or not failed or log is None:
        return 0.0, ()
    then = set().union(*lines_affirmed(tuple(incident.symptoms), lexicon)) if incident.symptoms else set()
    shared = (then & set(now)) - set(ignore)
    total, told = 0.0, {}
    for term in shared:
        counts = log.resolutions_with(term)
        fixed, other = counts.get(answer, 0), max(counts.get(choice, 0) for choice in failed)
        weight = rarity(term)
        total += weight
        if fixed > other:
            told[term] = weight * (fixed - other) / (fixed + other)
    if not told:
        return 0.0, ()
    return round(sum(told.values()) / total, 6), tuple(sorted(told, key=lambda t: (-told[t], t)))


def rarity_in(frequency: Callable[[str], int], documents: int) -> Callable[[str], float]:
    """Inverse document frequency over `documents` incidents: ``log((n + 1) / (df + 1)) + 1``."""
    return lambda term: math.log((documents + 1) / (frequency(term) + 1)) + 1.0


def separation_in(log: TermRecord) -> Callable[[str], float]:
    """How well a term tells resolutions apart in a principal's labelled incidents, times its rarity.

    ``purity = (max_c n_c + 1) / (N + C)``: of the N successful episodes whose observations hold
    the term, the share fixed by its most common answer (C: the answers seen, a Laplace prior),
    so a symptom that came with every cause weighs little and one that came with a single
    cause weighs fully. Multiplied by the term's rarity (`rarity_in`). Memoised per log size.
    """
    rarity = rarity_in(log.frequency, len(log))
    answers = max(1, len(log.confirmed()))
    memo: dict[str, float] = {}

    def weight(term: str) -> float:
        if term not in memo:
            counts = log.resolutions_with(term)
            purity = (max(counts.values(), default=0) + 1) / (sum(counts.values()) + answers)
            memo[term] = rarity(term) * purity
        return memo[term]

    return weight


def forget_cached_text() -> None:
    """Empty this module's caches keyed by text (an erasure: `memory.retrieval.text_caches`)."""
    lines_affirmed.cache_clear()
