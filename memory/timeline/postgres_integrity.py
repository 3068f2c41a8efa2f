"""The writer's half of a PostgreSQL store's integrity: sealing derived rows, anchoring, and the checks
that stop a write from vouching for rows written past the store's writer.

The objects are those of `memory.timeline.postgres_schema.integrity`. Inside every write
transaction (the advisory lock held) `PostgresStore` calls `refuse_unanchored` first: the store
must hold exactly what its newest anchor recorded, or the write would seal rows it did not
write (a forged record) or carry on past a lost tail. After the write's own rows, `seal` chains
the derived rows written since the last digest (`memory.timeline.anchor.row_digest`, the SQLite
store's chain) and `anchor` appends the new head through ``memory_anchor()``, in the same
transaction: unlike the SQLite file's sidecar, the anchor never lags the store, so a store ahead
of its newest anchor was written past the store's writer.

A store created before these objects opens as before; its owner's first write (or `grant_writer`)
adds them, chaining every derived row already stored, in one transaction (`install`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import psycopg
from psycopg import sql

from memory.errors import StoreError
from memory.timeline.anchor import DERIVED, GENESIS, row_digest
from memory.timeline.entries import GENESIS_ID
from memory.timeline.postgres_schema import WRITE_LOCK, integrity

DERIVED_COLUMNS = {"records": "seq, kind, id, body", "snapshots": "seq, kind, id, meta, body"}

# Derived records are served up to the records seq of the newest anchor: every honest write anchors in
# its own transaction, so a row past it was written past the store's writer and is never served.
SEALED = "seq <= COALESCE((SELECT records_seq FROM anchors ORDER BY seq DESC LIMIT 1), 0)"


class Anchored(NamedTuple):
    """One row of ``anchors``: what the store held when a write transaction ended."""

    seq: int  # the anchor row's own position
    entries: int  # number of timeline entries
    head: str  # id of the last entry (GENESIS_ID when there is none)
    derived: dict[str, tuple[int, str]]  # table -> (seq, digest) of its last chained row (0, GENESIS when none)


class State(NamedTuple):
    """What the store holds now, read in one query (every write reads it)."""

    entries: int  # number of timeline rows (the last seq plus one)
    head: str  # id of the last timeline row
    tops: dict[str, int]  # table -> its last seq (0 when empty)
    chained: dict[str, tuple[int, str]]  # table -> (seq, digest) of its last digest row
    anchor: Anchored | None  # the newest anchor, None when there is none
    anchored_head: str | None  # id of the timeline row at the anchor's last entry (None: no such row)
    unsealed: tuple[int, str, str] | None  # (seq, kind, id) of the first records row no digest covers


_STATE = """
SELECT (SELECT seq FROM timeline ORDER BY seq DESC LIMIT 1), (SELECT id FROM timeline ORDER BY seq DESC LIMIT 1),
       (SELECT MAX(seq) FROM records), (SELECT MAX(seq) FROM snapshots),
       (SELECT ARRAY[seq::text, digest] FROM digests WHERE tbl = 'records' ORDER BY seq DESC LIMIT 1),
       (SELECT ARRAY[seq::text, digest] FROM digests WHERE tbl = 'snapshots' ORDER BY seq DESC LIMIT 1),
       (SELECT ARRAY[seq::text, entries::text, head, records_seq::text, records_digest, snapshots_seq::text,
                     snapshots_digest] FROM anchors ORDER BY seq DESC LIMIT 1),
       (SELECT id FROM timeline WHERE seq = (SELECT entries - 1 FROM anchors ORDER BY seq DESC LIMIT 1)),
       (SELECT ARRAY[seq::text, kind, id] FROM records
         WHERE seq > COALESCE((SELECT seq FROM digests WHERE tbl = 'records' ORDER BY seq DESC LIMIT 1), 0)
         ORDER BY seq LIMIT 1)
"""


def anchored(row: Sequence[Any]) -> Anchored:
    """An `Anchored` from (seq, entries, head, records_seq, records_digest, snapshots_seq, snapshots_digest)."""
    return Anchored(
        int(row[0]),
        int(row[1]),
        str(row[2]),
        {"records": (int(row[3]), str(row[4])), "snapshots": (int(row[5]), str(row[6]))},
    )


def state(db: psycopg.Connection) -> State:
    """The store's heads and its newest anchor."""
    row = db.execute(_STATE).fetchone()
    assert row is not None  # a SELECT without FROM returns one row
    last, head, records_top, snapshots_top, records_chain, snapshots_chain, newest, anchored_head, unsealed = row
    chained = {
        table: (int(chain[0]), chain[1]) if chain else (0, GENESIS)
        for table, chain in zip(DERIVED, (records_chain, snapshots_chain))
    }
    return State(
        0 if last is None else last + 1,
        head or GENESIS_ID,
        {"records": records_top or 0, "snapshots": snapshots_top or 0},
        chained,
        anchored(newest) if newest else None,
        anchored_head,
        (int(unsealed[0]), unsealed[1], unsealed[2]) if unsealed else None,
    )


