"""Columnar snapshots of the derived state: opening a large store reads a few blobs, not every record.

A *run* stands for the derived records stored in one contiguous range of the records
table (``after < seq <= upto``): the episodes (as columns), their problem vectors, texts
and citations, the edges, fact versions and reinforcement marks, plus the relevance-bound
projections of the vectors when their partition had a bounding basis. Runs are stored in
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
use (`memory.persistence.lazy`), problem texts, edge ids and mark ids when first asked for.

No pickle: bodies are raw little-endian arrays and UTF-8 JSON.
"""

from __future__ import annotations

import hashlib
import json
import queue
import threading
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from functools import cached_property
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from memory.episodes import Edge, EdgeType, Episode, Outcome
from memory.persistence.vectors import DIGEST_BYTES, StoredRows, VectorFile

RUN = "open_state/1"  # snapshot kind of runs
BASIS = "bounds_basis/1"  # snapshot kind of a partition's bounding basis (float64, dim × rank)
FORMAT = 2  # layout version inside the kind: 2 keeps the vectors in the sidecar, 1 (still read) in the body
READ_FORMATS = (1, 2)

OUTCOMES = tuple(Outcome)  # outcome codes, by position
OUTCOME_NAMES = tuple(o.value for o in OUTCOMES)  # the same, as the strings graph nodes hold
EDGE_TYPES = tuple(EdgeType)  # edge type codes, by position


def config_digest(config: Any) -> str:
    """Digest of a frozen dataclass configuration (problem vectors depend on the graph rules)."""
    return hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode("utf-8")).hexdigest()[:32]


