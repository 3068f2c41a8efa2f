"""The SQLite half of `memory.timeline.erasure`: the narrowed triggers, the two steps of an erasure
(its record, sealed by the caller, then the blanking it authorises), the purge, and the marks `verify` reads.
"""

from __future__ import annotations

import json
import sqlite3

from memory.timeline import record_body
from memory.timeline.erasure import BLANK_ROW, ERASURE, LISTED, ErasurePlan, Marks, check_unchanged, dumps, marks_of
from memory.timeline.schema import SCHEMA_VERSION

_SEALED_ERASURES = (  # driven by the records' (kind, seq) index: a few erasure records, one digest lookup each
    "records WHERE records.kind = 'erasure' AND EXISTS "
    "(SELECT 1 FROM digests WHERE digests.tbl = 'records' AND digests.seq = records.seq)"
)
_NEWEST = f"(SELECT COALESCE(MAX(records.seq), 0) FROM {_SEALED_ERASURES})"
_UPTO = (
    "(SELECT COALESCE(MAX(CAST(json_extract(records.body, '$.snapshots_upto') AS INTEGER)), 0) "
    f"FROM {_SEALED_ERASURES})"
)
_LISTED_BY_SEALED = (
    "EXISTS (SELECT 1 FROM erased JOIN records ON records.kind = 'erasure' AND records.id = erased.erasure "
    "JOIN digests ON digests.tbl = 'records' AND digests.seq = records.seq "
    "WHERE erased.seq = OLD.seq AND erased.id = OLD.id)"
)

# The triggers of schema.py, narrowed to the one UPDATE and the DELETEs a sealed erasure record allows:
# a row is blanked only when the listing of a sealed erasure names it, and derived rows are deleted only
# below the newest sealed erasure record.
SQLITE_DDL = [
    "CREATE TABLE IF NOT EXISTS erased (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, erasure TEXT NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS erased_no_update BEFORE UPDATE ON erased "
    "BEGIN SELECT RAISE(ABORT, 'erased is insert-only: UPDATE refused'); END",
    "CREATE TRIGGER IF NOT EXISTS erased_no_delete BEFORE DELETE ON erased "
    "BEGIN SELECT RAISE(ABORT, 'erased is insert-only: DELETE refused'); END",
    "DROP TRIGGER IF EXISTS timeline_no_update",
    f"CREATE TRIGGER timeline_no_update BEFORE UPDATE ON timeline WHEN NOT ({_LISTED_BY_SEALED} AND {BLANK_ROW}) "
    "BEGIN SELECT RAISE(ABORT, 'timeline is append-only: UPDATE refused'); END",
    "DROP TRIGGER IF EXISTS records_no_delete",
    f"CREATE TRIGGER records_no_delete BEFORE DELETE ON records WHEN OLD.kind = 'erasure' OR OLD.seq >= {_NEWEST} "
    "BEGIN SELECT RAISE(ABORT, 'records are insert-only: DELETE refused'); END",
    "DROP TRIGGER IF EXISTS snapshots_no_delete",
    f"CREATE TRIGGER snapshots_no_delete BEFORE DELETE ON snapshots WHEN OLD.seq > {_UPTO} "
    "BEGIN SELECT RAISE(ABORT, 'snapshots are insert-only: DELETE refused'); END",
]


def outdated_sqlite_triggers(db: sqlite3.Connection) -> bool:
    """Whether a store that erased before holds erasure triggers older than `SQLITE_DDL`'s (which
    allowed blanking under an erasure record not yet sealed)."""
    if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'erased'").fetchone():
        return False
    stored = {sql for (sql,) in db.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger'")}
    narrowed = [
        statement for statement in SQLITE_DDL if statement.startswith("CREATE TRIGGER ") and "IF NOT" not in statement
    ]
    return any(statement not in stored for statement in narrowed)


def record_sqlite(db: sqlite3.Connection, plan: ErasurePlan) -> int:
    """Inside the store's write transaction: install the narrow triggers and insert the erasure record and
    its listing; the record's seq. The caller seals it (`memory.timeline.integrity.seal`) before
    `blank_sqlite`, which the triggers refuse until then.

    Raises:
        StoreChanged: the store grew after the plan was made (make it again).
    """
    check_unchanged(
        db.execute("SELECT COALESCE(MAX(seq), -1) FROM timeline").fetchone()[0],
        db.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()[0],
        plan,
    )
    for statement in SQLITE_DDL:
        db.execute(statement)
    upto = db.execute("SELECT COALESCE(MAX(seq), 0) FROM snapshots").fetchone()[0]
    cursor = db.execute(
        "INSERT INTO records (kind, id, body) VALUES (?,?,?)",
        (ERASURE, plan.record_id, dumps({**plan.record, "snapshots_upto": upto})),
    )
    db.executemany(
        "INSERT INTO erased (seq, id, erasure) VALUES (?,?,?)",
        [(seq, entry_id, plan.record_id) for seq, entry_id in plan.entries],
    )
    return int(cursor.lastrowid or 0)


def blank_sqlite(db: sqlite3.Connection, plan: ErasurePlan, newest: int) -> None:
    """In the same transaction, once the erasure record at seq `newest` is sealed: blank the listed rows,
    delete the derived rows before it and store the re-derived ones."""
    upto = json.loads(db.execute("SELECT body FROM records WHERE seq = ?", (newest,)).fetchone()[0])["snapshots_upto"]
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
    listed = db.execute(LISTED).fetchall() if has_table else []
    bodies = [
        (rid, json.loads(body))
        for seq, rid, body in db.execute("SELECT seq, id, body FROM records WHERE kind = ? ORDER BY seq", (ERASURE,))
    ]
    newest = db.execute("SELECT COALESCE(MAX(seq), 0) FROM records WHERE kind = ?", (ERASURE,)).fetchone()[0]
    return marks_of(listed, bodies, newest)


# The erased listing with what each listed row keeps (its principal and timestamp), as format 2 covers them.
