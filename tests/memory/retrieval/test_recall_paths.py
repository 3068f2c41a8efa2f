"""Fast paths of recall give exactly what the plain definitions give."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.episodes import Episode, Outcome
from memory.graph import BACKWARD, FORWARD, Edge, EdgeType, Link, add_edges, add_episode, causal_chain
from memory.retrieval import DEFAULT, EpisodeIndex, Retriever, episode_vector, graph_proximity
from memory.retrieval.proximity import power_iteration
from memory.retrieval.relevance import at_most_kth, kth
from tests.memory.retrieval.test_retriever import synthetic_texts

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def plain_power_iteration(matrix: np.ndarray, rank: np.ndarray) -> np.ndarray:
    for _ in range(100):
        nxt = rank @ matrix
        if np.abs(nxt - rank).sum() < 1e-10:
            return nxt
        rank = nxt
    return rank


@settings(max_examples=120, deadline=None)
@given(
    n=st.integers(1, 24),
    seed=st.integers(0, 2**32 - 1),
    alpha=st.sampled_from([0.0, 0.5, 0.85, 1.0]),
    chunk=st.integers(1, 40),
)
def test_power_iteration_gives_the_vector_of_the_plain_loop(n, seed, alpha, chunk):
    rng = np.random.default_rng(seed)
    links = rng.random((n, n)) * (rng.random((n, n)) < 0.4)
    links[links.sum(axis=1) == 0, 0] = 1.0
    personal = rng.random(n)
    google = alpha * links / links.sum(axis=1)[:, None] + (1 - alpha) * personal / personal.sum()
    start = np.full(n, 1.0 / n)
    fast = power_iteration(google, start, chunk=chunk)
    assert np.array_equal(fast, plain_power_iteration(google, start))


def episode(i: int, rng: np.random.Generator) -> Episode:
    at = T0 + timedelta(hours=int(rng.integers(0, 50)))  # shared starts: ties fall to first_seq and id
    return Episode(
        id=f"ep{i:03d}",
        entry_ids=(f"e{i}",),
        first_seq=int(rng.integers(0, 5)),
        last_seq=i,
        principal="p",
        situation="ops",
        subject=None,
        start=at,
        end=at,
        summary=f"episode {i}",
        outcome=list(Outcome)[int(rng.integers(len(Outcome)))],
        outcome_evidence="",
        decisions=("Decision: x",) if rng.random() < 0.6 else (),
        corrections=("y",) if rng.random() < 0.3 else (),
        observations=("z",) if rng.random() < 0.5 else (),
    )


def episode_of(G: nx.MultiDiGraph):
    """The episode lookup these test graphs carry: each node's "episode" attribute, when it has one."""
    return lambda node: G.nodes[node].get("episode") if node in G else None


def random_episode_graph(n: int, density: float, rng: np.random.Generator) -> nx.MultiDiGraph:
    """`n` random episodes joined by random typed edges (each type with its own chance)."""
    G = nx.MultiDiGraph()
    for i in range(n):
        ep = episode(i, rng)
        G.add_node(ep.id, episode=ep, start=ep.start, first_seq=ep.first_seq)
    types = list(EdgeType)
    for u in range(n):
        for v in range(n):
            for kind in types:
                if u != v and rng.random() < density / len(types) * 3:
                    G.add_edge(f"ep{u:03d}", f"ep{v:03d}", key=kind.value, type=kind, weight=0.5, evidence="")
    return G


def backward_steps(G: nx.MultiDiGraph) -> nx.DiGraph:
    """One step back in time per causal edge: BACKWARD edges as they point, LED_TO reversed."""
    back = nx.DiGraph()
    back.add_nodes_from(G)
    for u, v, kind in G.edges(data="type"):
        if kind in BACKWARD:
            back.add_edge(u, v)
        elif kind in FORWARD:
            back.add_edge(v, u)
    return back


