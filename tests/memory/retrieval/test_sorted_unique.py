"""`relevance.sorted_unique` is numpy's unique of the concatenation (and `union1d` of two), values and dtype."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from memory.retrieval.relevance import sorted_unique

rows = st.lists(st.integers(min_value=0, max_value=60), max_size=40).map(lambda xs: np.array(xs, dtype=np.intp))


@given(rows)
def test_one_array_is_its_unique_values(a):
    found = sorted_unique(a)
    assert found.dtype == np.unique(a).dtype and np.array_equal(found, np.unique(a))


@given(rows, rows)
def test_two_arrays_are_their_union(a, b):
    found = sorted_unique(a, b)
    assert found.dtype == np.union1d(a, b).dtype and np.array_equal(found, np.union1d(a, b))
