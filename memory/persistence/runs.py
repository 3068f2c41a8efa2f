"""Columnar snapshots of the derived state: opening a large store reads a few blobs, not every record.

A *run* stands for the derived records stored in one contiguous range of the records
table (``after < seq <= upto``): the episodes (as columns), their problem vectors, texts
and citations, the edges, fact versions and reinforcement marks, plus the relevance-bound
projections of the vectors when their partition had a bounding basis, and (runs written since
they were added; the format did not change) each principal's term counts of its episodes' evidence,
which a first recall adds up instead of reading every episode (`memory.state.TermCounts`). A run of format 4
keeps where its vectors are in the store's vectors sidecar (sparse rows, most of them as
palettes), with their checksums and digests (`memory.persistence.vectors`), and its JSON
documents compressed with zlib; format 3 (still read) has no palette rows; format 2 (still
read) points to dense sidecar rows and keeps its documents as they are; format 1 (still
read) keeps the vectors in the body. Runs are stored in
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
use (`memory.persistence.lazy`), problem texts when asked for (kept compressed, a run's decoded
at a time), edge ids and mark ids when first asked for,
vectors row by row when recall scores them (`memory.persistence.vectors.StoredRows`).
`run_reader` reads and checks runs, `run_encoding` writes them.
The bounding bases the projections were made with are stored apart (`stored_bounds`).

No pickle: bodies are raw little-endian arrays and UTF-8 JSON.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zlib
from collections.abc import Mapping
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any, cast

import numpy as np

from memory.episodes import Outcome
from memory.graph.edges import EdgeType
from memory.persistence.digests import hex_digests
from memory.persistence.sparse_rows import row_offsets
from memory.persistence.vectors import StoredRows

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


PACKED = "zlib"  # the dtype of a JSON section compressed with zlib (in a run of format 3 or 4, and in memory)


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

    def _document(self, name: str, *, keep: bool = False) -> Any:
        """A JSON section, decoded; its bytes are dropped unless `keep`."""
        data, packed, _ = self._sections[name] if keep else self._sections.pop(name)
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
        keep = (
            *("texts", "edge_ids", "marks", "principal", "strings", "outcome", "choice", "end_us", "seqs"),
            "term_counts",
        )
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

    def texts(self) -> list[str]:
        """The problem texts by row, decoded on every call: the run keeps them compressed (a tenth of the
        decoded list's size; `memory.persistence.lazy.RunTexts` keeps the last run's list while its rows are read)."""
        return cast(list[str], self._document("texts", keep=True))

    def counted(self, principal: str) -> tuple[dict[str, Any], list[str]] | None:
        """The term counts stored for a principal's episodes in this run (`memory.state.TermCounts.to_plain`)
        and their ids; None for a run written before they were stored, or without episodes of the principal.
        Decoded on every call (a principal's counts are read once, by its first recall)."""
        if "term_counts" not in self._sections:
            return None
        plain = self._document("term_counts", keep=True).get(principal)
        if plain is None:
            return None
        codes, table = self._array("principal").tolist(), self.strings
        return plain, [i for i, code in zip(self.ids, codes) if table[code] == principal]

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
