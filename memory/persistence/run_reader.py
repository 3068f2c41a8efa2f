"""Reading state runs (`memory.persistence.runs` describes what a run holds and when it is used).

`RunReader` finds the stored runs that fit a store's records and configuration, reads and
checks their bodies on a worker thread, and hands each checked `Run` to the opening, its
vectors and bound projections copied into each principal's arrays.
"""

from __future__ import annotations

import queue
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any

import numpy as np

from memory.persistence.runs import PACKED, READ_FORMATS, RUN, Corrupt, Run, body_digest, sidecar_rows
from memory.persistence.sparse_rows import DIGEST_BYTES, row_sizes
from memory.persistence.vectors import StoredRows, VectorFile
from memory.timeline import Store

_BULK = (
    "vectors:",
    "digests:",
    "checksums:",
    "counts:",
    "palettes:",
    "proj:",
    "resid:",
)  # sections copied into the partitions, not kept with the run


_PACKED_DOCUMENTS = ("texts",)  # kept after opening, read on demand if ever, and compress well (7×)


def _kept(
    name: str, data: memoryview, dtype: str | None, shape: list[int] | None
) -> tuple[bytes, str | None, list[int] | None]:
    """A section as a run keeps it: the documents read only on demand compressed, the rest as they are."""
    if dtype != PACKED and name in _PACKED_DOCUMENTS:
        return zlib.compress(data, 1), PACKED, None
    return bytes(data), dtype, shape


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
        store: Store,
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
                self.dim, None if recompute is None else partial(recompute, principal)
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
                reopen: Callable[..., Store] = type(self.store)  # its own connection, of the same kind of store
                reader = reopen(self.store.path, create=False)
                try:
                    after = 0
                    while after in self.candidates:
                        run = self._first_usable(reader, after)
                        if run is None or not offer(run):
                            break
                        after = run.upto
                finally:
                    reader.close()
            except Exception:  # runs only make opening faster: what they do not cover loads exactly
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

    def _first_usable(self, store: Store, after: int) -> Run | None:
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

    def _in_sidecar(
        self, sidecar: VectorFile, meta: Mapping[str, Any], sections: Mapping[str, np.ndarray]
    ) -> dict[str, tuple]:
        """principal → (byte offsets, float counts, palette sizes) of a run's sidecar rows; `Corrupt` unless the
        sidecar holds them."""
        dim = int(meta["dim"])
        where = {p: sidecar_rows(meta, p, sections, dim) for p in meta["rows"]}
        if any(
            len(offsets) and int((offsets + row_sizes(dim, counts, palettes)).max()) > sidecar.size()
            for offsets, counts, palettes in where.values()
        ):
            raise Corrupt("the vectors sidecar does not hold the run's rows")
        return where

    def _copy(self, store: Store, seq: int, meta: Mapping[str, Any]) -> Run | None:
        """Read and check a run's sections; its vectors and projections go to the principals' arrays.

        Raises `Corrupt` when a section is truncated, altered or of the wrong shape; None when
        the run does not fit the arrays (the rest then loads the exact way).
        """
        rows = {p: int(k) for p, k in meta["rows"].items()}
        in_sidecar = meta["format"] >= 2
        self._check_layout(meta, rows, in_sidecar)
        if any(self.filled.get(p, 0) + k > self.capacity.get(p, 0) for p, k in rows.items()):
            return None
        body = store.snapshot_body(seq)  # one read and one digest per run: the GIL is released for both
        if len(body) != int(meta["size"]) or body_digest(body) != meta["digest"]:
            raise Corrupt("body is truncated or altered")
        kept, bulk = _sections(body, meta["sections"])
        run = Run(meta, kept)
        sidecar = self.sidecar if in_sidecar else None  # `_check_layout` refused a run needing one it lacks
        where = self._in_sidecar(sidecar, meta, bulk) if sidecar is not None else {}
        for principal, k in rows.items():
            self._add_rows(run, principal, k, bulk, where.get(principal))
        return run

    def _check_layout(self, meta: Mapping[str, Any], rows: Mapping[str, int], in_sidecar: bool) -> None:
        """`Corrupt` unless a run's section table holds every section of its format, shaped for its rows, and
        a run that keeps its vectors in the sidecar says where each principal's rows are."""
        layout = meta["sections"]
        n, dim = int(meta["episodes"]), int(meta["dim"])
        if not isinstance(layout, dict) or sum(rows.values()) != n:
            raise Corrupt("no section table, or rows disagree with the episodes")
        for name, shape in _expected_shapes(int(meta["format"]), rows, dim).items():
            if name not in layout or list(layout[name][3]) != shape:
                raise Corrupt(f"section {name} is missing or has another shape")
        if in_sidecar and (
            self.sidecar is None or not isinstance(meta["vectors"], dict) or set(meta["vectors"]) != set(rows)
        ):
            raise Corrupt("no vectors sidecar, or the run does not say where each principal's rows are")

    def _add_rows(
        self,
        run: Run,
        principal: str,
        k: int,
        bulk: Mapping[str, np.ndarray],
        in_sidecar: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
    ) -> None:
        """A principal's `k` rows of a run: its vectors (`in_sidecar`: where they are in the sidecar, else held
        in `bulk`) and its bound projections, to be copied into place by `Run.place`."""
        at = self.filled[principal]
        if in_sidecar is not None:
            offsets, counts, palettes = in_sidecar
            segment: Any = (self.sidecar, offsets, counts, bulk[f"checksums:{principal}"].copy(), palettes)
        else:
            segment = bulk[f"vectors:{principal}"].copy()
        run.vectors.append((self.source(principal), segment))
        digest = run.meta["bases"].get(principal)
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


def _sections(
    body: bytes, layout: Mapping[str, Any]
) -> tuple[dict[str, tuple[bytes, str | None, list[int] | None]], dict[str, np.ndarray]]:
    """A run body cut into its sections: those the run keeps (`_kept`), and the bulk ones (vectors and
    projections, copied into the partitions) as arrays; `Corrupt` for a section that does not fit."""
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
    return kept, bulk


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
