"""An approximate nearest-neighbour index over one partition's rows (the optional ``ann`` extra).

Recall over a partition of at least `RetrieverConfig.neighbours_from` episodes asks this index for
the rows nearest to the query instead of bounding every row, then scores those rows exactly
(`memory.retrieval.relevance.NeighbourScores`). The index holds each row's projection on the
partition's bounding basis (`memory.retrieval.bounds.Bounds`: 128 dimensions where the encoder has
1,024), quantized to 8 bits, in an HNSW graph of usearch (`pip install -e '.[ann]'`).

Why usearch, measured on the 100k bench store's largest partition (70,013 projections; one build
thread, 16 links a row, 64 candidates while linking; 300 queries, the rows found then rescored
exactly against the full vectors): usearch with 8-bit rows built in 5.9 s, kept 19.4 MB, found
100 rows in 0.10 ms p50 with recall@10 0.998 (0.9997 from 200 rows); faiss's HNSW with 8-bit rows
built in 3.0 s, 0.09 ms, 0.996 (1.0); hnswlib built in 2.6 s, 0.07 ms, 0.995 (0.995), but keeps
float32 rows only (46 MB) and ships as source to compile at install. faiss sets its threads through
OpenMP, for the whole process, which a threaded host such as the MCP server must not do; usearch
takes a thread count per call. Its slower build is paid once: the index is kept beside the store.

The index is built on one thread: the same rows added in the same order, all at once or a few at a
time, give the same index byte for byte, so a memory's recalls do not depend on how its episodes
came in. (An index read back from its file and then extended places the new rows on other levels
of its graph than one built at once: the library does not keep the generator that draws them.)
"""

from __future__ import annotations

import ctypes
import threading
from functools import cache
from importlib import metadata
from typing import Any

import numpy as np

LIBRARY = "usearch"  # the distribution the ``ann`` extra installs
CONNECTIVITY = 16  # graph links per row and level (HNSW's M): 8-bit rows of 128 values take as much
EXPANSION_ADD = 64  # candidates kept while linking a new row (efConstruction): 128 built 1.5× slower, no better
EXPANSION_SEARCH = 64  # candidates kept while searching (ef; a search for more rows keeps that many)
SCALAR = "i8"  # stored per value: projections of unit vectors lie in [-1, 1]


@cache
def _index_class() -> Any:
    """usearch's `Index`, loaded once.

    usearch's compiled module carries its own copy of parts of the C++ runtime: loaded before any shared
    libstdc++, it left a process where importing onnxruntime (the ``embeddings`` extra) segfaulted and
    ``ray.init`` aborted. The system's libstdc++ is loaded first, for the whole process, so that every C++
    library loaded later binds to the one runtime (where there is none by that name, nothing is loaded).
    """
    try:
        ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass
    from usearch.index import Index

    return Index


def library_version() -> str | None:
    """The installed version of the index library, or None when the ``ann`` extra is not installed."""
    try:
        _index_class()  # the module recall loads, not only its metadata
    except ImportError:
        return None
    return metadata.version(LIBRARY)


class NeighbourIndex:
    """Rows of one partition (keys are row numbers, added in order) in an approximate index by inner product.

    Search and additions may come from several threads: a lock keeps them apart (a search takes a
    fraction of a millisecond).

    An index read from `stored` is searched where those bytes are (a file mapped into memory: only the
    pages its searches reach are read); the first `extend` copies it into memory, where it can grow.

    Args:
        rank: dimensions of the rows (the bounding basis's rank).
        stored: an index written by `to_bytes`, to read instead of starting empty (kept while it is read).
    """

    def __init__(self, rank: int, stored: bytes | memoryview | None = None) -> None:
        Index = _index_class()
        self.rank = rank
        self._lock = threading.Lock()
        self._stored = stored  # the bytes a read index is searched in (None once copied, or when built here)
        if stored is None:
            self._index: Any = Index(
                ndim=rank,
                metric="ip",
                dtype=SCALAR,
                connectivity=CONNECTIVITY,
                expansion_add=EXPANSION_ADD,
                expansion_search=EXPANSION_SEARCH,
            )
        else:
            self._index = _restored(stored, rank, view=True)

    def __len__(self) -> int:
        return len(self._index)

    def extend(self, rows: np.ndarray) -> None:
        """Add the next rows (float32, one per row of the partition after those held), on this thread."""
        rows = np.ascontiguousarray(rows, dtype=np.float32).reshape(-1, self.rank)
        if not len(rows):
            return
        with self._lock:
            if self._stored is not None:  # a viewed index is read-only
                self._index, self._stored = _restored(self._stored, self.rank, view=False), None
            start = len(self._index)
            self._index.add(np.arange(start, start + len(rows), dtype=np.uint64), rows, threads=1)

    def nearest(self, query: np.ndarray, count: int) -> np.ndarray:
        """Rows (int64) of about the `count` largest inner products with `query`, best first."""
        with self._lock:
            size = len(self._index)
            if not size or count <= 0:
                return np.zeros(0, dtype=np.int64)
            found = self._index.search(np.ascontiguousarray(query, dtype=np.float32), min(count, size), threads=1)
        rows = np.asarray(found.keys, dtype=np.int64)
        return rows[(rows >= 0) & (rows < size)]  # a damaged index never names a row it does not hold

    def to_bytes(self) -> bytes:
        """The index as bytes (`NeighbourIndex(rank, stored=...)` reads them back)."""
        with self._lock:
            return bytes(self._index.save())


def _restored(stored: bytes | memoryview, rank: int, *, view: bool) -> Any:
    """The index `stored` holds: searched in place (`view`), or copied into memory."""
    Index = _index_class()
    index: Any = Index.restore(stored, view=view)
    if index is None or index.ndim != rank:
        raise ValueError(f"not an index of {rank}-dimensional rows")
    index.expansion_search = EXPANSION_SEARCH
    return index
