"""Confidence intervals and the paired test, against values computed by hand."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval.stats import mcnemar_exact, wilson


def test_wilson_matches_reference_values():
    # 8/9 → Wilson 95%: [0.5650, 0.9801] (standard formula, z = 1.96)
    interval = wilson(8, 9)
    assert interval.value == pytest.approx(8 / 9)
    assert interval.low == pytest.approx(0.5650, abs=1e-3) and interval.high == pytest.approx(0.9801, abs=1e-3)
    assert wilson(0, 10).low == 0.0 and wilson(10, 10).high == 1.0
    assert math.isnan(wilson(0, 0).value)


@given(st.integers(0, 200), st.integers(1, 200))
def test_wilson_contains_the_estimate(successes, extra):
    trials = successes + extra
    interval = wilson(successes, trials)
    assert 0.0 <= interval.low <= interval.value <= interval.high <= 1.0


def test_mcnemar_exact_values():
    # 6 discordant pairs all favouring A: p = 2 * 0.5**6 = 0.03125
    a = [True] * 6 + [True, False]
    b = [False] * 6 + [True, False]
    result = mcnemar_exact(a, b)
    assert (result.a_only, result.b_only) == (6, 0) and result.p_value == pytest.approx(0.03125)
    # 3 vs 1: p = 2 * (1 + 4) / 16 = 0.625
    assert mcnemar_exact([1, 1, 1, 0], [0, 0, 0, 1]).p_value == pytest.approx(0.625)
    assert mcnemar_exact([True, False], [True, False]).p_value == 1.0
    with pytest.raises(ValueError):
        mcnemar_exact([True], [])


# -- round level ---------------------------------------------------------------------------------

import json  # noqa: E402

from eval.metrics import compare_rounds, comparisons, round_level  # noqa: E402
from eval.report import records  # noqa: E402
from eval.runner import RoundRecord  # noqa: E402
from eval.stats import cluster_bootstrap, sign_test  # noqa: E402


def _records(pattern, seeds):
    """One record per (seed, round); `pattern` is the per-round first-attempt correctness."""
    return [
        RoundRecord(
            scenario="s",
            seed=seed,
            round=f"r{i}",
            kind="k",
            truth="x",
            first_decision="x",
            first_correct=right,
            solved=True,
            attempts=1,
        )
        for seed in seeds
        for i, right in enumerate(pattern)
    ]


def test_seeds_that_duplicate_rounds_do_not_change_the_round_level_test():
    a = [True] * 7 + [False, True, True]
    b = [False] * 5 + [True, True, True, False, True]

    def log(seeds):  # a synthetic run log, read back the way the report reads it
        return {
            "agents": {
                "episodic": {"rounds": [r.to_json() for r in _records(a, seeds)]},
                "flat_rag": {"rounds": [r.to_json() for r in _records(b, seeds)]},
            }
        }

    def compared(seeds):
        data = json.loads(json.dumps(log(seeds)))
        return comparisons({name: records(data, name) for name in data["agents"]}, "episodic")["flat_rag"]

    once, five = compared([0]), compared(range(5))
    assert once == five == compare_rounds(_records(a, [0]), _records(b, [0]))
    assert (once["n_rounds"], once["discordant"], once["a_better"], once["b_better"]) == (10, 7, 6, 1)
    assert once["sign_test_p"] == pytest.approx(2 * (1 + 7) / 128)  # exact binomial, 1 of 7
    assert not once["significant"]
    # The per-trial McNemar does change with duplicated seeds: exactly the overstatement removed.
    assert (
        mcnemar_exact(
            [r.first_correct for r in _records(a, range(5))], [r.first_correct for r in _records(b, range(5))]
        ).p_value
        < once["sign_test_p"]
    )
    assert round_level(_records(a, range(5)))["rounds"] == 10


def test_sign_test_and_cluster_bootstrap_values():
    assert sign_test([1, 1, 1, 1, 1, 1, 0, 0]) == (6, 0, pytest.approx(0.03125))
    assert sign_test([0.0, 0.0]).p_value == 1.0
    interval = cluster_bootstrap([1, 0, 1, 1, 0, 1, 1, 1])
    assert interval.value == pytest.approx(0.75) and interval.low < 0.75 < interval.high <= 1.0
    assert cluster_bootstrap([1, 0, 1, 1, 0, 1, 1, 1]) == interval  # seeded: deterministic
    assert cluster_bootstrap([0.5, 0.5]) == (0.5, 0.5, 0.5, 2)
