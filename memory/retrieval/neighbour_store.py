"""Approximate indexes kept beside the store: read on first need, checked against the partition, else built.

A file store ``memory.sqlite`` keeps one file per principal in the folder ``memory.sqlite-ann``
(`index_folder`): a header naming what the index was made from, then the index
(`memory.retrieval.neighbours`). Files are replaced whole (`memory.outputs.write_atomic`) when an
index is built or, at close, when it grew. Like the vectors sidecar they are derived data, never
trusted over the store: an index is used only when its header matches the partition it would
serve, and is otherwise built again from the partition's projections and written back:

- ``rows`` at most the partition's rows, and ``ids``, the digest of those rows' episode ids in
  order (`ids_digest`), theirs: otherwise the episodes changed (another store, an erasure);
- ``basis``, the digest of the bounding basis the rows are projected on;
- ``encoder``, ``dim``, ``rank``, the library and its version, and the index's parameters;
- ``digest``, the sha256 of the index bytes: otherwise the file is damaged.

An index with fewer rows than its partition (a process added episodes and stopped before
closing) gets the rest added. An erasure keeps episode ids and changes the vectors of what it
erased: it deletes the index files (`NeighbourIndexes.discard`), and the bounding basis is fitted
again after it (an erasure deletes the stored one), so an index another process writes later
from what it held before is not used either, unless the erased text lay beyond the episodes the
basis is fitted on. A projection is rounded a little differently when rows are projected in other
batches, so the rows' vectors are not checked bit for bit: rescoring is exact, an index only
proposes candidates. A store in memory or on a server keeps its indexes in memory:
each process that opens it builds them on its first recall over a large partition.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

from memory.outputs import write_atomic
from memory.retrieval.bounds import Bounds
from memory.retrieval.index import Partition
from memory.retrieval.neighbours import (
    CONNECTIVITY,
    EXPANSION_ADD,
    LIBRARY,
    SCALAR,
    NeighbourIndex,
    library_version,
)
from memory.timeline import SQLiteStore, Store
from memory.timeline.record_body import parse

MAGIC = b"episodic-memory neighbour index\n"  # first bytes of an index file
FORMAT = 1  # the header's format
SUFFIX = "-ann"  # the folder beside a store file: ``<store>-ann``
BUILD_CHUNK = 16384  # rows added at a time while building (projections are copied out of the bounds per chunk)
log = logging.getLogger(__name__)


def index_folder(store_path: str | Path) -> Path:
    """Where the indexes of the store file at `store_path` are kept."""
    return Path(f"{store_path}{SUFFIX}")


def index_file(folder: Path, principal: str) -> Path:
    """The file of a principal's index (named by a digest: a principal's name may hold any character)."""
    return folder / f"{hashlib.sha256(principal.encode('utf-8')).hexdigest()[:32]}.index"


def ids_digest(ids: Iterable[str]) -> str:
    """The sha256 of episode ids in row order, one per line."""
    return hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()


class StoredIndex(NamedTuple):
    """An index file mapped into memory: its header and the index bytes (not yet checked against their digest)."""

    header: dict[str, Any]
    data: memoryview  # the index bytes, where the file is mapped (an index of a large partition takes hundreds of MB)
    mapped: mmap.mmap  # the whole file, mapped read-only


def read_index_file(path: Path) -> StoredIndex | None:
    """The header and index bytes of an index file, or None when it is missing or not one.

    The file is mapped, not read: a memory searches the index where it lies (`NeighbourIndex`),
    so only the pages its searches reach are read, and they stay in the system's file cache,
    shared by the processes that open the store. Index files are replaced whole, never written
    in place (`memory.outputs.write_atomic`), so a mapped file does not change under its reader.
    """
    try:
        with path.open("rb") as file:
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # missing, unreadable, or empty (nothing to map)
        return None
    if mapped[: len(MAGIC)] != MAGIC:
        return None
    start = len(MAGIC) + 8
    size = int.from_bytes(mapped[len(MAGIC) : start], "little")
    try:
        header = json.loads(mapped[start : start + size].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(header, dict):
        return None
    return StoredIndex(header, memoryview(mapped)[start + size :], mapped)


def let_go(stored: StoredIndex) -> None:
    """Let this process's resident set drop the pages of a mapped index file read so far (checking its
    digest read all of them): they stay in the file cache, and a search maps again the few it reaches."""
    if hasattr(mmap, "MADV_DONTNEED"):  # where the platform has it
        stored.mapped.madvise(mmap.MADV_DONTNEED)


def index_file_bytes(header: dict[str, Any], data: bytes) -> bytes:
    """An index file: `MAGIC`, the header's length (8 bytes, little-endian), the header as JSON, the index."""
    text = json.dumps(header, sort_keys=True).encode("utf-8")
    return MAGIC + len(text).to_bytes(8, "little") + text + data