def has_integrity(db: psycopg.Connection) -> bool:
    """Whether the store has its digests and anchors (a store created before them has neither)."""
    row = db.execute(
        "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename IN ('digests', 'anchors')"
    ).fetchone()
    return row is not None and row[0] == 2


def owns_store(db: psycopg.Connection) -> bool:
    """Whether the connection's role owns the store's tables (or is a superuser): it may add the integrity
    objects, and row-level security does not apply to it."""
    row = db.execute(
        "SELECT pg_has_role(current_user, relowner, 'MEMBER') FROM pg_class "
        "WHERE oid = (quote_ident(current_schema()) || '.timeline')::regclass"
    ).fetchone()
    return row is not None and bool(row[0])


def install(db: psycopg.Connection) -> None:
    """Inside a write transaction of the owner: add the integrity objects, chain every derived row already
    stored (a store written before digests: they are vouched for once, as the SQLite store's first write
    does) and anchor the result."""
    schema = db.execute("SELECT current_schema()").fetchone()
    assert schema is not None
    db.execute(integrity(schema[0]))
    seal(db)
    anchor(db)


def seal(db: psycopg.Connection, since: State | None = None, tables: Sequence[str] = DERIVED) -> None:
    """Inside a write transaction: digest the derived rows not yet chained, in seq order.

    `since`: the state read when this transaction took the write lock (`refuse_unanchored`), and `tables`
    the derived tables that may hold rows past its chains (those the transaction wrote, or that held
    unchained rows then); under the lock no other writer chains meanwhile. Without it the state is read.
    """
    if since is None:
        since = state(db)
        tables = [table for table in DERIVED if since.tops[table] > since.chained[table][0]]
    new: list[tuple[str, int, str]] = []
    with db.cursor() as cursor:
        for table in tables:
            seq, prev = since.chained[table]
            for row in cursor.execute(
                f"SELECT {DERIVED_COLUMNS[table]} FROM {table} WHERE seq > %s ORDER BY seq", (seq,)
            ).fetchall():
                prev = row_digest(
                    prev, tuple(bytes(part) if isinstance(part, memoryview) else part for part in row[1:])
                )
                new.append((table, row[0], prev))
        if new:
            cursor.executemany("INSERT INTO digests (tbl, seq, digest) VALUES (%s,%s,%s)", new)


@dataclass
class Held:
    """What a write transaction knows once it holds the store's write lock (`lock_and_check`)."""

    entries: int  # number of timeline entries (the next entry's seq)
    head: str  # id of the last entry (GENESIS_ID when there is none)
    records: int  # seq of the last records row (0 when there is none)
    before: State | None  # the state checked under the lock (None: a store without the integrity objects)
    wrote: set[str] = field(default_factory=set)  # the derived tables written so far
    unknown: bool = False  # what was written is not known (an erasure): sealing reads the state again


_HEADS = """
SELECT (SELECT seq FROM timeline ORDER BY seq DESC LIMIT 1), (SELECT id FROM timeline ORDER BY seq DESC LIMIT 1),
       (SELECT MAX(seq) FROM records)
"""


def lock_and_check(db: psycopg.Connection, shown: str, *, known: bool, owner: bool) -> Held:
    """At the start of a write transaction: take the store's write lock, add the integrity objects when the
    owner writes to a store created before them, refuse a store its newest anchor does not describe
    (`refuse_unanchored`), and read the heads the write continues. `known`: the store is known to have
    the objects, so the lock and the check go in one round trip (pipeline mode)."""
    current: State | None
    if known:
        with db.pipeline():
            db.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            current = refuse_unanchored(db, shown)
    else:
        db.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        present = has_integrity(db)
        if owner and not present:
            install(db)
            present = True
        current = refuse_unanchored(db, shown) if present else None
    if current is not None:
        return Held(current.entries, current.head, current.tops["records"], current)
    row = db.execute(_HEADS).fetchone()
    assert row is not None  # a SELECT without FROM returns one row
    last, head, records = row
    return Held(0 if last is None else last + 1, head or GENESIS_ID, records or 0, None)


def seal_and_anchor(db: psycopg.Connection, held: Held) -> None:
    """At the end of a write transaction: chain the derived rows it wrote and anchor the store's head, the
    digests and the anchor in one round trip (pipeline mode). Nothing for a store without the objects."""
    before = held.before
    if before is None:
        return
    with db.pipeline():
        if held.unknown:
            seal(db)
        else:
            unchained = {table for table in DERIVED if before.tops[table] > before.chained[table][0]}
            seal(db, before, [table for table in DERIVED if table in held.wrote | unchained])
        anchor(db)


def anchor(db: psycopg.Connection) -> None:
    """Inside a write transaction, after `seal`: append the store's head to ``anchors``."""
    db.execute("SELECT memory_anchor()")


