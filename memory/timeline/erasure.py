"""Forgetting on request: an entry's or a principal's content erased, everything else still verifiable.

The same erasure serves a request (one entry, or a whole principal; the record says who asked
and why) and a retention policy (the set of a principal's entries it expires; the record names
the policy and its parameters, see `memory.retention`).

An entry's id is the SHA-256 of its content and its predecessor's id, so erased content
cannot be re-hashed. Erasure therefore keeps what the chain needs and records what it did:

- **An erasure record** (record kind ``erasure``: when, who asked, why, which principal or
  entry, how many entries, a SHA-256 over their ``seq id`` lines, the last snapshot seq
  then; no content) is stored like
  every derived record, so the digest chain and the anchor cover it, and the insert-only
  ``erased`` table lists each erased entry's seq and id under that record's id.
- **Blank rows.** The erased entries' rows keep seq, id, previous id, timestamp, principal,
  role and kind; text, situation, metadata, encoder and embedding are emptied. The only
  UPDATE the store permits is exactly this one, and only for rows listed in ``erased``.
- **Derived state rebuilt.** Every derived record written before the erasure (episode
  summaries, edges, fact versions and their evidence, marks, flush points) and every state
  run is deleted (the only DELETE permitted: rows older than the newest erasure record), and
  the records a replay of the timeline without the erased entries writes are stored in the
  same transaction; so the memory's projection equals `rebuild()` afterwards.
- **Bytes purged.** SQLite deletes with ``secure_delete``, then ``VACUUM`` and a truncating
  WAL checkpoint leave no copy in the file or its ``-wal``; PostgreSQL runs ``VACUUM FULL``
  on the tables (their owner only).

`verify` accepts a blank row when ``erased`` lists its seq and id and an erasure record's
digest covers that listing; it checks the row's links as before. A row emptied without that
(an erasure without a record), a listed row that still holds content, and a derived row
missing after the newest erasure are findings.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from memory.errors import StoreChanged
from memory.timeline import record_body
from memory.timeline.entries import Entry
from memory.timeline.protocols import Store
from memory.timeline.schema import SCHEMA_VERSION
from memory.timeline.validation import check_label

ERASURE = "erasure"  # the record kind of erasure records
MAX_REASON = 1000  # characters of an erasure's reason and requester


class ErasurePlan(NamedTuple):
    """What one erasure writes, computed before the store's write lock is taken."""

    record_id: str  # id of the erasure record
    record: dict[str, Any]  # its body (no content)
    entries: list[tuple[int, str]]  # (seq, id) of the entries to erase, in timeline order
    records: list[tuple[str, str, str]]  # (kind, id, body JSON text) of the re-derived records, in order
    head: int  # the last timeline seq the replay read (the store must not have grown since)
    last_record: int  # the last record seq when the plan was made


class Erasure(NamedTuple):
    """What `forget` did."""

    record_id: str  # id of the erasure record
    entries: int  # entries erased
    records: int  # derived records rewritten from the replay
    purged: bool  # no copy of the erased bytes is left in the store's files (see `purge_sqlite`)


class Marks(NamedTuple):
    """The erasures a store holds, as `verify` reads them."""

    entries: dict[int, str]  # seq -> id of each erased entry
    records_before: int  # derived records with a lower seq may be absent (0: none)
    snapshots_upto: int  # snapshots up to this seq may be absent (0: none)
    findings: list[str]  # erasure bookkeeping that does not add up


def is_erased(entry: Entry) -> bool:
    """Whether an entry's content was erased (its row is blank: no situation, text, encoder or embedding).

    The timeline refuses an empty situation, so no recorded entry looks like this.
    """
    return entry.situation == "" and entry.text == "" and entry.encoder == "" and entry.embedding.size == 0


def listing_digest(entries: Iterable[tuple[int, str]]) -> str:
    """SHA-256 over the ``seq id`` lines of erased entries, in the given order."""
    h = hashlib.sha256()
    for seq, entry_id in entries:
        h.update(f"{seq} {entry_id}\n".encode("ascii"))
    return h.hexdigest()