def damage(stored: StoredIndex) -> str:
    """What makes a read index file unusable whatever the store holds ("" when nothing)."""
    header = stored.header
    if header.get("format") != FORMAT:
        return f"format {header.get('format')!r}, not {FORMAT}"
    if hashlib.sha256(stored.data).hexdigest() != header.get("digest"):
        return "its index does not match its digest (damaged)"
    return ""


class _Held(NamedTuple):
    """A partition's index as this memory holds it."""

    part: Partition  # the partition it serves
    bounds: Bounds  # the partition's bounds its rows were projected with
    basis: str  # digest of their basis
    found: NeighbourIndex  # the index
    written: int  # rows the file beside the store holds (0: none written)


class NeighbourIndexes:
    """Each large partition's `NeighbourIndex`: read from beside the store or built on first need, then kept
    current with the partition's later rows (see the module docstring).

    Args:
        folder: where the index files are (`index_folder`); None keeps the indexes in memory only.
        encoder: the encoder's name (an index of another encoder's vectors is not used).
        dim: the encoder's dimension.
    """

    def __init__(self, folder: Path | None, *, encoder: str, dim: int) -> None:
        self.folder = folder
        self.encoder = encoder
        self.dim = dim
        self.version = library_version()
        self._held: dict[str, _Held] = {}
        self._lock = threading.Lock()

    @classmethod
    def beside(cls, store: Store, *, encoder: str, dim: int) -> NeighbourIndexes:
        """The indexes of a store's memory: in the folder beside a SQLite file, else in memory only."""
        on_file = isinstance(store, SQLiteStore) and store.path != ":memory:"
        return cls(index_folder(store.path) if on_file else None, encoder=encoder, dim=dim)

    @property
    def available(self) -> bool:
        """Whether the index library is installed (without it, recall stays exact)."""
        return self.version is not None

    def of(self, principal: str, part: Partition, bounds: Bounds) -> NeighbourIndex | None:
        """The index of a principal's partition, holding every row of it (None without the library)."""
        if self.version is None:
            return None
        with self._lock:
            held = self._held.get(principal)
            if held is None or held.part is not part or held.bounds is not bounds:
                held = self._open(principal, part, bounds, basis_digest(bounds))
            if len(held.found) < len(part):
                _extend(held.found, bounds, len(part))
            self._held[principal] = held
            if not held.written:  # built here: written at once, so the next process reads it
                self._held[principal] = self._write(principal, held, part, bounds)
            return held.found

    def save(self) -> None:
        """Write the indexes that gained rows since they were read or written (at close)."""
        with self._lock:
            for principal, held in list(self._held.items()):
                if held.written < len(held.found):
                    self._held[principal] = self._write(principal, held, held.part, held.bounds)

    def discard(self) -> None:
        """Forget the indexes and delete their files (an erasure: they hold projections of what it erased)."""
        with self._lock:
            self._held.clear()
            if self.folder is not None:
                for path in self.folder.glob("*.index"):
                    path.unlink(missing_ok=True)

    def header(self, principal: str, part: Partition, bounds: Bounds, rows: int, basis: str) -> dict[str, Any]:
        """What an index of the first `rows` rows of `part` is made from (the digest of its bytes apart)."""
        return {
            "format": FORMAT,
            "principal": principal,
            "library": LIBRARY,
            "version": self.version,
            "scalar": SCALAR,
            "connectivity": CONNECTIVITY,
            "expansion_add": EXPANSION_ADD,
            "encoder": self.encoder,
            "dim": self.dim,
            "rank": bounds.basis.shape[1],
            "basis": basis,
            "rows": rows,
            "ids": ids_digest(part.ids(rows)),
        }

    def _open(self, principal: str, part: Partition, bounds: Bounds, basis: str) -> _Held:
        """The partition's index read from its file when the file matches it, else built from the bounds."""
        rank = bounds.basis.shape[1]
        folder = self.folder if self._usable() else None
        stored = read_index_file(index_file(folder, principal)) if folder is not None else None
        if stored is not None:
            rows = stored.header.get("rows")
            problem = damage(stored)
            if not problem and isinstance(rows, int) and 0 < rows <= len(part):
                expected = self.header(principal, part, bounds, rows, basis)
                changed = [key for key, value in expected.items() if stored.header.get(key) != value]
                problem = f"made from other rows or settings ({', '.join(changed)})" if changed else ""
            elif not problem:
                problem = f"it holds {rows!r} rows, the partition {len(part)}"
            if not problem:
                try:
                    index = NeighbourIndex(rank, stored.data)  # searched where the file is mapped
                except (ValueError, RuntimeError) as exc:
                    problem = f"the library cannot read it ({exc})"
                else:
                    if len(index) == rows:
                        let_go(stored)
                        return _Held(part, bounds, basis, index, rows)
                    problem = f"it reads as {len(index)} rows, not {rows}"
            log.info("the approximate index of %r is built again: %s", principal, problem)
        index = NeighbourIndex(rank)
        _extend(index, bounds, len(part))
        return _Held(part, bounds, basis, index, 0)

    def _usable(self) -> bool:
        """Whether the folder may be read and written: there is one, and it is not a symbolic link (like the store's
        other sidecars, never followed; the indexes are then kept in memory)."""
        if self.folder is None:
            return False
        if self.folder.is_symlink():
            log.warning("%s is a symbolic link: approximate indexes are kept in memory only", self.folder)
            return False
        return True

    def _write(self, principal: str, held: _Held, part: Partition, bounds: Bounds) -> _Held:
        """Write a held index beside the store (nothing without a folder); the held index, written."""
        rows = len(held.found)
        if self.folder is None or not self._usable():
            return held._replace(written=rows)
        data = held.found.to_bytes()
        header = {**self.header(principal, part, bounds, rows, held.basis), "digest": hashlib.sha256(data).hexdigest()}
        try:
            write_atomic(index_file(self.folder, principal), index_file_bytes(header, data))
        except OSError as exc:  # derived data: recall goes on with the index held here
            log.warning("cannot write the approximate index of %r in %s: %s", principal, self.folder, exc)
        return held._replace(written=rows)


