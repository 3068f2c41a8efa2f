"""Row sums from the non-zero entries alone equal numpy's pairwise sum of the dense rows, bit for bit."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.timeline import HashingEncoder
from memory.timeline.pairwise import row_sums

WIDTHS = [1, 5, 7, 8, 9, 63, 64, 100, 127, 128, 129, 200, 257, 384, 1000, 1024, 1025, 4097]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(WIDTHS), st.integers(1, 5), st.integers(0, 2**32 - 1), st.sampled_from([0.02, 0.15, 0.6, 1.0]))
def test_row_sums_equal_numpys_pairwise_sum(width, count, seed, density):
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((count, width)) < density, np.log1p(rng.integers(1, 40, (count, width)) * 0.3), 0.0)
    dense *= dense  # squares, as the encoder sums them
    hit = np.flatnonzero(dense)
    rows, positions = hit // width, hit % width
    found = row_sums(rows, positions, dense.reshape(-1)[hit], count, width)
    assert np.array_equal(found.view(np.uint64), np.add.reduce(dense, axis=1).view(np.uint64))


@pytest.mark.parametrize("dim", [7, 100, 1000, 1024])
def test_batch_vectors_equal_single_text_vectors_at_any_width(dim):
    texts = [f"pool{i} exhausted on shard-{i % 13} after deploy v{i % 5} " * (1 + i % 4) for i in range(40)] + [""]
    batch = HashingEncoder(dim=dim, char_weight=0.3).encode(texts)
    single = np.stack([HashingEncoder(dim=dim, char_weight=0.3).encode([text])[0] for text in texts])
    assert np.array_equal(batch.view(np.uint32), single.view(np.uint32))
