"""Graph proximity: personalized PageRank around the most relevant episodes.

The neighbourhood holds at most ``max_nodes`` episodes (the most strongly linked ones at
each hop), so an episode that many later ones link to does not make every recall pay for
its whole history.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import networkx as nx
import numpy as np


def graph_proximity(
    graph: nx.MultiDiGraph,
    seeds: dict[str, float],
    allowed: Callable[[str], bool],
    *,
    hops: int = 2,
    max_nodes: int = 0,
    weight: str = "weight",
    alpha: float = 0.85,
) -> dict[str, float]:
    """Personalized PageRank around `seeds`, on allowed nodes within `hops`; best node = 1.

    Edge direction is ignored (a cause and its effect are equally near) and parallel edges
    add their weights. With `max_nodes` > 0 the neighbourhood stops growing at that many
    nodes: a hop that would overflow it keeps the new nodes with the largest summed link
    weight to the nodes the previous hop reached (ties: the more recent episode, by
    ``first_seq``, then the smaller id). The neighbourhood is small, so the stationary
    vector of networkx's `google_matrix` is found by power iteration in numpy; on a graph
    of a few dozen nodes this is far cheaper than `nx.pagerank`'s sparse solver, with the
    same definition.
    """
    seeds = {s: w for s, w in seeds.items() if w > 0 and s in graph}
    nodes = neighbourhood(graph, seeds, allowed, hops=hops, max_nodes=max_nodes, weight=weight)
    sub = nx.Graph()  # isolated seeds stay out: proximity needs a link
    sub.add_weighted_edges_from(undirected_links(graph, nodes, weight=weight), weight=weight)
    seeds = {s: w for s, w in seeds.items() if s in sub}
    if not seeds:
        return {}
    order = list(sub)
    google = nx.google_matrix(sub, alpha=alpha, personalization=seeds, nodelist=order, weight=weight)
    rank = power_iteration(google, np.full(len(order), 1.0 / len(order)))
    top = float(rank.max())
    return {n: float(r) / top for n, r in zip(order, rank)} if top > 0 else {}


def neighbourhood(
    graph: nx.MultiDiGraph,
    seeds: Iterable[str],
    allowed: Callable[[str], bool],
    *,
    hops: int,
    max_nodes: int = 0,
    weight: str = "weight",
) -> set[str]:
    """The seeds and the allowed nodes within `hops` of them, at most `max_nodes` (> 0) of them.

    Each hop ranks its new nodes as `graph_proximity` describes when they would overflow.
    """
    nodes = set(seeds)
    frontier = set(nodes)
    for _ in range(hops):
        reached = _links_out_of(graph, frontier, nodes, allowed, weight)
        room = max_nodes - len(nodes)
        if max_nodes > 0 and len(reached) > room:
            attrs = graph.nodes
            ranked = sorted(reached, key=lambda m: (-reached[m], -attrs[m].get("first_seq", 0), m))
            frontier = set(ranked[: max(room, 0)])
        else:
            frontier = set(reached)
        if not frontier:
            break
        nodes |= frontier
    return nodes


def _links_out_of(
    graph: nx.MultiDiGraph, frontier: set[str], nodes: set[str], allowed: Callable[[str], bool], weight: str
) -> dict[str, float]:
    """New allowed nodes next to the frontier → summed weight of their links to it (either direction)."""
    reached: dict[str, float] = {}
    for n in sorted(frontier):
        # the edge views iterate networkx's adjacency dicts directly, one neighbour's parallel
        # edges in a row (cheaper than the per-item views of `graph.succ[n]` on hub episodes)
        for edges, side in (
            (graph.out_edges(n, data=weight, default=1.0), 1),
            (graph.in_edges(n, data=weight, default=1.0), 0),
        ):
            for m, parallel in _by_neighbour(edges, side):
                if m in nodes:
                    continue
                strength = reached.get(m)
                if strength is None:
                    if not allowed(m):
                        continue
                    strength = 0.0
                reached[m] = strength + parallel
    return reached


def _by_neighbour(edges: Iterable[tuple[str, str, float]], side: int) -> Iterator[tuple[str, float]]:
    """(neighbour, summed weight of its parallel edges) from edges grouped by neighbour at `side`."""
    last: str | None = None
    total = 0.0
    for u, v, w in edges:
        m = v if side == 1 else u
        if m == last:
            total += float(w)
            continue
        if last is not None:
            yield last, total
        last, total = m, float(w)
    if last is not None:
        yield last, total


def undirected_links(graph: nx.MultiDiGraph, nodes: set[str], *, weight: str = "weight") -> list[list]:
    """``[u, v, summed weight]`` of every linked pair of `nodes` (no self-loops), direction ignored.

    Weights of parallel and opposite edges are summed in `graph.out_edges` order; each link
    keeps the orientation it was first met in, so a graph built from them gets its nodes in
    that order.
    """
    links: dict[tuple[str, str], list] = {}
    for u in sorted(nodes):
        for _, v, w in graph.out_edges(u, data=weight, default=1.0):
            if v not in nodes or v == u:
                continue
            pair = (v, u) if v < u else (u, v)
            link = links.get(pair)
            if link is None:
                links[pair] = [u, v, float(w)]
            else:
                link[2] += float(w)
    return list(links.values())


def power_iteration(
    matrix: np.ndarray, start: np.ndarray, *, steps: int = 100, tol: float = 1e-10, chunk: int = 25
) -> np.ndarray:
    """``x ← x @ matrix`` until the L1 change is below `tol`, at most `steps` times.

    The same products as a plain loop, but the convergence test runs once per `chunk`
    steps over all of them: fewer small numpy calls, the same vector.
    """
    xs = np.empty((chunk + 1, len(start)))
    xs[0] = start
    done = 0
    while done < steps:
        m = min(chunk, steps - done)
        for j in range(m):
            np.matmul(xs[j], matrix, out=xs[j + 1])
        hit = np.flatnonzero(np.abs(xs[1 : m + 1] - xs[:m]).sum(axis=1) < tol)
        if len(hit):
            return xs[hit[0] + 1].copy()
        xs[0] = xs[m]
        done += m
    return xs[0].copy()
