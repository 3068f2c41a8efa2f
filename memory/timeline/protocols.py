"""What the memory needs from persistence, as protocols: SQLite now, a server database later.

A store has three parts, each its own protocol: the `EntryLog` of chained timeline entries,
the `RecordLog` of derived insert-only records keyed by ``(kind, id)``, and the
`SnapshotLog` of derived binary snapshots. `Store` combines them with what concerns the
whole file (its path, integrity, portability, counts). `memory.timeline.SQLiteStore` is
the implementation; these protocols list every method the rest of the code calls on it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from memory.timeline.entries import ChainBreak, Entry, EntryDraft, Kind
from memory.timeline.schema import RecordKind

if TYPE_CHECKING:  # erasure reads stores through these protocols
    from memory.timeline.erasure import ErasurePlan


class StoreStats(NamedTuple):
    """Counts that describe a store."""

    entries: int  # timeline entries
    principals: int  # distinct tenants
    situations: dict[str, int]  # entries per situation label (erased entries have none)
    records: dict[str, int]  # derived records per kind
    first: str | None  # timestamp of the first entry
    last: str | None  # timestamp of the last entry
    encoders: list[str]  # encoders that made the stored embeddings (erased entries name none)
    erased: int = 0  # entries whose content was erased (left out of `situations` and `encoders`)


class EntryParts(NamedTuple):
    """The parts of an entry that indexing an episode reads (see `EntryLog.entry_parts`)."""

    id: str  # entry id
    kind: Kind  # what it is
    text: str  # redacted content
    metadata: Mapping[str, Any]  # parsed for decisions only, else empty
    embedding: np.ndarray  # float32 unit vector (read-only)


class EntryLog(Protocol):
    """The timeline: chained entries, append-only."""

    def append(self, draft: EntryDraft) -> Entry:
        """Chain and commit one entry; durable when it returns."""
        ...

    def append_many(self, drafts: Sequence[EntryDraft]) -> list[Entry]:
        """Chain and commit many entries in one transaction."""
        ...

    def get(self, entry_id: str) -> Entry | None:
        """The entry with this id, or None."""
        ...

    def get_many(self, entry_ids: Sequence[str]) -> list[Entry]:
        """Entries for `entry_ids`, in the given order; unknown ids are skipped."""
        ...

    def entries(
        self, *, start: int = 0, stop: int | None = None, principal: str | None = None, situation: str | None = None
    ) -> Iterator[Entry]:
        """Entries in timeline order, optionally by sequence range, principal and situation."""
        ...

    def entry_parts(self, entry_ids: Sequence[str]) -> dict[str, EntryParts]:
        """What indexing an episode reads of its entries, by id; unknown ids are absent."""
        ...

    def decisions_between(self, principal: str, first_seq: int, last_seq: int) -> list[tuple[int, dict[str, Any]]]:
        """(seq, metadata) of a principal's decision entries from `first_seq` to `last_seq`, in order (no text or
        vector is read)."""
        ...

    def tail(self, principal: str, n: int) -> list[Entry]:
        """The last `n` entries of a principal, oldest first."""
        ...

    def principals(self) -> list[str]:
        """Distinct tenants in the timeline, sorted."""
        ...

    def __len__(self) -> int:
        """The number of entries."""
        ...


class RecordLog(Protocol):
    """Derived records (episodes, edges, fact versions, ...), insert-only, in insertion order."""

    def add_records(
        self, kind: RecordKind | str, records: Iterable[tuple[str, Mapping[str, Any]]], *, head: int | None = None
    ) -> int:
        """Insert derived records; an existing identical record is skipped. Returns how many were new.

        With `head`, only while the timeline's last entry is at that seq (else `HeadMoved`).
        """
        ...

    def others_wrote(self) -> bool:
        """Whether another connection may have committed since the last call (True when unknown)."""
        ...

    def records(self, kind: RecordKind | str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(id, body) of the records of one kind, in insertion order."""
        ...

    def records_after(self, kind: RecordKind | str, after: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """(id, body) of the records of one kind stored after record seq `after`, in order."""
        ...

    def record(self, kind: RecordKind | str, record_id: str) -> dict[str, Any] | None:
        """The body of one record, or None."""
        ...

    def record_ids(self, kind: RecordKind | str) -> list[str]:
        """The ids of the records of one kind, in no particular order (read from the (kind, id) key alone)."""
        ...

    def record_at(self, seq: int) -> tuple[str, str] | None:
        """(kind, id) of the record stored at `seq`, or None."""
        ...

    def last_record(self) -> int:
        """The seq of the last stored record (0 when there is none)."""
        ...

    def record_rows(
        self, after: int, upto: int, *, bodies: Collection[str] | None = None
    ) -> list[tuple[int, str, str, str | None]]:
        """(seq, kind, id, body JSON text) of the records with ``after < seq <= upto``, in order; with
        `bodies`, only records of those kinds come with their body (the others' is None, and not read)."""
        ...


class SnapshotLog(Protocol):
    """Derived binary snapshots (precomputed state), insert-only, in insertion order."""

    def add_snapshot(self, kind: str, snapshot_id: str, meta: Mapping[str, Any], body: bytes) -> bool:
        """Insert a snapshot unless one with this kind and id exists; whether it was new."""
        ...

    def snapshots(self, kind: str) -> Iterator[tuple[str, dict[str, Any], bytes]]:
        """(id, meta, body) of the snapshots of one kind, in insertion order."""
        ...

    def snapshot_index(self, kind: str) -> list[tuple[int, str, dict[str, Any]]]:
        """(seq, id, meta) of the snapshots of one kind, in insertion order, without bodies."""
        ...

    def snapshot_body(self, seq: int) -> bytes:
        """The body of the snapshot stored at `seq` (empty when there is none)."""
        ...


class Store(EntryLog, RecordLog, SnapshotLog, Protocol):
    """A whole store: the three logs plus what concerns the file as one."""

    path: str  # where the store lives, or ":memory:"

    def verify(self) -> ChainBreak | None:
        """Recompute the whole chain; the first bad entry, or None when intact."""
        ...

    def stats(self) -> StoreStats:
        """Counts of entries, tenants, situations and derived records."""
        ...

    def export_jsonl(self, out: str | Path) -> int:
        """Write every entry as one JSON line; returns the number written."""
        ...

    def import_jsonl(self, source: str | Path) -> int:
        """Append the entries of a JSONL export, all or nothing; returns the number appended."""
        ...

    def erase(self, plan: ErasurePlan) -> bool:
        """Apply an `memory.timeline.erasure.ErasurePlan` in one transaction; whether the old bytes were purged."""
        ...

    def close(self) -> None:
        """Release the store (idempotent)."""
        ...
