"""Episode graph: golden fixtures per edge type, queries and exports."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import networkx as nx
import pytest

from memory.episodes import segment
from memory.graph import (
    Edge,
    EdgeType,
    GraphConfig,
    build_graph,
    causal_chain,
    export_dot,
    export_graphml,
    infer_edges,
    later_attempts,
    link_episodes,
    neighbours,
    subject_history,
)
from memory.graph.build import add_edge_rows
from tests.builders import entries_from

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "graph"


def lookup(episodes):
    """Episode by id, as the queries that need episodes take it."""
    return {ep.id: ep for ep in episodes}.get


def _case(name: str):
    case = json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    episodes = segment(entries_from(case["entries"]))
    return case, episodes, link_episodes(episodes)


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.json")), ids=lambda p: p.stem)
def test_golden(path: Path) -> None:
    case, episodes, edges = _case(path.stem)
    assert {"description", "entries", "expected"} <= set(case)
    assert len(episodes) == case["expected"]["episodes"]
    index = {ep.id: i for i, ep in enumerate(episodes)}
    got = sorted([e.type.value, index[e.source], index[e.target]] for e in edges)
    assert got == sorted(case["expected"]["edges"])
    for edge in edges:
        assert 0.0 < edge.weight <= 1.0 and edge.evidence


def test_golden_covers_every_edge_type() -> None:
    seen = {edge[0] for p in GOLDEN.glob("*.json") for edge in json.loads(p.read_text())["expected"]["edges"]}
    assert seen == {t.value for t in EdgeType}


def test_rules_only_look_at_the_window() -> None:
    _, episodes, _ = _case("learned_from")
    new, old = episodes[1], episodes[0]
    assert {e.type for e in infer_edges(new, [old], config=GraphConfig(window=1))} == {
        EdgeType.RETRY_OF,
        EdgeType.LEARNED_FROM,
    }
    later = replace(new, first_seq=100, last_seq=101)
    between = replace(_case("continuation")[1][1], first_seq=50, last_seq=51)  # a planning episode
    assert infer_edges(later, [old, between], config=GraphConfig(window=2)) != []
    assert infer_edges(later, [old, between], config=GraphConfig(window=1)) == []  # old is out of the window
    assert infer_edges(new, [old], config=GraphConfig(window=0)) == []  # [-0:] must not mean "all"


def test_causal_chain_narrates_incident_fix_and_consequence() -> None:
    _, episodes, edges = _case("caused_by")
    G = build_graph(episodes, edges)
    result = causal_chain(G, episodes[2].id, episodes=lookup(episodes))
    assert result.episode_ids == tuple(ep.id for ep in episodes)
    assert set(result.edge_types) == {EdgeType.RETRY_OF, EdgeType.CAUSED_BY}  # LED_TO mirrors CAUSED_BY
    assert result.narrative == "incident → failed fix → fix → incident"
    assert causal_chain(G, episodes[2].id, episodes=lookup(episodes), max_hops=1).episode_ids == (
        episodes[1].id,
        episodes[2].id,
    )


def test_causal_chain_of_a_corrected_retry() -> None:
    _, episodes, edges = _case("learned_from")
    result = causal_chain(build_graph(episodes, edges), episodes[1].id, episodes=lookup(episodes))
    assert result.narrative == "incident → failed fix → correction → fix"
    with pytest.raises(KeyError):
        causal_chain(build_graph(episodes, edges), "nope", episodes=lookup(episodes))


def test_neighbours_by_type_and_direction() -> None:
    _, episodes, edges = _case("learned_from")
    G = build_graph(episodes, edges)
    out = neighbours(G, episodes[1].id)
    assert [n.type for n in out] == [EdgeType.RETRY_OF, EdgeType.LEARNED_FROM] or [n.type for n in out] == [
        EdgeType.LEARNED_FROM,
        EdgeType.RETRY_OF,
    ]
    assert [n.episode_id for n in neighbours(G, episodes[1].id, edge_type="LEARNED_FROM")] == [episodes[0].id]
    assert [n.episode_id for n in neighbours(G, episodes[0].id, direction="in", edge_type=EdgeType.RETRY_OF)] == [
        episodes[1].id
    ]
    assert neighbours(G, episodes[0].id) == []
    with pytest.raises(ValueError, match="direction"):
        neighbours(G, episodes[0].id, direction="sideways")


def test_subject_history_is_time_ordered() -> None:
    _, episodes, edges = _case("caused_by")
    G = build_graph(reversed(episodes), edges)
    assert subject_history(G, "checkout-api") == [episodes[0].id, episodes[1].id]
    assert subject_history(G, "checkout-api", principal="someone-else") == []


def test_exports_read_back(tmp_path: Path) -> None:
    _, episodes, edges = _case("caused_by")
    G = build_graph(episodes, edges)
    export_graphml(G, tmp_path / "g.graphml")
    back = nx.read_graphml(tmp_path / "g.graphml", force_multigraph=True)
    assert set(back.nodes) == set(G.nodes)
    assert back.number_of_edges() == G.number_of_edges()
    assert {d["type"] for _, _, d in back.edges(data=True)} == {"RETRY_OF", "CAUSED_BY", "LED_TO"}
    assert back.nodes[episodes[2].id]["outcome"] == "UNKNOWN"
    export_dot(G, tmp_path / "g.dot")
    dot = (tmp_path / "g.dot").read_text()
    assert dot.startswith("digraph") and dot.count("->") == G.number_of_edges()
    assert f'"{episodes[2].id}" -> "{episodes[1].id}"' in dot


def test_later_attempts_follow_resolving_edges_within_the_view_given():
    """RETRY_OF and LEARNED_FROM into an episode, once per later attempt, in the graph's order; other edge
    types and episodes the view leaves out do not count; pending edges come after."""
    G = nx.MultiDiGraph()
    for node, who in (("fail", "a"), ("retry", "a"), ("learner", "a"), ("effect", "a"), ("other", "b")):
        G.add_node(node, principal=who)
    add_edge_rows(
        G,
        [
            ("retry", "fail", EdgeType.RETRY_OF, 1.0, ""),
            ("retry", "fail", EdgeType.LEARNED_FROM, 0.9, ""),
            ("effect", "fail", EdgeType.CAUSED_BY, 0.8, ""),
            ("other", "fail", EdgeType.RETRY_OF, 1.0, ""),
            ("learner", "fail", EdgeType.LEARNED_FROM, 0.7, ""),
        ],
    )
    only_a = nx.subgraph_view(G, filter_node=lambda n: G.nodes[n]["principal"] == "a")
    assert later_attempts(G, "fail") == ["retry", "other", "learner"]
    assert later_attempts(only_a, "fail") == ["retry", "learner"]
    pending = [Edge("late", "fail", EdgeType.RETRY_OF, 1.0, ""), Edge("late", "retry", EdgeType.RETRY_OF, 1.0, "")]
    assert later_attempts(only_a, "fail", pending=pending) == ["retry", "learner", "late"]
    assert later_attempts(only_a, "missing") == [] and later_attempts(only_a, "other") == []
