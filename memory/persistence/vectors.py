"""Problem vectors kept on disk beside the store and read on demand, so an open memory does not
hold every episode's vector in memory.

A file store has a sidecar, ``<store>-vectors``: raw little-endian float32 rows of the
encoder's dimension, only ever appended (`VectorFile`). A state run of format 2
(`memory.persistence.runs`) records, per principal, the first sidecar row of its episodes'
vectors, a CRC-32 of every row (checked on read: damage, a torn write, a wrong file) and a
truncated SHA-256 (checked by ``python -m memory verify``, whose digest chain covers the
runs: a row altered on purpose); the sidecar itself is derived data, like the runs, and
holds nothing the timeline does not.

`StoredRows` is what a partition of the recall index reads its older rows from
(`memory.retrieval.index.Partition`): segments of sidecar rows (read when recall needs
them, so only those pass through memory) or of vectors held in memory (runs of format 1). A
sidecar row is checked against its CRC-32 the first time it is read; a row that fails (a
damaged or replaced sidecar) is recomputed from the episode's entries, the exact way, and
logged, so a run can make opening faster, never recall different.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import zlib
from typing import Callable

import numpy as np

try:
    import fcntl
except ImportError:  # not POSIX: appends of several processes at once are not serialized
    fcntl = None  # type: ignore[assignment]

DIGEST_BYTES = 16  # bytes of each row's SHA-256 kept in the run
log = logging.getLogger(__name__)


def row_checksums(rows: np.ndarray) -> np.ndarray:
    """CRC-32 of each float32 row (what a read checks: cheap, and catches damage and a wrong file)."""
    data = np.ascontiguousarray(rows, dtype="<f4")
    return np.array([zlib.crc32(row.tobytes()) for row in data], dtype="<u4")


def row_digests(rows: np.ndarray) -> np.ndarray:
    """Truncated SHA-256 of each float32 row, as a ``(n, DIGEST_BYTES)`` uint8 array."""
    data = np.ascontiguousarray(rows, dtype="<f4")
    out = np.empty((len(data), DIGEST_BYTES), dtype=np.uint8)
    for n, row in enumerate(data):
        out[n] = np.frombuffer(hashlib.sha256(row.tobytes()).digest()[:DIGEST_BYTES], dtype=np.uint8)
    return out


class VectorFile:
    """A store's vectors sidecar: rows appended durably, read row by row.

    Args:
        path: the sidecar's path (``SQLiteStore.vectors_path``).
        dim: floats per row.
    """

    def __init__(self, path: str, dim: int) -> None:
        self.path = path
        self.dim = dim
        self.row_bytes = 4 * dim
        self._fd: int | None = None
        self._lock = threading.Lock()

    def rows(self) -> int:
        """Whole rows the file holds now (0 when it is missing)."""
        try:
            return os.path.getsize(self.path) // self.row_bytes
        except OSError:
            return 0

    def append(self, rows: np.ndarray) -> int:
        """Write rows at the end (after any partial row a crash left), flushed to disk; their first row number.

        An exclusive ``flock`` on the file covers finding the end and writing, so processes
        writing runs of one store at once never record the same rows.
        """
        data = np.ascontiguousarray(rows, dtype="<f4").reshape(-1, self.dim)
        with self._lock, open(self.path, "ab") as out:
            if fcntl is not None:
                fcntl.flock(out.fileno(), fcntl.LOCK_EX)  # released when the file is closed
            size = out.seek(0, os.SEEK_END)
            first = -(-size // self.row_bytes)  # a torn row from an interrupted write is skipped, never reused
            if first * self.row_bytes != size:
                out.write(b"\0" * (first * self.row_bytes - size))
            out.write(data.tobytes())
            out.flush()
            os.fsync(out.fileno())
        return first

    def read(self, file_rows: np.ndarray) -> np.ndarray:
        """Rows by their row numbers (a copy); rows past the end read as NaN (they fail their checksum).

        Each row is one ``preadv`` straight into the result: the rows come through the page
        cache without being mapped into this process, so reading a few rows of a large
        sidecar adds only them to its resident memory (a memory map faults in whole folios).
        """
        file_rows = np.asarray(file_rows, dtype=np.intp).reshape(-1)
        out = np.empty((len(file_rows), self.dim), dtype=np.float32)
        fd = self._descriptor() if len(file_rows) else None
        if fd is None:
            out.fill(np.nan)
            return out
        rb, view = self.row_bytes, memoryview(out).cast("B")
        for n, row in enumerate(file_rows.tolist()):
            try:
                whole = row >= 0 and os.preadv(fd, [view[n * rb : (n + 1) * rb]], row * rb) == rb
            except OSError:  # an unreadable sidecar: its rows fail their checksums and are recomputed
                whole = False
            if not whole:
                out[n] = np.nan
        return out

    def _descriptor(self) -> int | None:
        with self._lock:
            if self._fd is None:
                try:
                    self._fd = os.open(self.path, os.O_RDONLY)
                except OSError:
                    return None
            return self._fd

    def close(self) -> None:
        """Close the file (reads open it again)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)


