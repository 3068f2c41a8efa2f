"""Persistence: an embedded SQLite store, insert-only at the database level.

Only this module touches disk. The `timeline` table holds chained entries (embeddings
in the layouts of `memory.embedding_blob`); the
`records` table holds derived, insert-only records (episodes, edges, fact versions,
reinforcement marks) as canonical JSON keyed by ``(kind, id)``. Triggers make SQLite itself
refuse UPDATE and DELETE on both tables. Appends run in ``BEGIN IMMEDIATE`` transactions,
so several processes can append to one file and the chain stays linear.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, NamedTuple, Protocol, Sequence

import numpy as np

from memory import embedding_blob
from memory.errors import ImmutableRecordError, ImportFailed, IntegrityError, StoreError
from memory.timeline import (
    GENESIS_ID,
    ChainBreak,
    Entry,
    EntryDraft,
    Kind,
    Role,
    canonical_fields,
    canonical_metadata,
    chain_canonical,
    embedding_digest,
    format_timestamp,
    parse_timestamp,
    verify_chain,
)

APPLICATION_ID = 0x45504D31  # "EPM1": marks a file as a store of this project
# Schema 2 adds the compact (sparse) embedding layout of `memory.embedding_blob`; schema 1
# stores hold dense blobs only, which schema 2 still reads. A schema 1 store is marked 2 by
# the first transaction that writes entries into it, so older code refuses it with a clear
# message instead of misreading a compact blob.
SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS timeline (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    prev_id TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    principal TEXT NOT NULL,
    situation TEXT NOT NULL,
    role TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    encoder TEXT NOT NULL,
    embedding BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS timeline_scope ON timeline (principal, situation, seq);
CREATE TRIGGER IF NOT EXISTS timeline_no_update BEFORE UPDATE ON timeline
BEGIN SELECT RAISE(ABORT, 'timeline is append-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS timeline_no_delete BEFORE DELETE ON timeline
BEGIN SELECT RAISE(ABORT, 'timeline is append-only: DELETE refused'); END;
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (kind, id)
);
CREATE TRIGGER IF NOT EXISTS records_no_update BEFORE UPDATE ON records
BEGIN SELECT RAISE(ABORT, 'records are insert-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS records_no_delete BEFORE DELETE ON records
BEGIN SELECT RAISE(ABORT, 'records are insert-only: DELETE refused'); END;
"""

# Derived binary snapshots (e.g. precomputed episode vectors), insert-only like records. Added
# after schema 1 without changing it: created on open when missing.
_SNAPSHOTS = """
CREATE TABLE IF NOT EXISTS snapshots (
    seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    meta TEXT NOT NULL,
    body BLOB NOT NULL,
    UNIQUE (kind, id)
);
CREATE TRIGGER IF NOT EXISTS snapshots_no_update BEFORE UPDATE ON snapshots
BEGIN SELECT RAISE(ABORT, 'snapshots are insert-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS snapshots_no_delete BEFORE DELETE ON snapshots
BEGIN SELECT RAISE(ABORT, 'snapshots are insert-only: DELETE refused'); END;
"""

_COLUMNS = "seq, id, prev_id, timestamp, principal, situation, role, kind, text, metadata, encoder, embedding"


