"""The EpisodicMemory facade over whole incidents: episodes, facts, recall, tenants, rebuilds, restarts."""

import pickle
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest

from memory import EdgeType, Outcome
from memory.agent_memory import EpisodicMemory
from tests.builders import INCIDENTS, T0
from tests.builders import play_incidents as play

ROOT = Path(__file__).resolve().parents[2]


def test_episodes_close_and_carry_outcomes_choices_and_corrections():
    with EpisodicMemory() as memory:
        play(memory)
        memory.flush()
        episodes = memory.episodes()
        assert len(episodes) == 7  # five incidents, two of them retried
        assert [e.outcome for e in episodes[:2]] == [Outcome.FAILURE, Outcome.SUCCESS]
        assert episodes[0].choices == ("driver",) and episodes[0].corrections
        types = {e.type for e in memory.edges()}
        assert {EdgeType.RETRY_OF, EdgeType.LEARNED_FROM, EdgeType.LED_TO} <= types
        assert memory.reinforcements and all(r.marks for r in memory.reinforcements)


def test_facts_are_learned_and_their_history_is_queryable():
    with EpisodicMemory() as memory:
        play(memory)
        memory.flush()
        facts = {f.conclusion: f for f in memory.facts()}
        assert set(facts) == {"spool", "driver"}
        spool = facts["spool"]
        assert spool.usefulness.passed and spool.confidence >= 0.6
        history = memory.fact_history(spool.id)
        assert history[0].version == 1 and history[-1] == spool
        assert all(b.supersedes == a.version for a, b in zip(history, history[1:]))
        context = memory.recall("jobs stuck in the spool queue")  # the lesson's detail, in full
        assert any(r.fact.conclusion == "spool" for r in context.facts)
        assert "spool" in context.render(1500)


def test_recall_uses_current_observations_and_reports_why():
    with EpisodicMemory() as memory:
        play(memory, INCIDENTS[:4])
        memory.observe(
            "print jobs stuck again, spool at 98%",
            timestamp=T0 + timedelta(days=10),
            situation="support",
            metadata={"service": "print"},
        )
        context = memory.recall(k=3)
        assert context.query == "print jobs stuck again, spool at 98%"
        assert context.situation == "support" and 0 < len(context.episodes) <= 3
        top = context.episodes[0]
        assert "spool" in top.episode.summary and top.why and top.score.total > 0
        assert set(context.item_ids()) <= {e.id for e in memory.episodes()} | {f.id for f in memory.facts()}


def test_short_term_window_and_messages():
    with EpisodicMemory() as memory:
        play(memory, INCIDENTS[:1])
        recent = memory.recent(3)
        assert [e.kind.value for e in recent] == ["correction", "decision", "outcome"]
        assert recent[-1].seq == max(e.seq for e in memory.recent(50))
        messages = memory.messages(6)
        assert {m["role"] for m in messages} <= {"user", "assistant"}
        assert all(a["role"] != b["role"] for a, b in zip(messages, messages[1:]))  # merged, alternating
        assert any(m["role"] == "assistant" and "[decision]" in m["content"] for m in messages)


def test_principals_are_isolated_in_the_facade():
    with EpisodicMemory(principal="team-a") as memory:
        play(memory, INCIDENTS[:3], principal="team-a")
        play(memory, INCIDENTS[3:], principal="team-b", start=T0 + timedelta(days=30))
        memory.flush()
        for who in ("team-a", "team-b"):
            mine = {e.id for e in memory.episodes(who)} | {f.id for f in memory.facts(who)}
            context = memory.recall("spool jobs stuck, driver garbled", principal=who, k=10)
            assert context.item_ids() and set(context.item_ids()) <= mine
            assert all(memory.graph_of(who).nodes[e.source]["principal"] == who for e in memory.edges(who))


def test_a_principal_s_graph_view_holds_exactly_its_episodes_and_edges_and_refuses_writes():
    import networkx as nx

    with EpisodicMemory(principal="team-a") as memory:
        play(memory, INCIDENTS[:3], principal="team-a")
        memory.flush()
        alone = memory.graph_of("team-a")  # one tenant: the whole graph, unfiltered
        assert set(alone) == {e.id for e in memory.episodes("team-a")} and nx.is_frozen(alone)
        assert sorted(alone.edges(keys=True)) == sorted(memory.state.graph.edges(keys=True))
        play(memory, INCIDENTS[3:], principal="team-b", start=T0 + timedelta(days=30))
        memory.flush()
        for who in ("team-a", "team-b"):
            view = memory.graph_of(who)
            assert set(view) == {e.id for e in memory.episodes(who)} and nx.is_frozen(view)
            assert all(view.nodes[u]["principal"] == view.nodes[v]["principal"] == who for u, v in view.edges())
        assert len(memory.graph_of("team-c")) == 0
        with pytest.raises(nx.NetworkXError):
            memory.graph_of("team-a").add_edge("x", "y")


