"""Reliability under hostile input: each case replays a failure an adversarial pass found.

Validation at the boundary, tenant isolation of every read path, a `verify` that is
read-only and sees every tampering, atomic creation, clean CLI errors, bounded scenario
loading. The corpus of hostile files is in tests/hostile/.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.agent_memory import EpisodicMemory
from memory.errors import InvalidEntry
from memory.timeline import SQLiteStore
from tests.builders import INCIDENTS, T0, play_incidents as play

UTC = timezone.utc


# -- validation at the boundary ------------------------------------------------------------

@pytest.mark.parametrize("fields, message", [
    ({"timestamp": datetime.min.replace(tzinfo=UTC)}, "outside years 1970..9998"),
    ({"timestamp": datetime.max.replace(tzinfo=UTC)}, "outside years"),
    ({"timestamp": datetime(2026, 1, 1)}, "has no timezone"),
    ({"timestamp": "2026-01-01"}, "timestamp must be a datetime"),
    ({"situation": 5}, "situation must be a non-empty str, not int"),
    ({"situation": ""}, "situation must be a non-empty str"),
    ({"principal": 7}, "principal must be a non-empty str, not int"),
    ({"principal": ""}, "principal must be a non-empty str, not ''"),
    ({"metadata": {"x": math.nan}}, "metadata.x: nan is not a finite number"),
    ({"metadata": {"x": math.inf}}, "not a finite number"),
    ({"metadata": {1: "a"}}, "key 1 is not a str"),
    ({"metadata": {"x": object()}}, "object is not a JSON value"),
    ({"metadata": {"x": "\udc80"}}, "UTF-8 cannot encode"),
    ({"metadata": [1, 2]}, "metadata must be a mapping"),
    ({"metadata": {"x": 10 ** 30}}, "does not fit in 64 bits"),
])
def test_bad_fields_are_refused_and_the_store_stays_usable(tmp_path, fields, message):
    path = tmp_path / "m.db"
    with EpisodicMemory(path) as memory:
        with pytest.raises(InvalidEntry, match=message):
            memory.observe("x", **fields)
        memory.observe("still fine")
    with EpisodicMemory(path) as memory:  # reopens: nothing unreadable was stored
        assert [e.text for e in memory.recent(5)] == ["still fine"]
        assert memory.store.verify() is None


def test_deeply_nested_metadata_and_bad_text_are_refused():
    deep: dict = {}
    node = deep
    for _ in range(5000):
        node["a"] = {}
        node = node["a"]
    with EpisodicMemory() as memory:
        with pytest.raises(InvalidEntry, match="nested deeper than 32 levels"):
            memory.observe("x", metadata=deep)
        with pytest.raises(InvalidEntry, match="text must be a str, not bytes"):
            memory.observe(b"x")
        with pytest.raises(InvalidEntry, match="UTF-8 cannot encode"):
            memory.observe("bad \ud800 surrogate")


def test_a_ten_megabyte_observation_is_refused_before_encoding():
    with EpisodicMemory() as memory:
        with pytest.raises(InvalidEntry, match="text of 10,000,000 characters exceeds the limit of 1,000,000"):
            memory.observe("x" * 10_000_000)
        assert len(memory.store) == 0


def test_an_empty_principal_is_an_error_not_the_default_tenant():
    with pytest.raises(InvalidEntry, match="principal must be a non-empty str"):
        EpisodicMemory(principal="")
    with EpisodicMemory(principal="team-a") as memory:
        memory.observe("a")
        for call in (lambda: memory.recent(principal=""), lambda: memory.recall("a", principal=""),
                     lambda: memory.episodes(""), lambda: memory.facts(""), lambda: memory.edges("")):
            with pytest.raises(InvalidEntry):
                call()


# -- tenant isolation ------------------------------------------------------------------------

def _two_tenants() -> EpisodicMemory:
    memory = EpisodicMemory(principal="team-a")
    play(memory, INCIDENTS[:3], principal="team-a")
    play(memory, INCIDENTS[3:], principal="team-b", start=T0 + timedelta(days=30))
    memory.flush()
    return memory


def _leaks(memory: EpisodicMemory, reader: str, other_ids: set[str], other_facts: set[str],
           other_texts: set[str]) -> list[str]:
    """What of another tenant's a memory whose principal is `reader` answers on every public read path."""
    found: list[str] = []
    graph = memory.graph
    found += [n for n in graph if n in other_ids]
    found += [f"{u}->{v}" for u, v in graph.edges() if u in other_ids or v in other_ids]
    found += [str(d) for _, d in graph.nodes(data=True) if any(t and t in str(d) for t in other_texts)]
    for episode_id in other_ids:
        for answer in (memory.episode(episode_id), memory.problem(episode_id), memory.resolution(episode_id)):
            if answer is not None:
                found.append(f"{episode_id}: {answer}")
    for fact_id in other_facts:
        found += [v.id for v in memory.fact_history(fact_id)]
    found += [e.id for e in memory.episodes() if e.id in other_ids]
    found += [e.source for e in memory.edges() if e.source in other_ids or e.target in other_ids]
    found += [f.id for f in memory.facts(include_retired=True) if f.fact_id in other_facts]
    found += [e.id for e in memory.recent(200) if e.principal != reader]
    context = memory.recall("spool jobs stuck, driver garbled printer queue", k=20)
    found += [i for i in context.item_ids() if i in other_ids or i.split("@")[0] in other_facts]
    return found


def test_no_read_path_answers_for_another_tenant():
    with _two_tenants() as memory:
        for reader, other in (("team-a", "team-b"), ("team-b", "team-a")):
            memory.principal = reader
            theirs = memory.episodes(other)
            assert theirs
            texts = {e.text for e in memory.store.entries(principal=other) if len(e.text) > 12}
            facts = {f.fact_id for f in memory.facts(other, include_retired=True)}
            assert _leaks(memory, reader, {e.id for e in theirs}, facts, texts) == []
            assert memory.episode(theirs[0].id, principal=other) == theirs[0]  # explicit principal answers


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, len(INCIDENTS) - 1)),
                min_size=2, max_size=8))
def test_random_tenant_interleavings_never_leak(plan):
    with EpisodicMemory(principal="a") as memory:
        for index, (who, incident) in enumerate(plan):
            play(memory, INCIDENTS[incident:incident + 1], principal=who, start=T0 + timedelta(days=3 * index))
        memory.flush()
        tenants = {who for who, _ in plan}
        for reader in tenants:
            memory.principal = reader
            for other in tenants - {reader}:
                ids = {e.id for e in memory.episodes(other)}
                facts = {f.fact_id for f in memory.facts(other, include_retired=True)}
                assert _leaks(memory, reader, ids, facts, set()) == []
