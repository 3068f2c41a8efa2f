"""Persistence: an embedded SQLite store, insert-only at the database level.

Only this module (with the index-shaped reads of `memory.timeline.sqlite_reads`) and
`memory.timeline.connection` (which opens the file) touch disk. The tables and the row form
of an entry are in `memory.timeline.schema`; what the rest of the code may call is listed by
the protocols of `memory.timeline.protocols`. Triggers make SQLite itself refuse UPDATE and
DELETE. Appends run in ``BEGIN IMMEDIATE`` transactions, so several processes can append to
one file and the chain stays linear.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import Any

from memory.errors import HeadMoved, ImportFailed, IntegrityError, StoreError
from memory.timeline import anchor as anchor_file
from memory.timeline import erasure, erasure_sqlite, portable, record_body, sidecars
from memory.timeline import integrity as anchors
from memory.timeline import sqlite_reads as reads
from memory.timeline.batch import chained_entries, chained_ids
from memory.timeline.connection import WriteTransaction, open_database, open_read_only
from memory.timeline.entries import (
    GENESIS_ID,
    ChainBreak,
    Entry,
    EntryDraft,
    Kind,
    verify_chain,
)
from memory.timeline.protocols import EntryParts, StoreStats
from memory.timeline.schema import (
    COLUMNS,
    READ_COLUMNS,
    SCHEMA_VERSION,
    Prepared,
    RecordKind,
    chained_rows,
    entry_to_row,
    imported_blobs,
    kind_text,
    linked_rows,
    pack_embeddings,
    prepare,
    row_to_entry,
    rows_to_entries,
    stream_entries,
    vectors_of,
)


class SQLiteStore:
    """The default store: one SQLite file in WAL mode, or ``":memory:"``.

    Args:
        path: database file, or ``":memory:"``.
        create: create the file when missing; when False a missing file is a `StoreError`.
        synchronous: SQLite ``synchronous`` level. ``"FULL"`` (default) makes every commit
            survive power loss; ``"NORMAL"`` in WAL mode survives process crashes only.
        lock_timeout: seconds to wait for another writer's lock.
        read_only: open an existing file for reading alone (`connection.open_read_only`), e.g. to
            inspect or export a store an ordinary open refuses as damaged; every write is a `StoreError`.
    """

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        create: bool = True,
        synchronous: str = "FULL",
        lock_timeout: float = 30.0,
        read_only: bool = False,
    ) -> None:
        self.path = str(path)
        self._lock_timeout = lock_timeout
        self.read_only = read_only
        if self.path != ":memory:" and not read_only:  # before anything is written: a link would be written through
            sidecars.refuse_links(self.path)
        self._db, self._schema = (
            open_read_only(self.path)
            if read_only
            else open_database(self.path, create=create, synchronous=synchronous, lock_timeout=lock_timeout)
        )
        durable = synchronous.upper() in ("FULL", "EXTRA")
        self._anchor = anchor_file.Writer(self.path, durable=durable) if self.path != ":memory:" else None
        self.vectors_path = f"{self.path}-vectors" if self.path != ":memory:" else None  # `memory.persistence.vectors`
        # A file keeps a hashing-encoder vector as its text alone (recomputed on read); a store
        # in memory keeps the vector, since it has no disk to save and reads back often.
        self._derive = self.path != ":memory:"
        if self.path != ":memory:" and not read_only:
            try:
                anchors.refuse_open(self._db, self.path, lock_timeout)  # a lost tail, a rewound schema version
                if erasure_sqlite.outdated_sqlite_triggers(self._db):  # erased under triggers not asking for a seal
                    with WriteTransaction(self._db, self.path, lock_timeout):
                        for statement in erasure_sqlite.SQLITE_DDL:
                            self._db.execute(statement)
            except StoreError:
                self._db.close()
                raise

    # -- timeline ---------------------------------------------------------------------

    def _head(self) -> tuple[int, str]:
        """(seq, prev_id) of the entry that would come next."""
        row = self._db.execute("SELECT seq, id FROM timeline ORDER BY seq DESC LIMIT 1").fetchone()
        return (row[0] + 1, row[1]) if row else (0, GENESIS_ID)

    def append(self, draft: EntryDraft) -> Entry:
        """Chain and commit one entry; durable when it returns."""
        return self.append_many([draft])[0]

    def append_many(self, drafts: Sequence[EntryDraft]) -> list[Entry]:
        """Chain and commit many entries in one transaction."""
        # Under the write lock, only the ids and rows: the rest is done before it, the entries after it.
        return self._append_prepared([prepare(drafts, derive=self._derive)]) if drafts else []

    def append_batches(self, batches: Iterable[Sequence[EntryDraft]]) -> list[Entry]:
        """Chain and commit the drafts of every batch in one transaction, each prepared and inserted as it comes
        (`Timeline`'s workers make the next batch meanwhile). An error of `batches` commits nothing."""
        return self._append_prepared(prepare(drafts, derive=self._derive) for drafts in batches)

    def _append_prepared(self, prepared: Iterable[Prepared]) -> list[Entry]:
        chained = []  # (batch, ids, previous id, first seq)
        with self._write() as sealing:
            seq, prev_id = sealing.before.entries, sealing.before.head  # (the head `_head()` reads)
            for part in prepared:
                ids = chained_ids(part.batch, part.id_texts, part.digests, prev_id=prev_id, seq=seq)
                self._insert_linked(chained_rows(part, ids, seq=seq, prev_id=prev_id, linked=True))
                chained.append((part.batch, ids, prev_id, seq))
                prev_id, seq = (ids[-1] if ids else prev_id), seq + len(ids)
            sealing.appended_only(seq, prev_id)
        self._schema = SCHEMA_VERSION
        return [e for batch, ids, prev, first in chained for e in chained_entries(batch, ids, prev_id=prev, seq=first)]

    def _insert_rows(self, rows: Sequence[tuple[Any, ...]], head: tuple[int, str] | None = None) -> None:
        """Insert timeline rows inside the caller's write transaction (`head`: `_head()` if the caller read it),
        marking an older store with this schema (the caller sets ``_schema`` once it commits)."""
        seq, head_id = head or self._head()
        self._insert_linked(linked_rows(rows, head_id if rows and seq > 0 and rows[0][0] == seq else None))

    def _insert_linked(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """`_insert_rows` of rows whose previous ids are already `schema.LINKED` where they link."""
        if self._schema != SCHEMA_VERSION:
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self._db.executemany(f"INSERT INTO timeline ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)

    def entry_rows(self) -> list[tuple[Any, ...]]:
        """Every timeline row exactly as stored (columns in `schema.COLUMNS` order), in timeline order: raw rows
        for copying a timeline as it is (`insert_entry_rows`), e.g. to time SQLite alone on the same rows."""
        return self._db.execute(f"SELECT {COLUMNS} FROM timeline ORDER BY seq").fetchall()

    def insert_entry_rows(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert rows of `entry_rows` as they are, in one write transaction. Nothing is chained, hashed or
        checked here: the rows must continue this store's chain, or `verify` names the first that does not."""
        with self._write():
            self._insert_rows(rows)
        self._schema = SCHEMA_VERSION

    def get(self, entry_id: str) -> Entry | None:
        """The entry with this id, or None."""
        row = self._db.execute(f"SELECT {READ_COLUMNS} FROM timeline WHERE id = ?", (entry_id,)).fetchone()
        return row_to_entry(row) if row else None

    def get_many(self, entry_ids: Sequence[str]) -> list[Entry]:
        """Entries for `entry_ids`, in the given order; unknown ids are skipped."""
        found = {entry.id: entry for entry in rows_to_entries(reads.by_ids(self._db, READ_COLUMNS, entry_ids))}
        return [found[i] for i in entry_ids if i in found]

    def entries(
        self, *, start: int = 0, stop: int | None = None, principal: str | None = None, situation: str | None = None
    ) -> Iterator[Entry]:
        """Entries in timeline order, optionally by sequence range, principal and situation."""
        clauses: list[str] = ["seq >= ?"]
        params: list[int | str] = [start]
        if stop is not None:
            clauses.append("seq < ?")
            params.append(stop)
        if principal is not None:
            clauses.append("principal = ?")
            params.append(principal)
        if situation is not None:
            clauses.append("situation = ?")
            params.append(situation)
        query = f"SELECT {READ_COLUMNS} FROM timeline WHERE {' AND '.join(clauses)} ORDER BY seq"
        yield from stream_entries(self._db.execute(query, params))

    def __len__(self) -> int:
        """The number of entries."""
        return self._db.execute("SELECT COUNT(*) FROM timeline").fetchone()[0]

    def tail(self, principal: str, n: int) -> list[Entry]:
        """The last `n` entries of a principal, oldest first (reads only those rows)."""
        return reads.tail(self._db, principal, n) if n > 0 else []

    def entry_parts(self, entry_ids: Sequence[str]) -> dict[str, EntryParts]:
        """What indexing an episode reads of its entries, by id; unknown ids are absent.

        Lighter than `get_many`: no timestamps or enums beyond the kind, metadata parsed
        only for decisions, embeddings as read-only views of the stored bytes.
        """
        rows = reads.by_ids(self._db, "id, kind, text, metadata, embedding, encoder", entry_ids)
        decision = Kind.DECISION.value
        vectors = vectors_of(
            [row[4] for row in rows], [row[2] for row in rows], [row[5] for row in rows], writable=False
        )
        return {
            id_: EntryParts(id_, Kind(kind), text, json.loads(metadata) if kind == decision else {}, vector)
            for (id_, kind, text, metadata, _, _), vector in zip(rows, vectors)
        }

    def decisions_between(self, principal: str, first_seq: int, last_seq: int) -> list[tuple[int, dict[str, Any]]]:
        """(seq, metadata) of a principal's decision entries from `first_seq` to `last_seq`, in order."""
        rows = self._db.execute(
            "SELECT seq, metadata FROM timeline WHERE seq >= ? AND seq <= ? AND +principal = ? "
            "AND kind = ? ORDER BY seq",
            (first_seq, last_seq, principal, Kind.DECISION.value),
        )
        return [(seq, json.loads(metadata)) for seq, metadata in rows]  # (+principal: a range of seqs, not the index)

    # -- derived records ----------------------------------------------------------------

    def add_records(
        self, kind: RecordKind | str, records: Iterable[tuple[str, Mapping[str, Any]]], *, head: int | None = None
    ) -> int:
        """Insert derived records; an existing identical record is skipped. Returns how many were new.

        With `head`, the records are stored only while the timeline's last entry is at that seq
        (checked under the write lock; `HeadMoved` otherwise), e.g. a flush point other writers must see.
        """
        kind = kind_text(kind)
        texts = [
            (record_id, json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
            for record_id, body in records
        ]
        rows, added = [(kind, record_id, record_body.pack(text)) for record_id, text in texts], 0
        if not rows:
            return 0
        with self._write():
            if head is not None and self._head()[0] - 1 != head:
                raise HeadMoved(f"{self.path}: the timeline moved past seq {head}")
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")  # older code cannot read packed bodies
            for row, (_, text) in zip(rows, texts):
                cursor = self._db.execute("INSERT OR IGNORE INTO records (kind, id, body) VALUES (?,?,?)", row)
                if cursor.rowcount:
                    added += 1
                else:
                    stored = self._db.execute("SELECT body FROM records WHERE kind = ? AND id = ?", row[:2]).fetchone()
                    if record_body.unpack(stored[0]) != text:
                        raise IntegrityError(f"{kind} record {row[1]} already stored with different content")
        return added

    def others_wrote(self) -> bool:
        """Whether another connection committed to the file since the last call (SQLite's data_version)."""
        version = self._db.execute("PRAGMA data_version").fetchone()[0]
        changed, self._data_version = version != getattr(self, "_data_version", None), version
        return changed

    def records(self, kind: RecordKind | str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(id, body) of the records of one kind, in insertion order (`DamagedStore` for a body not a JSON object)."""
        name = kind_text(kind)
        for seq, record_id, body in reads.records_in_order(self._db, name, "seq, id, body"):
            yield record_id, record_body.decoded(self.path, name, record_id, body, seq)

    def add_snapshot(self, kind: str, snapshot_id: str, meta: Mapping[str, Any], body: bytes) -> bool:
        """Insert a derived binary snapshot (ignored when one with this kind and id exists); whether it was new."""
        text = json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        with self._write():
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO snapshots (kind, id, meta, body) VALUES (?,?,?,?)",
                (kind, snapshot_id, text, body),
            )
        return bool(cursor.rowcount)

    def snapshots(self, kind: str) -> Iterator[tuple[str, dict[str, Any], bytes]]:
        """(id, meta, body) of the snapshots of one kind, in insertion order."""
        for snapshot_id, meta, body in self._db.execute(
            "SELECT id, meta, body FROM snapshots WHERE kind = ? ORDER BY seq", (kind,)
        ):
            yield snapshot_id, json.loads(meta), body

    # -- reads for opening from snapshots ------------------------------------------------------

    def records_after(self, kind: RecordKind | str, after: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """Records of one kind stored after record `after` (a records seq), in insertion order."""
        kind = kind_text(kind)
        for seq, record_id, body in self._db.execute(
            f"SELECT seq, id, body FROM records WHERE seq > ? AND +kind = ? AND {anchors.SEALED} ORDER BY seq",
            (after, kind),
        ):
            yield record_id, record_body.decoded(self.path, kind, record_id, body, seq)

    def record(self, kind: RecordKind | str, record_id: str) -> dict[str, Any] | None:
        """The body of one record, or None."""
        kind = kind_text(kind)
        try:
            row = self._db.execute(
                f"SELECT body, seq FROM records WHERE kind = ? AND id = ? AND {anchors.SEALED}", (kind, record_id)
            ).fetchone()
        except sqlite3.ProgrammingError as exc:
            raise StoreError(
                f"{self.path}: the store is closed ({kind} {record_id[:12]}… was not read before)"
            ) from exc
        return record_body.decoded(self.path, kind, record_id, *row) if row else None

    def record_ids(self, kind: RecordKind | str) -> list[str]:
        """The ids of the records of one kind, in no particular order (the (kind, id) index alone is read)."""
        return [row[0] for row in self._db.execute("SELECT id FROM records WHERE kind = ?", (kind_text(kind),))]

    def record_at(self, seq: int) -> tuple[str, str] | None:
        """(kind, id) of the record stored at `seq`, or None."""
        row = self._db.execute("SELECT kind, id FROM records WHERE seq = ?", (seq,)).fetchone()
        return (row[0], row[1]) if row else None

    def last_record(self) -> int:
        """The seq of the last stored record (0 when there is none)."""
        return self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()[0]

    def record_rows(
        self, after: int, upto: int, *, bodies: Collection[str] | None = None
    ) -> list[tuple[int, str, str, str | None]]:
        """(seq, kind, id, body JSON text) of the records ``after < seq <= upto``.

        Only the records of kinds in `bodies` (every kind when None) come with their body; the others' is None.
        """
        return reads.record_rows(self._db, self.path, after, upto, bodies)

    def snapshot_index(self, kind: str) -> list[tuple[int, str, dict[str, Any]]]:
        """(seq, id, meta) of the snapshots of one kind, in insertion order, without their bodies."""
        return [
            (seq, snapshot_id, json.loads(meta))
            for seq, snapshot_id, meta in self._db.execute(
                "SELECT seq, id, meta FROM snapshots WHERE kind = ? ORDER BY seq", (kind,)
            )
        ]

    def snapshot_body(self, seq: int) -> bytes:
        """The body of the snapshot stored at `seq` (empty when there is none).

        Read with SQLite's incremental blob I/O: large bodies are copied once, not three times.
        """
        try:
            with self._db.blobopen("snapshots", "body", seq, readonly=True) as blob:
                return blob.read()
        except sqlite3.OperationalError:  # no such row, or a body not stored as a blob
            row = self._db.execute("SELECT CAST(body AS BLOB) FROM snapshots WHERE seq = ?", (seq,)).fetchone()
            return row[0] if row else b""

    def principals(self) -> list[str]:
        """Distinct tenants in the timeline, sorted (one index seek each)."""
        return reads.principals(self._db)

    def principal_count(self) -> int:
        """Distinct tenants in the timeline."""
        return self._db.execute("SELECT COUNT(DISTINCT principal) FROM timeline").fetchone()[0]

    def has_record(self, kind: RecordKind | str, record_id: str) -> bool:
        """Whether a derived record of this kind and id exists."""
        kind = kind_text(kind)
        return (
            self._db.execute("SELECT 1 FROM records WHERE kind = ? AND id = ?", (kind, record_id)).fetchone()
            is not None
        )

    # -- integrity, portability, stats ---------------------------------------------------

    def verify(self) -> ChainBreak | None:
        """Recompute the whole chain; the first bad entry, or None when intact."""
        unreadable: list[ChainBreak] = []
        try:
            brk = verify_chain(
                reads.readable_entries(self._db, unreadable), erased=erasure_sqlite.sqlite_marks(self._db).entries
            )
        except reads.UNREADABLE as exc:
            return ChainBreak(-1, "?", f"unreadable row: {exc}")
        return unreadable[0] if unreadable else brk

    def erase(self, plan: erasure.ErasurePlan) -> bool:
        """Apply an erasure plan (`memory.timeline.erasure`) in one write transaction, then purge the file.

        Returns whether no copy of the erased content is left in the file and its ``-wal``.
        """
        self._db.execute("PRAGMA secure_delete = ON")
        try:
            with self._write():
                anchors.seal(self._db)  # rows of a store written before digests get theirs before any is deleted
                newest = erasure_sqlite.record_sqlite(self._db, plan)
                anchors.seal(self._db)  # the record's authority: the triggers blank nothing before it is sealed
                erasure_sqlite.blank_sqlite(self._db, plan, newest)
        finally:
            self._db.execute("PRAGMA secure_delete = OFF")
        if self.vectors_path:  # no run refers to it now, and it may hold vectors of the erased text
            Path(self.vectors_path).unlink(missing_ok=True)
        return self.path == ":memory:" or erasure_sqlite.purge_sqlite(self._db)

    def export_jsonl(self, out: str | Path) -> int:
        """Write every entry as one JSON line, atomically (`memory.timeline.portable`); the number written."""
        return portable.export_jsonl(self, out)

    def import_jsonl(self, source: str | Path) -> int:
        """Append the entries of a JSONL export, all or nothing.

        The file's chain must continue this store's head (an empty store takes a full
        export). Every line is checked and every id recomputed. On the first bad, torn or
        unlinked record an `ImportFailed` names the file and line and nothing is imported.
        """
        parsed, line_of = portable.parse_jsonl(source)
        consumed = [0]

        def counted() -> Iterator[Entry]:
            for index, entry in enumerate(parsed):
                consumed[0] = index
                yield entry

        with self._write():
            seq, prev_id = self._head()
            brk = verify_chain(counted(), start_prev_id=prev_id, start_seq=seq)
            if brk is not None:
                raise ImportFailed(str(source), line_of[consumed[0]], f"entry {brk.id[:12]}…: {brk.reason}")
            blobs = imported_blobs(parsed) if self._derive else pack_embeddings([e.embedding for e in parsed])
            self._insert_rows([entry_to_row(entry, blob) for entry, blob in zip(parsed, blobs)], head=(seq, prev_id))
        self._schema = SCHEMA_VERSION
        return len(parsed)

    def stats(self) -> StoreStats:
        """Counts of entries, tenants, situations and derived records."""
        return portable.sqlite_stats(self._db, len(self))

    def close(self) -> None:
        """Close the connection and the anchor file (idempotent)."""
        if self._anchor is not None:
            self._anchor.close()
        with suppress(sqlite3.Error):
            self._db.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self) -> AbstractContextManager[anchors.Sealing]:
        """One write transaction that seals its derived rows and anchors what it commits (`anchors.sealed`)."""
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only (for inspection): nothing is written")
        return anchors.sealed(self._db, self.path, self._anchor, self._lock_timeout)