def refuse_unanchored(db: psycopg.Connection, shown: str) -> State:
    """At the start of a write transaction: refuse to write on a store that does not hold exactly what its
    newest anchor recorded (`lost_tail`), or holds a records row no digest covers (sealing it would vouch
    for it; a foreign state run in ``snapshots`` is only ignored when read, and is sealed as before).

    Returns:
        The state it checked (what the write starts from).

    Raises:
        StoreError: naming the first such row or the lost tail; nothing is written, and `verify` names it.
    """
    current = state(db)
    problem = _against_anchor(current) or _unsealed(current)
    if problem:
        raise StoreError(f"{shown}: {problem} (python -m memory verify {shown} lists every finding)")
    return current


def lost_tail(db: psycopg.Connection) -> str:
    """A cheap check on open: what the store lost against its newest anchor ("" when nothing is known lost)."""
    current = state(db)
    anchor_row = current.anchor
    if anchor_row is None:
        return ""
    if current.entries < anchor_row.entries:
        return (
            f"the store holds {current.entries} entries but its anchor records {anchor_row.entries}: its tail was lost"
        )
    return _missing_derived(current, anchor_row)


def _against_anchor(current: State) -> str:
    anchor_row = current.anchor
    if anchor_row is None:
        return "the anchors table holds no row (its rows were deleted)"
    if current.entries < anchor_row.entries:
        return (
            f"the store holds {current.entries} entries but its anchor records {anchor_row.entries}: its tail was lost"
        )
    if anchor_row.entries and current.anchored_head != anchor_row.head:
        return f"entry seq={anchor_row.entries - 1} is not the anchored head {anchor_row.head[:12]}…"
    if current.entries > anchor_row.entries:
        return f"timeline seq={anchor_row.entries} and after were written past the store's writer (not anchored)"
    for table in DERIVED:
        seq, digest = anchor_row.derived[table]
        chained_seq, chained_digest = current.chained[table]
        if chained_seq > seq:
            return f"digests of {table} seq={seq + 1} and after were written past the store's writer (not anchored)"
        if (chained_seq, chained_digest) != (seq, digest):
            return f"{table} seq={seq}: the anchored digest {digest[:12]}… is missing or different"
    return _missing_derived(current, anchor_row)


def _missing_derived(current: State, anchor_row: Anchored) -> str:
    """A derived table whose anchored last row is gone (deleted past its digest): "" when there is none."""
    for table in DERIVED:
        seq, _ = anchor_row.derived[table]
        if seq and current.tops[table] < seq:
            return f"{table} row seq={seq} recorded by the anchor is missing"
    return ""


def _unsealed(current: State) -> str:
    if current.unsealed is None:
        return ""
    seq, kind, id_ = current.unsealed
    return (
        f"records seq={seq} kind={kind} id={id_} was written past the store's writer "
        "(no digest covers it); refusing to write, which would seal it"
    )


def grant_writer(url: str, role: str, *, principals: Sequence[str] | None = None) -> None:
    """Let `role` read the store at `url` and append entries and derived records of `principals` (by default
    the principal named like the role), and nothing else. Run as the tables' owner; a store created
    before digests and anchors gets them first.

    The role may append to ``timeline``, ``records``, ``snapshots`` and ``digests`` and call
    ``memory_anchor()``; row-level security refuses its rows of any other principal (see
    `memory.timeline.postgres_schema`). Granting again replaces the role's principals.

    Raises:
        StoreError: no store at `url`, or the connection's role cannot grant.
    """
    granted = list(principals) if principals is not None else [role]
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                if not has_integrity(conn):
                    install(conn)
                database, name = sql.Identifier(conn.info.dbname), sql.Identifier(role)
                schema = conn.execute("SELECT current_schema()").fetchone()
                assert schema is not None
                for statement in (
                    "GRANT CONNECT ON DATABASE {db} TO {role}",
                    "GRANT USAGE ON SCHEMA {schema} TO {role}",
                    "REVOKE ALL ON timeline, records, snapshots, digests, anchors, writers FROM {role}",
                    "GRANT SELECT, INSERT ON timeline, records, snapshots, digests TO {role}",
                    "GRANT SELECT ON anchors TO {role}",
                    "GRANT EXECUTE ON FUNCTION memory_anchor() TO {role}",
                ):
                    conn.execute(sql.SQL(statement).format(db=database, role=name, schema=sql.Identifier(schema[0])))
                erased = conn.execute("SELECT to_regclass('erased')").fetchone()
                if erased is not None and erased[0] is not None:  # a store that erased
                    conn.execute(sql.SQL("GRANT SELECT ON erased TO {}").format(name))
                conn.execute("DELETE FROM writers WHERE role = %s", (role,))
                with conn.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO writers (role, principal) VALUES (%s, %s)", [(role, p) for p in granted]
                    )
    except psycopg.Error as exc:
        raise StoreError(f"cannot grant {role!r} writing to the store: {str(exc).strip()}") from exc