class StoredRows:
    """The leading rows of one principal's partition, read on demand (see the module docstring).

    Args:
        dim: floats per row.
        recompute: the exact vector of a row (from its episode's entries), for a sidecar
            row that fails its checksum.
    """

    def __init__(self, dim: int, recompute: Callable[[int], np.ndarray] | None = None) -> None:
        self.dim = dim
        self.recompute = recompute
        self.file: VectorFile | None = None  # the sidecar of every file segment
        self._starts = np.zeros(0, dtype=np.intp)  # first partition row of each segment
        self._size = 0
        self._pending: list[tuple[np.ndarray, np.ndarray, bool]] = []  # segments added since the last read
        self._arrays: list[np.ndarray | None] = []  # each segment's rows when held in memory
        self._file_rows = np.zeros(0, dtype=np.intp)  # sidecar row of each partition row (-1: held in memory)
        self._sums = np.zeros(0, dtype=np.uint32)  # CRC-32 of each partition row
        self._checked = np.zeros(0, dtype=bool)  # rows whose checksum matched (or held in memory)
        self._fixed: dict[int, np.ndarray] = {}  # rows recomputed after failing their checksum
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._size

    def add_array(self, vectors: np.ndarray) -> None:
        """Rows held in memory (a run of format 1)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        self._add(vectors, np.full(len(vectors), -1), np.zeros(len(vectors), np.uint32), True)

    def add_file(self, file: VectorFile, first: int, checksums: np.ndarray, *, checked: bool = False) -> None:
        """Rows ``first, first + 1, …`` of a sidecar, with their checksums (`row_checksums`)."""
        if self.file is not None and file is not self.file and file.path != self.file.path:
            raise ValueError("all sidecar rows of a partition come from one sidecar")
        self.file = file
        checksums = np.asarray(checksums, dtype=np.uint32).reshape(-1)
        self._add(None, first + np.arange(len(checksums)), checksums, checked)

    def _add(self, array: np.ndarray | None, file_rows: np.ndarray, sums: np.ndarray, checked: bool) -> None:
        with self._lock:
            self._starts = np.append(self._starts, self._size)
            self._arrays.append(array)
            self._pending.append((file_rows.astype(np.intp), sums, checked))
            self._size += len(file_rows)

    def _columns(self) -> None:
        """Join the per-row columns of the segments added since the last read (once, not per segment:
        opening from many runs adds one segment per run)."""
        with self._lock:
            if self._pending:
                self._file_rows = np.concatenate([self._file_rows, *(rows for rows, _, _ in self._pending)])
                self._sums = np.concatenate([self._sums, *(sums for _, sums, _ in self._pending)])
                self._checked = np.concatenate([self._checked, *(np.full(len(rows), checked)
                                                                 for rows, _, checked in self._pending)])
                self._pending = []

    def resident_bytes(self) -> int:
        """Bytes of vectors this object holds in memory (sidecar rows are not counted)."""
        return sum(a.nbytes for a in self._arrays if a is not None)

    def read(self, rows: np.ndarray) -> np.ndarray:
        """float32 vectors of partition rows (each below ``len(self)``), in the order given."""
        rows = np.asarray(rows, dtype=np.intp).reshape(-1)
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        if not len(rows):
            return out
        self._columns()
        file_rows = self._file_rows[rows]
        on_file = file_rows >= 0
        if not on_file.all():
            which = np.searchsorted(self._starts, rows, side="right") - 1
            for s in np.unique(which[~on_file]).tolist():
                at = np.flatnonzero(which == s)
                out[at] = self._arrays[s][rows[at] - self._starts[s]]  # type: ignore[index]
        if on_file.any():
            at = np.flatnonzero(on_file) if not on_file.all() else np.arange(len(rows))
            out[at] = self.file.read(file_rows[at])  # type: ignore[union-attr]
            self._check(rows[at], out, at)
        return out

    def _check(self, rows: np.ndarray, out: np.ndarray, at: np.ndarray) -> None:
        """Check sidecar rows read for the first time against their checksums; recompute those that fail."""
        todo = np.flatnonzero(~self._checked[rows])
        if not len(todo):
            return
        data = np.ascontiguousarray(out[at[todo]], dtype="<f4")
        ok = np.array([zlib.crc32(row) for row in data], dtype=np.uint32) == self._sums[rows[todo]]
        self._checked[rows[todo[ok]]] = True
        for i in todo[~ok].tolist():
            row = int(rows[i])
            fixed = self._fixed.get(row)
            if fixed is None:
                if self.recompute is None:
                    raise ValueError(f"vector row {row} does not match its checksum and cannot be recomputed")
                log.warning("vector of partition row %s does not match its checksum in %s; recomputed from its entries",
                            row, self.file.path)  # type: ignore[union-attr]
                fixed = self._fixed[row] = np.asarray(self.recompute(row), dtype=np.float32)
            out[at[i]] = fixed
