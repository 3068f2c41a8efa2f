"""Columnar snapshots of the derived state: opening a large store reads a few blobs, not every record.

A *run* stands for the derived records stored in one contiguous range of the records
table (``after < seq <= upto``): the episodes (as columns), their problem vectors, texts
and citations, the edges, fact versions and reinforcement marks, plus the relevance-bound
projections of the vectors when their partition had a bounding basis. Runs are stored in
the insert-only snapshots table (kind `RUN`), each in its own transaction; the timeline
and the records are never touched, so a crash while writing one leaves a valid store.

Opening follows the runs from the first record onwards and loads the records after the
last usable one the exact way. A run is used only when everything checks out: its format
and the graph configuration its problems were computed under, the sha256 of every section
of its body (a truncated or altered body fails), and the records at both ends of its range
(the records are insert-only and content-addressed, so a run made of another store or
another range fails). Anything else falls back to the exact path; a run can make opening
faster, never different.

No pickle: bodies are raw little-endian arrays and UTF-8 JSON.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import MutableMapping, MutableSequence, MutableSet
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from memory.episodes import Edge, EdgeType, Episode, Outcome

RUN = "open_state/1"  # snapshot kind of runs
BASIS = "bounds_basis/1"  # snapshot kind of a partition's bounding basis (float64, dim × rank)
FORMAT = 1  # layout version inside the kind

EPISODE, EDGE, FACT, MARK = "episode", "edge", "fact_version", "reinforcement"  # the record kinds a run holds
OUTCOMES = tuple(Outcome)  # outcome codes, by position
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
               projections: Mapping[str, tuple[str, np.ndarray, np.ndarray]]) -> tuple[dict[str, Any], bytes]:
    """Meta and body of a run.

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
    """
    sections: list[tuple[str, bytes, str | None, list[int] | None]] = []

    def array(name: str, values: np.ndarray, dtype: str) -> None:
        a = np.ascontiguousarray(values, dtype=dtype)
        sections.append((name, a.tobytes(), dtype, list(a.shape)))

    def document(name: str, value: Any) -> None:
        sections.append((name, json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"), None, None))

    strings: dict[str | None, int] = {}
    code = lambda s: strings.setdefault(s, len(strings))  # noqa: E731
    document("ids", [ep.id for ep in episodes])
    array("principal", [code(ep.principal) for ep in episodes], "<i4")
    array("situation", [code(ep.situation) for ep in episodes], "<i4")
    array("subject", [code(ep.subject) for ep in episodes], "<i4")
    array("seqs", [(ep.first_seq, ep.last_seq) for ep in episodes] or np.zeros((0, 2)), "<i8")
    array("ends", [ep.end.timestamp() for ep in episodes], "<f8")
    array("outcome", [OUTCOMES.index(ep.outcome) for ep in episodes], "<i1")
    array("corrected", [bool(ep.corrections) for ep in episodes], "u1")
    array("vectors", np.stack([v for _, v in problems]) if problems else np.zeros((0, dim)), "<f4")
    document("texts", [t for t, _ in problems])
    document("cites", {i: list(c) for i, c in cites.items()})
    document("edges", [[body["source"], body["target"], EDGE_TYPES.index(EdgeType(body["type"])), body["evidence"]]
                       for _, body in edges])
    array("weights", [float(body["weight"]) for _, body in edges], "<f8")
    document("edge_ids", [i for i, _ in edges])
    document("facts", list(facts))
    document("marks", [m for m, _ in marks])
    marked, own = {e for _, e in marks}, {ep.id for ep in episodes}
    document("unmarked", [ep.id for ep in episodes if ep.id not in marked])  # learned after the range, or never
    document("outside", sorted(marked - own))  # episodes before the range marked in it
    bases = {}
    for principal, (basis, proj, resid) in projections.items():
        bases[principal] = basis
        array(f"proj:{principal}", proj, "<f4")
        array(f"resid:{principal}", resid, "<f4")
    document("strings", list(strings))
    layout, chunks, offset = {}, [], 0
    for name, data, dtype, shape in sections:
        layout[name] = [offset, len(data), _digest(data), dtype, shape]
        chunks.append(data)
        offset += len(data)
    meta = {"format": FORMAT, "after": after, "upto": upto, "first": list(first), "last": list(last),
            "config": config, "dim": dim, "episodes": len(episodes), "bases": bases, "sections": layout}
    return meta, b"".join(chunks)


def run_id(meta: Mapping[str, Any], body: bytes) -> str:
    """Snapshot id of a run: its range and the digest of its body."""
    return f"{meta['after']}:{meta['upto']}:{_digest(body)[:32]}"


# -- reading -------------------------------------------------------------------------------


class Corrupt(ValueError):
    """A run or basis that does not check out (the caller falls back to the exact path)."""


class Run:
    """A verified run, decoded column by column on first use."""

    def __init__(self, meta: Mapping[str, Any], body: bytes) -> None:
        self.meta = meta
        self.after: int = int(meta["after"])
        self.upto: int = int(meta["upto"])
        self._body = memoryview(body)
        layout = meta["sections"]
        if not isinstance(layout, dict):
            raise Corrupt("no section table")
        for name, (offset, length, digest, _, _) in layout.items():
            if offset < 0 or offset + length > len(body) or _digest(self._body[offset : offset + length]) != digest:
                raise Corrupt(f"section {name} is truncated or altered")
        self._layout = layout
        n = int(meta["episodes"])
        for name in ("principal", "situation", "subject", "ends", "outcome", "corrected"):
            if self._array(name).shape != (n,):
                raise Corrupt(f"section {name} does not have {n} rows")
        if self._array("seqs").shape != (n, 2) or self._array("vectors").shape != (n, int(meta["dim"])):
            raise Corrupt("episode sections disagree on their rows")
        if len(self.ids) != n:
            raise Corrupt("episode ids disagree with the count")

    def _array(self, name: str) -> np.ndarray:
        offset, length, _, dtype, shape = self._layout[name]
        return np.frombuffer(self._body[offset : offset + length], dtype=dtype).reshape(shape)

    def _document(self, name: str) -> Any:
        kept = getattr(self, "_kept", None)
        if kept is not None and name in kept:
            return json.loads(kept.pop(name).decode("utf-8"))
        offset, length = self._layout[name][:2]
        return json.loads(bytes(self._body[offset : offset + length]).decode("utf-8"))

    def release(self) -> None:
        """Drop the body, keeping only what is read later (texts, ids, principal codes): frees the vectors."""
        keep = {}
        for name in ("texts", "edge_ids", "marks"):
            offset, length = self._layout[name][:2]
            keep[name] = bytes(self._body[offset : offset + length])
        principals = self._array("principal").copy()
        self._body = memoryview(b"")
        self._kept = keep
        self._principals = principals

    def row(self, episode_id: str) -> int:
        """The row of an episode of this run."""
        rows = self.__dict__.get("_rows")
        if rows is None:
            rows = self.__dict__["_rows"] = {i: n for n, i in enumerate(self.ids)}
        return rows[episode_id]

    def principal_at(self, row: int) -> str:
        codes = self._principals if hasattr(self, "_principals") else self._array("principal")
        return self.strings[int(codes[row])]

    @cached_property
    def ids(self) -> list[str]:
        return self._document("ids")

    @cached_property
    def strings(self) -> list[str | None]:
        return self._document("strings")

    def column(self, name: str) -> np.ndarray:
        """A numeric column: principal, situation, subject (string codes), seqs, ends, outcome, corrected, vectors."""
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
    def edges(self) -> list[Edge]:
        weights = self._array("weights").tolist()
        return [Edge(s, t, EDGE_TYPES[k], w, ev) for (s, t, k, ev), w in zip(self._document("edges"), weights)]

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

    def projections(self, principal: str) -> tuple[str, np.ndarray, np.ndarray] | None:
        """(basis digest, projections, residual norms) of a principal's rows, when stored."""
        basis = self.meta["bases"].get(principal)
        if basis is None:
            return None
        return basis, self._array(f"proj:{principal}"), self._array(f"resid:{principal}")


