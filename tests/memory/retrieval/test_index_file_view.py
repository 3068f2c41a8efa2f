"""An approximate index read back from its file is searched where the file is mapped: it finds what the index
written finds, and grows (copied into memory first) like an index read whole."""

import numpy as np
import pytest

from memory.retrieval import NeighbourIndexes
from memory.retrieval.neighbour_store import index_file, read_index_file
from memory.retrieval.neighbours import NeighbourIndex
from tests.memory.retrieval.test_approximate_index import _partition


@pytest.mark.extra("ann")
def test_an_index_read_from_its_file_finds_what_the_written_one_finds_and_grows_like_it(tmp_path):
    part = _partition(400)
    built = NeighbourIndexes(tmp_path, encoder="hashing", dim=part.dim).of("p", part, part.bounds)
    stored = read_index_file(index_file(tmp_path, "p"))
    rank = part.bounds.basis.shape[1]
    read = NeighbourIndexes(tmp_path, encoder="hashing", dim=part.dim).of("p", part, part.bounds)
    queries = np.random.default_rng(1).normal(size=(20, rank)).astype(np.float32)
    assert [read.nearest(q, 25).tolist() for q in queries] == [built.nearest(q, 25).tolist() for q in queries]
    assert read.to_bytes() == built.to_bytes() == bytes(stored.data)
    copied = NeighbourIndex(rank, bytes(stored.data))  # searched in its own bytes
    more = part.bounds.projections(0, 30)
    read.extend(more)
    copied.extend(more)
    assert len(read) == 430 and read.to_bytes() == copied.to_bytes()
    assert read.nearest(more[7], 1)[0] in (7, 407)  # the same row twice: either copy
