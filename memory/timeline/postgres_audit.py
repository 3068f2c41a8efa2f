"""Auditing a PostgreSQL store: everything `python -m memory verify postgresql://...` checks, read-only.

The same checks as `memory.timeline.integrity.audit` on a SQLite file, with the server's
objects: the tables and the refusal triggers (present, enabled, firing on the right
operations, calling the store's own functions); row-level security and its policies, and the
bodies of the store's functions (a function replaced to let every row through is a finding);
the erasure listing; the timeline's hash chain (every id recomputed); malformed derived
records; the digest chains of the derived tables; and the anchors (a lost tail, a replaced
head, rows written past the store's writer, rewritten or deleted derived rows). Every finding
says what and where; none is raised. It runs in one read-only REPEATABLE READ transaction, so
writers may go on meanwhile.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import psycopg

from memory.errors import StoreError
from memory.timeline import erasure, postgres_erasure, record_body
from memory.timeline.anchor import DERIVED, GENESIS, row_digest
from memory.timeline.entries import GENESIS_ID, ChainBreak, Entry, verify_chain
from memory.timeline.integrity import MAX_FINDINGS, Audit
from memory.timeline.postgres_erasure import GUARD
from memory.timeline.postgres_integrity import DERIVED_COLUMNS, Anchored, anchored, has_integrity
from memory.timeline.postgres_schema import FUNCTIONS, INTEGRITY_TABLES, POLICIES, ROW_SECURED, SCHEMA, TABLES
from memory.timeline.schema import COLUMNS, row_to_entry

# pg_trigger.tgtype bits: FOR EACH ROW 1, BEFORE 2, DELETE 8, UPDATE 16, TRUNCATE 32
_NO_CHANGE, _NO_TRUNCATE = 1 | 2 | 8 | 16, 2 | 32
_REFUSALS = (("no_change", _NO_CHANGE, "UPDATE/DELETE"), ("no_truncate", _NO_TRUNCATE, "TRUNCATE"))
# the WITH CHECK expression of each table's memory_append policy, as the server shows it
APPEND_CHECKS = {
    "timeline": "memory_may_append(CURRENT_USER, seq, principal)",
    "records": "memory_may_add(CURRENT_USER, kind, id, body)",
}
_REFUSE = re.search(r"memory_refuse\(\).*?\$\$(.*?)\$\$", SCHEMA, re.S)
TRIGGER_BODIES = {"memory_refuse": _REFUSE.group(1) if _REFUSE else "", "memory_erasure_guard": GUARD}


def audit(url: str, shown: str) -> Audit:
    """Check the store at `url` read-only (`shown`: the URL without its password, for messages).

    Raises:
        StoreError: the server cannot be reached or the database does not exist (a user's mistake, as a
            missing file is for `memory.timeline.integrity.audit`).
    """
    try:
        db = psycopg.connect(url, autocommit=True)
    except psycopg.Error as exc:
        raise StoreError(f"{shown}: cannot connect ({str(exc).strip()})") from exc
    with db:
        return audit_connection(db)[0]


def audit_connection(db: psycopg.Connection) -> tuple[Audit, ChainBreak | None]:
    """The audit of the store on `db` (an autocommit connection), and the timeline's first chain break."""
    try:
        with db.transaction():
            db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return _audit(db)
    except psycopg.OperationalError as exc:
        raise StoreError(f"the server went away during verify ({str(exc).strip()})") from exc
    except psycopg.Error as exc:  # a store damaged past reading: a finding, not a traceback
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return Audit(0, GENESIS_ID, [f"the database cannot be read: {message}"], []), None


