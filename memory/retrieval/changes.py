"""The recent changes an incident's observations implicate: the CAUSED_BY rule's hypotheses before any edge exists.

`changes_for` asks the graph (`memory.graph.recent_changes`) which changes still in place the
observations implicate, each with a probability, a readable chain ("this started 2 d after the
capacity change on orders-db-proxy …") and what incidents such changes led to before.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memory.graph import ChangeLink, causes_among, recent_changes
from memory.state import MemoryState


def changes_for(
    state: MemoryState,
    observations: Sequence[str],
    *,
    principal: str,
    at: datetime,
    subject: str | None = None,
    limit: int = 3,
) -> list[ChangeLink]:
    """The recent changes of a principal that `observations` implicate at time `at`, most probable first.

    Args:
        state: the memory's derived state.
        observations: what is observed now.
        principal: the tenant.
        at: now (e.g. the time of the principal's latest entry).
        subject: the failing service.
        limit: at most this many.
    """
    window = state.graph_config.window
    history = state.ended_by(principal, at, window) if window > 0 else []
    graph = state.graph_of(principal)
    caused = causes_among(graph, [episode.id for episode in history])
    return recent_changes(
        observations,
        subject,
        at,
        history,
        graph=graph,
        caused=caused,
        limit=limit,
        config=state.graph_config,
        lexicon=state.lexicon,
    )