class Selection(NamedTuple):
    """The entries one erasure covers and what its record says of them (no content)."""

    entries: list[tuple[int, str]]  # (seq, id) of the entries to erase, in timeline order
    scope: dict[str, Any]  # the record's target and ground: {"by", "reason", "entry"|"principal"} or a policy's


def make_plan(
    store: Store,
    *,
    owner: str,
    rederive: Callable[[frozenset[int]], list[tuple[str, str, str]]],
    entry_id: str | None = None,
    principal: str | None = None,
    select: Callable[[Store], Selection] | None = None,
    reason: str = "",
    requested_by: str = "",
) -> ErasurePlan:
    """The plan of erasing one entry of `owner` (by id), every entry of a principal, or the set `select` picks.

    Args:
        store: the memory's store.
        owner: the principal an entry id must belong to (tenants never erase each other's entries by id).
        rederive: the records a replay of the timeline writes with the given seqs erased.
        entry_id, principal, select: exactly one of them; `select` reads the store (after the plan noted
            its head) and picks entries of one principal, e.g. those a retention policy expires.
        reason, requested_by: kept in the erasure record of a request (no content belongs there).

    Raises:
        ValueError: not exactly one target, an unknown entry, another tenant's entry, nothing to erase.
    """
    if sum(target is not None for target in (entry_id, principal, select)) != 1:
        raise ValueError("forget needs exactly one of entry_id or principal")
    for name, value in (("reason", reason), ("requested_by", requested_by)):
        if not isinstance(value, str) or len(value) > MAX_REASON:
            raise ValueError(f"{name} must be a str of at most {MAX_REASON} characters")
    head, last_record = len(store) - 1, store.last_record()  # before the replay: the store must not move after
    if select is not None:
        targets, scope = select(store)
    else:
        targets, scope = _requested(store, entry_id, principal, owner)
        scope = {"by": requested_by, "reason": reason, **scope}
    if not targets:
        raise ValueError("nothing to erase: the content is already erased")
    body = {
        "at": datetime.now(UTC).isoformat(timespec="microseconds"),
        **scope,
        "entries": len(targets),
        "entries_sha256": listing_digest(targets),
        "format": 1,
    }
    record_id = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    rows = rederive(frozenset(seq for seq, _ in targets))
    return ErasurePlan(record_id, body, targets, rows, head, last_record)


def _requested(store: Store, entry_id: str | None, principal: str | None, owner: str) -> Selection:
    """The entries a request names: one entry of `owner`, or every entry of a principal (not yet erased)."""
    if entry_id is not None:
        entry = store.get(entry_id)
        if entry is None or entry.principal != owner:
            raise ValueError(f"no entry {entry_id[:16]}… of principal {owner!r} in this store")
        return Selection([] if is_erased(entry) else [(entry.seq, entry.id)], {"entry": entry.id})
    who = check_label("principal", principal)
    return Selection([(e.seq, e.id) for e in store.entries(principal=who) if not is_erased(e)], {"principal": who})