def _digest(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


# -- writing -------------------------------------------------------------------------------


def encode_run(*, after: int, upto: int, first: tuple[str, str], last: tuple[str, str], config: str, dim: int,
               episodes: Sequence[Episode], problems: Sequence[tuple[str, np.ndarray]],
               cites: Mapping[str, list[str]], edges: Sequence[tuple[str, dict[str, Any]]],
               facts: Sequence[dict[str, Any]], marks: Sequence[tuple[str, str]],
               projections: Mapping[str, tuple[str, np.ndarray, np.ndarray]],
               sidecar: Mapping[str, tuple[int, np.ndarray]] | None = None) -> tuple[dict[str, Any], bytes]:
    """Meta and body of a run (format 2 with `sidecar`, else format 1).

    Args:
        after, upto: the records range the run stands for.
        first, last: (kind, id) of the records at ``after + 1`` and ``upto``.
        config: `config_digest` of the graph rules the problems were computed under.
        dim: vector length.
        episodes: the episode records of the range, in storing order.
        problems: (text, unit vector) of each of them.
        cites: fact ids cited by those of them that cite any.
        edges: (record id, record body) of the edge records, in storing order.
        facts: fact version record bodies, in storing order.
        marks: (mark id, episode id) of the reinforcement marks, in storing order.
        projections: principal → (basis digest, projections, residual norms) of the rows of
            that principal's episodes (in storing order), for principals with a basis.
        sidecar: principal → (first sidecar row, `vectors.row_digests`) of its episodes'
            vectors, written to the store's vectors sidecar beforehand; without it the vectors
            are kept in the body.
    """
    out = _Sections()
    rows = _episode_columns(out, episodes)
    for principal, picked in rows.items():  # one block per principal: copied straight into its partition
        if sidecar is None:
            out.array(f"vectors:{principal}", np.stack([problems[n][1] for n in picked]).reshape(-1, dim), "<f4")
        else:
            out.array(f"digests:{principal}", sidecar[principal][1], "u1")
    out.document("texts", [t for t, _ in problems])
    out.document("cites", {i: list(c) for i, c in cites.items()})
    _link_sections(out, episodes, edges, facts, marks)
    bases = {}
    for principal, (basis, proj, resid) in projections.items():
        bases[principal] = basis
        out.array(f"proj:{principal}", proj, "<f4")
        out.array(f"resid:{principal}", resid, "<f4")
    out.document("strings", list(out.strings))
    layout, body = out.pack()
    meta = {"format": 1 if sidecar is None else FORMAT, "after": after, "upto": upto, "first": list(first), "last": list(last),
            "config": config, "dim": dim, "episodes": len(episodes), "rows": {p: len(r) for p, r in rows.items()},
            "bases": bases, "sections": layout, "size": len(body), "digest": _digest(body)}
    if sidecar is not None:
        meta["vectors"] = {p: int(first) for p, (first, _) in sidecar.items()}
    return meta, body


class _Sections:
    """A run body being written: named sections (arrays or JSON documents) and a string table."""

    def __init__(self) -> None:
        self.sections: list[tuple[str, bytes, str | None, list[int] | None]] = []
        self.strings: dict[str | None, int] = {}

    def code(self, value: str | None) -> int:
        """The string table code of `value` (added on first use)."""
        return self.strings.setdefault(value, len(self.strings))

    def array(self, name: str, values: Any, dtype: str) -> None:
        a = np.ascontiguousarray(values, dtype=dtype)
        self.sections.append((name, a.tobytes(), dtype, list(a.shape)))

    def document(self, name: str, value: Any) -> None:
        data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self.sections.append((name, data, None, None))

    def pack(self) -> tuple[dict[str, list[Any]], bytes]:
        """The layout (name → offset, size, dtype, shape) and the concatenated body."""
        layout, chunks, offset = {}, [], 0
        for name, data, dtype, shape in self.sections:
            layout[name] = [offset, len(data), dtype, shape]
            chunks.append(data)
            offset += len(data)
        return layout, b"".join(chunks)


def _episode_columns(out: _Sections, episodes: Sequence[Episode]) -> dict[str, list[int]]:
    """The episodes as columns; returns each principal's rows."""
    code = out.code
    out.document("ids", [ep.id for ep in episodes])
    out.array("principal", [code(ep.principal) for ep in episodes], "<i4")
    out.array("situation", [code(ep.situation) for ep in episodes], "<i4")
    out.array("subject", [code(ep.subject) for ep in episodes], "<i4")
    out.array("seqs", np.array([(ep.first_seq, ep.last_seq) for ep in episodes]).reshape(-1, 2), "<i8")
    out.array("ends", [ep.end.timestamp() for ep in episodes], "<f8")
    out.array("end_us", [_microseconds(ep.end) for ep in episodes], "<i8")
    out.array("choice", [code(ep.choices[-1]) if ep.choices else -1 for ep in episodes], "<i4")
    out.array("outcome", [OUTCOMES.index(ep.outcome) for ep in episodes], "<i1")
    out.array("corrected", [bool(ep.corrections) for ep in episodes], "u1")
    rows: dict[str, list[int]] = {}
    for n, ep in enumerate(episodes):
        rows.setdefault(ep.principal, []).append(n)
    return rows


def _link_sections(out: _Sections, episodes: Sequence[Episode], edges: Sequence[tuple[str, dict[str, Any]]],
                   facts: Sequence[dict[str, Any]], marks: Sequence[tuple[str, str]]) -> None:
    """Edges, fact versions and reinforcement marks of the range."""
    out.document("edges", [[body["source"], body["target"], EDGE_TYPES.index(EdgeType(body["type"])), body["evidence"]]
                           for _, body in edges])
    out.array("weights", [float(body["weight"]) for _, body in edges], "<f8")
    out.document("edge_ids", [i for i, _ in edges])
    out.document("facts", list(facts))
    out.document("marks", [m for m, _ in marks])
    marked, own = {e for _, e in marks}, {ep.id for ep in episodes}
    out.document("unmarked", [ep.id for ep in episodes if ep.id not in marked])  # learned after the range, or never
    out.document("outside", sorted(marked - own))  # episodes before the range marked in it


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _microseconds(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def run_id(meta: Mapping[str, Any]) -> str:
    """Snapshot id of a run: its range and the digest of its body."""
    return f"{meta['after']}:{meta['upto']}:{meta['digest'][:32]}"


# -- reading -------------------------------------------------------------------------------


class Corrupt(ValueError):
    """A run or basis that does not check out (the caller falls back to the exact path)."""


_BULK = ("vectors:", "digests:", "proj:", "resid:")  # sections copied into the partitions, not kept with the run


class Run:
    """A checked run: its small sections, decoded on first use (the vectors went to `RunReader.sources`)."""

    def __init__(self, meta: Mapping[str, Any], sections: dict[str, tuple[bytes, str | None, list[int] | None]]) -> None:
        self.meta = meta
        self.after: int = int(meta["after"])
        self.upto: int = int(meta["upto"])
        self.rows: dict[str, int] = dict(meta["rows"])  # episodes per principal
        self.offsets: dict[str, int] = {}  # principal → first row of this run in its partition
        self.bases: dict[str, str | None] = {}  # principal → basis digest of its stored projections
        self.copies: list[tuple[np.ndarray, int, np.ndarray]] = []  # (target, first row, rows) still to copy
        self.vectors: list[tuple[StoredRows, Callable[[StoredRows], None]]] = []  # vector segments still to add
        self._sections = sections

    def _array(self, name: str) -> np.ndarray:
        data, dtype, shape = self._sections[name]
        return np.frombuffer(data, dtype=dtype).reshape(shape)

    def _document(self, name: str) -> Any:
        data = self._sections.pop(name)[0]
        return json.loads(data.decode("utf-8"))

    def place(self) -> None:
        """Copy the run's vectors and projections into the principals' arrays (the iterating thread does:
        the reading thread then only reads and digests, so it seldom waits for the interpreter lock)."""
        for target, at, rows in self.copies:
            target[at : at + len(rows)] = rows
        for source, add in self.vectors:
            add(source)
        self.copies, self.vectors = [], []

    def release(self) -> None:
        """Drop the columns only opening needs (what is read later stays)."""
        keep = ("texts", "edge_ids", "marks", "principal", "strings", "outcome", "choice", "end_us")
        self._sections = {name: value for name, value in self._sections.items() if name in keep}
        for loaded in ("edges", "facts", "cites", "unmarked", "outside"):  # in the state now; not kept twice
            self.__dict__.pop(loaded, None)

    def row(self, episode_id: str) -> int:
        """The row of an episode of this run."""
        rows = self.__dict__.get("_rows")
        if rows is None:
            rows = self.__dict__["_rows"] = {i: n for n, i in enumerate(self.ids)}
        return rows[episode_id]

    def verdict(self, row: int) -> tuple[Outcome, str | None, datetime]:
        """Outcome, last structured choice and end of the episode at a row (what its evidence needs)."""
        choice = int(self._array("choice")[row])
        end = _EPOCH + timedelta(microseconds=int(self._array("end_us")[row]))
        return OUTCOMES[int(self._array("outcome")[row])], self.strings[choice] if choice >= 0 else None, end

    def principal_at(self, row: int) -> str:
        return self.strings[int(self._array("principal")[row])]

    @cached_property
    def ids(self) -> list[str]:
        return self._document("ids")

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
        return [(s, t, EDGE_TYPES[k], w, ev) for (s, t, k, ev), w in zip(self._document("edges"), weights)]

    @cached_property
    def edge_ids(self) -> list[str]:
        return self._document("edge_ids")

    @cached_property
    def facts(self) -> list[dict[str, Any]]:
        return self._document("facts")

    @cached_property
    def marks(self) -> list[str]:
        return self._document("marks")

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
            row that fails its digest.
    """

    def __init__(self, store: Any, *, config: str, dim: int, kind: str | None = RUN,
                 sidecar: VectorFile | None = None,
                 recompute: Callable[[str, int], np.ndarray] | None = None) -> None:
        self.store = store
        self.dim = dim
        self.sidecar = sidecar
        self.recompute = recompute
        self.candidates: dict[int, list[tuple[int, dict[str, Any]]]] = {}
        for seq, _, meta in store.snapshot_index(kind) if store.path != ":memory:" and kind is not None else ():
            if isinstance(meta, dict) and meta.get("format") in READ_FORMATS and meta.get("config") == config \
                    and meta.get("dim") == dim and isinstance(meta.get("after"), int) \
                    and isinstance(meta.get("rows"), dict) and isinstance(meta.get("bases"), dict):
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
                self.dim, None if recompute is None else lambda row, who=principal: recompute(who, row))
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
        in_sidecar = meta["format"] == 2
        vectors = {f"digests:{p}": [k, DIGEST_BYTES] for p, k in rows.items()} if in_sidecar else \
            {f"vectors:{p}": [k, dim] for p, k in rows.items()}
        expected = {"principal": [n], "situation": [n], "subject": [n], "ends": [n], "outcome": [n], "corrected": [n],
                    "end_us": [n], "choice": [n], "seqs": [n, 2], **vectors}
        for name, shape in expected.items():
            if name not in layout or list(layout[name][3]) != shape:
                raise Corrupt(f"section {name} is missing or has another shape")
        if in_sidecar:
            firsts = meta["vectors"]
            if self.sidecar is None or not isinstance(firsts, dict) or set(firsts) != set(rows) \
                    or any(not isinstance(firsts[p], int) or not 0 <= firsts[p] <= self.sidecar.rows() - k
                           for p, k in rows.items()):
                raise Corrupt("the vectors sidecar is missing or does not hold the run's rows")
        if any(self.filled.get(p, 0) + k > self.capacity.get(p, 0) for p, k in rows.items()):
            return None
        body = store.snapshot_body(seq)  # one read and one digest per run: the GIL is released for both
        if len(body) != int(meta["size"]) or _digest(body) != meta["digest"]:
            raise Corrupt("body is truncated or altered")
        view = memoryview(body)
        kept: dict[str, tuple[bytes, str | None, list[int] | None]] = {}
        bulk: dict[str, np.ndarray] = {}
        for name, (offset, length, dtype, shape) in layout.items():
            if not 0 <= offset <= offset + length <= len(body) or \
                    dtype is not None and int(np.prod(shape)) * np.dtype(dtype).itemsize != length:
                raise Corrupt(f"section {name} does not fit the body or its shape")
            data = view[offset : offset + length]
            if name.startswith(_BULK):
                bulk[name] = np.frombuffer(data, dtype=dtype).reshape(shape)
            else:
                kept[name] = (bytes(data), dtype, shape)
        run = Run(meta, kept)
        for principal, k in rows.items():
            at = self.filled[principal]
            if in_sidecar:
                first, digests, file = int(meta["vectors"][principal]), bulk[f"digests:{principal}"], self.sidecar
                run.vectors.append((self.source(principal),
                                    lambda source, f=first, d=digests.copy(): source.add_file(file, f, d)))
            else:
                run.vectors.append((self.source(principal),
                                    lambda source, v=bulk[f"vectors:{principal}"].copy(): source.add_array(v)))
            digest = meta["bases"].get(principal)
            proj, resid = bulk.get(f"proj:{principal}"), bulk.get(f"resid:{principal}")
            target = self.proj.get(principal)
            if digest is not None and proj is not None and resid is not None and target is not None \
                    and proj.shape == (k, target.shape[1]) and resid.shape == (k,):
                run.copies.append((target, at, proj))
                run.copies.append((self.resid[principal], at, resid))
                run.bases[principal] = digest
            else:
                run.bases[principal] = None
            run.offsets[principal] = at
            self.filled[principal] = at + k
        return run


def read_basis(store: Any, principal: str, digest: str) -> np.ndarray | None:
    """The bounding basis of `principal` with this digest, when stored intact."""
    for seq, _, meta in store.snapshot_index(BASIS):
        if meta.get("principal") == principal and meta.get("digest") == digest:
            body = store.snapshot_body(seq)
            if _digest(body) == digest:
                try:
                    return np.frombuffer(body, dtype="<f8").reshape(meta["shape"])
                except (ValueError, TypeError):
                    continue
    return None


def basis_digest(basis: np.ndarray) -> str:
    return _digest(np.ascontiguousarray(basis, dtype="<f8").tobytes())
