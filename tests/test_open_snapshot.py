"""Opening from problem snapshots gives the same memory as rebuilding the index from the timeline."""

import numpy as np

import memory.agent_memory as agent_memory
from memory.agent_memory import PROBLEMS, EpisodicMemory
from tests.test_retriever_bounds import play
from tests.test_retriever_latency import synthetic_texts


def state(memory: EpisodicMemory, queries):
    recalls = [[(e.episode.id, e.score, e.why) for e in memory.recall(q, situation="ops", k=5, principal=p).episodes]
               for q in queries for p in ("p0", "p1")]
    vectors = {i: memory._problems[i].vector.tobytes() for i in memory._episodes}
    texts = {i: memory._problems[i].text for i in memory._episodes}
    return recalls, vectors, texts, memory._evidence.get("p0"), memory._evidence.get("p1"), memory._cites


def test_snapshot_open_equals_rebuilt_open_and_the_live_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(agent_memory, "SNAPSHOT_EPISODES", 16)
    path = tmp_path / "m.sqlite"
    queries = [t for t, _ in synthetic_texts(8, seed=11)]
    with EpisodicMemory(path, principal="p0") as live:
        play(live, 120)
        expected = state(live, queries)
        written = list(live.store.snapshots(PROBLEMS))
    assert len(written) == len(live._episodes) // 16 > 0
    with EpisodicMemory(path, principal="p0") as snapped:
        assert snapped._snapshot_runs == {run[1]["start"] for run in written}
        assert state(snapped, queries) == expected
    monkeypatch.setattr(agent_memory, "PROBLEMS", "no-such-snapshot")  # the same store, rebuilt from entries
    with EpisodicMemory(path, principal="p0") as rebuilt:
        assert state(rebuilt, queries) == expected


def test_a_snapshot_of_other_episodes_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setattr(agent_memory, "SNAPSHOT_EPISODES", 16)
    path = tmp_path / "m.sqlite"
    queries = [t for t, _ in synthetic_texts(4, seed=12)]
    with EpisodicMemory(path, principal="p0") as live:
        bogus = np.ones((16, live.encoder.dim), dtype="<f4").tobytes()  # stored first: the run it claims is found first
        live.store.add_snapshot(PROBLEMS, "forged", {"start": 16, "episodes": ["x"] * 16, "texts": [""] * 16,
                                                     "cites": {}}, bogus)
        play(live, 60)
        expected = state(live, queries)
    with EpisodicMemory(path, principal="p0") as reopened:
        assert state(reopened, queries) == expected  # run 16 was recomputed from the entries
        genuine = [meta for _, meta, _ in reopened.store.snapshots(PROBLEMS) if meta["start"] == 16]
        assert [meta["episodes"] == ["x"] * 16 for meta in genuine] == [True, False]


def test_tail_is_the_last_entries_of_a_principal_in_order(tmp_path):
    with EpisodicMemory(tmp_path / "m.sqlite", principal="p0") as memory:
        play(memory, 30)
        for who in ("p0", "p1", "nobody"):
            every = list(memory.store.entries(principal=who))
            for n in (0, 1, 7, len(every) + 5):
                assert [e.id for e in memory.store.tail(who, n)] == ([e.id for e in every[-n:]] if n else [])