def time_order(G: nx.MultiDiGraph, node: str) -> tuple:
    """The documented order of a chain: start, then first_seq, then id."""
    return G.nodes[node]["start"], G.nodes[node]["first_seq"], node


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 14), density=st.floats(0.0, 0.5), seed=st.integers(0, 2**32 - 1), hops=st.integers(0, 4))
def test_a_chain_holds_what_lies_within_its_hops_backwards_joined_by_the_causal_edges_of_g(n, density, seed, hops):
    G = random_episode_graph(n, density, np.random.default_rng(seed))
    back = backward_steps(G)
    for node in G:
        chain = causal_chain(G, node, episodes=episode_of(G), max_hops=hops)
        reach = nx.single_source_shortest_path_length(back, node, cutoff=hops)
        assert set(chain.episode_ids) == set(reach) and node in chain.episode_ids
        assert len(set(chain.episode_ids)) == len(chain.episode_ids)  # no episode twice
        assert list(chain.episode_ids) == sorted(chain.episode_ids, key=lambda e: time_order(G, e))
        for link in chain.links:  # each link is an edge of its type in G, oriented later → earlier
            assert link.source in reach and link.target in reach
            if link.type in BACKWARD:
                assert G.has_edge(link.source, link.target, key=link.type.value)
            else:
                assert link.type in FORWARD and G.has_edge(link.target, link.source, key=link.type.value)
        pairs = [(link.source, link.target) for link in chain.links]
        assert len(set(pairs)) == len(pairs)  # one link per ordered pair of episodes
        assert set(pairs) == set(back.subgraph(chain.episode_ids).edges)  # and every causal step among them
        assert pairs == sorted(pairs, key=lambda p: (time_order(G, p[0]), time_order(G, p[1])))
        assert chain.edge_types == tuple(link.type for link in chain.links)


def story_graph(*edges: tuple[str, str, EdgeType], **episodes: Episode | None) -> nx.MultiDiGraph:
    G = nx.MultiDiGraph()
    for name, ep in episodes.items():
        if ep is None:  # a node without its episode (the narrative calls it "episode")
            G.add_node(name, start=T0 + timedelta(hours=len(G)), first_seq=len(G))
        else:
            add_episode(G, ep)
            G.nodes[name]["episode"] = ep  # where `episode_of` finds it
    add_edges(G, [Edge(u, v, kind, 0.5, "golden") for u, v, kind in edges])
    return G


def story(name: str, hour: int, *, outcome=Outcome.UNKNOWN, observed=True, decided=False, corrected=False) -> Episode:
    at = T0 + timedelta(hours=hour)
    return Episode(
        id=name,
        entry_ids=(f"e-{name}",),
        first_seq=hour,
        last_seq=hour,
        principal="p",
        situation="ops",
        subject=None,
        start=at,
        end=at,
        summary=name,
        outcome=outcome,
        outcome_evidence="",
        decisions=("Decision: restart",) if decided else (),
        corrections=("it was the pool",) if corrected else (),
        observations=("errors rising",) if observed else (),
    )


C, L, R, F, S = EdgeType.CAUSED_BY, EdgeType.LED_TO, EdgeType.RETRY_OF, EdgeType.LEARNED_FROM, EdgeType.CONTINUATION
GOLDEN = {
    "incident, failed fix, corrected retry": (
        story_graph(
            ("b", "a", C),
            ("c", "b", R),
            a=story("a", 0),
            b=story("b", 1, outcome=Outcome.FAILURE, decided=True),
            c=story("c", 2, outcome=Outcome.SUCCESS, decided=True, corrected=True),
        ),
        dict(episode_id="c"),
        (("a", "b", "c"), (Link("b", "a", C), Link("c", "b", R)), "incident → failed fix → fix → correction"),
    ),
    "LED_TO is followed against its direction": (
        story_graph(("a", "b", L), a=story("a", 0, outcome=Outcome.PARTIAL, decided=True), b=story("b", 3)),
        dict(episode_id="b"),
        (("a", "b"), (Link("b", "a", L),), "incident → partial fix → incident"),
    ),
    "nothing is reached forwards, nor over other edge types": (
        story_graph(("b", "a", C), ("c", "b", S), a=story("a", 0), b=story("b", 1), c=story("c", 2)),
        dict(episode_id="a"),
        (("a",), (), "incident"),
    ),
    "hops bound the walk": (
        story_graph(
            ("d", "c", F),
            ("c", "b", F),
            ("b", "a", F),
            a=story("a", 0),
            b=story("b", 1),
            c=story("c", 2),
            d=story("d", 3),
        ),
        dict(episode_id="d", max_hops=2),
        (("b", "c", "d"), (Link("c", "b", F), Link("d", "c", F)), "incident → incident → incident"),
    ),
    "max_episodes keeps the nearest": (
        story_graph(
            ("d", "c", C),
            ("c", "a", C),
            ("d", "b", R),
            a=story("a", 0),
            b=story("b", 1),
            c=story("c", 2),
            d=story("d", 3),
        ),
        dict(episode_id="d", max_episodes=3),
        (("b", "c", "d"), (Link("d", "b", R), Link("d", "c", C)), "incident → incident → incident"),
    ),
    "a node without its episode": (
        story_graph(("b", "a", C), a=None, b=story("b", 5, observed=False, decided=True, outcome=Outcome.SUCCESS)),
        dict(episode_id="b"),
        (("a", "b"), (Link("b", "a", C),), "episode → fix"),
    ),
}