def read_runs(store: Any, *, config: str, dim: int) -> list[Run]:
    """The usable runs of a store, in records order from the first record on (see the module docstring)."""
    candidates: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for seq, _, meta in store.snapshot_index(RUN):
        if isinstance(meta, dict) and meta.get("format") == FORMAT and meta.get("config") == config \
                and meta.get("dim") == dim and isinstance(meta.get("after"), int):
            candidates.setdefault(meta["after"], []).append((seq, meta))
    runs: list[Run] = []
    after, last = 0, store.last_record()
    while after in candidates:
        found = None
        for seq, meta in candidates[after]:
            try:
                upto = int(meta["upto"])
                if not after < upto <= last:
                    continue
                if store.record_at(after + 1) != tuple(meta["first"]) or store.record_at(upto) != tuple(meta["last"]):
                    continue  # made of other records
                found = Run(meta, store.snapshot_body(seq))
                break
            except (Corrupt, KeyError, TypeError, ValueError):
                continue
        if found is None:
            break
        runs.append(found)
        after = found.upto
    return runs


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


# -- lazily read episodes ----------------------------------------------------------------------


class _Later:
    """Marks values not read yet, with where to read them from."""

    __slots__ = ("source",)

    def __init__(self, source: Any) -> None:
        self.source = source


