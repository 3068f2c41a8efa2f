"""`python -m eval.compare` in-process: run log contract, report agreement, determinism, errors."""

import json

import pytest

import scenarios
from eval import runlog
from eval.compare import main
from eval.metrics import summary
from eval.report import records
from tests.builders import T0, at
from tests.fake_messages_api import FakeMessagesAPI

ROUND_KEYS = {"scenario", "seed", "round", "kind", "truth", "first_decision", "first_correct", "solved", "attempts"}


def _run(tmp_path, *args, now=lambda: T0):
    path = tmp_path / "log.json"
    code = main([*args, "--json", str(path)], now=now)
    return code, runlog.read(path)


def test_default_run_writes_a_schema_1_log_that_the_report_agrees_with(tmp_path, capsys):
    code, log = _run(tmp_path, "--seeds", "2")
    assert code == 0
    assert log["schema"] == 1 and log["status"] == "success" and log["mode"] == "heuristic"
    assert log["seeds"] == [0, 1]
    scenario = scenarios.load("pool-vs-deploy")
    assert log["scenarios"] == [{"name": "pool-vs-deploy", "sha256": scenario.sha256}]
    assert set(log["agents"]) == {"episodic", "flat_rag", "no_memory"}
    for name, entry in log["agents"].items():
        assert len(entry["rounds"]) == 2 * len(scenario.rounds)
        assert all(ROUND_KEYS <= set(row) for row in entry["rounds"])
        recomputed = summary(records(log, name))
        assert entry["summary"]["first_attempt_accuracy"] == recomputed["first_attempt_accuracy"]
        assert entry["summary"]["solve_rate"] == recomputed["solve_rate"]
        right = sum(row["first_correct"] for row in entry["rounds"])
        assert entry["summary"]["first_attempt_accuracy"] == pytest.approx(right / len(entry["rounds"]))
    layers = log["agents"]["episodic"]["layers"]
    assert 0.0 <= layers["boundary_f1"] <= 1.0 and 0.0 <= layers["outcome_accuracy"] <= 1.0
    assert {"RETRY_OF", "LEARNED_FROM", "CAUSED_BY"} <= set(layers["edges"])
    out = capsys.readouterr().out
    for entry in log["agents"].values():
        assert f"{100 * entry['summary']['first_attempt_accuracy']:.0f}%" in out
    assert "McNemar" in out and "scenario rounds" in out and ("not significant" in out or "significant at" in out)


@pytest.mark.parametrize("name", scenarios.shipped())
def test_every_shipped_scenario_gives_identical_numbers_and_an_agreeing_report(tmp_path, capsys, name):
    _, first = _run(tmp_path, name, "--seeds", "2")
    later = at(days=1, seconds=1)  # a later clock must not change anything (it once changed tenant names)
    _, second = _run(tmp_path, name, "--seeds", "2", now=lambda: later)
    assert (first["started_at"], second["started_at"]) == (T0.isoformat(), later.isoformat())  # the clock was used

    def strip(rows):
        return [{k: v for k, v in row.items() if k != "latency_ms"} for row in rows]

    for agent in first["agents"]:
        assert strip(first["agents"][agent]["rounds"]) == strip(second["agents"][agent]["rounds"])
        assert (
            first["agents"][agent]["summary"]["first_attempt_accuracy"]
            == second["agents"][agent]["summary"]["first_attempt_accuracy"]
        )
    out = capsys.readouterr().out
    for entry in first["agents"].values():
        assert f"{100 * entry['summary']['first_attempt_accuracy']:.0f}%" in out


def test_bad_scenario_is_located_and_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema: 1\nname: x\nroot_causes: {}\nrounds: []\n")
    assert main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "Traceback" not in err


def test_unknown_agent_and_missing_scenario_exit_2(capsys):
    assert main(["--agents", "oracle"]) == 2
    assert "unknown agent(s) oracle" in capsys.readouterr().err
    assert main(["no-such-scenario"]) == 2