@pytest.mark.parametrize("case", list(GOLDEN))
def test_golden_chains(case):
    G, query, (ids, links, narrative) = GOLDEN[case]
    chain = causal_chain(G, episodes=episode_of(G), **query)
    assert (chain.episode_ids, chain.links, chain.narrative) == (ids, links, narrative)


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 60), size=st.integers(1, 30000), seed=st.integers(0, 2**32 - 1), ties=st.booleans())
def test_at_most_kth_is_a_lower_bound_of_the_kth_largest(n, size, seed, ties):
    rng = np.random.default_rng(seed)
    values = (rng.integers(0, 5, size) if ties else rng.random(size)).astype(np.float32)
    got = at_most_kth(values, n)
    assert got <= kth(values, n)
    block = len(values) // (64 * n)
    if block >= 4:  # no more than n - 1 blocks hold values above it
        assert got >= kth(values, (n - 1) * block + 1)
    else:
        assert got == kth(values, n)


def grown_retriever(n_first: int, n_more: int, edges_every: int):
    """A retriever fed `n_first` episodes, recalled once (fitting bounds), then fed `n_more`.

    Every partition is scored through its bounds (`prune_from=1`: fitted on the first recall).
    """
    from memory.timeline import HashingEncoder

    encoder = HashingEncoder()
    texts = synthetic_texts(n_first + n_more, seed=11)
    vectors = encoder.encode([t for t, _ in texts])
    index, graph = EpisodeIndex(encoder.dim), nx.MultiDiGraph()
    known: dict[str, Episode] = {}

    def chain(G, node, hops, most):
        return causal_chain(G, node, episodes=known.get, max_hops=hops, max_episodes=most).narrative

    retriever = Retriever(index, encoder.encode, graph=graph, chain=chain, config=replace(DEFAULT, prune_from=1))

    def feed(start: int, stop: int) -> None:
        for i in range(start, stop):
            text, cause = texts[i]
            at = T0 + timedelta(hours=i)
            ep = Episode(
                id=f"ep{i:05d}",
                entry_ids=(f"e{i}",),
                first_seq=i,
                last_seq=i,
                principal="p",
                situation="ops",
                subject=None,
                start=at,
                end=at,
                summary=text,
                outcome=(Outcome.SUCCESS, Outcome.FAILURE)[i % 3 == 0],
                outcome_evidence="",
                choices=(cause,),
                decisions=(f"Decision: {cause}",),
                observations=(text,),
            )
            index.add(ep, episode_vector(vectors[i][None, :]))
            add_episode(graph, ep)
            known[ep.id] = ep
            if i and i % edges_every == 0:
                add_edges(
                    graph,
                    [
                        Edge(ep.id, f"ep{i - 1:05d}", EdgeType.RETRY_OF, 0.7, "test"),
                        Edge(f"ep{i // 2:05d}", ep.id, EdgeType.LED_TO, 0.5, "test"),
                    ],
                )

    feed(0, n_first)
    retriever.recall(texts[0][0], principal="p", situation="ops", k=5)
    feed(n_first, n_first + n_more)
    return retriever, [t for t, _ in texts]