class LazyMap(MutableMapping):
    """A dict whose deferred values are read on first use by ``read(key, source)``, in insertion order.

    Used for episodes (each value is `Episode.from_record` of the stored record, as an exact
    load makes it) and problems; keys, order and length are there from the start.
    """

    def __init__(self, read: Callable[[Any, Any], Any]) -> None:
        self._read = read
        self._known: dict[Any, Any] = {}

    def defer(self, keys: Iterable[Any], source: Any = None) -> None:
        """Add keys whose values are read on first use."""
        self._known.update(dict.fromkeys(keys, _Later(source)))

    def __getitem__(self, key: Any) -> Any:
        value = self._known[key]
        if type(value) is _Later:
            value = self._read(key, value.source)
            if value is None:
                raise KeyError(key)
            self._known[key] = value
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return key in self._known

    def __setitem__(self, key: Any, value: Any) -> None:
        self._known[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._known[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._known)

    def __len__(self) -> int:
        return len(self._known)


class LazySet(MutableSet):
    """A set with members still to be added by loaders, run on first use."""

    def __init__(self) -> None:
        self._members: set[Any] = set()
        self._pending: list[Callable[[], Iterable[Any]]] = []

    def defer(self, load: Callable[[], Iterable[Any]]) -> None:
        self._pending.append(load)

    def _ready(self) -> set[Any]:
        while self._pending:
            self._members.update(self._pending.pop(0)())
        return self._members

    def __contains__(self, item: object) -> bool:
        return item in self._ready()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._ready())

    def __len__(self) -> int:
        return len(self._ready())

    def add(self, item: Any) -> None:
        self._members.add(item)

    def discard(self, item: Any) -> None:
        self._ready().discard(item)

    def update(self, items: Iterable[Any]) -> None:
        self._members.update(items)


class EpisodeList(MutableSequence):
    """A partition's episodes by row: ids, each episode looked up (and so read lazily) on use."""

    def __init__(self, ids: Iterable[str], lookup: Mapping[str, Episode]) -> None:
        self._ids = list(ids)
        self._lookup = lookup

    def __getitem__(self, row: Any) -> Any:
        if isinstance(row, slice):
            return [self._lookup[i] for i in self._ids[row]]
        return self._lookup[self._ids[row]]

    def __len__(self) -> int:
        return len(self._ids)

    def __setitem__(self, row: Any, episode: Any) -> None:
        raise TypeError("partition rows are append-only")

    def __delitem__(self, row: Any) -> None:
        raise TypeError("partition rows are append-only")

    def insert(self, row: int, episode: Episode) -> None:
        if row != len(self._ids):
            raise TypeError("partition rows are append-only")
        self._ids.append(episode.id)

    def append(self, episode: Episode) -> None:
        self._ids.append(episode.id)


# -- lazily filled node attributes ---------------------------------------------------------------

DEFERRED = ("episode", "start", "end", "summary")  # node attributes read from the episode record on first use


class Pending:
    """Placeholder of a deferred node attribute: where to read the episode from."""

    __slots__ = ("episodes", "episode_id")

    def __init__(self, episodes: Mapping[str, Episode], episode_id: str) -> None:
        self.episodes = episodes
        self.episode_id = episode_id


class NodeAttrs(dict):
    """Node attribute dict whose `DEFERRED` values are filled from the episode on first read.

    Keys are always all present; reading any deferred value (or iterating values/items,
    copying, comparing) fills them, so callers see the same dict an eager build makes.
    """

    __slots__ = ()

    def _fill(self) -> None:
        pending = dict.get(self, "episode")
        if type(pending) is Pending:
            ep = pending.episodes[pending.episode_id]
            dict.update(self, episode=ep, start=ep.start, end=ep.end, summary=ep.summary)

    def __getitem__(self, key: Any) -> Any:
        if key in DEFERRED:
            self._fill()
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        if key in DEFERRED:
            self._fill()
        return dict.get(self, key, default)

    def __iter__(self) -> Iterator[Any]:  # dict(d), {**d} and d.update(other) then go through keys and []
        self._fill()
        return dict.__iter__(self)

    def items(self) -> Any:
        self._fill()
        return dict.items(self)

    def values(self) -> Any:
        self._fill()
        return dict.values(self)

    def copy(self) -> dict:
        self._fill()
        return dict(dict.items(self))

    def pop(self, key: Any, *default: Any) -> Any:
        self._fill()
        return dict.pop(self, key, *default)

    def popitem(self) -> Any:
        self._fill()
        return dict.popitem(self)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self._fill()
        return dict.setdefault(self, key, default)

    def __eq__(self, other: object) -> bool:
        self._fill()
        if isinstance(other, NodeAttrs):
            other._fill()
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        self._fill()
        return dict.__repr__(self)

    def __reduce__(self) -> Any:
        self._fill()
        return (dict, (dict(dict.items(self)),))
