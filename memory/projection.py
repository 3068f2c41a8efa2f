"""Episodes and the episode graph as a projection of the stored timeline.

Closed episodes and their edges are stored as insert-only records (kinds ``episode`` and
``edge``); storing the same record twice is a no-op. The episode still open at the end of
each principal's stream is *provisional*: it is part of a `snapshot` but is never stored
until a later entry closes it, so re-segmenting the whole timeline (`rebuild`) always
equals the live state, also after the store is reopened (`LiveProjection` resumes the
segmenter from the timeline tail).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable, NamedTuple, Sequence

import networkx as nx

from memory.episodes import Edge, Episode
from memory.graph import DEFAULT_GRAPH_CONFIG, GraphConfig, add_edges, add_episode, build_graph, infer_edges
from memory.episodes import DEFAULT_CONFIG, Segmenter, SegmenterConfig, segment
from memory.timeline import RecordKind


@dataclass(frozen=True)
class Projection:
    """Episodes, edges and the graph derived from a timeline."""

    episodes: tuple[Episode, ...]  # ordered by first seq
    edges: tuple[Edge, ...]  # ordered by their source episode, then rule order
    graph: nx.MultiDiGraph = field(compare=False, repr=False)  # built from the two above


class Update(NamedTuple):
    """What one entry changed: newly closed episodes and their edges."""

    episodes: list[Episode]  # closed (and stored) by the entry
    edges: list[Edge]  # inferred for them (and stored)


def _history(window: int) -> deque[Episode]:
    return deque(maxlen=max(window, 1))


def link(episodes: Sequence[Episode], *, config: GraphConfig = DEFAULT_GRAPH_CONFIG) -> list[Edge]:
    """Batch linking: infer each episode's edges against its principal's earlier episodes."""
    histories: dict[str, deque[Episode]] = {}
    edges: list[Edge] = []
    for ep in sorted(episodes, key=lambda e: e.first_seq):
        history = histories.setdefault(ep.principal, _history(config.window))
        edges.extend(infer_edges(ep, history, config=config))
        history.append(ep)
    return edges


def persist(store: Any, episodes: Iterable[Episode], edges: Iterable[Edge]) -> int:
    """Insert episode and edge records (idempotent); returns how many were new."""
    added = store.add_records(RecordKind.EPISODE, [(ep.id, ep.to_record()) for ep in episodes])
    return added + store.add_records(RecordKind.EDGE, [(edge.id, edge.to_record()) for edge in edges])


def _project(episodes: Iterable[Episode], edges: Iterable[Edge]) -> Projection:
    ordered = tuple(sorted(episodes, key=lambda ep: ep.first_seq))
    rank = {ep.id: i for i, ep in enumerate(ordered)}
    edge_list = list(dict.fromkeys(edges))
    edge_order = tuple(sorted(edge_list, key=lambda e: rank.get(e.source, len(rank))))  # stable within a source
    return Projection(ordered, edge_order, build_graph(ordered, edge_order))


def load(store: Any) -> Projection:
    """The stored (closed) episodes and edges, as a projection."""
    episodes = [Episode.from_record(body) for _, body in store.records(RecordKind.EPISODE)]
    edges = [Edge.from_record(body) for _, body in store.records(RecordKind.EDGE)]
    return _project(episodes, edges)


def rebuild(store: Any, *, segmenter: SegmenterConfig = DEFAULT_CONFIG,
            graph: GraphConfig = DEFAULT_GRAPH_CONFIG) -> Projection:
    """Re-segment and re-link the whole stored timeline (open episodes included)."""
    episodes = segment(store.entries(), segmenter)
    return _project(episodes, link(episodes, config=graph))


class LiveProjection:
    """Keeps episodes, edges and the graph current as entries are appended.

    On construction it loads the stored records and replays the timeline after the last
    stored episode of each principal, so the open episodes resume where they were.

    Args:
        store: the store holding the timeline and the records.
        segmenter: segmentation configuration.
        graph: edge-rule configuration.
    """

    def __init__(self, store: Any, *, segmenter: SegmenterConfig = DEFAULT_CONFIG,
                 graph: GraphConfig = DEFAULT_GRAPH_CONFIG) -> None:
        self.store = store
        self.graph_config = graph
        self.segmenter = Segmenter(segmenter)
        stored = load(store)
        self._episodes: list[Episode] = list(stored.episodes)
        self._edges: list[Edge] = list(stored.edges)
        self.graph: nx.MultiDiGraph = stored.graph  # closed episodes only
        self._histories: dict[str, deque[Episode]] = {}
        last: dict[str, int] = {}
        for ep in self._episodes:
            self._histories.setdefault(ep.principal, _history(graph.window)).append(ep)
            last[ep.principal] = max(last.get(ep.principal, -1), ep.last_seq)
        start = min(last.values()) + 1 if last else 0
        for entry in store.entries(start=start):
            if entry.seq > last.get(entry.principal, -1):
                self.observe(entry)

    @property
    def episodes(self) -> tuple[Episode, ...]:
        """Closed (stored) episodes, in closing order."""
        return tuple(self._episodes)

    @property
    def edges(self) -> tuple[Edge, ...]:
        """Edges of the closed episodes."""
        return tuple(self._edges)

    def observe(self, entry: Any) -> Update:
        """Feed one appended entry; store and link the episodes it closes."""
        closed = self.segmenter.feed(entry)
        edges: list[Edge] = []
        for ep in closed:
            history = self._histories.setdefault(ep.principal, _history(self.graph_config.window))
            new_edges = infer_edges(ep, history, config=self.graph_config)
            persist(self.store, [ep], new_edges)
            history.append(ep)
            self._episodes.append(ep)
            self._edges.extend(new_edges)
            add_episode(self.graph, ep)
            add_edges(self.graph, new_edges)
            edges.extend(new_edges)
        return Update(closed, edges)

    def provisional(self) -> Update:
        """The open episodes (not stored) and the edges they would get if closed now."""
        episodes = self.segmenter.peek()
        edges = [edge for ep in episodes
                 for edge in infer_edges(ep, self._histories.get(ep.principal, ()), config=self.graph_config)]
        return Update(episodes, edges)

    def snapshot(self) -> Projection:
        """Closed plus provisional episodes: equals `rebuild` of the same store."""
        tail = self.provisional()
        return _project(self._episodes + tail.episodes, self._edges + tail.edges)