@settings(max_examples=12, deadline=None)
@given(
    n_first=st.integers(20, 120), n_more=st.integers(1, 80), edges_every=st.integers(2, 7), query=st.integers(0, 199)
)
def test_recall_after_growth_equals_recall_over_the_same_content_built_at_once(n_first, n_more, edges_every, query):
    grown, texts = grown_retriever(n_first, n_more, edges_every)
    fresh, _ = grown_retriever(n_first + n_more, 0, edges_every)
    text = texts[query % len(texts)]
    for k in (1, 6):
        a = grown.recall(text, principal="p", situation="ops", k=k)
        b = fresh.recall(text, principal="p", situation="ops", k=k)
        assert a == b and a.episodes


def reference_proximity(graph, seeds, allowed, hops=2, weight="weight", alpha=0.85):
    """Graph proximity as first written: out_edges views and a plain power iteration."""
    seeds = {s: w for s, w in seeds.items() if w > 0 and s in graph}
    nodes, frontier = set(seeds), set(seeds)
    for _ in range(hops):
        frontier = {
            m for n in frontier for m in (*graph.successors(n), *graph.predecessors(n)) if m not in nodes and allowed(m)
        }
        nodes |= frontier
    sub = nx.Graph()
    for u in sorted(nodes):
        for _, v, data in graph.out_edges(u, data=True):
            if v in nodes and v != u:
                w = float(data.get(weight, 1.0))
                sub.add_edge(u, v, **{weight: sub[u][v][weight] + w if sub.has_edge(u, v) else w})
    seeds = {s: w for s, w in seeds.items() if s in sub}
    if not seeds:
        return {}
    order = list(sub)
    google = nx.google_matrix(sub, alpha=alpha, personalization=seeds, nodelist=order, weight=weight)
    rank = plain_power_iteration(google, np.full(len(order), 1.0 / len(order)))
    top = float(rank.max())
    return {n: float(r) / top for n, r in zip(order, rank)} if top > 0 else {}


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 25), density=st.floats(0.0, 0.4), seed=st.integers(0, 2**32 - 1), hops=st.integers(0, 3))
def test_graph_proximity_equals_its_first_definition(n, density, seed, hops):
    rng = np.random.default_rng(seed)
    G = nx.MultiDiGraph()
    G.add_nodes_from(f"n{i}" for i in range(n))
    for u in range(n):
        for v in range(n):
            for kind in list(EdgeType)[:3]:
                if rng.random() < density / 3:
                    G.add_edge(f"n{u}", f"n{v}", key=kind.value, weight=float(rng.choice([0.3, 0.5, 0.9])))
    seeds = {f"n{i}": float(rng.random()) for i in rng.choice(n, size=min(n, 5), replace=False)}
    banned = {f"n{i}" for i in range(n) if rng.random() < 0.2}
    allowed = lambda node: node not in banned  # noqa: E731
    assert graph_proximity(G, seeds, allowed, hops=hops) == reference_proximity(G, seeds, allowed, hops=hops)


def random_weighted_graph(n: int, density: float, rng: np.random.Generator) -> nx.MultiDiGraph:
    G = nx.MultiDiGraph()
    for i in range(n):
        G.add_node(f"n{i}", first_seq=int(rng.integers(0, 4)))  # shared first_seq: ties fall to the id
    for u in range(n):
        for v in range(n):
            for kind in list(EdgeType)[:3]:
                if rng.random() < density / 3:
                    G.add_edge(f"n{u}", f"n{v}", key=kind.value, weight=float(rng.choice([0.3, 0.5, 0.9])))
    return G


