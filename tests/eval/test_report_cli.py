"""`python -m eval.report` in-process: re-render, merge, CSV round trip, figures and HTML."""

import contextlib
import csv
import io
import json

import pytest

from eval import runlog
from eval.compare import main as compare
from eval.outputs import curves
from eval.outputs.console import paired_verdict
from eval.report import main as report
from tests.builders import T0

AGENTS = ("--agents", "episodic", "flat_rag", "--jobs", "1")


def _log(tmp_path, name, *args):
    path = tmp_path / f"{name}.json"
    assert compare([*args, *AGENTS, "--json", str(path)], now=lambda: T0) == 0
    return path


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Logs of pool-vs-deploy, memory-gc and both (two seeds), and what compare printed for the first."""
    folder = tmp_path_factory.mktemp("logs")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        one = _log(folder, "one", "pool-vs-deploy", "--seeds", "2")
    return {
        "one": one,
        "printed": printed.getvalue(),
        "two": _log(folder, "two", "memory-gc", "--seeds", "2"),
        "both": _log(folder, "both", "pool-vs-deploy", "memory-gc", "--seeds", "2"),
    }


def _timeless(entry):
    """An agent's rounds and summary without the wall-clock fields."""
    rounds = [{k: v for k, v in row.items() if k != "latency_ms"} for row in entry["rounds"]]
    summary = {k: v for k, v in entry["summary"].items() if k != "latency_ms_per_round"}
    return rounds, summary, entry.get("layers")


def test_a_saved_log_renders_exactly_as_compare_printed_it(saved, capsys):
    assert report([str(saved["one"])]) == 0
    again = capsys.readouterr().out
    assert again == saved["printed"] and "McNemar" in again


def test_two_logs_merge_to_the_numbers_of_one_run_over_both(saved, tmp_path):
    one, two, both = saved["one"], saved["two"], runlog.read(saved["both"])
    merged_path = tmp_path / "out" / "merged.json"
    assert report([str(one), str(two), "--json", str(merged_path), "--quiet"]) == 0
    merged = runlog.read(merged_path)
    assert merged["scenarios"] == both["scenarios"] and merged["seeds"] == both["seeds"]
    assert merged["status"] == "success" and [m["path"] for m in merged["merged_from"]] == [str(one), str(two)]
    for agent in both["agents"]:
        assert _timeless(merged["agents"][agent]) == _timeless(both["agents"][agent])
    # the merged accuracy is over all rounds, not the mean of the two logs' accuracies
    parts = [runlog.read(p)["agents"]["flat_rag"]["summary"]["first_attempt_accuracy"] for p in (one, two)]
    assert merged["agents"]["flat_rag"]["summary"]["first_attempt_accuracy"] != pytest.approx(sum(parts) / 2)


def test_logs_of_other_seeds_merge_to_the_run_over_all_seeds(tmp_path):
    later = _log(tmp_path, "later", "pool-vs-deploy", "--first-seed", "2", "--seeds", "1")
    earlier = _log(tmp_path, "earlier", "pool-vs-deploy", "--seeds", "2")  # seeds 0 and 1, as in saved["one"]
    all_three = runlog.read(_log(tmp_path, "all", "pool-vs-deploy", "--seeds", "3"))
    assert runlog.read(later)["seeds"] == [2]
    assert report([str(earlier), str(later), "--json", str(tmp_path / "merged.json"), "--quiet"]) == 0
    merged = runlog.read(tmp_path / "merged.json")
    assert merged["seeds"] == [0, 1, 2]
    for agent in all_three["agents"]:
        assert _timeless(merged["agents"][agent]) == _timeless(all_three["agents"][agent])


