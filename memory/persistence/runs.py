"""Columnar snapshots of the derived state: opening a large store reads a few blobs, not every record.

A *run* stands for the derived records stored in one contiguous range of the records
table (``after < seq <= upto``): the episodes (as columns), their problem vectors, texts
and citations, the edges, fact versions and reinforcement marks, plus the relevance-bound
projections of the vectors when their partition had a bounding basis. A run of format 4
keeps where its vectors are in the store's vectors sidecar (sparse rows, most of them as
palettes), with their checksums and digests (`memory.persistence.vectors`), and its JSON
documents compressed with zlib; format 3 (still read) has no palette rows; format 2 (still read) points to dense sidecar rows and keeps its documents as
they are; format 1 (still read) keeps the vectors in the body. Runs are stored in
the insert-only snapshots table (kind `RUN`), each in its own transaction; the timeline
and the records are never touched, so a crash while writing one leaves a valid store.

Opening follows the runs from the first record onwards and loads the records after the
last usable one the exact way. A run is used only when everything checks out: its format
and the graph configuration its problems were computed under, the size and sha256 of its
body (a truncated or altered body fails), the shapes of its sections, and the records at
both ends of its range (the records are insert-only and content-addressed, so a run made
of another store or another range fails). Anything else falls back to the exact path; a
run can make opening faster, never different.

Opening reads only the columns recall needs: episodes are read from their records on first
use (`memory.persistence.lazy`), problem texts, edge ids and mark ids when first asked for,
vectors row by row when recall scores them (`memory.persistence.vectors.StoredRows`).
`run_encoding` writes runs.
The bounding bases the projections were made with are stored apart (`stored_bounds`).

No pickle: bodies are raw little-endian arrays and UTF-8 JSON.
"""

from __future__ import annotations

import hashlib
import json
import queue
import sys
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

import numpy as np

from memory.episodes import Outcome
from memory.graph.edges import EdgeType
from memory.persistence.digests import hex_digests
from memory.persistence.vectors import DIGEST_BYTES, StoredRows, VectorFile, row_offsets, row_sizes

RUN = "open_state/1"  # snapshot kind of runs
FORMAT = 4  # layout version inside the kind (see the module docstring)
READ_FORMATS = (1, 2, 3, 4)

OUTCOMES = tuple(Outcome)  # outcome codes, by position
OUTCOME_NAMES = tuple(o.value for o in OUTCOMES)  # the same, as the strings graph nodes hold
EDGE_TYPES = tuple(EdgeType)  # edge type codes, by position
VERDICT_COLUMNS = frozenset({"choice", "end_us", "outcome", "principal", "seqs"})  # what `Run.verdict` reads


def config_digest(config: Any) -> str:
    """Digest of a frozen dataclass configuration (problem vectors depend on the graph rules)."""
    return hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode("utf-8")).hexdigest()[:32]


