"""eval.bench at tiny sizes, in-process: structure and arithmetic, never timings."""

from __future__ import annotations

import json
import math

import pytest

from eval.bench import cli, footprint, measure
from eval.bench.corpus import build_store, incident_stream, log_lines, query_texts
from eval.bench.results import METRICS, BenchReport, failures, judge, metric, summarize, summarize_rate
from memory.agent_memory import EpisodicMemory
from memory.timeline import RecordKind, SQLiteStore

TINY = cli.Plan(
    True,
    durable=4,
    batches=2,
    batch_size=20,
    sizes=(12, 30),
    queries=3,
    opens=2,
    rounds=6,
    compare_runs=0,
    durable_settle=3,
    round_runs=2,
    agent_rounds=3,
)


def test_summarize_known_samples():
    assert summarize([4.0, 1.0, 3.0, 2.0]) == (2.5, pytest.approx(3.85), 4)
    stat = summarize(list(range(1, 101)))
    assert stat.median == 50.5 and stat.p95 == pytest.approx(95.05) and stat.n == 100
    assert summarize([7.0]) == (7.0, 7.0, 1)
    assert summarize([]) == (None, None, 0)


def test_rate_p95_is_the_slow_tail():
    stat = summarize_rate([1.0, 2.0, 4.0], 100)
    assert stat.median == 50.0
    assert stat.p95 == pytest.approx(100 / 3.8)  # 95th-percentile batch time 3.8 s
    assert stat.p95 < stat.median and stat.n == 3


def _document(recall_median: float, *, size: str = "100000", first: float = 5.0, last: float = 9.0) -> dict:
    return {
        "append_durable_ms": metric(summarize([0.4, 0.45])),
        "append_batch_per_s": metric(summarize_rate([0.01], 1000)),
        "recall_ms": {"1000": metric(summarize([1.0])), size: metric(summarize([recall_median, recall_median]))},
        "open_ms": metric(summarize([1500.0]), episodes=int(size)),
        "round_ms": {"first_100": metric(summarize([first])), "last_100": metric(summarize([last])), "rounds": 200},
        "compare_wall_s": metric(summarize([2.0])),
        "compare_peak_rss_mb": metric(summarize([310.0])),
        "machine": {},
        "quick": False,
    }


def test_judge_applies_the_issue_targets():
    results = judge(_document(4.0))
    assert results["append_durable_ms"]["passed"] is True
    assert results["append_batch_per_s"]["passed"] is True  # 100,000/s
    assert results["recall_ms"]["100000"]["passed"] is True
    assert results["recall_ms"]["1000"]["passed"] is None  # no target below 100k
    assert results["open_ms"]["passed"] is True
    assert results["round_ms"]["last_100"]["passed"] is True  # 9 ≤ 2×5 and ≤ 20
    assert results["compare_wall_s"]["passed"] is True
    assert results["compare_peak_rss_mb"]["passed"] is False
    assert failures(results) == ["compare_peak_rss_mb"]

    slow = judge(_document(6.0, last=11.0))
    assert slow["recall_ms"]["100000"]["passed"] is False
    assert slow["round_ms"]["last_100"]["passed"] is False  # 11 > 2×5
    assert "recall_ms @100,000" in failures(slow) and "round_ms last_100" in failures(slow)


def test_targets_at_other_sizes_are_not_judged():
    results = judge(_document(40.0, size="10000"))
    assert results["open_ms"]["passed"] is None and "not measured" in results["open_ms"]["target"]
    assert all(entry["passed"] is None for entry in results["recall_ms"].values())


def test_stream_is_seeded_and_realistic():
    first = [item["text"] for _, (_, block) in zip(range(40), incident_stream(3)) for item in block]
    again = [item["text"] for _, (_, block) in zip(range(40), incident_stream(3)) for item in block]
    assert first == again and len(set(first)) > len(first) // 2
    lines = log_lines(3000)
    assert len(lines) == 3000 and any("@example." in item["text"] for item in lines)
    assert query_texts(5, seed=1) == query_texts(5, seed=1) and all(len(q) >= 2 for q in query_texts(5))


@pytest.mark.parametrize("episodes", [1, 17, 60])
def test_built_store_holds_the_claimed_episodes(tmp_path, episodes):
    lines = []
    built = build_store(tmp_path / "s.sqlite", episodes, seed=5, progress=lines.append)
    assert built.episodes == episodes and sum(built.principals.values()) == episodes
    assert lines and lines[-1].startswith(f"{episodes:,} of {episodes:,} episodes written")
    with SQLiteStore(built.path, create=False) as store:
        assert sum(1 for _ in store.records(RecordKind.EPISODE)) == episodes
        assert len(store) == built.entries and store.verify() is None
    with EpisodicMemory(built.path, principal=built.largest) as memory:
        assert len(memory.index) == episodes
        assert len(memory.episodes()) == built.principals[built.largest]