def _audit(db: psycopg.Connection) -> tuple[Audit, ChainBreak | None]:
    findings: list[str] = []
    notes: list[str] = []
    tables = {
        row[0] for row in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()
    }
    for table in TABLES:
        if table not in tables:
            findings.append(f"schema: table {table} is missing")
    if "timeline" not in tables:
        return Audit(0, GENESIS_ID, findings, notes), None
    sealed = has_integrity(db)
    if not sealed:
        notes.append(
            "the store was created before digests and anchors: derived records are not digest-chained and no "
            "anchor shows a lost tail (its owner's next write, or grant_writer, adds them)"
        )
    guarded = [*TABLES, *(INTEGRITY_TABLES if sealed else ()), *(("erased",) if "erased" in tables else ())]
    findings += _trigger_findings(db, [t for t in guarded if t in tables])
    findings += _function_findings(db, sealed)
    if sealed:
        findings += _security_findings(db)
    marks = erasure.postgres_marks(db)
    findings += marks.findings
    count, head, brk = _chain(db, marks.entries)
    if brk is not None:
        findings.append(f"timeline seq={brk.seq} id={brk.id[:16]}…: {brk.reason}")
    if sealed:
        bounds = {"records": marks.records_before - 1, "snapshots": marks.snapshots_upto}
        for table in DERIVED:
            if table in tables:
                findings += _derived(db, table, bounds[table])
        findings += _anchor_findings(db, bounds)
    elif "records" in tables:
        findings += _malformed(db)
    shown = findings[:MAX_FINDINGS] + (
        [f"… and {len(findings) - MAX_FINDINGS} more"] if len(findings) > MAX_FINDINGS else []
    )
    return Audit(count, head, shown, notes), brk


def _trigger_findings(db: psycopg.Connection, tables: list[str]) -> list[str]:
    """The refusal triggers of `tables`: each present, enabled, firing before UPDATE/DELETE (per row) and
    TRUNCATE, on one of the store's refusal functions."""
    rows = db.execute(
        "SELECT c.relname, t.tgname, t.tgtype, t.tgenabled, p.proname FROM pg_trigger t "
        "JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_proc p ON p.oid = t.tgfoid "
        "WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal"
    ).fetchall()
    found = {(table, name): (tgtype, enabled, function) for table, name, tgtype, enabled, function in rows}
    findings = []
    for table in tables:
        for suffix, tgtype, refused in (
            ("no_change", _NO_CHANGE, "UPDATE/DELETE"),
            ("no_truncate", _NO_TRUNCATE, "TRUNCATE"),
        ):
            name = f"{table}_{suffix}"
            trigger = found.get((table, name))
            allowed = ("memory_refuse", "memory_erasure_guard") if suffix == "no_change" else ("memory_refuse",)
            if trigger is None:
                findings.append(f"schema: refusal trigger {name} on {table} is missing ({refused} were possible)")
            elif trigger[1] == "D":
                findings.append(f"schema: refusal trigger {name} on {table} is disabled ({refused} were possible)")
            elif trigger[0] != tgtype or trigger[2] not in allowed:
                findings.append(
                    f"schema: refusal trigger {name} on {table} is not the store's (it calls {trigger[2]}, "
                    f"type {trigger[0]}): {refused} may be possible"
                )
    return findings


def _function_findings(db: psycopg.Connection, sealed: bool) -> list[str]:
    """The store's functions whose stored body is not the one the store created (or that are missing)."""
    expected = dict(TRIGGER_BODIES)
    if sealed:
        expected.update({name: spec[4] for name, spec in FUNCTIONS.items()})
    rows = db.execute(
        "SELECT proname, prosrc, prosecdef FROM pg_proc WHERE pronamespace = current_schema()::regnamespace "
        "AND proname = ANY(%s)",
        (list(expected),),
    ).fetchall()
    stored: dict[str, list[tuple[str, bool]]] = {}
    for name, source, definer in rows:
        stored.setdefault(name, []).append((source, definer))
    findings = []
    for name, body in expected.items():
        versions = stored.get(name, [])
        if name == "memory_erasure_guard" and not versions:
            continue  # a store that never erased
        if not versions:
            findings.append(f"schema: function {name} is missing")
        elif len(versions) > 1 or not (
            postgres_erasure.known_guard(versions[0][0]) if name == "memory_erasure_guard" else versions[0][0] == body
        ):
            findings.append(f"schema: function {name} was replaced (its body is not the store's)")
        elif name in FUNCTIONS and not versions[0][1]:
            findings.append(f"schema: function {name} is not SECURITY DEFINER")
    return findings


