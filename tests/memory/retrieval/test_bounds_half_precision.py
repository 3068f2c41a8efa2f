"""Bounds hold both halves of every projection in half precision (`memory.retrieval.Bounds`) and stay exact:
each bound adds what the rounding lost. A first pass over every row (`Probe`) widens the first halves to
float32 once; a partition bounded a few rows at a time (`RowBounds`) keeps them in half precision."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.agent_memory import EpisodicMemory
from memory.retrieval import DEFAULT, Bounds
from memory.retrieval import bounds as bounds_module
from memory.retrieval.bounds import RowBounds
from tests.builders import play_incidents


def _rows(seed: int, scale: float, n: int = 120, dim: int = 32) -> np.ndarray:
    """Unit rows, about half of their dimensions scaled by `scale` (values float16 rounds to nothing or
    to subnormals included)."""
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((n, dim)) * np.where(rng.random(dim) < 0.5, scale, 1.0)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _queries(rows: np.ndarray, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed + 1)
    noise = rng.standard_normal((2, rows.shape[1]))
    picked = (rows[5], rows[-1], noise[0], rows[7] + 1e-3 * noise[1])
    return [(q / np.linalg.norm(q)).astype(np.float32) for q in picked]


def _in_half_precision(bounds: Bounds) -> bool:
    """Whether the first halves are held in float16 (not widened by a first pass)."""
    return bounds._head is not None and bounds._head.dtype == np.float16 and bounds._wide is None


def _contain(low: np.ndarray, high: np.ndarray, exact: np.ndarray) -> bool:
    return bool(np.all(low <= exact + 1e-6) and np.all(exact <= high + 1e-6))


@given(
    seed=st.integers(0, 2**32 - 1),
    scale=st.sampled_from([1e-6, 1e-3, 1.0]),
    loaded=st.booleans(),
    rank=st.sampled_from([3, 16, 30]),
)
@settings(max_examples=40, deadline=None)
def test_bounds_from_first_halves_in_half_precision_contain_the_cosine_without_slack(seed, scale, loaded, rank):
    """Without the slack that covers float32 sums, every bound still contains the cosine: the bounds of a few
    rows (`RowBounds`, first halves still in float16), a first pass over every row and refined ones."""
    rows = _rows(seed, scale)
    bounds = Bounds(rows[:60], rank=rank)
    if loaded:  # as an opening installs them
        bounds = Bounds.from_parts(bounds.basis, *bounds.split(rows))
    else:
        bounds.extend(rows)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bounds_module, "BOUND_SLACK", 0.0)
        for query in _queries(rows, seed):
            exact = np.clip(rows @ query.astype(np.float64), 0.0, 1.0)
            assert _in_half_precision(bounds)
            picked = np.flatnonzero(np.random.default_rng(seed).random(len(rows)) < 0.5)
            low, high = RowBounds(bounds, query).of(picked)
            assert _contain(low, high, exact[picked])
            probe = bounds.probe(query)  # widens the first halves; the rows keep what rounding lost
            assert not _in_half_precision(bounds)
            assert _contain(probe.low, probe.high, exact)
            probe.refine(picked)
            assert _contain(probe.low, probe.high, exact)
            bounds = Bounds.from_parts(bounds.basis, *bounds.split(rows))  # in half precision again


def test_widening_the_first_halves_changes_no_bound_and_rows_appended_after_are_held_exactly():
    rows = _rows(3, 1.0, n=300)
    bounds = Bounds(rows[:100], rank=16)
    bounds.extend(rows[:200])
    query = _queries(rows, 3)[2]
    every = np.arange(200)
    before = RowBounds(bounds, query).of(every)
    held = bounds.projections(0, 200)
    bounds.probe(query)
    assert not _in_half_precision(bounds)
    assert np.array_equal(bounds.projections(0, 200), held)
    after = RowBounds(bounds, query).of(every)
    assert np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])
    bounds.extend(rows[200:])  # grows the widened array
    proj, _ = bounds.split(rows[200:])
    assert np.array_equal(bounds.projections(200, 300)[:, : bounds.head], proj[:, : bounds.head])
    assert not bounds._head_lost[200:300].any() and bounds._head_lost[:200].any()
    exact = np.clip(rows @ query.astype(np.float64), 0.0, 1.0)
    low, high = bounds.relevance(query)
    assert _contain(low, high, exact)


@pytest.mark.extra("ann")
def test_a_partition_recalled_through_its_approximate_index_keeps_its_first_halves_in_half_precision(tmp_path):
    approximate = replace(DEFAULT, prune_from=1, neighbours_from=1)
    with EpisodicMemory(tmp_path / "memory.sqlite", retriever=approximate) as memory:
        play_incidents(memory)
        assert memory.recall("jobs stuck in the spool queue").episodes
        bounds = [part.bounds for part in memory.index._parts.values() if part.bounds is not None]
        assert bounds and all(_in_half_precision(b) for b in bounds)


def test_a_partition_recalled_by_a_first_pass_over_every_row_widens_its_first_halves(tmp_path):
    exact_first = replace(DEFAULT, prune_from=1)  # no index: a first pass over every row
    with EpisodicMemory(tmp_path / "other.sqlite", retriever=exact_first) as memory:
        play_incidents(memory)
        assert memory.recall("jobs stuck in the spool queue").episodes
        bounds = [part.bounds for part in memory.index._parts.values() if part.bounds is not None]
        assert bounds and not any(_in_half_precision(b) for b in bounds)
