"""Scenario generator: long horizons validate and play; output is deterministic."""

from __future__ import annotations

from collections import Counter

import pytest

import scenarios
from simulator import DebugEnv
from simulator.generate import generate, main, to_yaml


def test_thousand_rounds_validate_and_play_to_completion():
    text = to_yaml(generate(1000, seed=3))
    s = scenarios.loads(text, source="generated")
    assert len(s.rounds) == 1000
    kinds = Counter(r.kind for r in s.rounds)
    assert {"learn", "recall", "red_herring", "caused", "drift_setup", "drift"} <= set(kinds)
    assert all(2 <= len(r.candidates) <= 4 for r in s.rounds)
    assert len({o for r in s.rounds for o in r.observations}) > 500  # varied wording
    env = DebugEnv(s)
    prompt, _ = env.reset(seed=1)
    steps = 0
    while prompt is not None:
        result = env.step(prompt.candidates[(prompt.attempt - 1) % len(prompt.candidates)])
        prompt, steps = result.prompt, steps + 1
    assert result.terminated and steps >= 1000
    relations = {r.type for r in env.ground_truth().relations}
    assert relations == {"RETRY_OF", "LEARNED_FROM", "CAUSED_BY"}


def test_drift_reverses_the_cue_and_is_described():
    s = scenarios.loads(to_yaml(generate(80, seed=5)))
    setup = [r for r in s.rounds if r.kind == "drift_setup"]
    drift = [r for r in s.rounds if r.kind == "drift"]
    assert setup and drift
    assert len({r.truth for r in setup}) == 1 and len({r.truth for r in drift}) == 1
    assert setup[0].truth != drift[0].truth
    assert set(setup[0].observations) & set(drift[0].observations)  # the shared cue
    assert all(r.id in s.description for r in setup + drift)


def test_same_seed_same_yaml_and_different_seed_differs():
    assert to_yaml(generate(50, seed=9)) == to_yaml(generate(50, seed=9))
    assert to_yaml(generate(50, seed=9)) != to_yaml(generate(50, seed=10))


@pytest.mark.parametrize("rounds", [1, 2, 7])
def test_small_horizons_are_valid(rounds):
    assert len(scenarios.loads(to_yaml(generate(rounds, seed=0))).rounds) == rounds


def test_cli_writes_file_or_stdout(tmp_path, capsys):
    out = tmp_path / "gen.yaml"
    assert main(["--rounds", "12", "--seed", "4", "--out", str(out)]) == 0
    assert scenarios.load(out).name == "generated-12-s4"
    assert main(["--rounds", "12", "--seed", "4"]) == 0
    assert capsys.readouterr().out == out.read_text()


def test_cli_rejects_bad_arguments(capsys):
    for argv in (["--rounds", "0"], ["--rounds", "3", "--name", "Bad Name"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
    assert "--rounds must be at least 1" in capsys.readouterr().err
