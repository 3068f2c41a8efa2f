"""Lesson scenarios: valid, deterministic, split by family, paraphrased, and not solved by the runbook."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scenarios
from agent.agents import NoMemoryAgent
from agent.heuristic import HeuristicReasoner
from eval.runner import play
from simulator import families as fam
from simulator.generate import generate, main, to_yaml
from simulator.lessons import generate_lessons, lesson_overlap


def test_lesson_scenario_is_valid_deterministic_and_uses_only_its_split():
    doc = generate_lessons(100, seed=3, families="test")
    assert to_yaml(doc) == to_yaml(generate_lessons(100, seed=3, families="test"))
    assert to_yaml(doc) != to_yaml(generate_lessons(100, seed=4, families="test"))
    scenario = scenarios.loads(to_yaml(doc))
    assert set(scenario.root_causes) == set(fam.TEST_FAMILIES)
    assert set(generate_lessons(20, seed=3, families="train")["root_causes"]) == set(fam.TRAIN_FAMILIES)
    kinds = {r.kind for r in scenario.rounds}
    assert {"lesson", "lesson_recur", "red_herring", "caused", "plain", "drift"} <= kinds
    assert all(r.caused_by for r in scenario.rounds if r.kind == "caused")
    with pytest.raises(ValueError):
        generate_lessons(10, seed=0, families="holdout")


def test_recurrences_are_paraphrased_and_the_runbook_does_not_solve_them():
    doc = generate_lessons(60, seed=5, families="test")
    overlap = float(doc["description"].rsplit(": ", 1)[1].rstrip("."))
    assert 0.0 < overlap <= 0.3
    assert lesson_overlap(
        [
            {"id": "a", "kind": "lesson", "observations": ["extra disk full"]},
            {"id": "b", "kind": "lesson_recur", "observations": ["disk full"]},
        ],
        {"a": 0, "b": 0},
    ) == pytest.approx(2 / 3)
    rounds = play(scenarios.loads(to_yaml(doc)), 0, NoMemoryAgent(HeuristicReasoner())).rounds
    assert sum(r.first_correct for r in rounds) / len(rounds) <= 0.6
    assert not any(r.first_correct for r in rounds if r.kind in ("lesson", "lesson_recur"))


def test_cli_lessons_and_families_flags(tmp_path, capsys):
    out = tmp_path / "l.yaml"
    assert main(["--lessons", "--families", "train", "--rounds", "20", "--seed", "1", "--out", str(out)]) == 0
    assert scenarios.load(out).name == "lessons-train-20-s1"
    assert "stem-Jaccard" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["--families", "test", "--rounds", "5"])
    assert exit_.value.code == 2


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), rounds=st.integers(7, 90), families=st.sampled_from(["train", "test"]))
def test_a_causal_hint_names_a_service_whose_only_change_since_is_the_cause(seed, rounds, families):
    # The hint names the cause's service ("yesterday's fix to X", "the only recent change was the
    # remediation applied to X"): no round on that service may come between the cause and its incident.
    check_caused_referents(generate_lessons(rounds, seed=seed, families=families)["rounds"])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), rounds=st.integers(8, 90))
def test_a_plain_scenario_s_causal_hint_names_one_change(seed, rounds):
    check_caused_referents(generate(rounds, seed)["rounds"])


def check_caused_referents(rounds):
    at = {r["id"]: n for n, r in enumerate(rounds)}
    caused = [(n, at[r["caused_by"]]) for n, r in enumerate(rounds) if r.get("caused_by")]
    assert caused
    for n, cause in caused:
        service = rounds[cause]["service"]
        between = [r["id"] for r in rounds[cause + 1 : n] if r["service"] == service]
        assert not between, (
            f"{rounds[n]['id']} is caused by {rounds[cause]['id']} on {service}, changed again in {between}"
        )
