"""The recent changes an incident's observations implicate: the CAUSED_BY rule's hypotheses before any edge exists.

`changes_for` asks the graph (`memory.graph.recent_changes`) which changes still in place the
observations implicate, each with a probability, a readable chain ("this started 2 d after the
capacity change on orders-db-proxy …") and what incidents such changes led to before.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memory.graph import ChangeLink, causes_among
from memory.graph.implicated import ChangeBasis, change_basis, implicated_changes
from memory.state import MemoryState


class ChangeBases:
    """The part of `changes_for` that does not depend on the observations, kept per principal while it holds.

    It is the same for every question asked at one time before the memory learns anything (the
    same closed episodes, the same edge records): the principal's recent history, which of them
    are linked as causes, the changes still in place, their term weights and learned shares.
    """

    def __init__(self, state: MemoryState) -> None:
        self.state = state
        self._kept: dict[str, tuple[tuple[Any, ...], ChangeBasis]] = {}  # principal → (when it holds, basis)

    def at(self, principal: str, at: datetime) -> ChangeBasis:
        """The principal's basis at time `at` (built again once the memory learned something or `at` moved)."""
        state = self.state
        window = state.graph_config.window
        holds = (at, window, len(state.episodes), len(state.edge_ids))
        kept = self._kept.get(principal)
        if kept is None or kept[0] != holds:
            history = state.ended_by(principal, at, window) if window > 0 else []
            graph = state.graph_of(principal)
            caused = causes_among(graph, [episode.id for episode in history])
            kept = (holds, change_basis(at, history, graph=graph, caused=caused, config=state.graph_config))
            self._kept[principal] = kept
        return kept[1]


def changes_for(
    state: MemoryState,
    observations: Sequence[str],
    *,
    principal: str,
    at: datetime,
    subject: str | None = None,
    limit: int = 3,
    bases: ChangeBases | None = None,
) -> list[ChangeLink]:
    """The recent changes of a principal that `observations` implicate at time `at`, most probable first.

    Args:
        state: the memory's derived state.
        observations: what is observed now.
        principal: the tenant.
        at: now (e.g. the time of the principal's latest entry).
        subject: the failing service.
        limit: at most this many.
        bases: what earlier questions prepared (`ChangeBases` of `state`; None: prepared for this one).
    """
    basis = (bases if bases is not None else ChangeBases(state)).at(principal, at)
    return implicated_changes(observations, subject, basis, limit=limit, lexicon=state.lexicon)
