"""Episodes, edges and facts are a projection: rebuilt from the stored timeline == live state, also after reopening."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import scenarios
from eval.layers import play
from memory import EpisodicMemory


def _two_tenants(until: int) -> list[tuple[object, str]]:
    """The canonical scenario played twice, as two interleaved tenants, cut after `until` entries."""
    scenario = scenarios.load("pool-vs-deploy")
    a = play(scenario, 0, "truth-on-retry").entries
    b = play(scenario, 1, "first-candidate").entries
    merged = sorted([(e, "acme") for e in a] + [(e, "globex") for e in b], key=lambda p: (p[0].timestamp, p[1]))
    return merged[:until]


def _record(memory: EpisodicMemory, stream: list[tuple[object, str]]) -> None:
    for entry, principal in stream:
        memory.record(
            entry.text,
            kind=entry.kind,
            role=entry.role,
            timestamp=entry.timestamp,
            situation=entry.situation,
            principal=principal,
            metadata=entry.metadata,
        )


def test_rebuild_equals_live_after_an_incremental_run_and_after_reopening(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    stream = _two_tenants(120)
    with EpisodicMemory(path, principal="acme") as live:
        _record(live, stream)
        first = live.projection()
        state = live.state.snapshot()
        assert first == live.rebuild()
        assert {ep.principal for ep in first.episodes} == {"acme", "globex"}
        assert len(first.edges) > 0 and len(first.episodes) > 10
    with EpisodicMemory(path, principal="acme") as reopened:  # loads records, resumes the open episodes
        assert reopened.projection() == first
        assert reopened.state.snapshot() == state
        last = stream[-1][0]
        for minutes in (5, 9):  # the stream goes on after reopening
            reopened.record(
                f"follow-up note {minutes}",
                kind="note",
                role="user",
                timestamp=last.timestamp + timedelta(hours=minutes),
                situation=last.situation,
                principal="acme",
            )
        assert reopened.projection() == reopened.rebuild()
        assert len(reopened.projection().episodes) > len(first.episodes)  # the hours-long gap closed one