class Store(Protocol):
    """What the memory needs from persistence; SQLite now, a server database later."""

    def append(self, draft: EntryDraft) -> Entry:
        """Chain and commit one entry; durable when it returns."""
        ...

    def append_many(self, drafts: Sequence[EntryDraft]) -> list[Entry]:
        """Chain and commit many entries in one transaction."""
        ...

    def get(self, entry_id: str) -> Entry | None:
        """The entry with this id, or None."""
        ...

    def entries(self, *, start: int = 0, stop: int | None = None, principal: str | None = None,
                situation: str | None = None) -> Iterator[Entry]:
        """Entries in timeline order, optionally by sequence range, principal and situation."""
        ...

    def add_records(self, kind: str, records: Iterable[tuple[str, Mapping[str, Any]]]) -> int:
        """Insert derived records; an existing identical record is skipped. Returns how many were new."""
        ...

    def records(self, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """Derived records of one kind, in insertion order."""
        ...


class StoreStats(NamedTuple):
    """Counts that describe a store."""

    entries: int  # timeline entries
    principals: int  # distinct tenants
    situations: dict[str, int]  # entries per situation label
    records: dict[str, int]  # derived records per kind
    first: str | None  # timestamp of the first entry
    last: str | None  # timestamp of the last entry
    encoders: list[str]  # encoders that made the stored embeddings


class EntryParts(NamedTuple):
    """The parts of an entry that indexing an episode reads (see `SQLiteStore.entry_parts`)."""

    id: str  # entry id
    kind: Kind  # what it is
    text: str  # redacted content
    metadata: Mapping[str, Any]  # parsed for decisions only, else empty
    embedding: np.ndarray  # float32 unit vector (read-only)


def _row_to_entry(row: Sequence[Any]) -> Entry:
    seq, id_, prev_id, ts, principal, situation, role, kind, text, metadata, encoder, blob = row
    return Entry(
        id=id_,
        prev_id=prev_id,
        seq=seq,
        timestamp=parse_timestamp(ts),
        principal=principal,
        situation=situation,
        role=Role(role),
        kind=Kind(kind),
        text=text,
        metadata=json.loads(metadata),
        embedding=embedding_blob.unpack(blob, writable=True),
        encoder=encoder,
    )


def _entry_to_row(entry: Entry, blob: bytes | None = None, timestamp: str | None = None,
                  metadata: str | None = None) -> tuple[Any, ...]:
    """The timeline row of an entry; parts already computed by the caller are passed in."""
    return (
        entry.seq,
        entry.id,
        entry.prev_id,
        format_timestamp(entry.timestamp) if timestamp is None else timestamp,
        entry.principal,
        entry.situation,
        entry.role.value,
        entry.kind.value,
        entry.text,
        canonical_metadata(entry.metadata) if metadata is None else metadata,
        entry.encoder,
        embedding_blob.pack(entry.embedding) if blob is None else blob,
    )


def _pack_embeddings(vectors: Sequence[np.ndarray]) -> list[bytes]:
    """Stored blobs of many embeddings, vectorized when they share one dimension."""
    if len(vectors) > 1 and len({np.shape(v) for v in vectors}) == 1 and np.ndim(vectors[0]) == 1:
        return embedding_blob.pack_rows(np.stack(vectors))
    return [embedding_blob.pack(v) for v in vectors]


def entry_to_json(entry: Entry) -> dict[str, Any]:
    """JSON form of an entry (embedding as base64 of little-endian float32)."""
    return {
        "seq": entry.seq,
        "id": entry.id,
        "prev_id": entry.prev_id,
        "timestamp": format_timestamp(entry.timestamp),
        "principal": entry.principal,
        "situation": entry.situation,
        "role": entry.role.value,
        "kind": entry.kind.value,
        "text": entry.text,
        "metadata": entry.metadata,
        "encoder": entry.encoder,
        "embedding": base64.b64encode(np.asarray(entry.embedding, dtype="<f4").tobytes()).decode("ascii"),
    }


def entry_from_json(data: Mapping[str, Any]) -> Entry:
    """Inverse of `entry_to_json`; raises KeyError/ValueError/TypeError on bad input."""
    return Entry(
        id=str(data["id"]),
        prev_id=str(data["prev_id"]),
        seq=int(data["seq"]),
        timestamp=parse_timestamp(str(data["timestamp"])),
        principal=str(data["principal"]),
        situation=str(data["situation"]),
        role=Role(data["role"]),
        kind=Kind(data["kind"]),
        text=str(data["text"]),
        metadata=dict(data["metadata"]),
        embedding=np.frombuffer(base64.b64decode(data["embedding"], validate=True), dtype="<f4").astype(np.float32),
        encoder=str(data["encoder"]),
    )


class SQLiteStore:
    """The default store: one SQLite file in WAL mode, or ``":memory:"``.

    Args:
        path: database file, or ``":memory:"``.
        create: create the file when missing; when False a missing file is a `StoreError`.
        synchronous: SQLite ``synchronous`` level. ``"FULL"`` (default) makes every commit
            survive power loss; ``"NORMAL"`` in WAL mode survives process crashes only.
    """

    def __init__(self, path: str | Path = ":memory:", *, create: bool = True, synchronous: str = "FULL") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            file = Path(self.path)
            if file.is_dir():
                raise StoreError(f"{self.path}: is a directory, not a memory store")
            if not file.exists() and not create:
                raise StoreError(f"{self.path}: no such memory store")
            fresh = not file.exists() or file.stat().st_size == 0
        else:
            fresh = True
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            self._db.execute("PRAGMA busy_timeout = 30000")
            app_id = self._db.execute("PRAGMA application_id").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a memory store ({exc})") from exc
        if not fresh and app_id != APPLICATION_ID:
            self._db.close()
            raise StoreError(f"{self.path}: not a memory store (SQLite file without the store's application id)")
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode = WAL")
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self._db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        if fresh:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executescript(_SCHEMA.replace("\n\n", "\n") + f"PRAGMA application_id = {APPLICATION_ID};"
                                   f"PRAGMA user_version = {SCHEMA_VERSION};")
            self._db.execute("COMMIT") if self._db.in_transaction else None
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version not in READABLE_SCHEMAS:
            raise StoreError(f"{self.path}: store schema version {version}, this code reads "
                             f"{', '.join(map(str, READABLE_SCHEMAS))}")
        self._schema = version
        if self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'snapshots'").fetchone() is None:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executescript(_SNAPSHOTS.replace("\n\n", "\n"))
            self._db.execute("COMMIT") if self._db.in_transaction else None

    # -- timeline ---------------------------------------------------------------------

    def _head(self) -> tuple[int, str]:
        row = self._db.execute("SELECT seq, id FROM timeline ORDER BY seq DESC LIMIT 1").fetchone()
        return (row[0] + 1, row[1]) if row else (0, GENESIS_ID)

    def append(self, draft: EntryDraft) -> Entry:
        return self.append_many([draft])[0]

    def append_many(self, drafts: Sequence[EntryDraft]) -> list[Entry]:
        if not drafts:
            return []
        # Everything but the chain links is computed before the write lock is taken.
        vectors = [np.asarray(draft.embedding, dtype=np.float32) for draft in drafts]
        blobs = _pack_embeddings(vectors)
        digests = [embedding_digest(vector) for vector in vectors]
        fields = [canonical_fields(draft) for draft in drafts]
        with self._write():
            seq, prev_id = self._head()
            entries, rows = [], []
            for draft, canonical, digest, blob in zip(drafts, fields, digests, blobs):
                entry = chain_canonical(draft, canonical, prev_id=prev_id, seq=seq, digest=digest)
                entries.append(entry)
                rows.append(_entry_to_row(entry, blob, canonical.timestamp, canonical.metadata_json))
                prev_id, seq = entry.id, seq + 1
            self._insert_rows(rows)
        self._schema = SCHEMA_VERSION
        return entries

    def _insert_rows(self, rows: list[tuple[Any, ...]]) -> None:
        """Insert timeline rows inside the caller's write transaction, marking a schema 1 store as 2.

        The caller sets ``self._schema`` once the transaction committed (a rollback undoes the mark).
        """
        if self._schema != SCHEMA_VERSION:
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self._db.executemany(f"INSERT INTO timeline ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)

    def get(self, entry_id: str) -> Entry | None:
        row = self._db.execute(f"SELECT {_COLUMNS} FROM timeline WHERE id = ?", (entry_id,)).fetchone()
        return _row_to_entry(row) if row else None

    def get_many(self, entry_ids: Sequence[str]) -> list[Entry]:
        """Entries for `entry_ids`, in the given order; unknown ids are skipped."""
        found: dict[str, Entry] = {}
        for start in range(0, len(entry_ids), 500):
            chunk = list(entry_ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for row in self._db.execute(f"SELECT {_COLUMNS} FROM timeline WHERE id IN ({marks})", chunk):
                entry = _row_to_entry(row)
                found[entry.id] = entry
        return [found[i] for i in entry_ids if i in found]

    def entries(self, *, start: int = 0, stop: int | None = None, principal: str | None = None,
                situation: str | None = None) -> Iterator[Entry]:
        clauses, params = ["seq >= ?"], [start]
        if stop is not None:
            clauses.append("seq < ?")
            params.append(stop)
        if principal is not None:
            clauses.append("principal = ?")
            params.append(principal)
        if situation is not None:
            clauses.append("situation = ?")
            params.append(situation)
        query = f"SELECT {_COLUMNS} FROM timeline WHERE {' AND '.join(clauses)} ORDER BY seq"
        for row in self._db.execute(query, params):
            yield _row_to_entry(row)

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM timeline").fetchone()[0]

    def tail(self, principal: str, n: int) -> list[Entry]:
        """The last `n` entries of a principal, oldest first (reads only those rows)."""
        if n <= 0:
            return []
        # The (principal, situation, seq) index gives each situation's last rows without a sort;
        # the situations are found by seeking, so nothing scales with the principal's history.
        seqs: list[int] = []
        situation = ""
        while True:
            row = self._db.execute("SELECT situation FROM timeline WHERE principal = ? AND situation > ? "
                                   "ORDER BY situation LIMIT 1", (principal, situation)).fetchone()
            if row is None:
                break
            situation = row[0]
            seqs += [r[0] for r in self._db.execute(
                "SELECT seq FROM timeline WHERE principal = ? AND situation = ? ORDER BY seq DESC LIMIT ?",
                (principal, situation, n))]
        last = sorted(seqs)[-n:]
        if not last:
            return []
        marks = ",".join("?" * len(last))
        rows = self._db.execute(f"SELECT {_COLUMNS} FROM timeline WHERE seq IN ({marks}) ORDER BY seq", last)
        return [_row_to_entry(row) for row in rows]

    def entry_parts(self, entry_ids: Sequence[str]) -> dict[str, "EntryParts"]:
        """What indexing an episode reads of its entries, by id; unknown ids are absent.

        Lighter than `get_many`: no timestamps or enums beyond the kind, metadata parsed
        only for decisions, embeddings as read-only views of the stored bytes.
        """
        found: dict[str, EntryParts] = {}
        decision = Kind.DECISION.value
        for start in range(0, len(entry_ids), 900):
            chunk = list(entry_ids[start : start + 900])
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT id, kind, text, metadata, embedding FROM timeline WHERE id IN ({marks})", chunk).fetchall()
            vectors = embedding_blob.unpack_rows([row[4] for row in rows])
            for (id_, kind, text, metadata, _), vector in zip(rows, vectors):
                found[id_] = EntryParts(id_, Kind(kind), text, json.loads(metadata) if kind == decision else {}, vector)
        return found

    # -- derived records ----------------------------------------------------------------

    def add_records(self, kind: str, records: Iterable[tuple[str, Mapping[str, Any]]]) -> int:
        rows = [(kind, record_id, json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
                for record_id, body in records]
        if not rows:
            return 0
        added = 0
        with self._write():
            for row in rows:
                cursor = self._db.execute("INSERT OR IGNORE INTO records (kind, id, body) VALUES (?,?,?)", row)
                if cursor.rowcount:
                    added += 1
                else:
                    stored = self._db.execute("SELECT body FROM records WHERE kind = ? AND id = ?", row[:2]).fetchone()
                    if stored[0] != row[2]:
                        raise IntegrityError(f"{kind} record {row[1]} already stored with different content")
        return added

    def records(self, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for record_id, body in self._in_order(kind, "id, body"):
            yield record_id, json.loads(body)

    def _in_order(self, kind: str, columns: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        """Rows of one record kind in insertion order, read along the primary key.

        Filtering on the (kind, id) index would sort every body in a temporary B-tree (seconds
        at 100,000 episodes); the kind's seq range is found from the index, then scanned in order.
        """
        low, high = self._db.execute("SELECT MIN(seq), MAX(seq) FROM records WHERE kind = ?", (kind,)).fetchone()
        if low is None:
            return self._db.execute("SELECT NULL WHERE 0")
        return self._db.execute(f"SELECT {columns} FROM records WHERE seq BETWEEN ? AND ? AND +kind = ? ORDER BY seq",
                                (*params, low, high, kind))

    def record_field(self, kind: str, field: str) -> Iterator[tuple[str, Any]]:
        """(id, body[field]) of each record of one kind, in insertion order, parsed by SQLite."""
        yield from self._in_order(kind, "id, json_extract(body, ?)", (f"$.{field}",))

    def add_snapshot(self, kind: str, snapshot_id: str, meta: Mapping[str, Any], body: bytes) -> bool:
        """Insert a derived binary snapshot (ignored when one with this kind and id exists); whether it was new."""
        text = json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        with self._write():
            cursor = self._db.execute("INSERT OR IGNORE INTO snapshots (kind, id, meta, body) VALUES (?,?,?,?)",
                                      (kind, snapshot_id, text, body))
        return bool(cursor.rowcount)

    def snapshots(self, kind: str) -> Iterator[tuple[str, dict[str, Any], bytes]]:
        """(id, meta, body) of the snapshots of one kind, in insertion order."""
        for snapshot_id, meta, body in self._db.execute(
                "SELECT id, meta, body FROM snapshots WHERE kind = ? ORDER BY seq", (kind,)):
            yield snapshot_id, json.loads(meta), body

    # -- reads for opening from snapshots ------------------------------------------------------

    def records_after(self, kind: str, after: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """Records of one kind stored after record `after` (a records seq), in insertion order."""
        for record_id, body in self._db.execute(
                "SELECT id, body FROM records WHERE seq > ? AND +kind = ? ORDER BY seq", (after, kind)):
            yield record_id, json.loads(body)

    def record(self, kind: str, record_id: str) -> dict[str, Any] | None:
        """The body of one record, or None."""
        try:
            row = self._db.execute("SELECT body FROM records WHERE kind = ? AND id = ?", (kind, record_id)).fetchone()
        except sqlite3.ProgrammingError as exc:
            raise StoreError(f"{self.path}: the store is closed ({kind} {record_id[:12]}… was not read before)") from exc
        return json.loads(row[0]) if row else None

    def record_at(self, seq: int) -> tuple[str, str] | None:
        """(kind, id) of the record stored at `seq`, or None."""
        row = self._db.execute("SELECT kind, id FROM records WHERE seq = ?", (seq,)).fetchone()
        return (row[0], row[1]) if row else None

    def last_record(self) -> int:
        """The seq of the last stored record (0 when there is none)."""
        return self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()[0]

    def record_rows(self, after: int, upto: int) -> list[tuple[int, str, str, str]]:
        """(seq, kind, id, body as stored) of the records with ``after < seq <= upto``, in order."""
        return self._db.execute("SELECT seq, kind, id, body FROM records WHERE seq > ? AND seq <= ? ORDER BY seq",
                                (after, upto)).fetchall()

    def snapshot_index(self, kind: str) -> list[tuple[int, str, dict[str, Any]]]:
        """(seq, id, meta) of the snapshots of one kind, in insertion order, without their bodies."""
        return [(seq, snapshot_id, json.loads(meta)) for seq, snapshot_id, meta in self._db.execute(
            "SELECT seq, id, meta FROM snapshots WHERE kind = ? ORDER BY seq", (kind,))]

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
        found: list[str] = []
        row = self._db.execute("SELECT principal FROM timeline ORDER BY principal LIMIT 1").fetchone()
        while row is not None:
            found.append(row[0])
            row = self._db.execute("SELECT principal FROM timeline WHERE principal > ? ORDER BY principal LIMIT 1",
                                   (row[0],)).fetchone()
        return found

    def principal_count(self) -> int:
        """Distinct tenants in the timeline."""
        return self._db.execute("SELECT COUNT(DISTINCT principal) FROM timeline").fetchone()[0]

    def record_ids(self, kind: str) -> list[str]:
        """Ids of the records of one kind, in insertion order."""
        return [row[0] for row in self._in_order(kind, "id")]

    def has_record(self, kind: str, record_id: str) -> bool:
        """Whether a derived record of this kind and id exists."""
        return self._db.execute("SELECT 1 FROM records WHERE kind = ? AND id = ?", (kind, record_id)).fetchone() is not None

    # -- integrity, portability, stats ---------------------------------------------------

    def verify(self) -> ChainBreak | None:
        """Recompute the whole chain; the first bad entry, or None when intact."""
        unreadable: list[ChainBreak] = []

        def readable() -> Iterator[Entry]:
            for row in self._db.execute(f"SELECT {_COLUMNS} FROM timeline ORDER BY seq"):
                try:
                    yield _row_to_entry(row)
                except (ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
                    unreadable.append(ChainBreak(row[0], str(row[1]), f"unreadable row: {exc}"))
                    return

        try:
            brk = verify_chain(readable())
        except (ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
            return ChainBreak(-1, "?", f"unreadable row: {exc}")
        return unreadable[0] if unreadable else brk

    def export_jsonl(self, out: str | Path) -> int:
        """Write every entry as one JSON line; returns the number written."""
        count = 0
        with open(out, "w", encoding="utf-8") as handle:
            for entry in self.entries():
                handle.write(json.dumps(entry_to_json(entry), ensure_ascii=False, sort_keys=True) + "\n")
                count += 1
        return count

    def import_jsonl(self, source: str | Path) -> int:
        """Append the entries of a JSONL export, all or nothing.

        The file's chain must continue this store's head (an empty store takes a full
        export). Every id is recomputed. On the first bad, torn or unlinked record an
        `ImportFailed` names the file and line and nothing is imported.
        """
        path = str(source)
        try:
            lines = Path(path).read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise ImportFailed(path, 0, f"cannot read file ({exc})") from exc
        parsed: list[Entry] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                parsed.append(entry_from_json(json.loads(line)))
            except json.JSONDecodeError as exc:
                raise ImportFailed(path, number, f"not a complete JSON record ({exc.msg})") from exc
            except (KeyError, ValueError, TypeError, AttributeError) as exc:
                raise ImportFailed(path, number, f"not a timeline entry ({exc!r})") from exc
        line_of = [n for n, line in enumerate(lines, start=1) if line.strip()]
        with self._write():
            seq, prev_id = self._head()
            brk = verify_chain(parsed, start_prev_id=prev_id, start_seq=seq)
            if brk is not None:
                position = brk.seq - seq if 0 <= brk.seq - seq < len(parsed) else 0
                for index, entry in enumerate(parsed):
                    if entry.id == brk.id:
                        position = index
                        break
                raise ImportFailed(path, line_of[position], f"entry {brk.id[:12]}…: {brk.reason}")
            blobs = _pack_embeddings([entry.embedding for entry in parsed])
            self._insert_rows([_entry_to_row(entry, blob) for entry, blob in zip(parsed, blobs)])
        self._schema = SCHEMA_VERSION
        return len(parsed)

    def stats(self) -> StoreStats:
        """Counts of entries, tenants, situations and derived records."""
        db = self._db
        first, last = db.execute(
            "SELECT (SELECT timestamp FROM timeline ORDER BY seq LIMIT 1), "
            "(SELECT timestamp FROM timeline ORDER BY seq DESC LIMIT 1)").fetchone()
        return StoreStats(
            entries=len(self),
            principals=db.execute("SELECT COUNT(DISTINCT principal) FROM timeline").fetchone()[0],
            situations=dict(db.execute("SELECT situation, COUNT(*) FROM timeline GROUP BY situation ORDER BY 2 DESC")),
            records=dict(db.execute("SELECT kind, COUNT(*) FROM records GROUP BY kind ORDER BY kind")),
            first=first,
            last=last,
            encoders=[row[0] for row in db.execute("SELECT DISTINCT encoder FROM timeline ORDER BY 1")],
        )

    def close(self) -> None:
        """Close the connection (idempotent)."""
        try:
            self._db.close()
        except sqlite3.Error:
            pass

    def __enter__(self) -> "SQLiteStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions ----------------------------------------------------------------------

    def _write(self) -> "_WriteTransaction":
        return _WriteTransaction(self._db)


class _WriteTransaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``; rolls back on any error, translating trigger aborts."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: object) -> bool:
        if exc_type is None:
            self._db.execute("COMMIT")
            return False
        self._db.execute("ROLLBACK")
        if isinstance(exc, sqlite3.IntegrityError) and "refused" in str(exc):
            raise ImmutableRecordError(str(exc)) from exc
        return False


def is_refusal(error: BaseException) -> bool:
    """True when a raw SQLite error is the store refusing UPDATE/DELETE."""
    return isinstance(error, sqlite3.DatabaseError) and "refused" in str(error)
