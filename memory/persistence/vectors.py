"""Problem vectors kept on disk beside the store and read on demand, so an open memory does not
hold every episode's vector in memory.

A file store has a sidecar, ``<store>-vectors``, only ever appended (`VectorFile`). Each
row is stored sparse and exact: a bitmap of which floats are non-zero (by their bits, so
-0.0 and NaN are kept), then those floats as little-endian float32, or, when smaller, the
row's distinct floats and a few bits per float indexing them (`memory.persistence.sparse_rows`). Hashing vectors
have about a third of their buckets set and repeat a few dozen values, so a row takes about
14 % of its dense size; a dense encoder's row costs its bitmap more than dense (dim / 8
bytes). Rows written by earlier versions are stored without palettes, or dense at multiples
of the row size, and are still read.

A state run (`memory.persistence.runs`) records, per principal, where its episodes'
rows begin, how many floats each holds and its palette size (the row sizes follow), a CRC-32 of every row
(checked on read: damage, a torn write, a wrong file) and a truncated SHA-256 (checked by
``python -m memory verify``, whose digest chain covers the runs: a row altered on purpose);
both are of the dense float32 row, whichever way it is stored. The sidecar is derived
data, like the runs, and holds nothing the timeline does not.

`StoredRows` is what a partition of the recall index reads its older rows from
(`memory.retrieval.index.Partition`): segments of sidecar rows (read when recall needs
them, so only those pass through memory) or of vectors held in memory (runs of format 1). A
sidecar row is checked against its CRC-32 the first time it is read; a row that fails (a
damaged or replaced sidecar) is recomputed from the episode's entries, the exact way, and
logged, so a run can make opening faster, never recall different.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import cast

import numpy as np

from memory.errors import StoreError
from memory.persistence.sparse_rows import (
    bitmap_bytes,
    pack_rows,
    palette_values,
    row_checksums,
    row_sizes,
    unpack_rows,
)
from memory.timeline.sidecars import open_sidecar

try:
    import fcntl
except ImportError:  # not POSIX: appends of several processes at once are not serialized
    fcntl = None  # type: ignore[assignment]  # the stubs declare fcntl on every platform

log = logging.getLogger(__name__)


class VectorFile:
    """A store's vectors sidecar: rows appended durably, read row by row.

    Args:
        path: the sidecar's path (``SQLiteStore.vectors_path``).
        dim: floats per row.
    """

    def __init__(self, path: str, dim: int) -> None:
        self.path = path
        self.dim = dim
        self.row_bytes = 4 * dim  # a dense row (written by earlier versions)
        self._fd: int | None = None
        self._lock = threading.Lock()

    def size(self) -> int:
        """Bytes the file holds now (0 when it is missing)."""
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    def append(self, rows: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
        """Write rows sparse at the end (after anything a crash left), flushed to disk.

        Returns the byte where the first row begins, each row's count of floats and its palette
        size (`pack_rows`; `row_offsets` gives where every row begins). An exclusive ``flock`` on
        the file covers finding the end and writing, so processes writing runs of one store at
        once never record the same bytes.

        Raises:
            StoreError: the sidecar is a symbolic link (`memory.timeline.sidecars`).
        """
        packed, counts, palettes = pack_rows(np.asarray(rows, dtype=np.float32).reshape(-1, self.dim))
        with self._lock, os.fdopen(open_sidecar(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666), "ab") as out:
            if fcntl is not None:
                fcntl.flock(out.fileno(), fcntl.LOCK_EX)  # released when the file is closed
            first = out.seek(0, os.SEEK_END)  # bytes a torn write left are skipped, never reused
            out.write(packed)
            out.flush()
            os.fsync(out.fileno())
        return first, counts, palettes

    def read(self, offsets: np.ndarray, counts: np.ndarray, palettes: np.ndarray | None = None) -> np.ndarray:
        """Dense rows stored at byte `offsets` with `counts` floats each (negative: a dense row) and
        `palettes` distinct values (0 or None: the floats as they are), as a copy; a row past the
        end or unreadable reads as NaN (it fails its checksum).

        Each row is one ``pread`` of its stored bytes (`_read_rows`), decoded from there: the rows
        come through the page cache without being mapped into this process, so reading a few rows
        of a large sidecar adds only them to its resident memory (a memory map faults in whole folios).
        """
        offsets = np.asarray(offsets, dtype=np.int64).reshape(-1)
        counts = np.asarray(counts, dtype=np.int64).reshape(-1)
        palettes = (
            np.zeros(len(counts), dtype=np.int64)
            if palettes is None
            else np.asarray(palettes, dtype=np.int64).reshape(-1)
        )
        out = np.empty((len(offsets), self.dim), dtype=np.float32)
        fd = self._descriptor() if len(offsets) else None
        if fd is None:
            out.fill(np.nan)
            return out
        whole = (
            (offsets >= 0)
            & (counts <= self.dim)
            & (palettes >= 0)
            & (palettes <= np.minimum(np.maximum(counts, 0), 256))
        )
        width = bitmap_bytes(self.dim)
        # a sparse row's floats begin `width` bytes in: rows placed `lead` bytes off a multiple of 4 have them
        # on a float boundary of the buffer, so its float view indexes them
        lead = -width % 4
        sizes = np.where(whole, row_sizes(self.dim, counts, palettes), 0)
        buffer, starts, ok = self._read_rows(fd, offsets, sizes, lead)
        raw = np.frombuffer(buffer, dtype=np.uint8)
        floats = np.frombuffer(buffer, dtype="<f4", count=len(buffer) // 4)
        sparse = np.flatnonzero(whole & (counts >= 0))
        if len(sparse):
            begins = starts[sparse] + width  # the byte where each sparse row's floats or palette begin
            values = palette_values(
                floats,
                begins // 4,
                counts[sparse],
                palettes[sparse],
                raw,
                begins + 4 * np.where(palettes > 0, palettes, counts)[sparse],
            )
            bitmaps = raw[starts[sparse, None] + np.arange(width)]
            out[sparse] = unpack_rows(bitmaps, counts[sparse], values, self.dim)
        for row in np.flatnonzero(whole & (counts < 0)).tolist():  # a dense row of an earlier version
            out[row] = np.frombuffer(buffer, dtype="<f4", count=self.dim, offset=int(starts[row]))
        out[~ok] = np.nan
        return out

    @staticmethod
    def _read_rows(fd: int, offsets: np.ndarray, sizes: np.ndarray, lead: int) -> tuple[bytes, np.ndarray, np.ndarray]:
        """The `sizes` bytes stored at `offsets` (a row of size 0 is not read), each with one ``pread``, in one
        buffer: each row from a byte `lead` past a multiple of 4 (room to a multiple of 4 after it, then 8 spare
        zero bytes at the end, which `palette_values` reads past the last indices). The buffer, where each row
        begins in it, and whether each row was read whole (a row read short is filled up with zeros)."""
        room = (sizes + 3) // 4 * 4
        extents, places = room.tolist(), offsets.tolist()
        try:
            chunks = [os.pread(fd, extent, offset) if extent else b"" for offset, extent in zip(places, extents)]
        except OSError:  # an unreadable sidecar: its rows fail their checksums and are recomputed
            chunks = [_read_or_nothing(fd, extent, offset) for offset, extent in zip(places, extents)]
        lengths = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
        for row in np.flatnonzero(lengths != room).tolist():  # read short: past the end of the file
            chunks[row] = chunks[row].ljust(extents[row], b"\0")
        return (
            b"".join([bytes(lead), *chunks, bytes(8)]),
            lead + np.cumsum(room) - room,
            (sizes > 0) & (lengths >= sizes),
        )

    def read_dense(self, rows: np.ndarray) -> np.ndarray:
        """Dense rows by their row numbers (how earlier versions wrote rows)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        return self.read(rows * self.row_bytes, np.full(len(rows), -1))

    def _descriptor(self) -> int | None:
        with self._lock:
            if self._fd is None:
                try:
                    self._fd = open_sidecar(self.path, os.O_RDONLY)
                except (OSError, StoreError):  # a link is not read: its rows are recomputed
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


