"""Queries over the episode graph: causal chains, neighbours, a subject's history (plain functions)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from itertools import islice
from typing import Any, NamedTuple

import networkx as nx

from memory.episodes import Episode, Outcome
from memory.graph.edges import Edge, EdgeType

BACKWARD = (EdgeType.CAUSED_BY, EdgeType.RETRY_OF, EdgeType.LEARNED_FROM)  # point from later to earlier
FORWARD = (EdgeType.LED_TO,)  # points from earlier to later


class Link(NamedTuple):
    """One typed edge of a chain."""

    source: str  # episode id
    target: str  # episode id
    type: EdgeType  # relation


class CausalChain(NamedTuple):
    """What led to an episode, oldest first."""

    episode_ids: tuple[str, ...]  # episodes in time order, ending with (or containing) the queried one
    links: tuple[Link, ...]  # the typed edges among them, in time order of their later end
    edge_types: tuple[EdgeType, ...]  # types of `links`
    narrative: str  # one line, e.g. "incident → failed fix → correction → fix"


def _backward_view(G: nx.MultiDiGraph) -> nx.DiGraph:
    """Causal edges oriented from later to earlier episode (LED_TO reversed)."""
    view = nx.DiGraph()
    view.add_nodes_from(G)
    for u, v, data in G.edges(data=True):
        kind = data.get("type")
        if kind in BACKWARD:
            view.add_edge(u, v, type=kind)
        elif kind in FORWARD and not view.has_edge(v, u):
            view.add_edge(v, u, type=kind)
    return view


def _steps(ep: Episode | None, first: bool) -> list[str]:
    if ep is None:
        return ["episode"]
    steps = ["incident"] if ep.observations and (first or not ep.decisions) else []
    if ep.decisions or ep.actions:
        steps.append(
            {Outcome.SUCCESS: "fix", Outcome.FAILURE: "failed fix", Outcome.PARTIAL: "partial fix"}.get(
                ep.outcome, "decision"
            )
        )
    if ep.corrections:
        steps.append("correction")
    return steps or [ep.situation]


_EARLIEST = datetime.min.replace(tzinfo=UTC)  # where an episode that cannot be looked up sorts


def _sort_key(G: nx.MultiDiGraph, episodes: Callable[[str], Episode | None], node: str) -> tuple[Any, ...]:
    episode = episodes(node)
    return (episode.start if episode is not None else _EARLIEST, G.nodes[node].get("first_seq", 0), node)


def causal_chain(
    G: nx.MultiDiGraph,
    episode_id: str,
    *,
    episodes: Callable[[str], Episode | None],
    max_hops: int = 3,
    max_episodes: int = 0,
) -> CausalChain:
    """Follow CAUSED_BY / RETRY_OF / LEARNED_FROM (and LED_TO backwards) to the roots.

    The walk is breadth-first, up to `max_hops` steps; with `max_episodes` > 0 it stops once
    that many episodes are reached (the nearest ones), so an episode that learned from many
    others, which learned from many more, reads as a chain and not as its whole ancestry.
    `episodes` looks up an episode by id (for times and the narrative's steps).
    """
    if episode_id not in G:
        raise KeyError(f"episode {episode_id} is not in the graph")

    def backward_neighbours(node: str) -> Iterable[str]:
        for other, keyed in G.succ[node].items():
            if any(data.get("type") in BACKWARD for data in keyed.values()):
                yield other
        for other, keyed in G.pred[node].items():
            if any(data.get("type") in FORWARD for data in keyed.values()):
                yield other

    # A bounded breadth-first search over causal edges only: the cost depends on the
    # chain's neighbourhood, not on the size of the graph.
    walk = (v for _, v in nx.generic_bfs_edges(G, episode_id, neighbors=backward_neighbours, depth_limit=max_hops))
    reached = {episode_id} | set(islice(walk, max_episodes - 1) if max_episodes > 0 else walk)
    key = {n: _sort_key(G, episodes, n) for n in reached}
    nodes = sorted(reached, key=key.__getitem__)
    # The orientation of `_backward_view`, restricted to the reached episodes: (later, earlier) → type
    back: dict[tuple[str, str], EdgeType] = {}
    for u in nodes:
        for v, keyed in G.succ[u].items():
            if v not in reached:
                continue
            for data in keyed.values():
                kind = data.get("type")
                if kind in BACKWARD:
                    back[u, v] = kind
                elif kind in FORWARD and (v, u) not in back:
                    back[v, u] = kind
    links = tuple(
        sorted(
            (Link(u, v, EdgeType(kind)) for (u, v), kind in back.items()),
            key=lambda link: (key[link.source], key[link.target]),
        )
    )
    words: list[str] = []
    for position, node in enumerate(nodes):
        words.extend(_steps(episodes(node), position == 0))
    return CausalChain(tuple(nodes), links, tuple(link.type for link in links), " → ".join(words))


class Neighbour(NamedTuple):
    """An adjacent episode and the edge that joins it."""

    episode_id: str  # the other episode
    type: EdgeType  # edge type
    weight: float  # edge weight
    evidence: str  # why the edge exists


def neighbours(
    G: nx.MultiDiGraph, episode_id: str, *, edge_type: EdgeType | str | None = None, direction: str = "out"
) -> list[Neighbour]:
    """Adjacent episodes, strongest edge first; direction "out", "in" or "both"."""
    if direction not in ("out", "in", "both"):
        raise ValueError(f"direction must be 'out', 'in' or 'both', not {direction!r}")
    wanted = EdgeType(edge_type) if edge_type is not None else None
    found: list[Neighbour] = []
    if direction in ("out", "both"):
        found += [
            Neighbour(v, EdgeType(d["type"]), d["weight"], d["evidence"])
            for _, v, d in G.out_edges(episode_id, data=True)
        ]
    if direction in ("in", "both"):
        found += [
            Neighbour(u, EdgeType(d["type"]), d["weight"], d["evidence"])
            for u, _, d in G.in_edges(episode_id, data=True)
        ]
    found = [n for n in found if wanted is None or n.type == wanted]
    return sorted(found, key=lambda n: (-n.weight, _timeline_order(G, n.episode_id), n.type.value))


def subject_history(G: nx.MultiDiGraph, subject: str, *, principal: str | None = None) -> list[str]:
    """Episode ids about `subject`, oldest first (in timeline order)."""
    nodes = [
        n
        for n, d in G.nodes(data=True)
        if d.get("subject") == subject and (principal is None or d.get("principal") == principal)
    ]
    return sorted(nodes, key=lambda n: _timeline_order(G, n))


def _timeline_order(G: nx.MultiDiGraph, node: str) -> tuple[int, str]:
    return (G.nodes[node].get("first_seq", 0), node)


RESOLVING = (EdgeType.RETRY_OF, EdgeType.LEARNED_FROM)  # later attempt → earlier attempt at the same problem


def later_attempts(G: nx.MultiDiGraph, episode_id: str, *, pending: Iterable[Edge] = ()) -> list[str]:
    """Episodes that tried the problem of `episode_id` again: sources of RETRY_OF / LEARNED_FROM edges into it.

    `pending` are edges not in `G` yet (e.g. those of an episode being closed), counted as if they were.
    """
    # read through the adjacency: an edge view made per call cost most of a walk on a principal's view
    found = (
        [u for u, keyed in G.pred[episode_id].items() if any(data.get("type") in RESOLVING for data in keyed.values())]
        if episode_id in G
        else []
    )
    found += [e.source for e in pending if e.target == episode_id and e.type in RESOLVING]
    return list(dict.fromkeys(found))


def resolution(
    G: nx.MultiDiGraph,
    episode_id: str,
    lookup: Callable[[str], Episode | None],
    *,
    pending: Iterable[Edge] = (),
    known: Episode | None = None,
) -> str | None:
    """The choice that finally resolved an episode's problem, or None.

    An episode that succeeded with a choice resolved its own problem. Otherwise the later
    attempts at the same problem are the episodes with a path of RETRY_OF / LEARNED_FROM
    edges to it; the earliest successful one (by first timeline seq, then id) gives the answer.
    `known` is the episode (or what `lookup` gives for it) when the caller has looked it up already.
    """
    episode = lookup(episode_id) if known is None else known
    if episode is None:
        return None
    if episode.outcome is Outcome.SUCCESS:
        return episode.choices[-1] if episode.choices else None
    pending = tuple(pending)
    seen, frontier, successes = {episode_id}, [episode_id], []
    while frontier:
        later = [n for node in frontier for n in later_attempts(G, node, pending=pending) if n not in seen]
        later = list(dict.fromkeys(later))
        seen.update(later)
        for node in later:
            attempt = lookup(node)
            if attempt is not None and attempt.outcome is Outcome.SUCCESS and attempt.choices:
                successes.append(attempt)
        frontier = later
    if not successes:
        return None
    return min(successes, key=lambda e: (e.first_seq, e.id)).choices[-1]


def causes_among(G: nx.MultiDiGraph, episode_ids: Iterable[str], *, min_weight: float = 0.5) -> frozenset[str]:
    """The episodes among `episode_ids` that a CAUSED_BY edge of at least `min_weight` points to."""
    kind = EdgeType.CAUSED_BY.value
    pred = G.pred
    found = []
    for i in episode_ids:
        incoming = pred[i] if i in pred else None
        if incoming and any(
            kind in keyed and keyed[kind].get("weight", 0.0) >= min_weight for keyed in incoming.values()
        ):
            found.append(i)
    return frozenset(found)


def cause_links(
    G: nx.MultiDiGraph, episode_ids: Iterable[str], lookup: Callable[[str], Episode | None], *, min_weight: float = 0.5
) -> dict[str, tuple[str, ...]]:
    """The episodes among `episode_ids` that a CAUSED_BY edge of at least `min_weight` points to, each
    with what the incidents linked to it were finally resolved as (what the change led to; an
    incident not resolved yet adds nothing). Its keys are `causes_among`'s."""
    kind = EdgeType.CAUSED_BY.value
    ids = list(dict.fromkeys(episode_ids))
    sources: dict[str, list[str]] = {}
    # one pass over the edges into `ids` (a view of each node's neighbours cost most of the time before)
    for u, v, key, weight in G.in_edges(ids, keys=True, data="weight", default=0.0):
        if key == kind and weight >= min_weight:
            sources.setdefault(v, []).append(u)
    return {
        i: tuple(answer for u in sorted(sources[i]) if (answer := resolution(G, u, lookup)) is not None)
        for i in ids
        if i in sources
    }


def edge_history(edges: Iterable[Edge], source: str, target: str, kind: EdgeType) -> list[Edge]:
    """Every record of one edge, in storing order: its versions (the last is current)."""
    return [e for e in edges if e.source == source and e.target == target and e.type == kind]


def standing_edges(edges: Iterable[Edge], *, min_weight: dict[EdgeType, float] | None = None) -> list[Edge]:
    """The current version of every edge (its last record), without those weakened below `min_weight`.

    Edges are versioned like facts: a confirmed or weakened edge is a new record of the same
    source, target and type. `min_weight` maps a type to the weight under which a current
    version no longer stands (a CAUSED_BY link withdrawn by later evidence).
    """
    latest: dict[tuple[str, str, EdgeType], Edge] = {}
    for edge in edges:
        latest.pop((edge.source, edge.target, edge.type), None)
        latest[(edge.source, edge.target, edge.type)] = edge
    floors = min_weight or {}
    return [e for e in latest.values() if e.weight >= floors.get(e.type, 0.0)]