def test_two_scenarios_of_one_name_or_one_file_listed_twice_exit_2_before_any_run(tmp_path, capsys):
    shipped = scenarios.load("pool-vs-deploy")
    copy = tmp_path / "renamed-copy.yaml"
    copy.write_text(
        open(shipped.source).read().replace("truth: deployment_config_error", "truth: database_overload", 1)
    )
    log = tmp_path / "log.json"
    assert main(["pool-vs-deploy", str(copy), "--json", str(log)]) == 2
    err = capsys.readouterr().err
    assert f"{copy}: name: 'pool-vs-deploy' is also the name of {shipped.source}" in err and "Traceback" not in err
    assert not log.exists()  # nothing was played: rounds of two files would be counted as one scenario's
    assert main(["pool-vs-deploy", shipped.source]) == 2
    assert f"{shipped.source}: (file): listed twice" in capsys.readouterr().err


def test_failure_midway_keeps_completed_rounds(tmp_path, monkeypatch):
    from agent.heuristic import HeuristicReasoner

    calls = {"n": 0}
    original = HeuristicReasoner.decide

    def flaky(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 20:  # no_memory needs at most 9 rounds x 2 attempts = 18
            raise RuntimeError("API gave up after retries")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(HeuristicReasoner, "decide", flaky)
    code, log = _run(tmp_path, "--seeds", "1", "--agents", "no_memory", "flat_rag", "--jobs", "1")
    assert code == 1
    assert log["status"] == "error" and "API gave up" in log["error"]
    completed = log["agents"]["no_memory"]["rounds"]
    assert len(completed) == 9  # the first agent finished its run before the failure
    assert len(log["agents"]["flat_rag"]["rounds"]) < 9


def test_a_partial_log_is_written_when_due_and_never_takes_most_of_the_time(tmp_path, monkeypatch):
    """Rewriting the whole log after every run made a 160-run comparison spend two thirds of its
    time writing: a finished run is written once `min_interval_s` passed since the last write and
    `spacing` times as long as that write took."""
    from eval import compare

    now = {"t": 0.0}
    cost = {"write": 1.0}

    def slow_write(log, path):
        now["t"] += cost["write"]
        path.write_text(json.dumps(log))

    monkeypatch.setattr(compare.runlog, "write", slow_write)
    monkeypatch.setattr(compare, "summarise", lambda log, paired: None)
    path = tmp_path / "log.json"
    partial = compare.PartialLog(path, min_interval_s=2.0, spacing=4.0, clock=lambda: now["t"])
    written = []
    for run in range(12):
        now["t"] += 1.0  # a run takes a second
        written.append(partial.finished_run({"runs": run}))
    # run 1 ends at t=2 (2 s since the start) and is written until t=3; then each write waits 4 s
    # (4 x the 1 s it took): run 5 ends at t=7, run 9 at t=12
    assert [run for run, w in enumerate(written) if w] == [1, 5, 9]
    assert json.loads(path.read_text()) == {"runs": 9}
    cost["write"] = 0.0
    now["t"] += 4.0
    assert partial.finished_run({"runs": 12})  # 5 s after a write that took 1 s: due
    now["t"] += 1.9
    assert not partial.finished_run({"runs": 13})  # a free write still waits min_interval_s


def test_an_unexpected_error_midway_writes_what_completed_before_it_ends_the_process(tmp_path, monkeypatch):
    from eval import compare

    original = compare._record
    seen = {"runs": 0}

    def crash_after_two(log, result):
        if seen["runs"] == 2:
            raise MemoryError("out of memory")
        seen["runs"] += 1
        original(log, result)

    monkeypatch.setattr(compare, "_record", crash_after_two)
    path = tmp_path / "log.json"
    with pytest.raises(MemoryError):
        main(
            ["--seeds", "1", "--agents", "no_memory", "flat_rag", "episodic", "--jobs", "1", "--json", str(path)],
            now=lambda: T0,
        )
    log = runlog.read(path)
    assert log["status"] == "error" and log["error"] == "MemoryError: out of memory"
    assert [len(log["agents"][a]["rounds"]) for a in ("no_memory", "flat_rag", "episodic")] == [9, 9, 0]


def test_store_option_leaves_a_verifiable_store(tmp_path):
    from memory.__main__ import main as memory_main
    from memory.timeline import SQLiteStore

    store = tmp_path / "memory.sqlite"
    assert main(["--seeds", "1", "--agents", "episodic", "--store", str(store), "--quiet"], now=lambda: T0) == 0
    assert memory_main(["verify", str(store)]) == 0
    with SQLiteStore(store, create=False) as stored:  # a persistent store keeps runs apart by the clock
        assert {e.principal for e in stored.entries()} == {"pool-vs-deploy:0:20260302T090000"}


@pytest.fixture
def fake_api(monkeypatch):
    """The fake Messages API on 127.0.0.1 (`tests.fake_messages_api`), with the SDK pointed at it."""
    fake = FakeMessagesAPI()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.start())
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    yield fake
    fake.stop()


