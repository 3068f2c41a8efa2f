"""Statistics for the comparison: confidence intervals and paired tests (pure functions)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple


class Interval(NamedTuple):
    """A proportion with its 95% confidence interval."""

    value: float  # observed proportion
    low: float  # lower bound
    high: float  # upper bound
    n: int  # number of trials


def wilson(successes: int, trials: int, *, z: float = 1.959964) -> Interval:
    """Wilson score interval for a binomial proportion (95% by default)."""
    if trials == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    low = 0.0 if successes == 0 else max(0.0, min(p, centre - half))
    high = 1.0 if successes == trials else min(1.0, max(p, centre + half))
    return Interval(p, low, high, trials)


class McNemar(NamedTuple):
    """Exact McNemar test on paired binary outcomes."""

    a_only: int  # pairs where only A was right
    b_only: int  # pairs where only B was right
    p_value: float  # two-sided exact p-value (1.0 when there are no discordant pairs)


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> McNemar:
    """Two-sided exact McNemar test (binomial test on the discordant pairs)."""
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    a_only = sum(1 for x, y in zip(a, b) if x and not y)
    b_only = sum(1 for x, y in zip(a, b) if y and not x)
    n = a_only + b_only
    if n == 0:
        return McNemar(a_only, b_only, 1.0)
    k = min(a_only, b_only)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return McNemar(a_only, b_only, min(1.0, 2 * tail))


# -- round-level statistics ---------------------------------------------------------------------
# The evidence unit is a scenario round; seeds are repeated measures of it. Each agent's
# first-attempt correctness is averaged over seeds per round, and every test and interval below
# counts rounds, never seeds × rounds (which would treat correlated trials as independent).

BOOTSTRAP_RESAMPLES = 2000  # cluster-bootstrap resamples; seeded, so intervals are reproducible
BOOTSTRAP_SEED = 20260  # fixed: the same log always gives the same interval


class SignTest(NamedTuple):
    """Exact two-sided sign test over paired rounds."""

    a_better: int  # rounds where A's mean first-attempt correctness is higher
    b_better: int  # rounds where B's is higher
    p_value: float  # two-sided exact p-value (1.0 when no round differs)


def sign_test(differences: Sequence[float]) -> SignTest:
    """Exact two-sided sign test on per-round differences (zeros are dropped)."""
    a_better = sum(1 for d in differences if d > 0)
    b_better = sum(1 for d in differences if d < 0)
    n = a_better + b_better
    if n == 0:
        return SignTest(0, 0, 1.0)
    k = min(a_better, b_better)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return SignTest(a_better, b_better, min(1.0, 2 * tail))


def cluster_bootstrap(
    values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> Interval:
    """Percentile 95% interval of the mean of per-round values, resampling rounds.

    Each value is one round's mean over its seeds, so resampling values is resampling
    clusters: the interval reflects how many rounds there are, not how many seeds.
    """
    import numpy as np

    n = len(values)
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    data = np.asarray(values, dtype=float)
    mean = float(data.mean())
    if n == 1 or float(data.min()) == float(data.max()):
        return Interval(mean, mean, mean, n)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return Interval(mean, float(low), float(high), n)