def within(G: nx.MultiDiGraph, seeds, allowed, hops: int) -> set[str]:
    """Every allowed node within `hops` of the seeds, edge direction ignored."""
    undirected = G.to_undirected(as_view=True)
    found = set(seeds)
    for seed in seeds:
        found |= {m for m in nx.single_source_shortest_path_length(undirected, seed, cutoff=hops) if allowed(m)}
    return found


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 40),
    density=st.floats(0.0, 0.4),
    seed=st.integers(0, 2**32 - 1),
    hops=st.integers(0, 3),
    max_nodes=st.integers(1, 30),
)
def test_a_bounded_neighbourhood_is_the_whole_one_when_it_fits_and_never_larger(n, density, seed, hops, max_nodes):
    rng = np.random.default_rng(seed)
    G = random_weighted_graph(n, density, rng)
    seeds = {f"n{i}": float(rng.random()) + 0.01 for i in rng.choice(n, size=min(n, 5), replace=False)}
    banned = {f"n{i}" for i in range(n) if rng.random() < 0.2} - set(seeds)
    allowed = lambda node: node not in banned  # noqa: E731
    whole = graph_proximity(G, seeds, allowed, hops=hops)
    bounded = graph_proximity(G, seeds, allowed, hops=hops, max_nodes=max_nodes)
    assert len(bounded) <= max(max_nodes, len(seeds))
    assert set(bounded) <= set(whole) | set(seeds)
    # the BFS of graph_proximity only walks through allowed nodes; `within` may pass through banned ones,
    # so it is an upper bound of the neighbourhood: when even that fits, nothing was cut
    if len(within(G, seeds, allowed, hops)) <= max_nodes:
        assert bounded == whole


def test_a_hub_keeps_only_its_most_strongly_linked_then_most_recent_neighbours():
    G = nx.MultiDiGraph()
    G.add_node("seed", first_seq=0)
    G.add_node("hub", first_seq=1)
    G.add_edge("hub", "seed", key="LED_TO", weight=1.0)
    for i in range(100):
        G.add_node(f"leaf{i:03d}", first_seq=10 + i)
        G.add_edge("hub", f"leaf{i:03d}", key="LED_TO", weight=0.5)
    G.add_edge(f"leaf{5:03d}", "hub", key="CAUSED_BY", weight=0.9)  # leaf005: the strongest link to the hub
    near = graph_proximity(G, {"seed": 1.0}, lambda node: True, hops=2, max_nodes=5)
    assert set(near) == {"seed", "hub", "leaf005", "leaf099", "leaf098"}
    assert len(graph_proximity(G, {"seed": 1.0}, lambda node: True, hops=2)) == 102


@pytest.mark.parametrize("leaves", [2, 3, 4, 5])
def test_the_neighbourhood_fills_up_to_exactly_its_bound(leaves):
    G = nx.MultiDiGraph()
    G.add_edge("hub", "seed", key="LED_TO", weight=1.0)
    G.add_edges_from(("hub", f"leaf{i}", "LED_TO", {"weight": 0.5}) for i in range(leaves))
    near = graph_proximity(G, {"seed": 1.0}, lambda node: True, hops=2, max_nodes=5)
    assert len(near) == min(2 + leaves, 5)


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 16),
    density=st.floats(0.0, 0.6),
    seed=st.integers(0, 2**32 - 1),
    hops=st.integers(0, 4),
    most=st.integers(1, 8),
)
def test_a_bounded_chain_holds_the_nearest_episodes_of_the_walk(n, density, seed, hops, most):
    G = random_episode_graph(n, density, np.random.default_rng(seed))
    for node in G:
        whole = causal_chain(G, node, episodes=episode_of(G), max_hops=hops)
        bounded = causal_chain(G, node, episodes=episode_of(G), max_hops=hops, max_episodes=most)
        if len(whole.episode_ids) <= most:
            assert bounded == whole
        else:
            assert len(bounded.episode_ids) == most and node in bounded.episode_ids
            # the walk is breadth-first: nothing kept lies farther from the episode than anything dropped
            back = nx.DiGraph()
            back.add_nodes_from(whole.episode_ids)
            back.add_edges_from((link.source, link.target) for link in whole.links)
            hops_to = nx.single_source_shortest_path_length(back, node)
            kept = {hops_to[e] for e in bounded.episode_ids}
            dropped = {hops_to[e] for e in set(whole.episode_ids) - set(bounded.episode_ids)}
            assert max(kept) <= min(dropped)