def _offline(monkeypatch):
    """No key, and any network client use fails loudly: only the response cache can answer."""
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setattr("anthropic.Anthropic", None)


def test_claude_mode_accounts_tokens_and_replays_from_cache_without_key(tmp_path, monkeypatch, fake_api):
    cache = tmp_path / "cache"
    code, log = _run(tmp_path, "--mode", "claude", "--seeds", "1", "--agents", "no_memory", "--cache", str(cache))
    assert code == 0 and log["mode"] == "claude"
    summary_ = log["agents"]["no_memory"]["summary"]
    assert summary_["input_tokens"] > 0 and summary_["cost_usd"] > 0
    _offline(monkeypatch)
    code, replay = _run(tmp_path, "--mode", "claude", "--seeds", "1", "--agents", "no_memory", "--cache", str(cache))
    assert code == 0
    assert [r["decisions"] for r in replay["agents"]["no_memory"]["rounds"]] == [
        r["decisions"] for r in log["agents"]["no_memory"]["rounds"]
    ]
    assert replay["agents"]["no_memory"]["summary"]["cost_usd"] == 0  # a replay pays nothing


def test_claude_store_runs_keep_citations_and_read_the_prompt_cache(tmp_path, fake_api):
    cache = tmp_path / "cache"
    args = (
        "--mode",
        "claude",
        "--seeds",
        "1",
        "--agents",
        "episodic",
        "flat_rag",
        "--cache",
        str(cache),
        "--jobs",
        "1",
    )
    code, log = _run(tmp_path, *args, "--store", str(tmp_path / "a.sqlite"))
    assert code == 0
    rounds = log["agents"]["episodic"]["rounds"] + log["agents"]["flat_rag"]["rounds"]
    kept = sum(len(r["relied_on"]) for r in rounds)
    cited = sum(request["shown_ids"] for request in fake_api.log if request["attempt_1"])
    assert cited > 0 and kept / cited >= 0.95  # every cited alias resolved to an evidence id
    assert all(i in {item["id"] for item in r["retrieved_items"]} for r in rounds for i in r["relied_on"])
    # the stable prefix is written to the prompt cache once and read by every later request
    first, *later = fake_api.log
    assert first["cache_creation_input_tokens"] > 0 and first["cache_read_input_tokens"] == 0
    assert later and all(r["cache_read_input_tokens"] == first["cache_creation_input_tokens"] for r in later)
    assert all(r["prompt"].startswith("Service: ") for r in rounds)  # the rendered prompt, per round


def test_claude_store_runs_replay_without_a_key_under_another_clock(tmp_path, monkeypatch, fake_api):
    cache = tmp_path / "cache"
    args = (
        "--mode",
        "claude",
        "--seeds",
        "1",
        "--agents",
        "episodic",
        "flat_rag",
        "--cache",
        str(cache),
        "--jobs",
        "1",
    )
    code, log = _run(tmp_path, *args, "--store", str(tmp_path / "a.sqlite"))
    assert code == 0
    _offline(monkeypatch)
    later = at(days=1)  # another clock: another principal suffix in the store
    code, replay = _run(tmp_path, *args, "--store", str(tmp_path / "b.sqlite"), now=lambda: later)
    assert code == 0, replay.get("error")
    for name in ("episodic", "flat_rag"):
        assert [r["decisions"] for r in replay["agents"][name]["rounds"]] == [
            r["decisions"] for r in log["agents"][name]["rounds"]
        ]
