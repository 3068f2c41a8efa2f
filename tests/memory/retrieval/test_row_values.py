"""`memory.retrieval.row_values` reads like the dense columns it stands for: values, dtypes and the rows that clear
two thresholds, to the bit."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from memory.retrieval.row_values import Ascending, ConsideredRows, OtherParts, RowValues

N = 50
rows = st.lists(st.integers(min_value=0, max_value=N - 1), max_size=30, unique=True).map(
    lambda xs: np.array(xs, dtype=np.intp)
)
# few distinct values, so that ties (and equal thresholds) are common
values = st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.3000001, 0.5, 1.0]), min_size=N, max_size=N).map(
    lambda xs: np.array(xs, dtype=np.float32)
)
thresholds = st.sampled_from([-np.inf, 0.0, 0.1, 0.25, 0.3, 0.30000001, 0.3000001, 0.5, 0.75, 1.0, 2.0])


@given(rows, st.lists(st.floats(-1, 1), min_size=30, max_size=30), rows)
def test_row_values_read_as_the_dense_column(held, given_values, asked):
    column = np.zeros(N)
    column[held] = given_values[: len(held)]
    sparse = RowValues(held, np.array(given_values[: len(held)]))
    assert sparse[asked].dtype == column[asked].dtype and np.array_equal(sparse[asked], column[asked])
    for row in asked.tolist():
        assert sparse[row] == column[row]


@given(rows, rows)
def test_considered_rows_keep_their_bounds_and_read_zero_elsewhere(first, second):
    held, low, high = ConsideredRows(), np.zeros(N, dtype=np.float32), np.zeros(N, dtype=np.float32)
    for n, batch in enumerate((np.sort(first), np.sort(second))):
        held.bound(batch, batch.astype(np.float32) / 100 + n, batch.astype(np.float32) / 50 + n)
        low[batch], high[batch] = batch.astype(np.float32) / 100 + n, batch.astype(np.float32) / 50 + n
    everything = np.arange(N)
    assert np.array_equal(held.high_or_zero(everything), high)
    assert np.array_equal(held.rows, np.flatnonzero(np.isin(everything, np.concatenate([first, second]))))
    assert np.array_equal(held.low[held.at(held.rows)], low[held.rows])


@given(values, rows, st.data(), thresholds, thresholds, st.booleans())
def test_the_rows_above_two_thresholds_are_those_of_the_dense_comparison(rest, raised, data, over, least, ordered):
    add = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.05, 0.2]), min_size=len(raised), max_size=len(raised))))
    dense = rest.copy()
    dense[raised] += add.astype(np.float32)
    other = OtherParts(rest, (raised, add.astype(np.float32)), Ascending(rest, after=1) if ordered else None)
    least32 = np.float32(least)
    expected = np.flatnonzero((dense > over) & (dense >= least32))
    found = other.above(over, least32)
    assert found.dtype == expected.dtype and np.array_equal(found, expected)
    assert np.array_equal(other.dense(), dense) and np.array_equal(other[np.arange(N)], dense)


def test_a_nan_among_the_values_compares_every_row():
    rest = np.array([0.5, np.nan, 0.2, 0.9], dtype=np.float32)
    found = OtherParts(rest, None, Ascending(rest, after=1)).above(0.1, np.float32(0.3))
    assert found.tolist() == [0, 3]


def test_the_rows_above_two_thresholds_of_a_long_column_are_those_of_the_dense_comparison():
    rng = np.random.default_rng(0)
    rest = (rng.integers(0, 40, 20_000) / 40).astype(np.float32)  # long runs of equal values
    raised = np.sort(rng.choice(len(rest), 30, replace=False))
    add = rng.random(30).astype(np.float32) / 4
    dense = rest.copy()
    dense[raised] += add
    other = OtherParts(rest, (raised, add), Ascending(rest, after=1))
    for over in [-np.inf, *np.unique(dense)[::7].tolist(), 0.5 + 1e-9, 2.0]:
        for least in [np.float32(-np.inf), np.float32(0.25), np.float32(over), np.float32(0.9)]:
            expected = np.flatnonzero((dense > over) & (dense >= least))
            assert np.array_equal(other.above(over, least), expected)


def test_a_column_is_sorted_only_once_it_has_been_asked_for_often_enough():
    ascending = Ascending(np.array([0.3, 0.1, 0.2], dtype=np.float32), after=3)
    assert ascending.rows() is None and ascending.rows() is None
    assert ascending.rows().tolist() == [1, 2, 0]
