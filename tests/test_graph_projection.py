"""Episodes and graph as a projection: rebuilt from the stored timeline == live state."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import networkx as nx

import scenarios
from eval.layers import play
from memory.projection import LiveProjection, Projection, load, persist, rebuild
from memory.timeline import HashingEncoder, SQLiteStore, Timeline


def _same(a: Projection, b: Projection) -> None:
    assert a.episodes == b.episodes
    assert a.edges == b.edges
    assert set(a.graph.nodes) == set(b.graph.nodes)
    assert set(a.graph.edges(keys=True)) == set(b.graph.edges(keys=True))
    assert nx.utils.edges_equal(a.graph.edges(keys=True, data="weight"), b.graph.edges(keys=True, data="weight"))


def _record_two_tenants(store: SQLiteStore, *, until: int | None = None) -> int:
    """Play the canonical scenario as two interleaved tenants into `store`; returns entries written."""
    timeline = Timeline(store, HashingEncoder())
    scenario = scenarios.load("pool-vs-deploy")
    with SQLiteStore(":memory:") as scratch:
        a = play(scenario, 0, "truth-on-retry", Timeline(scratch, HashingEncoder())).entries
        b = play(scenario, 1, "first-candidate", Timeline(scratch, HashingEncoder())).entries
    merged = sorted([(e, "acme") for e in a] + [(e, "globex") for e in b], key=lambda p: (p[0].timestamp, p[1]))
    merged = merged[:until]
    for entry, principal in merged:
        timeline.append(entry.text, kind=entry.kind, role=entry.role, timestamp=entry.timestamp,
                        situation=entry.situation, principal=principal, metadata=entry.metadata)
    return len(merged)


def test_rebuild_equals_live_after_an_incremental_run_and_after_reopening(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with SQLiteStore(path) as store:
        live = LiveProjection(store)
        written = _record_two_tenants(store, until=120)
        for entry in store.entries():
            live.observe(entry)
        first = live.snapshot()
        _same(first, rebuild(store))
        stored = load(store)
        assert stored.episodes == tuple(sorted(live.episodes, key=lambda ep: ep.first_seq))
        assert len(stored.episodes) < len(first.episodes)  # the open tails are provisional, not stored
        assert {ep.principal for ep in first.episodes} == {"acme", "globex"}
    with SQLiteStore(path, create=False) as store:
        reopened = LiveProjection(store)  # loads records, resumes the open episodes from the tail
        _same(reopened.snapshot(), first)
        _same(rebuild(store), first)
        timeline = Timeline(store, HashingEncoder())
        last = list(store.entries())[-1]
        for minutes in (5, 9):  # the stream goes on after reopening
            entry = timeline.append(f"follow-up note {minutes}", kind="note", role="user",
                                    timestamp=last.timestamp + timedelta(minutes=minutes),
                                    situation=last.situation, principal=last.principal)
            reopened.observe(entry)
        _same(reopened.snapshot(), rebuild(store))
    assert written == 120


def test_persist_is_idempotent_and_insert_only() -> None:
    with SQLiteStore(":memory:") as store:
        _record_two_tenants(store, until=60)
        projection = rebuild(store)
        assert persist(store, projection.episodes, projection.edges) == len(projection.episodes) + len(projection.edges)
        assert persist(store, projection.episodes, projection.edges) == 0
        _same(load(store), projection)
