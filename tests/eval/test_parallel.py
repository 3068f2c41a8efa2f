"""`eval.compare --jobs`: parallel runs give the serial run log; a failing run is named."""

import importlib.util

import pytest

import eval.parallel
from eval import runlog
from eval.compare import main
from tests.builders import T0

real = importlib.util.find_spec
RUNS = ("pool-vs-deploy", "memory-gc", "--seeds", "2", "--agents", "episodic", "no_memory")


def _timeless(log):
    log = {k: v for k, v in log.items() if k not in ("config", "started_at", "finished_at")}
    for entry in log["agents"].values():
        for row in entry["rounds"]:
            row.pop("latency_ms")
        entry["summary"].pop("latency_ms_per_round")
    return log


def _run(tmp_path, name, *args):
    path = tmp_path / f"{name}.json"
    code = main([*args, "--json", str(path), "--quiet"], now=lambda: T0)
    return code, runlog.read(path)


def test_two_jobs_give_the_serial_run_log_but_for_timings(tmp_path):
    serial_code, serial = _run(tmp_path, "serial", *RUNS, "--jobs", "1")
    parallel_code, parallel = _run(tmp_path, "parallel", *RUNS, "--jobs", "2")
    assert serial_code == parallel_code == 0
    assert len(serial["agents"]["episodic"]["runs"]) == 4
    assert _timeless(parallel) == _timeless(serial)


def test_a_failing_run_is_named_and_the_log_keeps_the_serial_prefix(tmp_path, capsys, monkeypatch):
    real_play = eval.parallel.play

    def failing(scenario, seed, agent, outcome):
        if scenario.name == "pool-vs-deploy" and seed == 1:
            raise RuntimeError("simulated crash")
        return real_play(scenario, seed, agent, outcome)

    monkeypatch.setattr(eval.parallel, "play", failing)  # forked workers inherit the patch
    code, log = _run(tmp_path, "failed", *RUNS, "--jobs", "2")
    assert code == 1 and log["status"] == "error"
    assert log["error"] == "pool-vs-deploy seed 1 episodic: RuntimeError: simulated crash"
    assert "pool-vs-deploy seed 1 episodic: RuntimeError: simulated crash" in capsys.readouterr().err
    runs = [(r["scenario"], r["seed"]) for r in log["agents"]["episodic"]["runs"]]
    assert runs == [("pool-vs-deploy", 0), ("pool-vs-deploy", 1)]  # nothing after the failure, as serially
    assert [(r["scenario"], r["seed"]) for r in log["agents"]["no_memory"]["runs"]] == [("pool-vs-deploy", 0)]


def test_store_plays_serially_and_says_so(tmp_path, capsys):
    store = tmp_path / "memory.sqlite"
    assert (
        main(["--seeds", "1", "--agents", "episodic", "--store", str(store), "--jobs", "2", "--quiet"], now=lambda: T0)
        == 0
    )
    assert "--store plays the runs one after another (--jobs 1)" in capsys.readouterr().err


def test_jobs_below_one_and_a_missing_ray_are_usage_errors(capsys, monkeypatch):
    assert main(["--jobs", "0"]) == 2
    assert "--jobs must be at least 1" in capsys.readouterr().err
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    assert main(["--executor", "ray"]) == 2
    assert "--executor ray needs Ray: pip install '.[ray]'" in capsys.readouterr().err


@pytest.mark.extra("ray")
def test_ray_executor_gives_the_serial_run_log(tmp_path):
    args = ("pool-vs-deploy", "--seeds", "1", "--agents", "episodic", "no_memory")
    _, serial = _run(tmp_path, "serial", *args, "--jobs", "1")
    code, distributed = _run(tmp_path, "ray", *args, "--jobs", "2", "--executor", "ray")
    assert code == 0, distributed["error"]
    assert _timeless(distributed) == _timeless(serial)