def basis_digest(bounds: Bounds) -> str:
    """The sha256 of a bounding basis (float64, little-endian)."""
    return hashlib.sha256(bounds.basis.astype("<f8").tobytes()).hexdigest()


def _extend(index: NeighbourIndex, bounds: Bounds, rows: int) -> None:
    """Add the bounds' projections of rows from ``len(index)`` to `rows` to `index`."""
    for start in range(len(index), rows, BUILD_CHUNK):
        index.extend(bounds.projections(start, min(start + BUILD_CHUNK, rows)))


def index_findings(store_path: str) -> list[str]:
    """What is wrong with the approximate indexes beside the store (`memory.retrieval.neighbour_store`), read-only.

    Each index file must be intact and hold, in order, the first of its principal's episodes as
    the store lists them. Like the vectors sidecar they are derived data: one that is damaged or
    stale is never used (the memory checks it on open and builds it again), so these are notes.
    """
    folder = index_folder(store_path)
    files = sorted(folder.glob("*.index")) if folder.is_dir() else []
    if not files:
        return []
    episodes = _episode_ids(store_path)
    if episodes is None:
        return []
    found = []
    for path in files:
        stored = read_index_file(path)
        problem = "not an index file" if stored is None else damage(stored)
        if stored is not None and not problem:
            principal, rows = stored.header.get("principal"), stored.header.get("rows")
            ids = episodes.get(principal, []) if isinstance(principal, str) else []
            if not isinstance(principal, str) or path.name != index_file(folder, principal).name:
                problem = f"its header names principal {principal!r}, not the one of its file name"
            elif not isinstance(rows, int) or not 0 < rows <= len(ids):
                problem = f"it holds {rows!r} rows; the store has {len(ids):,} episodes of principal {principal!r}"
            elif ids_digest(ids[:rows]) != stored.header.get("ids"):
                problem = f"its {rows:,} rows are not the first episodes of principal {principal!r} in the store"
            elif rows < len(ids):
                problem = (
                    f"it holds the first {rows:,} of the {len(ids):,} episodes of principal {principal!r} "
                    "(a memory adds the others on its next recall)"
                )
        if problem:
            found.append(
                f"approximate index {path}: {problem} (derived data: it is not used as it is, but built again "
                "on the next recall over its partition)"
            )
    return found


def _episode_ids(store_path: str) -> dict[str, list[str]] | None:
    """Every principal's episode ids in the order of their records (None when the file cannot be read)."""
    try:
        db = sqlite3.connect(f"file:{quote(str(Path(store_path).resolve()))}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    ids: dict[str, list[str]] = {}
    try:
        for record_id, body in db.execute("SELECT id, body FROM records WHERE kind = 'episode' ORDER BY seq"):
            read = parse(body)
            if not read.problem and isinstance(read.body.get("principal"), str):
                ids.setdefault(read.body["principal"], []).append(record_id)
    except sqlite3.Error:
        return None
    finally:
        db.close()
    return ids
