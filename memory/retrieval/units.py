"""Recalled episodes as whole incidents: the notes that make `Context.render` show a past
problem with every attempt, its outcome and its corrections, not only the episode that ranked.

A recall returns episodes; the episode that ranked is often the attempt that fixed the
problem, while the lesson is in the failed attempt and the correction before it. Every caller
of `EpisodicMemory.recall` (an agent loop, the MCP server) gets the incident whole.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import networkx as nx

from memory.episodes import Episode
from memory.retrieval.incidents import incident_of
from memory.retrieval.context import Context, IncidentNote


def with_incidents(context: Context, G: nx.MultiDiGraph, lookup: Callable[[str], Episode | None]) -> Context:
    """`context` with a note per recalled episode naming its incident's symptoms, final fix and episodes.

    Args:
        context: what the retriever recalled.
        G: the principal's episode graph (RETRY_OF / LEARNED_FROM join an incident's attempts).
        lookup: an episode by id (None when unknown).
    """
    notes = {}
    for recalled in context.episodes:
        incident = incident_of(G, recalled.episode.id, lookup)
        if incident is None:
            continue
        episodes = tuple(e for e in map(lookup, incident.episode_ids) if e is not None)
        notes[recalled.episode.id] = IncidentNote(key=incident.opener, symptoms=incident.symptoms,
                                                  final_fix=incident.resolution, episodes=episodes)
    return replace(context, incidents=notes)
