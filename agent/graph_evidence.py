"""Graph evidence for a decision: the recent changes memory says the observations implicate, as votes.

    context = memory.recall(problem.observations, subject=problem.service, ...)
    votes = change_votes([c.change for c in context.changes], problem.candidates)   # pure

The memory (`EpisodicMemory.recall`, `Context.changes`) finds which changes still in place the
observations implicate, each with a probability and a readable chain ("this started 2 d after the
capacity change on orders-db-proxy …"). `change_votes` turns them into votes for the candidates,
from two sources:

- a candidate whose description or signals speak of a change (`CHANGE_CAUSE`, the lexicon's generic English:
  a release, version, configuration, setting, migration, dependency, rollout…) is a
  *change-type* cause: an implicated recent change is evidence for it (vote: the change's
  probability);
- what the memory recorded such changes leading to: when incidents earlier linked (CAUSED_BY)
  to changes that resolved the same choice were resolved as a candidate, the change is evidence
  for that candidate (vote: the probability).

A candidate gets the larger of its votes; the reason says which. The first source is off
unless asked for (`change_votes(change_type=True)`; see there why). Nothing here reads a
scenario's words: the change words are generic, the rest comes from the memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from agent.reasoner import CauseInfo
from memory import DEFAULT_LEXICON

# Generic English for a cause that is itself a change someone made: the lexicon's `change_cause` group.
CHANGE_CAUSE = re.compile(rf"\b(?:{DEFAULT_LEXICON['change_cause']})\b", re.IGNORECASE)


class ImplicatedChange(Protocol):
    """What a vote reads of a change memory implicates (`Context.changes`: `RecalledChange.change`)."""

    @property
    def probability(self) -> float: ...  # that this change caused what is observed now
    @property
    def resolved(self) -> str | None: ...  # the choice the change's incident was resolved with
    @property
    def led_to(self) -> tuple[str, ...]: ...  # how incidents earlier linked to such changes were resolved
    @property
    def chain(self) -> str: ...  # the change in one line


class ChangeVotes(NamedTuple):
    """Per-candidate votes from the recent changes, with their reasons."""

    votes: dict[str, float]  # candidate id → vote in [0, 1] (absent: no vote)
    reasons: dict[str, str]  # candidate id → why, with the change's chain


def is_change_cause(candidate: CauseInfo) -> bool:
    """Whether a candidate's description or signals describe a change (generic English)."""
    return bool(CHANGE_CAUSE.search(" ".join([candidate.description, *candidate.signals])))


def change_votes(
    changes: Sequence[ImplicatedChange], candidates: Iterable[CauseInfo], *, change_type: bool = False
) -> ChangeVotes:
    """Votes for the candidates from the implicated changes (pure; see the module docstring).

    Args:
        change_type: also vote for every change-type cause. Off by default: on the shipped
            scenarios it cost 4.5 points of first-attempt accuracy (65.3 % → 60.8 %, 5 seeds), because
            a recent change more often *caused a symptom* of another kind (a pool resized, a cache
            moved) than it was itself the fault; what the memory recorded such changes leading
            to is the vote that holds.
    """
    votes: dict[str, float] = {}
    reasons: dict[str, str] = {}
    for candidate in candidates:
        for change in changes:
            found: list[tuple[float, str]] = []
            if change_type and is_change_cause(candidate):
                found.append((change.probability, f"a change-type cause; {change.chain}"))
            if candidate.id in change.led_to:
                found.append(
                    (
                        change.probability,
                        f"changes resolving {change.resolved} led to {candidate.id} before; {change.chain}",
                    )
                )
            for vote, reason in found:
                if vote > votes.get(candidate.id, 0.0):
                    votes[candidate.id], reasons[candidate.id] = round(vote, 3), reason
    return ChangeVotes(votes, reasons)
