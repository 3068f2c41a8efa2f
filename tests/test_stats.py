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