def _dumps(body: Mapping[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# -- SQLite ------------------------------------------------------------------------------

_BLANK = (
    "NEW.seq = OLD.seq AND NEW.id = OLD.id AND NEW.prev_id = OLD.prev_id AND NEW.timestamp = OLD.timestamp "
    "AND NEW.principal = OLD.principal AND NEW.role = OLD.role AND NEW.kind = OLD.kind AND NEW.situation = '' "
    "AND NEW.text = '' AND NEW.metadata = '{}' AND NEW.encoder = '' AND length(NEW.embedding) = 0"
)
_NEWEST = "(SELECT COALESCE(MAX(seq), 0) FROM records WHERE kind = 'erasure')"
_UPTO = (
    "(SELECT COALESCE(MAX(CAST(json_extract(body, '$.snapshots_upto') AS INTEGER)), 0) "
    "FROM records WHERE kind = 'erasure')"
)

# The triggers of schema.py, narrowed to the one UPDATE and the DELETEs an erasure makes.
SQLITE_DDL = [
    "CREATE TABLE IF NOT EXISTS erased (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, erasure TEXT NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS erased_no_update BEFORE UPDATE ON erased "
    "BEGIN SELECT RAISE(ABORT, 'erased is insert-only: UPDATE refused'); END",
    "CREATE TRIGGER IF NOT EXISTS erased_no_delete BEFORE DELETE ON erased "
    "BEGIN SELECT RAISE(ABORT, 'erased is insert-only: DELETE refused'); END",
    "DROP TRIGGER IF EXISTS timeline_no_update",
    "CREATE TRIGGER timeline_no_update BEFORE UPDATE ON timeline WHEN NOT (EXISTS (SELECT 1 FROM erased "
    f"WHERE erased.seq = OLD.seq AND erased.id = OLD.id) AND {_BLANK}) "
    "BEGIN SELECT RAISE(ABORT, 'timeline is append-only: UPDATE refused'); END",
    "DROP TRIGGER IF EXISTS records_no_delete",
    f"CREATE TRIGGER records_no_delete BEFORE DELETE ON records WHEN OLD.kind = 'erasure' OR OLD.seq >= {_NEWEST} "
    "BEGIN SELECT RAISE(ABORT, 'records are insert-only: DELETE refused'); END",
    "DROP TRIGGER IF EXISTS snapshots_no_delete",
    f"CREATE TRIGGER snapshots_no_delete BEFORE DELETE ON snapshots WHEN OLD.seq > {_UPTO} "
    "BEGIN SELECT RAISE(ABORT, 'snapshots are insert-only: DELETE refused'); END",
]


def apply_sqlite(db: sqlite3.Connection, plan: ErasurePlan) -> None:
    """Inside the store's write transaction: install the narrow triggers, then erase as planned.

    Raises:
        StoreChanged: the store grew after the plan was made (make it again).
    """
    _check_unchanged(
        db.execute("SELECT COALESCE(MAX(seq), -1) FROM timeline").fetchone()[0],
        db.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()[0],
        plan,
    )
    for statement in SQLITE_DDL:
        db.execute(statement)
    upto = db.execute("SELECT COALESCE(MAX(seq), 0) FROM snapshots").fetchone()[0]
    cursor = db.execute(
        "INSERT INTO records (kind, id, body) VALUES (?,?,?)",
        (ERASURE, plan.record_id, _dumps({**plan.record, "snapshots_upto": upto})),
    )
    newest = cursor.lastrowid
    db.executemany(
        "INSERT INTO erased (seq, id, erasure) VALUES (?,?,?)",
        [(seq, entry_id, plan.record_id) for seq, entry_id in plan.entries],
    )
    db.executemany(
        "UPDATE timeline SET situation = '', text = '', metadata = '{}', encoder = '', embedding = X'' WHERE seq = ?",
        [(seq,) for seq, _ in plan.entries],
    )
    db.execute("DELETE FROM records WHERE seq < ? AND kind != ?", (newest, ERASURE))
    if upto:
        db.execute("DELETE FROM snapshots WHERE seq <= ?", (upto,))
        # a marker keeps snapshot seqs growing past the deleted ones (their digests stay)
        db.execute(
            "INSERT INTO snapshots (seq, kind, id, meta, body) VALUES (?,?,?,?,X'')",
            (upto + 1, ERASURE, plan.record_id, "{}"),
        )
    db.executemany(
        "INSERT INTO records (kind, id, body) VALUES (?,?,?)",
        [(kind, record_id, record_body.pack(body)) for kind, record_id, body in plan.records],
    )
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")  # packed bodies: older code must refuse the file


def _check_unchanged(head: int, last_record: int, plan: ErasurePlan) -> None:
    if head != plan.head or last_record != plan.last_record:
        raise StoreChanged("the store changed while the erasure was prepared (another writer appended)")


def purge_sqlite(db: sqlite3.Connection) -> bool:
    """After the erasure committed: rewrite the file and empty its WAL; whether both completed.

    ``VACUUM`` leaves no free page or cell holding an old copy; the truncating checkpoint
    fails while another connection reads, and the old frames then stay in ``-wal`` until a
    later checkpoint.
    """
    try:
        db.execute("VACUUM")
        busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except Exception:  # a reader holding the file: the erasure stands, the purge is retried later
        return False
    return busy == 0


def sqlite_marks(db: sqlite3.Connection) -> Marks:
    """The erasures of a SQLite store (empty when it never erased anything)."""
    has_table = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'erased'").fetchone()
    listed = db.execute("SELECT seq, id, erasure FROM erased ORDER BY seq").fetchall() if has_table else []
    bodies = [
        (rid, json.loads(body))
        for seq, rid, body in db.execute("SELECT seq, id, body FROM records WHERE kind = ? ORDER BY seq", (ERASURE,))
    ]
    newest = db.execute("SELECT COALESCE(MAX(seq), 0) FROM records WHERE kind = ?", (ERASURE,)).fetchone()[0]
    return marks_of(listed, bodies, newest)


def marks_of(
    listed: Sequence[tuple[int, str, str]], bodies: Sequence[tuple[str, Mapping[str, Any]]], newest: int
) -> Marks:
    """Check the ``erased`` listing against the erasure records that must cover it."""
    findings = []
    by_record: dict[str, list[tuple[int, str]]] = {}
    for seq, entry_id, record_id in listed:
        by_record.setdefault(record_id, []).append((int(seq), entry_id))
    known = dict(bodies)
    for record_id, rows in by_record.items():
        body = known.get(record_id)
        if body is None:
            findings.append(
                f"erased: {len(rows)} entries listed under {record_id[:16]}…, which is no erasure "
                f"record (an erasure without a record)"
            )
        elif body.get("entries") != len(rows) or body.get("entries_sha256") != listing_digest(rows):
            findings.append(
                f"erased: the entries listed under {record_id[:16]}… are not those its erasure record covers"
            )
    upto = max((int(body.get("snapshots_upto", 0)) for _, body in bodies), default=0)
    return Marks({seq: entry_id for seq, entry_id, _ in listed}, newest, upto, findings)


def blank_row_finding(row: Sequence[Any], listed_id: str) -> str:
    """What is wrong with a timeline row `erased` lists ("" when it is an intact erased row)."""
    seq, id_, _, _, _, situation, _, _, text, metadata, encoder, embedding = row
    where = f"timeline seq={seq} id={str(id_)[:16]}…"
    if id_ != listed_id:
        return f"{where}: erased as {listed_id[:16]}…, but the row holds another id"
    if situation or text or metadata != "{}" or encoder or len(embedding):
        return f"{where}: listed as erased but its content is still stored"
    return ""


# -- PostgreSQL --------------------------------------------------------------------------

POSTGRES_DDL = (
    f"""
CREATE TABLE IF NOT EXISTS erased (seq BIGINT PRIMARY KEY, id TEXT NOT NULL, erasure TEXT NOT NULL);
GRANT SELECT ON erased TO PUBLIC;  -- seqs and ids only: every role that verifies the store reads it
CREATE OR REPLACE FUNCTION memory_erasure_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'timeline' THEN
        IF TG_OP = 'UPDATE' AND EXISTS (SELECT 1 FROM erased WHERE erased.seq = OLD.seq AND erased.id = OLD.id) THEN
            IF {_BLANK} THEN
                RETURN NEW;
            END IF;
        END IF;
    ELSIF TG_TABLE_NAME = 'records' THEN
        IF TG_OP = 'DELETE' AND OLD.kind <> 'erasure' AND OLD.seq < {_NEWEST} THEN
            RETURN OLD;
        END IF;
    ELSIF TG_TABLE_NAME = 'snapshots' THEN
        IF TG_OP = 'DELETE' AND OLD.seq <= (SELECT COALESCE(MAX((body::json->>'snapshots_upto')::bigint), 0)
                                            FROM records WHERE kind = 'erasure') THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION '% is insert-only: % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'restrict_violation';
END $$;
"""
    + "".join(
        f"DROP TRIGGER IF EXISTS {table}_no_change ON {table};"
        f"CREATE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION memory_erasure_guard();"
        for table in ("timeline", "records", "snapshots")
    )
    + """
DROP TRIGGER IF EXISTS erased_no_change ON erased;
CREATE TRIGGER erased_no_change BEFORE UPDATE OR DELETE ON erased FOR EACH ROW EXECUTE FUNCTION memory_refuse();
DROP TRIGGER IF EXISTS erased_no_truncate ON erased;
CREATE TRIGGER erased_no_truncate BEFORE TRUNCATE ON erased FOR EACH STATEMENT EXECUTE FUNCTION memory_refuse();
"""
)


def apply_postgres(db: Any, plan: ErasurePlan) -> None:
    """Inside the store's write transaction (advisory lock held): the PostgreSQL form of `apply_sqlite`."""
    _check_unchanged(
        db.execute("SELECT COALESCE(MAX(seq), -1) FROM timeline").fetchone()[0],
        db.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()[0],
        plan,
    )
    db.execute(POSTGRES_DDL)
    newest = plan.last_record + 1
    upto = db.execute("SELECT COALESCE(MAX(seq), 0) FROM snapshots").fetchone()[0]
    db.execute(
        "INSERT INTO records (seq, kind, id, body) VALUES (%s,%s,%s,%s)",
        (newest, ERASURE, plan.record_id, _dumps({**plan.record, "snapshots_upto": upto})),
    )
    with db.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO erased (seq, id, erasure) VALUES (%s,%s,%s)",
            [(seq, entry_id, plan.record_id) for seq, entry_id in plan.entries],
        )
        db.execute(
            "UPDATE timeline SET situation = '', text = '', metadata = '{}', encoder = '', "
            "embedding = ''::bytea WHERE seq = ANY(%s)",
            ([seq for seq, _ in plan.entries],),
        )
        db.execute("DELETE FROM records WHERE seq < %s AND kind <> %s", (newest, ERASURE))
        if upto:
            db.execute("DELETE FROM snapshots WHERE seq <= %s", (upto,))
            db.execute(
                "INSERT INTO snapshots (seq, kind, id, meta, body) VALUES (%s,%s,%s,'{}',''::bytea)",
                (upto + 1, ERASURE, plan.record_id),
            )
        cursor.executemany(
            "INSERT INTO records (seq, kind, id, body) VALUES (%s,%s,%s,%s)",
            [(newest + i, kind, rid, body) for i, (kind, rid, body) in enumerate(plan.records, 1)],
        )


def purge_postgres(db: Any) -> bool:
    """After the erasure committed: ``VACUUM FULL`` rewrites the tables without the old row versions.

    Only the tables' owner may; for another role (or while other sessions hold locks) this
    returns False and the old versions stay until the owner vacuums. Copies in the server's
    WAL segments and backups are outside any table (see the README).
    """
    try:
        db.execute("VACUUM FULL timeline, records, snapshots, erased")
    except Exception:  # not the owner, or locks held: the erasure stands
        return False
    return True


def postgres_marks(db: Any) -> Marks:
    """The erasures of a PostgreSQL store."""
    has_table = db.execute(
        "SELECT EXISTS (SELECT FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'erased')"
    ).fetchone()[0]
    listed = db.execute("SELECT seq, id, erasure FROM erased ORDER BY seq").fetchall() if has_table else []
    bodies = [
        (rid, json.loads(body))
        for rid, body in db.execute("SELECT id, body FROM records WHERE kind = %s ORDER BY seq", (ERASURE,)).fetchall()
    ]
    newest = db.execute("SELECT COALESCE(MAX(seq), 0) FROM records WHERE kind = %s", (ERASURE,)).fetchone()[0]
    return marks_of(listed, bodies, newest)