def test_the_episodes_ended_by_a_time_are_the_tail_of_the_whole_history_read_back_from_the_latest():
    with EpisodicMemory() as memory:
        play(memory)
        memory.flush()
        history = memory.episodes()
        reads = []
        lookup = memory.state.episodes
        memory.state.episodes = type(
            "Counting", (dict,), {"__getitem__": lambda self, key: reads.append(key) or dict.__getitem__(self, key)}
        )(lookup)
        for at in sorted({ep.end for ep in history}) + [history[0].start]:
            for n in (0, 1, 2, len(history) + 1):
                reads.clear()
                found = memory.state.ended_by(memory.principal, at, n)
                assert found == ([ep for ep in history if ep.end <= at][-n:] if n else [])
                if n and at == history[-1].end:
                    assert len(reads) == min(n, len(history))  # nothing older than the answer is read


def test_rebuild_from_the_timeline_equals_the_live_state(tmp_path):
    with EpisodicMemory(tmp_path / "m.db") as memory:
        play(memory)
        memory.flush()
        play(memory, INCIDENTS[:2], start=T0 + timedelta(days=40))  # an open episode remains
        live = memory.projection()
        assert memory.rebuild() == live
    with EpisodicMemory(tmp_path / "m.db") as reopened:  # loaded from records, then resumed
        assert reopened.projection() == live


def check_flush_point_survives_a_crash(target):
    """A flush stores its point first, then closes the open episodes and stores them. A process that dies in
    between (or another process that opens the store in between) must still close those episodes at the
    point when it feeds their entries again, as `rebuild()` does."""
    with EpisodicMemory(target) as memory:
        memory.observe("checkout p99 latency 4 s, pool wait timeouts", timestamp=T0, situation="incident")
        memory.decide(
            "Decision: raise the pool size", choice="pool", timestamp=T0 + timedelta(minutes=1), situation="incident"
        )

        killed = KeyboardInterrupt("killed after the flush point was stored")
        with mock.patch.object(memory, "_close_open", side_effect=killed), pytest.raises(KeyboardInterrupt):
            memory.flush()
    with EpisodicMemory(target) as memory:
        # the same service a minute later: without the flush point this would continue the open episode
        memory.outcome(
            "checkout p99 back to 120 ms after the pool change",
            status="success",
            timestamp=T0 + timedelta(minutes=2),
            situation="incident",
        )
        memory.flush()
        assert len(memory.episodes()) == 2
        assert memory.projection() == memory.rebuild()


def test_a_flush_point_stored_before_a_crash_is_applied_when_the_store_reopens(tmp_path):
    check_flush_point_survives_a_crash(str(tmp_path / "m.db"))


def test_reopening_replays_nothing_twice(tmp_path):
    path = tmp_path / "m.db"
    with EpisodicMemory(path) as memory:
        play(memory)
        counts = memory.store.stats().records
    for _ in range(2):
        with EpisodicMemory(path) as memory:
            assert memory.store.stats().records == counts
            assert not memory.reinforcements


RECORD_SCRIPT = textwrap.dedent("""
    import pickle, sys
    sys.path.insert(0, {root!r})
    from tests.builders import play_incidents as play
    from memory.agent_memory import EpisodicMemory
    memory = EpisodicMemory({path!r}, principal="ops")
    play(memory)
    context = memory.recall("spool queue stuck", k=4)
    with open({out!r}, "wb") as handle:
        pickle.dump(context, handle)
    memory.close()
""")


def test_memory_survives_a_restart_in_another_process(tmp_path):
    path, out = str(tmp_path / "mem.db"), str(tmp_path / "context.pkl")
    script = RECORD_SCRIPT.format(root=str(ROOT), path=path, out=out)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=str(tmp_path), timeout=120)
    with open(out, "rb") as handle:
        before = pickle.load(handle)
    with EpisodicMemory(path, principal="ops") as memory:
        after = memory.recall("spool queue stuck", k=4)
        assert after == before
        assert after.episodes and after.render() == before.render()
