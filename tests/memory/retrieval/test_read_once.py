"""One recall reads each stored row once (`relevance._ReadOnce`): rows asked for again, in any order and with
repeats, come back as the partition gives them, without another read."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from memory.retrieval.relevance import _ReadOnce


class _Stored:
    """A partition's rows read from a source: what `_ReadOnce` asks of a `Partition`, with the rows each read asked."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.matrix, self.dim, self.reads = vectors, vectors.shape[1], []

    def vectors(self, rows=None):
        self.reads.append(None if rows is None else np.asarray(rows).tolist())
        return self.matrix.copy() if rows is None else self.matrix[rows]


asks = st.lists(st.lists(st.integers(0, 99), max_size=70), min_size=1, max_size=8)


@given(asks)
def test_each_row_is_read_once_and_every_ask_gets_its_rows_in_order(batches):
    part = _Stored(np.random.default_rng(0).standard_normal((100, 5)).astype(np.float32))
    rows = _ReadOnce(part)
    for batch in batches:
        got = rows.vectors(np.array(batch, dtype=np.intp))
        assert got.dtype == np.float32 and got.shape == (len(batch), 5)
        assert np.array_equal(got, part.matrix[batch])
    read = [r for batch in part.reads for r in batch]
    assert len(read) == len(set(read)) == len({r for batch in batches for r in batch})
    assert np.array_equal(rows.vectors(), part.matrix) and part.reads[-1] is None  # every row: from the partition
