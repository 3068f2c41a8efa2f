"""A store on a PostgreSQL server, for memories shared by agents on many processes and hosts.

`PostgresStore` implements the protocols of `memory.timeline.protocols` with the semantics
of `SQLiteStore`: the same tables and row form (`memory.timeline.schema`), the same entry ids
(chained by `memory.timeline.entries`), insert-only records and snapshots. The server
enforces the invariants (its tables, in `memory.timeline.postgres_schema`): triggers refuse
UPDATE, DELETE and TRUNCATE for every role, and `grant_writer` gives an application role only
SELECT and INSERT, for the principals it names (row-level security). Every write takes one
transaction-scoped advisory lock, so writers on any host append to one linear chain and records
get their ``seq`` in commit order (a reader polling by seq never skips a row).

Every write transaction also seals the derived rows it wrote (digest chains) and appends the
store's head to the server-side anchor, after refusing to write on a store that does not hold
what its newest anchor recorded (`memory.timeline.postgres_integrity`); derived records are read
only up to the anchored chain, and `verify` checks all of it (`memory.timeline.postgres_audit`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from memory.errors import HeadMoved, ImmutableRecordError, ImportFailed, IntegrityError, StoreError
from memory.timeline import erasure, portable, postgres_audit, postgres_erasure, record_body
from memory.timeline import postgres_integrity as integrity
from memory.timeline.entries import ChainBreak, Entry, EntryDraft, Kind, verify_chain
from memory.timeline.integrity import Audit
from memory.timeline.postgres_integrity import grant_writer
from memory.timeline.postgres_schema import SCHEMA, WRITE_LOCK, triggers
from memory.timeline.protocols import EntryParts, StoreStats
from memory.timeline.schema import (
    COLUMNS,
    RecordKind,
    chain_rows,
    entry_to_json,
    entry_to_row,
    kind_text,
    pack_embeddings,
    prepare,
    row_to_entry,
    vectors_of,
)

# grant_writer is defined with the integrity objects (`postgres_integrity`) and imported from here (docs/sharing.md)
__all__ = ["PostgresStore", "grant_writer"]


class PostgresStore:
    """A store in one PostgreSQL database, opened by URL (``postgresql://user@host/dbname``).

    Args:
        path: a libpq connection URL; the database must exist.
        create: create the tables when missing (needs the CREATE privilege on the schema);
            when False a database without them is a `StoreError`.
        synchronous: accepted for `SQLiteStore` compatibility; durability is the server's.
        read_only: a session whose transactions are read-only, without the open's refusals (a lost tail),
            e.g. to inspect or export a damaged store; every write is a `StoreError`.
    """

    def __init__(self, path: str, *, create: bool = True, synchronous: str = "FULL", read_only: bool = False) -> None:
        self.path, self.read_only = str(path), read_only
        try:
            self._db = psycopg.connect(self.path, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(f"{shown_url(self.path)}: cannot connect ({str(exc).strip()})") from exc
        try:
            self._db.execute("SET default_transaction_read_only = on") if read_only else None
            self._ensure_schema(create and not read_only)
            self._owner = integrity.owns_store(self._db)
            self._integrity = integrity.has_integrity(self._db)
            if self._integrity and not read_only and (lost := integrity.lost_tail(self._db)):
                raise StoreError(
                    f"{shown_url(self.path)}: {lost} (run `python -m memory verify {shown_url(self.path)}`)"
                )
        except psycopg.Error as exc:
            self._db.close()
            raise StoreError(f"{shown_url(self.path)}: cannot be read ({str(exc).strip()})") from exc
        except BaseException:
            self._db.close()
            raise

    def _ensure_schema(self, create: bool) -> None:
        if self._has_tables():
            return
        if not create:
            raise StoreError(f"{shown_url(self.path)}: no memory store in this database")
        try:
            with self._db.transaction():
                self._db.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                if not self._has_tables():  # another process may have created them meanwhile
                    self._db.execute(SCHEMA + triggers())
                    integrity.install(self._db)
        except psycopg.Error as exc:
            raise StoreError(f"{shown_url(self.path)}: cannot create the store's tables ({str(exc).strip()})") from exc

    def _has_tables(self) -> bool:
        # pg_tables, not to_regclass: the catalog cache may miss tables committed while this waited
        row = self._db.execute(
            "SELECT EXISTS (SELECT FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'timeline')"
        ).fetchone()
        return row is not None and bool(row[0])

    @contextmanager
    def _write(self) -> Iterator[integrity.Held]:
        """One transaction holding the store's advisory write lock, sealed and anchored before it commits.

        A store created before digests and anchors gets them in its owner's first write; an application
        role writes to it as before (its owner's next write seals those rows too). Refusals of the
        server (insert-only tables, another principal's rows) become `ImmutableRecordError`. The lock
        and the state checked under it go in one round trip (pipeline mode), as do the digests and the
        anchor at the end.
        """
        if self.read_only:
            raise StoreError(f"{shown_url(self.path)}: opened read-only (for inspection): nothing is written")
        try:
            with self._db.transaction():
                held = integrity.lock_and_check(
                    self._db, shown_url(self.path), known=self._integrity, owner=self._owner
                )
                self._integrity = held.before is not None
                yield held
                integrity.seal_and_anchor(self._db, held)
        except (psycopg.errors.RestrictViolation, psycopg.errors.InsufficientPrivilege) as exc:
            raise ImmutableRecordError(f"{shown_url(self.path)}: {exc.diag.message_primary or exc}") from exc
        except psycopg.OperationalError as exc:
            raise StoreError(f"{shown_url(self.path)}: {str(exc).strip()}") from exc

    def _sealed(self) -> str:
        """The condition a served records row meets: within the anchored digest chain (none on an old store)."""
        return f" AND {integrity.SEALED}" if self._integrity else ""

    def _rows(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._db.execute(query, params).fetchall()
        except psycopg.OperationalError as exc:  # the server went away, or the store was closed
            raise StoreError(f"{shown_url(self.path)}: {str(exc).strip()}") from exc

    # -- timeline ---------------------------------------------------------------------

    def append(self, draft: EntryDraft) -> Entry:
        """Chain and commit one entry; durable when it returns."""
        return self.append_many([draft])[0]

    def append_many(self, drafts: Sequence[EntryDraft]) -> list[Entry]:
        """Chain and commit many entries in one transaction."""
        if not drafts:
            return []
        prepared = prepare(drafts)
        with self._write() as held:
            entries, rows = chain_rows(prepared, held.entries, held.head)
            self._insert_rows(rows)
        return entries

    def _insert_rows(self, rows: Sequence[tuple[Any, ...]]) -> None:
        with self._db.cursor() as cursor:
            cursor.executemany(f"INSERT INTO timeline ({COLUMNS}) VALUES ({','.join(['%s'] * 12)})", rows)

    def get(self, entry_id: str) -> Entry | None:
        """The entry with this id, or None."""
        rows = self._rows(f"SELECT {COLUMNS} FROM timeline WHERE id = %s", (entry_id,))
        return row_to_entry(rows[0]) if rows else None

    def get_many(self, entry_ids: Sequence[str]) -> list[Entry]:
        """Entries for `entry_ids`, in the given order; unknown ids are skipped."""
        if not entry_ids:
            return []
        found = {
            row[1]: row_to_entry(row)
            for row in self._rows(f"SELECT {COLUMNS} FROM timeline WHERE id = ANY(%s)", (list(entry_ids),))
        }
        return [found[i] for i in entry_ids if i in found]

    def entries(
        self, *, start: int = 0, stop: int | None = None, principal: str | None = None, situation: str | None = None
    ) -> Iterator[Entry]:
        """Entries in timeline order, optionally by sequence range, principal and situation."""
        clauses: list[str] = ["seq >= %s"]
        params: list[int | str] = [start]
        for column, value in (("seq <", stop), ("principal =", principal), ("situation =", situation)):
            if value is not None:
                clauses.append(f"{column} %s")
                params.append(value)
        for row in self._rows(f"SELECT {COLUMNS} FROM timeline WHERE {' AND '.join(clauses)} ORDER BY seq", params):
            yield row_to_entry(row)

    def entry_parts(self, entry_ids: Sequence[str]) -> dict[str, EntryParts]:
        """What indexing an episode reads of its entries, by id; unknown ids are absent."""
        if not entry_ids:
            return {}
        rows = self._rows(
            "SELECT id, kind, text, metadata, embedding, encoder FROM timeline WHERE id = ANY(%s)", (list(entry_ids),)
        )
        vectors = vectors_of(
            [bytes(row[4]) for row in rows], [row[2] for row in rows], [row[5] for row in rows], writable=False
        )
        decision = Kind.DECISION.value
        return {
            id_: EntryParts(id_, Kind(kind), text, json.loads(metadata) if kind == decision else {}, vector)
            for (id_, kind, text, metadata, _, _), vector in zip(rows, vectors)
        }

    def decisions_between(self, principal: str, first_seq: int, last_seq: int) -> list[tuple[int, dict[str, Any]]]:
        """(seq, metadata) of a principal's decision entries from `first_seq` to `last_seq`, in order."""
        rows = self._rows(
            "SELECT seq, metadata FROM timeline WHERE seq >= %s AND seq <= %s AND principal = %s "
            "AND kind = %s ORDER BY seq",
            (first_seq, last_seq, principal, Kind.DECISION.value),
        )
        return [(seq, json.loads(metadata)) for seq, metadata in rows]

    def tail(self, principal: str, n: int) -> list[Entry]:
        """The last `n` entries of a principal, oldest first."""
        if n <= 0:
            return []
        rows = self._rows(
            f"SELECT {COLUMNS} FROM timeline WHERE principal = %s AND situation <> '' ORDER BY seq DESC LIMIT %s",
            (principal, n),
        )  # an erased row has no situation
        return [row_to_entry(row) for row in reversed(rows)]

    def principals(self) -> list[str]:
        """Distinct tenants in the timeline, sorted."""
        return [row[0] for row in self._rows("SELECT DISTINCT principal FROM timeline ORDER BY 1")]

    def __len__(self) -> int:
        """The number of entries."""
        return self._rows("SELECT COUNT(*) FROM timeline")[0][0]

    # -- derived records and snapshots ---------------------------------------------------

    def add_records(
        self, kind: RecordKind | str, records: Iterable[tuple[str, Mapping[str, Any]]], *, head: int | None = None
    ) -> int:
        """Insert derived records (skipping identical ones); how many were new. `head`: see `SQLiteStore`."""
        kind = kind_text(kind)
        rows = [
            (record_id, json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
            for record_id, body in records
        ]
        if not rows:
            return 0
        with self._write() as held:
            if head is not None and held.entries - 1 != head:
                raise HeadMoved(f"{shown_url(self.path)}: the timeline moved past seq {head}")
            stored = dict(
                self._rows(
                    "SELECT id, body FROM records WHERE kind = %s AND id = ANY(%s)", (kind, [row[0] for row in rows])
                )
            )
            for record_id, body in rows:
                if record_id in stored and stored[record_id] != body:
                    raise IntegrityError(f"{kind} record {record_id} already stored with different content")
            new: list[tuple[int, str, str, str]] = []
            seq = held.records
            for record_id, body in self._writable(kind, [row for row in rows if row[0] not in stored]):
                if record_id in stored:  # listed twice in `records`
                    if stored[record_id] != body:
                        raise IntegrityError(f"{kind} record {record_id} already stored with different content")
                    continue
                seq += 1
                new.append((seq, kind, record_id, body))
                stored[record_id] = body
            if new:
                with self._db.cursor() as cursor:
                    cursor.executemany("INSERT INTO records (seq, kind, id, body) VALUES (%s,%s,%s,%s)", new)
                held.wrote.add("records")
        return len(new)

    def _writable(self, kind: str, rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The rows this connection's role may add: all of them for the owner; for an application role, those
        of the principals `grant_writer` gave it. Every process of a shared memory derives every principal's
        records; the others' are left to their own writers (the server would refuse them)."""
        if self._owner or not self._integrity or not rows:
            return rows
        allowed = self._rows(
            "SELECT memory_may_write(current_user, memory_record_principals(%s, body)) "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS listed(body, position) ORDER BY position",
            (kind, [body for _, body in rows]),
        )
        return [row for row, (may,) in zip(rows, allowed) if may]

    def others_wrote(self) -> bool:
        """Always True: other hosts write to the server unannounced."""
        return True

    def records(self, kind: RecordKind | str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(id, body) of the records of one kind, in insertion order."""
        return self.records_after(kind, 0)

    def records_after(self, kind: RecordKind | str, after: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """(id, body) of the records of one kind stored after record seq `after`, in order."""
        for seq, record_id, body in self._rows(
            f"SELECT seq, id, body FROM records WHERE kind = %s AND seq > %s{self._sealed()} ORDER BY seq",
            (kind_text(kind), after),
        ):
            yield record_id, record_body.decoded(shown_url(self.path), kind_text(kind), record_id, body, seq)

    def record(self, kind: RecordKind | str, record_id: str) -> dict[str, Any] | None:
        """The body of one record, or None."""
        rows = self._rows(
            f"SELECT body, seq FROM records WHERE kind = %s AND id = %s{self._sealed()}", (kind_text(kind), record_id)
        )
        return record_body.decoded(shown_url(self.path), kind_text(kind), record_id, *rows[0]) if rows else None

    def record_ids(self, kind: RecordKind | str) -> list[str]:
        """The ids of the records of one kind, in no particular order."""
        return [row[0] for row in self._rows("SELECT id FROM records WHERE kind = %s", (kind_text(kind),))]

    def record_at(self, seq: int) -> tuple[str, str] | None:
        """(kind, id) of the record stored at `seq`, or None."""
        rows = self._rows("SELECT kind, id FROM records WHERE seq = %s", (seq,))
        return (rows[0][0], rows[0][1]) if rows else None

    def last_record(self) -> int:
        """The seq of the last stored record (0 when there is none)."""
        return self._rows("SELECT COALESCE(MAX(seq), 0) FROM records")[0][0]

    def record_rows(
        self, after: int, upto: int, *, bodies: Collection[str] | None = None
    ) -> list[tuple[int, str, str, str | None]]:
        """(seq, kind, id, body JSON text) of the records with ``after < seq <= upto``, in order; with
        `bodies`, only records of those kinds come with their body (the others' is None, and not read)."""
        if bodies is None:
            return self._rows(
                "SELECT seq, kind, id, body FROM records WHERE seq > %s AND seq <= %s ORDER BY seq", (after, upto)
            )
        return self._rows(
            "SELECT seq, kind, id, CASE WHEN kind = ANY(%s) THEN body END FROM records "
            "WHERE seq > %s AND seq <= %s ORDER BY seq",
            (list(bodies), after, upto),
        )

    def add_snapshot(self, kind: str, snapshot_id: str, meta: Mapping[str, Any], body: bytes) -> bool:
        """Insert a snapshot unless one with this kind and id exists; whether it was new."""
        text = json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        with self._write() as held:
            if self._rows("SELECT 1 FROM snapshots WHERE kind = %s AND id = %s", (kind, snapshot_id)):
                return False
            held.wrote.add("snapshots")
            self._db.execute(
                "INSERT INTO snapshots (seq, kind, id, meta, body) "
                "SELECT COALESCE(MAX(seq), 0) + 1, %s, %s, %s, %s FROM snapshots",
                (kind, snapshot_id, text, bytes(body)),
            )
        return True

    def snapshots(self, kind: str) -> Iterator[tuple[str, dict[str, Any], bytes]]:
        """(id, meta, body) of the snapshots of one kind, in insertion order."""
        for snapshot_id, meta, body in self._rows(
            "SELECT id, meta, body FROM snapshots WHERE kind = %s ORDER BY seq", (kind,)
        ):
            yield snapshot_id, json.loads(meta), bytes(body)

    def snapshot_index(self, kind: str) -> list[tuple[int, str, dict[str, Any]]]:
        """(seq, id, meta) of the snapshots of one kind, in insertion order, without bodies."""
        return [
            (seq, snapshot_id, json.loads(meta))
            for seq, snapshot_id, meta in self._rows(
                "SELECT seq, id, meta FROM snapshots WHERE kind = %s ORDER BY seq", (kind,)
            )
        ]

    def snapshot_body(self, seq: int) -> bytes:
        """The body of the snapshot stored at `seq` (empty when there is none)."""
        rows = self._rows("SELECT body FROM snapshots WHERE seq = %s", (seq,))
        return bytes(rows[0][0]) if rows else b""

    # -- integrity, portability, stats ---------------------------------------------------

    def verify(self) -> ChainBreak | None:
        """Audit the store (`memory.timeline.postgres_audit`); the first bad entry, else the first other finding
        (as a break at seq -1), or None when intact."""
        report, brk = postgres_audit.audit_connection(self._db)
        if brk is not None:
            return brk
        return ChainBreak(-1, "?", report.findings[0]) if report.findings else None

    def audit(self) -> Audit:
        """Every finding of `verify`, each saying what and where (`memory.timeline.postgres_audit`)."""
        return postgres_audit.audit_connection(self._db)[0]

    def erase(self, plan: erasure.ErasurePlan) -> bool:
        """Apply an erasure plan (`memory.timeline.erasure`; owner only); whether VACUUM FULL purged old rows."""
        with self._write() as held:
            held.unknown = True  # the erasure seals, deletes and stores derived rows of its own
            postgres_erasure.apply(self._db, plan)
        return erasure.purge_postgres(self._db)

    def export_jsonl(self, out: str | Path) -> int:
        """Write every entry as one JSON line; returns the number written."""
        count = 0
        with open(out, "w", encoding="utf-8") as handle:
            for entry in self.entries():
                handle.write(json.dumps(entry_to_json(entry), ensure_ascii=False, sort_keys=True) + "\n")
                count += 1
        return count

    def import_jsonl(self, source: str | Path) -> int:
        """Append the entries of a JSONL export, all or nothing; returns the number appended.

        The file's chain must continue this store's head; every id is recomputed, and the first
        bad, torn or unlinked line is named in an `ImportFailed`.
        """
        path = str(source)
        parsed, line_of = portable.parse_jsonl(path)
        with self._write() as held:
            seq, prev_id = held.entries, held.head
            brk = verify_chain(parsed, start_prev_id=prev_id, start_seq=seq)
            if brk is not None:
                position = next((i for i, entry in enumerate(parsed) if entry.id == brk.id), 0)
                raise ImportFailed(path, line_of[position] if line_of else 0, f"entry {brk.id[:12]}…: {brk.reason}")
            blobs = pack_embeddings([entry.embedding for entry in parsed])
            self._insert_rows([entry_to_row(entry, blob) for entry, blob in zip(parsed, blobs)])
        return len(parsed)

    def stats(self) -> StoreStats:
        """Counts of entries, tenants, situations and derived records (erased entries apart)."""
        return portable.store_stats(self._rows, len(self))

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._db.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def shown_url(url: str) -> str:
    """A URL without its password, for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://…"
    host = info.get("host", "")
    return f"postgresql://{info.get('user', '')}@{host}/{info.get('dbname', '')}"