def _security_findings(db: psycopg.Connection) -> list[str]:
    """Row-level security on `ROW_SECURED`: enabled, with exactly the store's policies (an added permissive
    policy would let a role write any principal's rows)."""
    enabled: dict[str, bool] = dict(
        db.execute(
            "SELECT relname, relrowsecurity FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
            "AND relname = ANY(%s) AND relkind = 'r'",
            (list(ROW_SECURED),),
        ).fetchall()
    )
    policies: dict[str, dict[str, tuple[str, str | None, str | None]]] = {}
    for table, name, command, qual, check in db.execute(
        "SELECT tablename, policyname, cmd, qual, with_check FROM pg_policies WHERE schemaname = current_schema()"
    ).fetchall():
        policies.setdefault(table, {})[name] = (command, qual, check)
    findings = []
    for table in ROW_SECURED:
        if not enabled.get(table, False):
            findings.append(f"schema: row-level security on {table} is disabled (any role may write any principal)")
        present = policies.get(table, {})
        for name in sorted(set(present) - set(POLICIES)):
            findings.append(
                f"schema: policy {name} on {table} is not the store's (it may let a role write any principal)"
            )
        read, append = present.get("memory_read"), present.get("memory_append")
        if read is None or read[:2] != ("SELECT", "true"):
            findings.append(f"schema: policy memory_read on {table} is missing or changed")
        if append is None or append[0] != "INSERT" or append[2] != APPEND_CHECKS[table]:
            findings.append(
                f"schema: policy memory_append on {table} is missing or changed (it limits a role's principals)"
            )
    return findings