def body_digest(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def free_id(known: set[str] | frozenset[str], name: str) -> str:
    """`name`, or `name` with as many ``+`` as make it one no stored snapshot holds (a damaged copy
    keeps its id: the copy that replaces it is stored beside it)."""
    while name in known:
        name += "+"
    return name


# -- reading -------------------------------------------------------------------------------


class Corrupt(ValueError):
    """A run or basis that does not check out (the caller falls back to the exact path)."""


_BULK = (
    "vectors:",
    "digests:",
    "checksums:",
    "counts:",
    "palettes:",
    "proj:",
    "resid:",
)  # sections copied into the partitions, not kept with the run


PACKED = "zlib"  # the dtype of a JSON section compressed with zlib (in a run of format 3 or 4, and in memory)
_PACKED_DOCUMENTS = ("texts",)  # kept after opening, read on demand if ever, and compress well (7×)


def _kept(
    name: str, data: memoryview, dtype: str | None, shape: list[int] | None
) -> tuple[bytes, str | None, list[int] | None]:
    """A section as a run keeps it: the documents read only on demand compressed, the rest as they are."""
    if dtype != PACKED and name in _PACKED_DOCUMENTS:
        return zlib.compress(data, 1), PACKED, None
    return bytes(data), dtype, shape


class Run:
    """A checked run: its small sections, decoded on first use (the vectors went to `RunReader.sources`)."""

    def __init__(
        self, meta: Mapping[str, Any], sections: dict[str, tuple[bytes, str | None, list[int] | None]]
    ) -> None:
        self.meta = meta
        self.after: int = int(meta["after"])
        self.upto: int = int(meta["upto"])
        self.rows: dict[str, int] = dict(meta["rows"])  # episodes per principal
        self.offsets: dict[str, int] = {}  # principal → first row of this run in its partition
        self.bases: dict[str, str | None] = {}  # principal → basis digest of its stored projections
        self.copies: list[tuple[np.ndarray, int, np.ndarray]] = []  # (target, first row, rows) still to copy
        self.vectors: list[
            tuple[StoredRows, Any]
        ] = []  # segments still to add: (sidecar, offsets, counts, checksums) or rows
        self._sections = sections
        self._arrays: dict[str, np.ndarray] = {}  # numeric sections already viewed

    def _array(self, name: str) -> np.ndarray:
        found = self._arrays.get(name)
        if found is None:  # a view of the section's bytes, made once (a verdict reads three per episode)
            data, dtype, shape = self._sections[name]
            found = self._arrays[name] = np.frombuffer(data, dtype=dtype).reshape(shape)
        return found

    def _document(self, name: str) -> Any:
        data, packed, _ = self._sections.pop(name)
        return json.loads((zlib.decompress(data) if packed == PACKED else data).decode("utf-8"))

    def place(self) -> None:
        """Copy the run's vectors and projections into the principals' arrays (the iterating thread does:
        the reading thread then only reads and digests, so it seldom waits for the interpreter lock)."""
        for target, at, rows in self.copies:
            target[at : at + len(rows)] = rows
        for source, segment in self.vectors:
            source.add_file(*segment) if isinstance(segment, tuple) else source.add_array(segment)
        self.copies, self.vectors = [], []

    def release(self) -> None:
        """Drop the columns only opening needs (what is read later stays)."""
        keep = ("texts", "edge_ids", "marks", "principal", "strings", "outcome", "choice", "end_us", "seqs")
        self._sections = {name: value for name, value in self._sections.items() if name in keep}
        self._arrays = {name: value for name, value in self._arrays.items() if name in keep}
        for loaded in ("edges", "facts", "cites", "unmarked", "outside"):  # in the state now; not kept twice
            self.__dict__.pop(loaded, None)

    def row(self, episode_id: str) -> int:
        """The row of an episode of this run."""
        rows = self.__dict__.get("_rows")
        if rows is None:
            rows = self.__dict__["_rows"] = {i: n for n, i in enumerate(self.ids)}
        return rows[episode_id]

    def verdict(self, row: int) -> tuple[Outcome, str | None, datetime, str, int, int]:
        """Outcome, last structured choice, end, principal, first and last seq of the episode at a row (what
        its evidence needs); read once per episode when an opened store counts its record, so each field is
        taken as a Python scalar (`item`) straight from its column."""
        arrays, strings = self._arrays, self.strings
        if not VERDICT_COLUMNS <= arrays.keys():
            for name in VERDICT_COLUMNS:
                self._array(name)
        choice = arrays["choice"].item(row)
        return (
            OUTCOMES[arrays["outcome"].item(row)],
            strings[choice] if choice >= 0 else None,
            EPOCH + timedelta(microseconds=arrays["end_us"].item(row)),
            strings[arrays["principal"].item(row)],
            arrays["seqs"].item(row, 0),
            arrays["seqs"].item(row, 1),
        )

    @cached_property
    def ids(self) -> list[str]:
        return [sys.intern(i) for i in self._document("ids")]  # one string per id, shared by the graph and edges

    @cached_property
    def strings(self) -> list[str | None]:
        return self._document("strings")

    def column(self, name: str) -> np.ndarray:
        """A numeric column: principal, situation, subject (string codes), seqs, ends, outcome, corrected."""
        return self._array(name)

    def decoded(self, name: str) -> list[str | None]:
        """A string column (principal, situation, subject), decoded."""
        table = self.strings
        return [table[c] for c in self._array(name).tolist()]

    @cached_property
    def texts(self) -> list[str]:
        return self._document("texts")

    @cached_property
    def cites(self) -> dict[str, list[str]]:
        return self._document("cites")

    @cached_property
    def edges(self) -> list[tuple[str, str, EdgeType, float, str]]:
        """(source, target, type, weight, evidence) of each edge record, in storing order."""
        weights = self._array("weights").tolist()
        # evidence texts repeat: interned as they are decoded, or the copies' freed memory stays resident
        return [
            (sys.intern(s), sys.intern(t), EDGE_TYPES[k], w, sys.intern(ev))
            for (s, t, k, ev), w in zip(self._document("edges"), weights)
        ]

    def id_list(self, name: str) -> np.ndarray | list[str]:
        """The ids a section lists (``edge_ids``, ``marks``), read once: the digests' 32 bytes each (numpy
        ``S32``) when every id is a lower-case SHA-256 hex digest, parsed from the JSON without a string
        per id (a million episodes' runs list millions); else the ids as strings."""
        data, packed, _ = self._sections.pop(name)
        raw = zlib.decompress(data) if packed == PACKED else bytes(data)
        digests = hex_digests(raw)
        return digests if digests is not None else json.loads(raw.decode("utf-8"))

    @cached_property
    def facts(self) -> list[dict[str, Any]]:
        return self._document("facts")

    @cached_property
    def unmarked(self) -> list[str]:
        """Episodes of the run without a reinforcement mark in it, in storing order."""
        return self._document("unmarked")

    @cached_property
    def outside(self) -> list[str]:
        """Episodes stored before the run that got a reinforcement mark in it."""
        return self._document("outside")


class RunReader:
    """The usable runs of a store, in records order from the first record on (see the module docstring).

    Iterating yields the runs; meanwhile a worker thread with its own connection reads and
    checks the bodies and copies each principal's bound projections into `proj` / `resid`
    (SQLite, sha256 and numpy copies release the GIL), so the caller's work on one run
    overlaps reading the next. Each principal's vectors are read through `sources`: rows in
    the store's vectors sidecar (format 2; `sidecar`) or held in memory (format 1).

    Args:
        sidecar: the store's vectors sidecar (None: format 2 runs are not usable).
        recompute: ``(principal, row) → vector`` from the episode's entries, for a sidecar
            row that fails its checksum.
    """

    def __init__(
        self,
        store: Any,
        *,
        config: str,
        dim: int,
        kind: str | None = RUN,
        sidecar: VectorFile | None = None,
        recompute: Callable[[str, int], np.ndarray] | None = None,
    ) -> None:
        self.store = store
        self.dim = dim
        self.sidecar = sidecar
        self.recompute = recompute
        self.candidates: dict[int, list[tuple[int, dict[str, Any]]]] = {}
        for seq, _, meta in store.snapshot_index(kind) if store.path != ":memory:" and kind is not None else ():
            if (
                isinstance(meta, dict)
                and meta.get("format") in READ_FORMATS
                and meta.get("config") == config
                and meta.get("dim") == dim
                and isinstance(meta.get("after"), int)
                and isinstance(meta.get("rows"), dict)
                and isinstance(meta.get("bases"), dict)
            ):
                self.candidates.setdefault(meta["after"], []).append((seq, meta))
        self.last = store.last_record() if self.candidates else 0
        rows: dict[str, int] = {}  # capacity: every candidate's rows (untouched pages of np.empty cost nothing)
        ranks: dict[str, int] = {}
        for _, meta in (c for found in self.candidates.values() for c in found):
            for principal, k in meta["rows"].items():
                rows[principal] = rows.get(principal, 0) + int(k)
                shape = meta["sections"].get(f"proj:{principal}", [0, 0, "", [0, 0]])[3]
                if len(shape) == 2 and int(shape[1]) > 0:
                    ranks.setdefault(principal, int(shape[1]))
        self.capacity = rows
        self.sources: dict[str, StoredRows] = {}
        self.proj = {p: np.empty((k, ranks[p]), dtype=np.float32) for p, k in rows.items() if ranks.get(p)}
        self.resid = {p: np.empty(k, dtype=np.float32) for p, k in rows.items() if ranks.get(p)}
        self.filled = dict.fromkeys(rows, 0)  # rows filled per principal, by the runs yielded so far

    def source(self, principal: str) -> StoredRows:
        """The vectors of a principal's rows from the runs read so far."""
        found = self.sources.get(principal)
        if found is None:
            recompute = self.recompute
            found = self.sources[principal] = StoredRows(
                self.dim, None if recompute is None else lambda row, who=principal: recompute(who, row)
            )
        return found

    def __iter__(self) -> Iterator[Run]:
        if 0 not in self.candidates:
            return
        found: queue.Queue = queue.Queue(maxsize=2)
        stop = threading.Event()

        def offer(item: Any) -> bool:
            while not stop.is_set():
                try:
                    found.put(item, timeout=0.05)
                    return True
                except queue.Full:
                    continue
            return False

        def work() -> None:
            try:
                reader = type(self.store)(self.store.path, create=False)
                try:
                    after = 0
                    while after in self.candidates:
                        run = self._first_usable(reader, after)
                        if run is None or not offer(run):
                            break
                        after = run.upto
                finally:
                    reader.close()
            except Exception:  # noqa: BLE001 - runs only make opening faster: what they do not cover loads exactly
                pass
            finally:
                offer(None)

        worker = threading.Thread(target=work, name="snapshot-reader", daemon=True)
        worker.start()
        try:
            while True:
                item = found.get()
                if item is None:
                    return
                item.place()
                yield item
        finally:
            stop.set()
            worker.join()

    def _first_usable(self, store: Any, after: int) -> Run | None:
        """The first candidate run starting after `after` that checks out and fits, copied in; or None."""
        for seq, meta in self.candidates[after]:
            try:
                upto = int(meta["upto"])
                if not after < upto <= self.last:
                    continue
                if store.record_at(after + 1) != tuple(meta["first"]) or store.record_at(upto) != tuple(meta["last"]):
                    continue  # made of other records
                run = self._copy(store, seq, meta)
            except (Corrupt, KeyError, TypeError, ValueError, IndexError, AttributeError):
                continue
            if run is not None:
                return run
        return None

    def _in_sidecar(self, meta: Mapping[str, Any], sections: Mapping[str, np.ndarray]) -> dict[str, tuple]:
        """principal → (byte offsets, float counts, palette sizes) of a run's sidecar rows; `Corrupt` unless the
        sidecar holds them."""
        dim = int(meta["dim"])
        where = {p: sidecar_rows(meta, p, sections, dim) for p in meta["rows"]}
        if any(
            len(offsets) and int((offsets + row_sizes(dim, counts, palettes)).max()) > self.sidecar.size()  # type: ignore[union-attr]
            for offsets, counts, palettes in where.values()
        ):
            raise Corrupt("the vectors sidecar does not hold the run's rows")
        return where

    def _copy(self, store: Any, seq: int, meta: Mapping[str, Any]) -> Run | None:
        """Read and check a run's sections; its vectors and projections go to the principals' arrays.

        Raises `Corrupt` when a section is truncated, altered or of the wrong shape; None when
        the run does not fit the arrays (the rest then loads the exact way).
        """
        layout = meta["sections"]
        n, dim = int(meta["episodes"]), int(meta["dim"])
        rows = {p: int(k) for p, k in meta["rows"].items()}
        if not isinstance(layout, dict) or sum(rows.values()) != n:
            raise Corrupt("no section table, or rows disagree with the episodes")
        in_sidecar = meta["format"] >= 2
        for name, shape in _expected_shapes(int(meta["format"]), rows, dim).items():
            if name not in layout or list(layout[name][3]) != shape:
                raise Corrupt(f"section {name} is missing or has another shape")
        if in_sidecar and (
            self.sidecar is None or not isinstance(meta["vectors"], dict) or set(meta["vectors"]) != set(rows)
        ):
            raise Corrupt("no vectors sidecar, or the run does not say where each principal's rows are")
        if any(self.filled.get(p, 0) + k > self.capacity.get(p, 0) for p, k in rows.items()):
            return None
        body = store.snapshot_body(seq)  # one read and one digest per run: the GIL is released for both
        if len(body) != int(meta["size"]) or body_digest(body) != meta["digest"]:
            raise Corrupt("body is truncated or altered")
        view = memoryview(body)
        kept: dict[str, tuple[bytes, str | None, list[int] | None]] = {}
        bulk: dict[str, np.ndarray] = {}
        for name, (offset, length, dtype, shape) in layout.items():
            if (
                not 0 <= offset <= offset + length <= len(body)
                or dtype not in (None, PACKED)
                and int(np.prod(shape)) * np.dtype(dtype).itemsize != length
            ):
                raise Corrupt(f"section {name} does not fit the body or its shape")
            data = view[offset : offset + length]
            if name.startswith(_BULK):
                bulk[name] = np.frombuffer(data, dtype=dtype).reshape(shape)
            else:
                kept[name] = _kept(name, data, dtype, shape)
        run = Run(meta, kept)
        where = self._in_sidecar(meta, bulk) if in_sidecar else {}
        for principal, k in rows.items():
            at = self.filled[principal]
            if in_sidecar:
                offsets, counts, palettes = where[principal]
                segment: Any = (self.sidecar, offsets, counts, bulk[f"checksums:{principal}"].copy(), palettes)
            else:
                segment = bulk[f"vectors:{principal}"].copy()
            run.vectors.append((self.source(principal), segment))
            digest = meta["bases"].get(principal)
            proj, resid = bulk.get(f"proj:{principal}"), bulk.get(f"resid:{principal}")
            target = self.proj.get(principal)
            if (
                digest is not None
                and proj is not None
                and resid is not None
                and target is not None
                and proj.shape == (k, target.shape[1])
                and resid.shape == (k,)
            ):
                run.copies.append((target, at, proj))
                run.copies.append((self.resid[principal], at, resid))
                run.bases[principal] = digest
            else:
                run.bases[principal] = None
            run.offsets[principal] = at
            self.filled[principal] = at + k
        return run


def _expected_shapes(run_format: int, rows: Mapping[str, int], dim: int) -> dict[str, list[int]]:
    """The sections a run of this format must hold, and their shapes, for `rows` episodes per principal."""
    n = sum(rows.values())
    named = {
        "principal": [n],
        "situation": [n],
        "subject": [n],
        "ends": [n],
        "outcome": [n],
        "corrected": [n],
        "end_us": [n],
        "choice": [n],
        "seqs": [n, 2],
    }
    if run_format < 2:
        return {**named, **{f"vectors:{p}": [k, dim] for p, k in rows.items()}}
    per_row = ["checksums"] + (["counts"] if run_format >= 3 else []) + (["palettes"] if run_format >= 4 else [])
    return {
        **named,
        **{f"digests:{p}": [k, DIGEST_BYTES] for p, k in rows.items()},
        **{f"{name}:{p}": [k] for name in per_row for p, k in rows.items()},
    }


def sidecar_rows(
    meta: Mapping[str, Any], principal: str, sections: Mapping[str, np.ndarray], dim: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where a principal's rows of a format 2 to 4 run are in the sidecar: byte offsets, float counts
    (-1: dense rows) and palette sizes (0: the floats as they are). Raises `Corrupt` for a first row
    that is not a non-negative integer, or a count or palette larger than a row holds."""
    first, k = meta["vectors"][principal], int(meta["rows"][principal])
    if not isinstance(first, int) or isinstance(first, bool) or first < 0:
        raise Corrupt("a run's first sidecar row is not a non-negative integer")
    if meta["format"] == 2:  # dense rows, numbered
        return (first + np.arange(k, dtype=np.int64)) * (4 * dim), np.full(k, -1, dtype=np.int64), np.zeros(k, np.int64)
    counts = np.asarray(sections[f"counts:{principal}"], dtype=np.int64)
    palettes = (
        np.asarray(sections[f"palettes:{principal}"], dtype=np.int64) if meta["format"] >= 4 else np.zeros(k, np.int64)
    )
    if len(counts) != k or (counts > dim).any() or len(palettes) != k or (palettes > np.minimum(counts, 256)).any():
        raise Corrupt("a run's row counts or palette sizes do not fit its rows")
    return row_offsets(first, dim, counts, palettes), counts, palettes
