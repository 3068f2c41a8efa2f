"""Graph evidence for a decision: recent changes the observations implicate, as per-candidate votes.

    changes = changes_for(memory, problem.observations, subject=problem.service, principal=principal)
    votes = change_votes(changes, problem.candidates)        # pure: {candidate id: vote in [0, 1]}
    items = change_evidence(changes)                         # Evidence(source="change", ...) for a context

`changes_for` asks the memory (`memory.graph.recent_changes`, the CAUSED_BY rule's hypotheses
before any edge exists) which changes still in place the observations implicate, each with a
probability and a readable chain ("this started 2 d after the capacity change on
orders-db-proxy …"). `change_votes` turns them into votes for the candidates, from two sources:

- a candidate whose description or signals speak of a change (`CHANGE_CAUSE`, generic English:
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
from datetime import datetime
from typing import Any, Iterable, NamedTuple, Sequence

from agent.reasoner import CauseInfo, Evidence
from memory.graph import ChangeLink, causes_among, recent_changes
from memory.timeline import check_label

# Generic English for a cause that is itself a change someone made.
CHANGE_CAUSE = re.compile(
    r"\b(?:releases?|released|versions?|deploy\w*|rollouts?|rolled out|configuration|config\w*|settings?|migrations?|"
    r"upgrades?|upgraded|dependenc(?:y|ies)|changes?|changed|shipped|flags?|patch(?:ed|es)?|updates?|updated)\b",
    re.IGNORECASE)


class ChangeVotes(NamedTuple):
    """Per-candidate votes from the recent changes, with their reasons."""

    votes: dict[str, float]  # candidate id → vote in [0, 1] (absent: no vote)
    reasons: dict[str, str]  # candidate id → why, with the change's chain


def is_change_cause(candidate: CauseInfo) -> bool:
    """Whether a candidate's description or signals describe a change (generic English)."""
    return bool(CHANGE_CAUSE.search(" ".join([candidate.description, *candidate.signals])))


def change_votes(changes: Sequence[ChangeLink], candidates: Iterable[CauseInfo], *,
                 change_type: bool = False) -> ChangeVotes:
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
                found.append((change.probability, f"changes resolving {change.resolved} led to {candidate.id} "
                                                  f"before; {change.chain}"))
            for vote, reason in found:
                if vote > votes.get(candidate.id, 0.0):
                    votes[candidate.id], reasons[candidate.id] = round(vote, 3), reason
    return ChangeVotes(votes, reasons)


def change_evidence(changes: Sequence[ChangeLink]) -> list[Evidence]:
    """The changes as `Evidence(source="change")` items for a context (text: the chain)."""
    return [Evidence(id=c.episode_id, source="change", text=c.chain, relevance=c.probability,
                     resolved_as=c.resolved, why=c.why) for c in changes]


def changes_for(memory: Any, observations: Sequence[str], *, subject: str | None = None,
                principal: str | None = None, at: datetime | None = None, limit: int = 3) -> list[ChangeLink]:
    """The recent changes of a memory's principal that `observations` implicate, most probable first.

    Args:
        memory: an `EpisodicMemory`.
        observations: what is observed now.
        subject: the failing service.
        principal: the tenant (the memory's default when None).
        at: now (default: the time of the principal's latest entry).
        limit: at most this many.
    """
    if at is None:
        latest = memory.recent(1, principal=principal)
        if not latest:
            return []
        at = latest[-1].timestamp
    window = memory.state.graph_config.window
    who = memory.principal if principal is None else check_label("principal", principal)
    history = memory.state.ended_by(who, at, window) if window > 0 else []
    graph = memory.graph_of(who)
    caused = causes_among(graph, [ep.id for ep in history])
    return recent_changes(observations, subject, at, history, graph=graph, caused=caused, limit=limit,
                          config=memory.state.graph_config)