def _chain(db: psycopg.Connection, erased: dict[int, str]) -> tuple[int, str, ChainBreak | None]:
    """(rows read, head id, first break) of the timeline's hash chain, streamed with a server-side cursor."""
    unreadable: list[ChainBreak] = []
    count, head = [0], [GENESIS_ID]

    def readable() -> Iterator[Entry]:
        with db.cursor(name="verify_chain") as cursor:
            cursor.itersize = 2000
            for row in cursor.execute(f"SELECT {COLUMNS} FROM timeline ORDER BY seq"):
                count[0] += 1
                try:
                    entry = row_to_entry(row)
                except (ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
                    unreadable.append(ChainBreak(row[0], str(row[1]), f"unreadable row: {exc}"))
                    return
                head[0] = entry.id
                yield entry

    brk = verify_chain(readable(), erased=erased)
    return count[0], head[0], unreadable[0] if unreadable else brk


def _malformed(db: psycopg.Connection) -> list[str]:
    """Findings of records whose bodies are not JSON objects (a store without digests)."""
    found = []
    for seq, kind, record_id, body in db.execute("SELECT seq, kind, id, body FROM records ORDER BY seq").fetchall():
        if wrong := record_body.parse(body).problem:
            found.append(f"records seq={seq} kind={kind} id={record_id}: malformed: {wrong}")
    return found


def _derived(db: psycopg.Connection, table: str, erased_upto: int) -> list[str]:
    """Findings of one derived table's digest chain (the first break) and, for records, every malformed body.

    Rows up to seq `erased_upto` may be absent (an erasure deleted them): the chain goes on from their
    stored digests, which the next present row's digest covers.
    """
    digests = iter(db.execute("SELECT seq, digest FROM digests WHERE tbl = %s ORDER BY seq", (table,)).fetchall())
    findings: list[str] = []
    broken = False
    prev = GENESIS
    with db.cursor(name=f"verify_{table}") as cursor:
        cursor.itersize = 2000
        for row in cursor.execute(f"SELECT {DERIVED_COLUMNS[table]} FROM {table} ORDER BY seq"):
            where = f"{table} seq={row[0]} kind={row[1]} id={row[2]}"
            if table == "records" and (wrong := record_body.parse(row[3]).problem):
                findings.append(f"{where}: malformed: {wrong}")
            if broken:
                continue
            stored = next(digests, None)
            while stored is not None and stored[0] < row[0] and stored[0] <= erased_upto:
                prev, stored = stored[1], next(digests, None)
            if stored is None:
                findings.append(f"{where}: not covered by the digest chain (inserted outside the store)")
                broken = True
            elif stored[0] != row[0]:
                findings.append(f"{table} seq={min(stored[0], row[0])}: a row and its digest are missing")
                broken = True
            else:
                prev = row_digest(prev, tuple(row[1:]))
                if prev != stored[1]:
                    findings.append(f"{where}: content does not match its digest")
                    broken = True
    if broken:
        return findings
    extra = next(digests, None)
    while extra is not None and extra[0] <= erased_upto:
        extra = next(digests, None)
    return findings + ([f"{table} seq={extra[0]}: digested row is missing (deleted)"] if extra else [])


_ANCHOR_COLUMNS = "seq, entries, head, records_seq, records_digest, snapshots_seq, snapshots_digest"


def _anchor_findings(db: psycopg.Connection, erased_upto: dict[str, int]) -> list[str]:
    """The store against its newest anchor and, when that one matches, against every older one."""
    newest = db.execute(f"SELECT {_ANCHOR_COLUMNS} FROM anchors ORDER BY seq DESC LIMIT 1").fetchone()
    if newest is None:
        return ["anchors: the table holds no row (deleted): a lost tail or rows written past the writer cannot be seen"]
    return _against_newest(db, anchored(newest), erased_upto) or _against_older(db)


def _against_newest(db: psycopg.Connection, anchor: Anchored, erased_upto: dict[str, int]) -> list[str]:
    """Findings of the store against its newest anchor, which it must match exactly: every write appends
    one in its own transaction, so the store is never legitimately ahead of it."""
    findings = []
    count, last = db.execute("SELECT COUNT(*), MAX(seq) FROM timeline").fetchone() or (0, None)
    if anchor.entries:
        row = db.execute("SELECT id FROM timeline WHERE seq = %s", (anchor.entries - 1,)).fetchone()
        if row is None:
            findings.append(f"timeline: {count} entries, the anchor records {anchor.entries}: the tail was lost")
        elif row[0] != anchor.head:
            findings.append(f"timeline seq={anchor.entries - 1}: not the anchored head {anchor.head[:16]}…")
    if last is not None and last + 1 > anchor.entries:
        findings.append(
            f"timeline seq={anchor.entries}..{last}: written past the store's writer (after the newest anchor, "
            f"which records {anchor.entries} entries)"
        )
    for table in DERIVED:
        seq, digest = anchor.derived[table]
        if seq:
            row = db.execute("SELECT digest FROM digests WHERE tbl = %s AND seq = %s", (table, seq)).fetchone()
            if row is None or row[0] != digest:
                findings.append(
                    f"{table} seq={seq}: the anchored digest {digest[:16]}… is "
                    f"{'missing' if row is None else 'different'} (rows lost or rewritten)"
                )
            elif (
                seq > erased_upto[table]
                and db.execute(f"SELECT 1 FROM {table} WHERE seq = %s", (seq,)).fetchone() is None
            ):
                findings.append(f"{table} seq={seq}: the anchored row is missing")
        past = db.execute("SELECT MIN(seq), MAX(seq) FROM digests WHERE tbl = %s AND seq > %s", (table, seq)).fetchone()
        if past is not None and past[0] is not None:
            findings.append(
                f"digests of {table} seq={past[0]}..{past[1]}: written past the store's writer "
                f"(after the newest anchor, which records {table} up to seq {seq})"
            )
    return findings


def _against_older(db: psycopg.Connection) -> list[str]:
    """The newest older anchor that no longer finds what it recorded (the entry at its head, the digests at
    its chains' heads): rows lost or replaced, then the newest anchors deleted to hide it. Two joins."""
    findings = []
    row = db.execute(
        "SELECT a.seq, a.entries, a.head FROM anchors a LEFT JOIN timeline t ON t.seq = a.entries - 1 "
        "WHERE a.entries > 0 AND t.id IS DISTINCT FROM a.head ORDER BY a.seq DESC LIMIT 1"
    ).fetchone()
    if row is not None:
        findings.append(
            f"anchors seq={row[0]}: records entry seq={row[1] - 1} as {row[2][:16]}…, which the timeline no longer "
            "holds (rows lost or replaced)"
        )
    for table in DERIVED:
        row = db.execute(
            f"SELECT a.seq, a.{table}_seq FROM anchors a LEFT JOIN digests d ON d.tbl = %s AND d.seq = a.{table}_seq "
            f"WHERE a.{table}_seq > 0 AND d.digest IS DISTINCT FROM a.{table}_digest ORDER BY a.seq DESC LIMIT 1",
            (table,),
        ).fetchone()
        if row is not None:
            findings.append(
                f"anchors seq={row[0]}: records the digest of {table} seq={row[1]}, which is missing or different "
                "(rows lost or rewritten)"
            )
    return findings