def test_unmergeable_and_unreadable_logs_exit_2_with_a_message(saved, tmp_path, capsys):
    one = saved["one"]
    assert report([str(one), str(one)]) == 2
    assert "scenario pool-vs-deploy seed 0 agent episodic is already in" in capsys.readouterr().err
    other = json.loads(one.read_text())
    other["mode"] = "claude"
    (tmp_path / "claude.json").write_text(json.dumps(other))
    assert report([str(one), str(tmp_path / "claude.json")]) == 2
    assert "cannot merge logs of different modes" in capsys.readouterr().err
    (tmp_path / "junk.json").write_text("{not json")
    assert report([str(tmp_path / "junk.json")]) == 2
    assert report([str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "junk.json: not a run log" in err and "missing.json: cannot read" in err and "Traceback" not in err


def test_csv_loaded_with_the_standard_library_gives_the_log_numbers(saved, tmp_path):
    path = saved["one"]
    out = tmp_path / "new" / "folder" / "rounds.csv"
    assert report([str(path), "--csv", str(out), "--quiet"]) == 0
    log = runlog.read(path)
    with out.open(newline="", encoding="utf-8") as handle:
        loaded = list(csv.DictReader(handle))
    expected = [(agent, row) for agent, entry in log["agents"].items() for row in entry["rounds"]]
    assert len(loaded) == len(expected) == 2 * 2 * 9
    for got, (agent, row) in zip(loaded, expected):
        assert got["agent"] == agent and got["scenario"] == row["scenario"] and got["round"] == row["round"]
        assert int(got["seed"]) == row["seed"] and int(got["attempts"]) == row["attempts"]
        assert (got["first_correct"] == "True") is row["first_correct"] and (got["solved"] == "True") is row["solved"]
        assert got["first_decision"] == row["first_decision"] and got["decisions"].split("|") == row["decisions"]
        assert float(got["first_confidence"]) == row["first_confidence"]
        assert float(got["latency_ms"]) == row["latency_ms"]
    positions = [int(g["position"]) for g in loaded if g["agent"] == "episodic" and g["seed"] == "1"]
    assert positions == list(range(1, 10))


def test_learning_curve_band_is_over_rounds_not_seeds():
    def log(seeds):
        rows = [
            {
                "scenario": "s",
                "seed": seed,
                "round": f"r{i}",
                "kind": "k",
                "first_correct": i % 2 == 0,
                "attempts": 1 if i % 2 == 0 else 2,
            }
            for seed in range(seeds)
            for i in range(4)
        ]
        return {"agents": {"a": {"rounds": rows}}}

    few, many = (curves.learning_curve("a", curves.scenario_rounds(log(n), "s", "a"), window=2) for n in (1, 10))
    assert few.cumulative == many.cumulative == (1.0, 0.5, 2 / 3, 0.5)
    assert few.windowed == (1.0, 0.5, 0.5, 0.5)
    assert few.cumulative_band == many.cumulative_band  # ten seeds of the same rounds are not more evidence
    low, high = few.cumulative_band[-1]
    assert low < 0.5 < high


@pytest.mark.extra("plots")
def test_plots_and_a_self_contained_html(saved, tmp_path):
    path = saved["one"]
    plots, page = tmp_path / "a" / "plots", tmp_path / "b" / "report.html"
    assert report([str(path), "--plots", str(plots), "--html", str(page), "--quiet"]) == 0
    names = sorted(p.name for p in plots.iterdir())
    stems = ("accuracy-by-kind", "attempts-pool-vs-deploy", "layers", "learning-curve-pool-vs-deploy")
    assert names == sorted(f"{stem}.{ext}" for stem in stems for ext in ("png", "svg"))
    assert all((plots / n).read_bytes()[:4] == b"\x89PNG" for n in names if n.endswith(".png"))
    text = page.read_text(encoding="utf-8")
    assert text.count("src='data:image/png;base64,") == len(stems)
    assert "http://" not in text.replace("http://www.w3.org", "") and "<script" not in text
    assert "first-attempt accuracy [95% CI]" in text and '"reasoner": "heuristic' in text


def test_plots_without_matplotlib_is_a_clear_usage_error(saved, tmp_path, capsys, monkeypatch):
    path = saved["one"]
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    assert report([str(path), "--plots", str(tmp_path / "plots"), "--quiet"]) == 2
    assert "pip install '.[plots]'" in capsys.readouterr().err
    assert not (tmp_path / "plots").exists()


@pytest.mark.parametrize(
    "a_better, b_better, difference, verdict",
    [
        (4, 1, 0.05, "episodic ahead"),
        (1, 4, -0.05, "flat_rag ahead"),
        (0, 0, 0.0, "no difference"),
        (4, 3, -0.014, "mixed: episodic better in more rounds, flat_rag higher accuracy"),
        (2, 2, 0.02, "mixed: rounds won tied, episodic higher accuracy"),
    ],
)
def test_the_paired_verdict_never_names_a_leader_the_accuracy_contradicts(a_better, b_better, difference, verdict):
    c = {"a_better": a_better, "b_better": b_better, "difference": difference}
    assert paired_verdict(c, "flat_rag") == verdict
