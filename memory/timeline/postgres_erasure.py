"""Erasure on a PostgreSQL store whose erasure records are sealed before they authorise anything.

The PostgreSQL form of `memory.timeline.erasure_sqlite`'s two steps, with the digest chains of
`memory.timeline.postgres_integrity`: the erasure record and its ``erased`` listing are inserted
and sealed first, and the guard trigger lets a row be blanked only when a *sealed* erasure record
lists it, and derived rows be deleted only below the newest sealed erasure record. An erasure
made with plain SQL (a record without the writer's digest) therefore cannot blank or delete
anything; one whose digest is forged too stays past the newest anchor, which `verify` names.

The plan (`erasure.make_plan`), the purge (`erasure.purge_postgres`) and the reading of the
listing (`erasure.postgres_marks`) are the shared ones.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import psycopg

from memory.errors import StoreChanged
from memory.timeline.erasure import BLANK_ROW, ERASURE, ErasurePlan
from memory.timeline.postgres_integrity import seal

_SEALED = "records r JOIN digests d ON d.tbl = 'records' AND d.seq = r.seq WHERE r.kind = 'erasure'"

GUARD = f"""
BEGIN
    IF TG_TABLE_NAME = 'timeline' THEN
        IF TG_OP = 'UPDATE' AND {BLANK_ROW} AND EXISTS (
            SELECT 1 FROM erased e JOIN records r ON r.kind = 'erasure' AND r.id = e.erasure
            JOIN digests d ON d.tbl = 'records' AND d.seq = r.seq
            WHERE e.seq = OLD.seq AND e.id = OLD.id
        ) THEN
            RETURN NEW;
        END IF;
    ELSIF TG_TABLE_NAME = 'records' THEN
        IF TG_OP = 'DELETE' AND OLD.kind <> 'erasure' AND OLD.seq < (SELECT COALESCE(MAX(r.seq), 0) FROM {_SEALED}) THEN
            RETURN OLD;
        END IF;
    ELSIF TG_TABLE_NAME = 'snapshots' THEN
        IF TG_OP = 'DELETE' AND OLD.seq <= (
            SELECT COALESCE(MAX((r.body::json->>'snapshots_upto')::bigint), 0) FROM {_SEALED}
        ) THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION '% is insert-only: % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'restrict_violation';
END
"""

# SHA-256 of the guard's body as stores erased before sealed erasures hold it (it trusted any erasure record):
# `verify` accepts it, and the next erasure replaces it with `GUARD`.
EARLIER_GUARDS = frozenset({"3e9b4f7bfda5fbde50e9fec795146024dc811ca30c1903129279b5563a44772c"})

DDL = (
    "CREATE TABLE IF NOT EXISTS erased (seq BIGINT PRIMARY KEY, id TEXT NOT NULL, erasure TEXT NOT NULL);"
    "GRANT SELECT ON erased TO PUBLIC;"  # seqs and ids only: every role that verifies the store reads it
    f"CREATE OR REPLACE FUNCTION memory_erasure_guard() RETURNS trigger LANGUAGE plpgsql AS $guard${GUARD}$guard$;"
    + "".join(
        f"DROP TRIGGER IF EXISTS {table}_no_change ON {table};"
        f"CREATE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION memory_erasure_guard();"
        for table in ("timeline", "records", "snapshots")
    )
    + "DROP TRIGGER IF EXISTS erased_no_change ON erased;"
    "CREATE TRIGGER erased_no_change BEFORE UPDATE OR DELETE ON erased FOR EACH ROW EXECUTE FUNCTION memory_refuse();"
    "DROP TRIGGER IF EXISTS erased_no_truncate ON erased;"
    "CREATE TRIGGER erased_no_truncate BEFORE TRUNCATE ON erased FOR EACH STATEMENT EXECUTE FUNCTION memory_refuse();"
)


def known_guard(body: str) -> bool:
    """Whether a stored body of ``memory_erasure_guard`` is this module's or one an earlier version installed."""
    return body == GUARD or hashlib.sha256(body.encode()).hexdigest() in EARLIER_GUARDS


def apply(db: psycopg.Connection, plan: ErasurePlan) -> None:
    """Inside the store's write transaction (advisory lock held, integrity objects present): erase as planned.

    The erasure record and its listing are inserted and sealed, then the listed rows are blanked, the
    derived rows before the record deleted and the re-derived ones stored (sealed with the write).

    Raises:
        StoreChanged: the store grew after the plan was made (make it again).
    """
    head = db.execute("SELECT COALESCE(MAX(seq), -1) FROM timeline").fetchone()
    last = db.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()
    if head is None or last is None or head[0] != plan.head or last[0] != plan.last_record:
        raise StoreChanged("the store changed while the erasure was prepared (another writer appended)")
    db.execute(DDL)
    newest = plan.last_record + 1
    upto_row = db.execute("SELECT COALESCE(MAX(seq), 0) FROM snapshots").fetchone()
    upto = upto_row[0] if upto_row else 0
    body: dict[str, Any] = {**plan.record, "snapshots_upto": upto}
    db.execute(
        "INSERT INTO records (seq, kind, id, body) VALUES (%s,%s,%s,%s)",
        (newest, ERASURE, plan.record_id, json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)),
    )
    with db.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO erased (seq, id, erasure) VALUES (%s,%s,%s)",
            [(seq, entry_id, plan.record_id) for seq, entry_id in plan.entries],
        )
        seal(db)  # the record's digest is what lets the guard allow what follows
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
            [(newest + i, kind, rid, text) for i, (kind, rid, text) in enumerate(plan.records, 1)],
        )