def test_a_builder_holding_few_episodes_in_memory_builds_the_same_store(tmp_path, monkeypatch):
    import sqlite3

    from eval.bench import corpus

    def records(path):
        db = sqlite3.connect(path)
        try:
            return db.execute("SELECT kind, id FROM records ORDER BY seq").fetchall()
        finally:
            db.close()

    held = build_store(tmp_path / "held.sqlite", 80, seed=3, batch=20)  # many writes: episodes deferred as it goes
    monkeypatch.setattr(corpus, "HELD_EPISODES_PER_PRINCIPAL", 2)  # nearly every episode read back from its record
    reads = []
    original = corpus._Projector._stored_episode
    monkeypatch.setattr(
        corpus._Projector, "_stored_episode", lambda self, i, source: reads.append(i) or original(self, i, source)
    )
    lean = build_store(tmp_path / "lean.sqlite", 80, seed=3, batch=20)
    assert reads and records(lean.path) == records(held.path)
    assert (lean.episodes, lean.edges, lean.facts, lean.principals) == (
        held.episodes,
        held.edges,
        held.facts,
        held.principals,
    )


def test_built_store_equals_recording_through_the_facade(tmp_path):
    built = build_store(tmp_path / "s.sqlite", 40, seed=2)
    live = EpisodicMemory(None)
    made, stream = 0, incident_stream(2)
    while made < 40:
        count, block = next(stream)
        if made + count > 40:
            continue
        made += count
        for item in block:
            live.record(
                item["text"],
                kind=item["kind"],
                role=item["role"],
                timestamp=item["timestamp"],
                situation=item["situation"],
                metadata=item["metadata"],
                principal=item["principal"],
            )
    live.flush()
    with EpisodicMemory(built.path) as reopened:
        assert [e.id for e in reopened.projection().episodes] == [e.id for e in live.projection().episodes]
        assert sorted(e.id for e in reopened.projection().edges) == sorted(e.id for e in live.projection().edges)
    live.close()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One run of the tiny plan: (results, the folder it built its stores in)."""
    folder = tmp_path_factory.mktemp("bench")
    return cli.run(TINY, folder), folder


def test_run_document_has_the_documented_keys(tiny_run):
    results, tmp_path = tiny_run
    assert list(results) == [*METRICS, "machine", "quick"]
    for name in ("append_durable_ms", "append_batch_per_s", "open_ms", "compare_wall_s", "compare_peak_rss_mb"):
        assert {"median", "p95", "n", "target", "passed"} <= set(results[name])
    assert results["append_durable_ms"]["n"] == 4 and results["append_durable_ms"]["synchronous"] == "FULL"
    assert results["append_durable_ms"]["normal"]["synchronous"] == "NORMAL"
    assert results["append_durable_ms"]["new_store"]["n"] == 4 and results["append_durable_ms"]["settle_appends"] == 3
    assert results["append_durable_ms"]["settled"] is False  # 3 settling appends cannot reach the WAL's reuse
    assert results["append_batch_per_s"]["n"] == 2
    storage = results["append_batch_per_s"]["storage_only"]
    assert storage["n"] == 2 and math.isfinite(storage["median"]) and storage["median"] > 0
    assert list(results["recall_ms"]) == ["12", "30"]
    for size, entry in results["recall_ms"].items():
        assert entry["n"] == 3 and entry["store"]["episodes"] == int(size) and entry["store"]["method"]
        assert 0 < entry["scanned"] <= int(size)
    assert results["open_ms"]["episodes"] == 30 and results["open_ms"]["n"] == 2
    first, later = results["open_ms"]["agent_first_decision_ms"], results["open_ms"]["agent_later_decision_ms"]
    assert first["n"] == 1 and first["median"] > 0 and later["n"] == 2 and later["peak_mb"] > 0
    assert not list(tmp_path.glob("agent-*"))  # the agent's copy of the store is gone
    for size in ("12", "30"):
        space = results["recall_ms"][size]["footprint"]
        assert space["bytes"] > 0 and space["tables"]["timeline"] > 0 and space["as_built"]["bytes"] > 0
        assert results["store_bytes_per_entry"][size]["median"] == space["bytes_per_entry"]
        assert 0 < results["resident_mb"][size]["median"] <= results["recall_ms"][size]["resident"]["peak_mb"]
    # two plays of 6 rounds: each window pools the 6 rounds of both
    assert results["round_ms"]["rounds"] == 6 and results["round_ms"]["plays"] == 2
    assert results["round_ms"]["first_100"]["n"] == results["round_ms"]["last_100"]["n"] == 12
    assert results["compare_wall_s"]["n"] == 0 and results["compare_wall_s"]["median"] is None
    assert {"cpu_count", "python", "platform", "elapsed_s"} <= set(results["machine"])
    assert results["quick"] is True
    assert all(math.isfinite(results[m]["median"]) for m in ("append_durable_ms", "append_batch_per_s", "open_ms"))
    BenchReport(results).table()  # renders without error


def test_main_writes_json_in_process(tiny_run, tmp_path, capsys, monkeypatch):
    """The command's own work around a run (its plan from the options, the JSON, the table), the run itself
    being the tiny one above."""
    planned = []

    def run(plan, directory, progress=None):
        planned.append(plan)
        return json.loads(json.dumps(tiny_run[0]))

    monkeypatch.setattr(cli, "run", run)
    out = tmp_path / "bench.json"
    assert cli.main(["--quick", "--sizes", "10", "--json", str(out), "--server", "off"], quick=TINY) == 0
    assert [plan.sizes for plan in planned] == [(10,)] and planned[0].durable == TINY.durable
    data = json.loads(out.read_text())
    assert list(data) == [*METRICS, "machine", "quick", "server_store"]
    assert data["server_store"] == {"skipped": "--server off"}
    assert {key: value for key, value in data.items() if key != "server_store"} == json.loads(json.dumps(tiny_run[0]))
    assert "append_durable_ms" in capsys.readouterr().out


def test_strict_exits_1_on_a_missed_target_and_a_pipe_gets_unwrapped_rows(monkeypatch, capsys):
    document = _document(6.0)
    document["compare_jobs_speedup"] = metric(summarize([1.2]), digits=2)
    monkeypatch.setattr(cli, "run", lambda plan, directory, progress=None: judge(document))
    assert cli.main(["--quick", "--server", "off"]) == 0
    assert cli.main(["--quick", "--strict", "--server", "off"]) == 1
    out = capsys.readouterr().out
    assert "targets missed: recall_ms @100,000, compare_peak_rss_mb, compare_jobs_speedup" in out
    assert any("recall_ms @100,000" in line and "p95 ≤ 15 ms" in line and "FAIL" in line for line in out.splitlines())
    assert any("compare_jobs_speedup" in line and "≥ 1.6×" in line and "FAIL" in line for line in out.splitlines())


def test_footprint_and_memory_targets_are_judged_per_size():
    document = _document(4.0)
    document["store_bytes_per_entry"] = {"100000": metric(summarize([1100.0])), "10000": metric(summarize([9e3]))}
    document["resident_mb"] = {"100000": metric(summarize([400.0]))}
    results = judge(document)
    assert results["store_bytes_per_entry"]["100000"]["passed"] is True
    assert results["store_bytes_per_entry"]["10000"]["passed"] is None
    assert results["resident_mb"]["100000"]["passed"] is False and "resident_mb @100,000" in failures(results)


def test_a_cached_store_is_built_once_and_reused(tmp_path):
    built, reused = footprint.cached_store(tmp_path, 9, seed=4, cache=True)
    again, reused_again = footprint.cached_store(tmp_path, 9, seed=4, cache=True)
    assert not reused and reused_again and again == built
    assert footprint.store_bytes(built.path) >= built.path.stat().st_size > 0


def test_a_store_has_state_runs_only_once_it_was_opened(tmp_path):
    from memory import EpisodicMemory
    from memory.persistence import Persistence

    built, _ = footprint.cached_store(tmp_path, 300, seed=4, cache=True)
    assert not footprint.has_state_runs(built.path)  # as built: a reused copy still needs its first open measured
    EpisodicMemory(built.path, principal=built.largest, persistence=Persistence(open_run_min=16)).close()
    assert footprint.has_state_runs(built.path)
    assert not footprint.has_state_runs(tmp_path / "missing.sqlite")


def test_million_needs_a_store_cache_and_adds_the_size(tmp_path, capsys):
    assert cli.main(["--million"]) == 2
    assert "--store-cache" in capsys.readouterr().err
    args = cli._parser().parse_args(["--quick", "--million", "--store-cache", str(tmp_path)])
    plan = cli.plan_from(args)
    assert plan.sizes[-1] == cli.MILLION and plan.cache == tmp_path


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--rounds", "0"], "at least 1"),
        (["--json", "/nonexistent-dir/x.json"], "does not exist"),
    ],
)
def test_main_rejects_bad_arguments(argv, message, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_durable_appends_time_the_steady_state_after_the_wal_is_reused(tmp_path):
    run = measure.durable_appends(tmp_path, 3, synchronous="OFF", quiet=20, max_settle=5000)
    assert len(run.new_store_ms) == 3 and len(run.steady_ms) == 3
    assert run.settled and run.settle_appends >= 20 and 23 < run.wal_grew_until < 20 + 3 + run.settle_appends


def test_compare_run_measures_the_child():
    run = measure.compare_run(["--help"])
    assert run.exit_code == 0 and run.wall_s > 0 and run.peak_rss_mb > 1


def test_a_first_open_reading_many_episodes_logs_its_progress(tmp_path, monkeypatch, caplog):
    from memory.persistence import loader

    built = build_store(tmp_path / "s.sqlite", 30, seed=1)
    monkeypatch.setattr(loader, "PROGRESS_FROM", 20)
    with caplog.at_level("INFO", logger="memory.persistence.loader"):
        EpisodicMemory(built.path).close()
    assert any("indexed 30 of 30 episodes from their records" in message for message in caplog.messages)
