"""Dataset tracks: top-1/top-3 of the first ranking, orders kept apart, paired rounds, published figures."""

import json

from eval.tracks import base_and_order, ceiling, first_ranking, main, published_for, tracks


def _row(scenario, round_id, kind, truth, scores, *, seed=0, solved=True, attempts=1):
    first = max(scores, key=lambda cid: scores[cid])
    return {
        "scenario": scenario,
        "seed": seed,
        "round": round_id,
        "kind": kind,
        "truth": truth,
        "first_decision": first,
        "first_correct": first == truth,
        "solved": solved,
        "attempts": attempts,
        "candidate_scores": {cid: {"total": value} for cid, value in scores.items()},
    }


def _log():
    time_rows = [
        _row("petshop-high-traffic", "train-0", "latency", "a", {"a": 3, "b": 2, "c": 1, "d": 0}),
        _row("petshop-high-traffic", "test-0", "latency", "c", {"a": 3, "b": 2, "c": 1, "d": 0}, attempts=3),
        _row(
            "petshop-high-traffic",
            "test-1",
            "availability",
            "d",
            {"a": 3, "b": 2, "c": 1, "d": 0},
            solved=False,
            attempts=3,
        ),
    ]
    other = [dict(r, first_correct=True, first_decision=r["truth"]) for r in time_rows]
    shuffled = [dict(r, scenario="petshop-high-traffic@shuffled-0") for r in reversed(time_rows)]
    return {"agents": {"episodic": {"rounds": time_rows + shuffled}, "no_memory": {"rounds": other}}}


def test_order_names_and_published_figures():
    assert base_and_order("petshop-high-traffic@shuffled-2") == ("petshop-high-traffic", "shuffled-2")
    assert base_and_order("itbench-sre") == ("itbench-sre", "time")
    assert published_for("petshop-temporal-traffic1")["latency"] == (1.0, 1.0)
    assert published_for("itbench-sre") is None


def test_first_ranking_puts_the_choice_first_on_ties():
    row = {"first_decision": "b", "candidate_scores": {"a": {"total": 1.0}, "b": {"total": 1.0}, "c": {"total": 0.5}}}
    assert first_ranking(row) == ["b", "a", "c"]
    assert first_ranking({"candidate_scores": {}}) == []


def test_measures_per_order_kind_and_test_split():
    result = tracks(_log())["petshop-high-traffic"]
    assert result["orders"] == ["shuffled-0", "time"]
    episodic = result["groups"]["time"]["agents"]["episodic"]
    assert episodic["all"]["top1"] == 1 / 3 and episodic["all"]["top3"] == 2 / 3
    assert episodic["kinds"]["availability"]["top3"] == 0.0
    assert episodic["test"]["latency"] == {"rounds": 1, "top1": 0.0, "top3": 1.0, "attempts": 3.0, "solved": 1.0}
    assert episodic["all"]["attempts"] == 2.0 and episodic["all"]["solved"] == 2 / 3
    paired = result["groups"]["time"]["paired"]["no_memory"]
    assert (paired["rounds"], paired["better"], paired["worse"]) == (3, 0, 2)
    # the shuffled order is measured apart: no_memory did not play it, so nothing is paired there
    assert "no_memory" not in result["groups"]["shuffled"]["agents"]
    assert result["groups"]["shuffled"]["agents"]["episodic"]["curve"][0] == 0.0  # test-1 played first


def test_cli_reads_logs_and_rejects_others(tmp_path, capsys):
    log = tmp_path / "log.json"
    log.write_text(json.dumps(_log()))
    out = tmp_path / "tracks.json"
    assert main([str(log), "--json", str(out)]) == 0
    assert "published (paper, no memory)" in capsys.readouterr().out
    assert json.loads(out.read_text())["petshop-high-traffic"]["published"]["latency"] == [0.571, 0.786]
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert main([str(bad)]) == 2
    assert "not an eval.compare run log" in capsys.readouterr().err


def test_ceiling_counts_recurrences_and_the_runbook_right():
    rows = [
        {"scenario": "s", "seed": 0, "truth": truth, "first_correct": right}
        for truth, right in (("a", False), ("a", False), ("b", True), ("c", False), ("b", False))
    ]
    assert ceiling(rows) == 3 / 5  # the second a, the runbook's b, the second b; never the first a or c
    assert ceiling([]) is None
    assert tracks(_log())["petshop-high-traffic"]["groups"]["time"]["ceiling"] == 1.0  # no_memory right on all


def test_markdown_page_is_rendered_from_the_measures(tmp_path):
    from eval.tracks import markdown

    page = markdown(tracks(_log()), commands=["python -m eval.compare x.yaml"])
    assert page.startswith("# Dataset results\n\n<!-- written by python -m eval.tracks --markdown")
    assert "| episodic | 33.3% | 66.7% | 0.0% / 0.0% | 0.0% / 100.0% | 2.00 (66.7%) |" in page
    assert "| published (no memory) |  |  | 66.7% / 100.0% | 57.1% / 78.6% |" in page
    assert "### petshop-high-traffic: shuffled orders (mean of 1)" in page
    assert "python -m eval.compare x.yaml" in page
