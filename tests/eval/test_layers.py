"""Layer-quality harness: scoring against the simulator's ground truth, and its CLI."""

from __future__ import annotations

import json

import pytest

import scenarios
from eval.layers import layer_quality, main, measure_scenario, play
from memory.episodes import build_episode


@pytest.fixture(scope="module")
def played():
    return play(scenarios.load("pool-vs-deploy"), 0, "truth-on-retry")


def test_canonical_scenario_is_segmented_and_linked(played) -> None:
    recorded = played.recorded
    quality = layer_quality(
        played.truth, recorded.entry_events, recorded.episodes, recorded.edges, events=played.events
    )
    assert (quality.boundary_precision, quality.boundary_recall, quality.outcome_accuracy) == (1.0, 1.0, 1.0)
    assert quality.edges["RETRY_OF"].recall == 1.0 and quality.edges["LEARNED_FROM"].precision == 1.0
    assert quality.edges["CAUSED_BY"].correct >= 1
    assert quality == measure_scenario("pool-vs-deploy", 0, "truth-on-retry")  # the driver is reproducible


def test_one_big_episode_scores_badly(played) -> None:
    lump = [build_episode(list(played.entries))]
    quality = layer_quality(played.truth, played.recorded.entry_events, lump, [], events=played.events)
    assert quality.boundary_precision == 1.0
    assert quality.boundary_recall == pytest.approx(1 / len(played.truth.episodes))
    assert quality.outcome_accuracy is not None and quality.outcome_accuracy < 0.8
    assert quality.edges["RETRY_OF"].precision is None and quality.edges["RETRY_OF"].recall == 0.0


def test_wrong_edges_lower_precision(played) -> None:
    recorded = played.recorded
    flipped = [e.__class__(e.target, e.source, e.type, e.weight, e.evidence) for e in recorded.edges]
    quality = layer_quality(
        played.truth, recorded.entry_events, recorded.episodes, flipped
    )  # no events: majority fallback
    assert quality.edges["RETRY_OF"].precision == 0.0
    assert quality.outcome_accuracy == 1.0


def test_json_has_the_run_log_keys() -> None:
    data = measure_scenario("pool-vs-deploy", 1, "first-candidate").to_json()
    assert {"boundary_f1", "outcome_accuracy", "edges"} <= set(data)
    assert set(data["edges"]) == {"RETRY_OF", "LEARNED_FROM", "CAUSED_BY"}
    assert {"precision", "recall"} <= set(data["edges"]["RETRY_OF"])
    json.dumps(data)


def test_cli_prints_json_and_reports_bad_input(capsys) -> None:
    assert main(["pool-vs-deploy", "--seeds", "2", "--policy", "first-candidate", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["scenario"], r["seed"], r["policy"]) for r in rows] == [
        ("pool-vs-deploy", s, "first-candidate") for s in (0, 1)
    ]
    assert main(["no-such-scenario"]) == 2
    assert "no-such-scenario" in capsys.readouterr().err
    assert main(["pool-vs-deploy", "--seed", "4", "--policy", "truth-on-retry", "--json"]) == 0  # deprecated alias
    captured = capsys.readouterr()
    assert [r["seed"] for r in json.loads(captured.out)] == [4] and "--seed is deprecated" in captured.err
    assert main(["pool-vs-deploy", "--seeds", "1", "--policy", "truth-on-retry"]) == 0
    assert "RETRY_OF" in capsys.readouterr().out
    assert main(["--seeds", "0"]) == 2 and main(["--seeds", "1", "--seed", "0"]) == 2
    assert "not both" in capsys.readouterr().err