def _read_or_nothing(fd: int, size: int, offset: int) -> bytes:
    """`size` bytes at `offset` (fewer at the end of the file), or none when they cannot be read."""
    try:
        return os.pread(fd, size, offset) if size else b""
    except OSError:
        return b""


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
        self._pending: list[
            tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]
        ] = []  # segments added since the last read
        self._arrays: list[np.ndarray | None] = []  # each segment's rows when held in memory
        self._offsets = np.zeros(0, dtype=np.int64)  # sidecar byte of each partition row (-1: held in memory)
        self._counts = np.zeros(0, dtype=np.int32)  # floats of each sidecar row (-1: a dense row)
        self._palettes = np.zeros(0, dtype=np.int16)  # distinct values of each sidecar row stored as a palette
        self._sums = np.zeros(0, dtype=np.uint32)  # CRC-32 of each partition row
        self._checked = np.zeros(0, dtype=bool)  # rows whose checksum matched (or held in memory)
        self._fixed: dict[int, np.ndarray] = {}  # rows recomputed after failing their checksum
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._size

    def add_array(self, vectors: np.ndarray) -> None:
        """Rows held in memory (a run of format 1)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        none = np.full(len(vectors), -1)
        self._add(vectors, none, none, np.zeros(len(vectors), np.int16), np.zeros(len(vectors), np.uint32), True)

    def add_file(
        self,
        file: VectorFile,
        offsets: np.ndarray,
        counts: np.ndarray,
        checksums: np.ndarray,
        palettes: np.ndarray | None = None,
        *,
        checked: bool = False,
    ) -> None:
        """Sidecar rows at byte `offsets` with `counts` floats and `palettes` distinct values each
        (`VectorFile.read`), and their checksums (`row_checksums`)."""
        if self.file is not None and file is not self.file and file.path != self.file.path:
            raise ValueError("all sidecar rows of a partition come from one sidecar")
        self.file = file
        checksums = np.asarray(checksums, dtype=np.uint32).reshape(-1)
        counts = np.asarray(counts).reshape(-1)
        palettes = np.zeros(len(counts), np.int16) if palettes is None else np.asarray(palettes).reshape(-1)
        self._add(None, np.asarray(offsets).reshape(-1), counts, palettes, checksums, checked)

    def _add(
        self,
        array: np.ndarray | None,
        offsets: np.ndarray,
        counts: np.ndarray,
        palettes: np.ndarray,
        sums: np.ndarray,
        checked: bool,
    ) -> None:
        if not len(offsets) == len(counts) == len(palettes) == len(sums):
            raise ValueError("every row needs its offset, count, palette size and checksum")
        with self._lock:
            self._starts = np.append(self._starts, self._size)
            self._arrays.append(array)
            self._pending.append(
                (offsets.astype(np.int64), counts.astype(np.int32), palettes.astype(np.int16), sums, checked)
            )
            self._size += len(offsets)

    def _columns(self) -> None:
        """Join the per-row columns of the segments added since the last read (once, not per segment:
        opening from many runs adds one segment per run)."""
        with self._lock:
            if self._pending:
                self._offsets = np.concatenate([self._offsets, *(offsets for offsets, *_ in self._pending)])
                self._counts = np.concatenate([self._counts, *(counts for _, counts, *_ in self._pending)])
                self._palettes = np.concatenate([self._palettes, *(palettes for _, _, palettes, *_ in self._pending)])
                self._sums = np.concatenate([self._sums, *(sums for *_, sums, _ in self._pending)])
                self._checked = np.concatenate(
                    [self._checked, *(np.full(len(offsets), checked) for offsets, *_, checked in self._pending)]
                )
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
        offsets = self._offsets[rows]
        on_file = offsets >= 0
        if not on_file.all():
            which = np.searchsorted(self._starts, rows, side="right") - 1
            for s in np.unique(which[~on_file]).tolist():
                at = np.flatnonzero(which == s)
                held = cast(np.ndarray, self._arrays[s])  # a segment of rows held in memory has its array
                out[at] = held[rows[at] - self._starts[s]]
        if on_file.any():
            at = np.flatnonzero(on_file) if not on_file.all() else np.arange(len(rows))
            file = self._sidecar()
            out[at] = file.read(offsets[at], self._counts[rows[at]], self._palettes[rows[at]])
            self._check(file, rows[at], out, at)
        return out

    def _sidecar(self) -> VectorFile:
        """The sidecar of the file segments (set by the first `add_file`: rows on file come with it)."""
        if self.file is None:
            raise ValueError("sidecar rows were read before any sidecar was added")
        return self.file

    def _check(self, file: VectorFile, rows: np.ndarray, out: np.ndarray, at: np.ndarray) -> None:
        """Check rows read for the first time from `file` against their checksums; recompute those that fail."""
        todo = np.flatnonzero(~self._checked[rows])
        if not len(todo):
            return
        ok = row_checksums(out[at[todo]]) == self._sums[rows[todo]]
        self._checked[rows[todo[ok]]] = True
        for i in todo[~ok].tolist():
            row = int(rows[i])
            fixed = self._fixed.get(row)
            if fixed is None:
                if self.recompute is None:
                    raise ValueError(f"vector row {row} does not match its checksum and cannot be recomputed")
                log.warning(
                    "vector of partition row %s does not match its checksum in %s; recomputed from its entries",
                    row,
                    file.path,
                )
                fixed = self._fixed[row] = np.asarray(self.recompute(row), dtype=np.float32)
            out[at[i]] = fixed
