"""Problem vectors kept on disk beside the store and read on demand, so an open memory does not
hold every episode's vector in memory.

A file store has a sidecar, ``<store>-vectors``: raw little-endian float32 rows of the
encoder's dimension, only ever appended (`VectorFile`). A state run of format 2
(`memory.persistence.runs`) records, per principal, the first sidecar row of its episodes'
vectors and a truncated SHA-256 of every row; the sidecar itself is derived data, like the
runs, and holds nothing the timeline does not.

`StoredRows` is what a partition of the recall index reads its older rows from
(`memory.retrieval.index.Partition`): segments of sidecar rows (memory-mapped, so only the
pages recall touches become resident) or of vectors held in memory (runs of format 1). A
sidecar row is checked against its digest the first time it is read; a row that fails (a
damaged or replaced sidecar) is recomputed from the episode's entries, the exact way, and
logged, so a run can make opening faster, never recall different.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from typing import Callable

import numpy as np

DIGEST_BYTES = 16  # bytes of each row's SHA-256 kept in the run
log = logging.getLogger(__name__)


def row_digests(rows: np.ndarray) -> np.ndarray:
    """Truncated SHA-256 of each float32 row, as a ``(n, DIGEST_BYTES)`` uint8 array."""
    data = np.ascontiguousarray(rows, dtype="<f4")
    out = np.empty((len(data), DIGEST_BYTES), dtype=np.uint8)
    for n, row in enumerate(data):
        out[n] = np.frombuffer(hashlib.sha256(row.tobytes()).digest()[:DIGEST_BYTES], dtype=np.uint8)
    return out


class VectorFile:
    """A store's vectors sidecar: rows appended durably, read through a memory map.

    Args:
        path: the sidecar's path (``SQLiteStore.vectors_path``).
        dim: floats per row.
    """

    def __init__(self, path: str, dim: int) -> None:
        self.path = path
        self.dim = dim
        self.row_bytes = 4 * dim
        self._map: np.ndarray | None = None
        self._lock = threading.Lock()

    def rows(self) -> int:
        """Whole rows the file holds now (0 when it is missing)."""
        try:
            return os.path.getsize(self.path) // self.row_bytes
        except OSError:
            return 0

    def append(self, rows: np.ndarray) -> int:
        """Write rows at the end (after any partial row a crash left), flushed to disk; their first row number."""
        data = np.ascontiguousarray(rows, dtype="<f4").reshape(-1, self.dim)
        with self._lock, open(self.path, "ab") as out:
            size = out.seek(0, os.SEEK_END)
            first = -(-size // self.row_bytes)  # a torn row from an interrupted write is skipped, never reused
            if first * self.row_bytes != size:
                out.write(b"\0" * (first * self.row_bytes - size))
            out.write(data.tobytes())
            out.flush()
            os.fsync(out.fileno())
        return first

    def read(self, file_rows: np.ndarray) -> np.ndarray:
        """Rows by their row numbers (a copy); rows past the end read as NaN (they fail their digest)."""
        file_rows = np.asarray(file_rows, dtype=np.intp)
        out = np.full((len(file_rows), self.dim), np.nan, dtype=np.float32)
        if not len(file_rows):
            return out
        mapped = self._mapped(int(file_rows.max()) + 1)
        if mapped is not None:
            inside = file_rows < len(mapped)
            out[inside] = mapped[file_rows[inside]]
        return out

    def _mapped(self, needed: int) -> np.ndarray | None:
        with self._lock:
            if self._map is None or len(self._map) < needed:
                count = self.rows()
                if count == 0:
                    return None
                self._map = np.memmap(self.path, dtype="<f4", mode="r", shape=(count, self.dim))
            return self._map


class StoredRows:
    """The leading rows of one principal's partition, read on demand (see the module docstring).

    Args:
        dim: floats per row.
        recompute: the exact vector of a row (from its episode's entries), for a sidecar
            row that fails its digest.
    """

    def __init__(self, dim: int, recompute: Callable[[int], np.ndarray] | None = None) -> None:
        self.dim = dim
        self.recompute = recompute
        self._starts: list[int] = []  # first partition row of each segment
        self._segments: list[tuple[np.ndarray | None, VectorFile | None, int, np.ndarray | None]] = []
        self._size = 0
        self._checked = np.zeros(0, dtype=bool)  # sidecar rows whose digest matched
        self._fixed: dict[int, np.ndarray] = {}  # rows recomputed after failing their digest
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._size

    def add_array(self, vectors: np.ndarray) -> None:
        """Rows held in memory (a run of format 1)."""
        self._add((np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dim), None, 0, None),
                  len(vectors), checked=True)

    def add_file(self, file: VectorFile, first: int, digests: np.ndarray, *, checked: bool = False) -> None:
        """Rows ``first, first + 1, …`` of a sidecar, with their digests (`row_digests`)."""
        digests = np.asarray(digests, dtype=np.uint8).reshape(-1, DIGEST_BYTES)
        self._add((None, file, first, digests), len(digests), checked=checked)

    def _add(self, segment: tuple, count: int, *, checked: bool) -> None:
        with self._lock:
            self._starts.append(self._size)
            self._segments.append(segment)
            self._size += count
            self._checked = np.concatenate([self._checked, np.full(count, checked)])

    def resident_bytes(self) -> int:
        """Bytes of vectors this object holds in memory (sidecar rows are not counted)."""
        return sum(a.nbytes for a, *_ in self._segments if a is not None)

    def read(self, rows: np.ndarray) -> np.ndarray:
        """float32 vectors of partition rows (each below ``len(self)``), in the order given."""
        rows = np.asarray(rows, dtype=np.intp).reshape(-1)
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        if not len(rows):
            return out
        which = np.searchsorted(np.asarray(self._starts), rows, side="right") - 1
        for s in np.unique(which).tolist():
            at = np.flatnonzero(which == s)
            local = rows[at] - self._starts[s]
            array, file, first, digests = self._segments[s]
            if array is not None:
                out[at] = array[local]
                continue
            out[at] = file.read(first + local)  # type: ignore[union-attr]
            self._check(rows[at], local, out, at, digests, file)  # type: ignore[arg-type]
        return out

    def _check(self, rows: np.ndarray, local: np.ndarray, out: np.ndarray, at: np.ndarray, digests: np.ndarray,
               file: VectorFile) -> None:
        """Check sidecar rows read for the first time against their digests; recompute those that fail."""
        todo = np.flatnonzero(~self._checked[rows])
        for i in todo.tolist():
            row = int(rows[i])
            fixed = self._fixed.get(row)
            if fixed is None:
                data = out[at[i]].astype("<f4").tobytes()
                if hashlib.sha256(data).digest()[:DIGEST_BYTES] == digests[local[i]].tobytes():
                    self._checked[row] = True
                    continue
                if self.recompute is None:
                    raise ValueError(f"vector row {row} does not match its digest and cannot be recomputed")
                log.warning("vector of partition row %s does not match its digest in %s; recomputed from its entries",
                            row, file.path)
                fixed = self._fixed[row] = np.asarray(self.recompute(row), dtype=np.float32)
            out[at[i]] = fixed
