"""Ground truth of a played scenario, for evaluation only (never shown to agents).

True episodes partition the environment's stream, in stream order:

- an **attempt** episode is one attempt of one round. Attempt 1 holds the round's
  observations, its outcome signal and (after a wrong choice) the correction. A retry
  (attempt k > 1) holds the stream events that attempt produced: its outcome signal and
  any correction. (The retry *prompt* repeats the previous attempt's outcome and
  correction as context, but those events belong to the previous attempt's episode.)
  Outcome: SUCCESS if the choice was right, FAILURE if wrong, UNKNOWN while undecided.
- an **interlude** episode is one interlude block: all its events, outcome UNKNOWN.

A boundary is the stream index of the first event of a true episode.

Relations point from a later episode (``source``) to an earlier one (``target``), both
given as positions in ``GroundTruth.episodes``:

- RETRY_OF: attempt k+1 of a round -> attempt k of the same round.
- LEARNED_FROM: a correct attempt -> the latest earlier failed attempt of the same round
  that received a correction (none if the round has no correction text).
- CAUSED_BY: attempt 1 of a round with ``caused_by: X`` -> the last attempt of round X.
"""

from __future__ import annotations

from dataclasses import dataclass

SUCCESS = "SUCCESS"
FAILURE = "FAILURE"
UNKNOWN = "UNKNOWN"
RETRY_OF = "RETRY_OF"
LEARNED_FROM = "LEARNED_FROM"
CAUSED_BY = "CAUSED_BY"


@dataclass(frozen=True)
class TrueEpisode:
    """One true unit of experience in the stream."""

    event_indices: tuple[int, ...]  # stream indices of its events, ascending
    kind: str  # "attempt" | "interlude"
    round_id: str | None  # round of an attempt; None for an interlude
    attempt: int | None  # 1-based attempt number; None for an interlude
    outcome: str  # "SUCCESS" | "FAILURE" | "UNKNOWN"
    situation: str  # situation label of its events
    service: str | None  # affected service of an attempt; None for an interlude


@dataclass(frozen=True)
class TrueRelation:
    """A typed link between two true episodes (positions in ``episodes``)."""

    type: str  # "RETRY_OF" | "LEARNED_FROM" | "CAUSED_BY"
    source: int  # position of the later episode
    target: int  # position of the earlier episode


@dataclass(frozen=True)
class GroundTruth:
    """True episodes and relations of the stream played so far."""

    episodes: tuple[TrueEpisode, ...]  # in stream order; they partition the stream
    relations: tuple[TrueRelation, ...]  # sorted by (source, type, target)

    @property
    def boundaries(self) -> tuple[int, ...]:
        """Stream index of the first event of each true episode."""
        return tuple(ep.event_indices[0] for ep in self.episodes if ep.event_indices)


@dataclass(frozen=True)
class AttemptRecord:
    """What the environment logged about one attempt while playing."""

    position: int  # position of its episode in the episode list
    round_id: str  # round of the attempt
    attempt: int  # 1-based attempt number
    correct: bool | None  # None while undecided
    corrected: bool  # a correction event followed this attempt


def relations(attempts: list[AttemptRecord], caused_by: dict[str, str]) -> tuple[TrueRelation, ...]:
    """Derives RETRY_OF, LEARNED_FROM and CAUSED_BY from the attempt log.

    Args:
        attempts: attempt records in play order.
        caused_by: round id -> id of the earlier round that caused it.
    """
    by_round: dict[str, list[AttemptRecord]] = {}
    for a in attempts:
        by_round.setdefault(a.round_id, []).append(a)
    out: list[TrueRelation] = []
    for tries in by_round.values():
        for prev, cur in zip(tries, tries[1:]):
            out.append(TrueRelation(RETRY_OF, cur.position, prev.position))
        for k, cur in enumerate(tries):
            if cur.correct:
                taught = [t for t in tries[:k] if t.correct is False and t.corrected]
                if taught:
                    out.append(TrueRelation(LEARNED_FROM, cur.position, taught[-1].position))
    for rid, cause in caused_by.items():
        if rid in by_round and cause in by_round:
            out.append(TrueRelation(CAUSED_BY, by_round[rid][0].position, by_round[cause][-1].position))
    return tuple(sorted(out, key=lambda r: (r.source, r.type, r.target)))
