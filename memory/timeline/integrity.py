"""Auditing a store file: everything `python -m memory verify` checks, read-only.

`audit` opens the file read-only (it never creates, migrates or repairs anything) and
reports every finding with what is wrong and where, instead of raising: a damaged file is
the expected input here. It checks, in order: that the file is an SQLite store of this
project; SQLite's own ``integrity_check``; the schema version and the refusal triggers;
the timeline's hash chain (every id recomputed); the digest chains of the derived tables;
and the sidecar anchor (a lost or truncated tail, a replaced head, rewritten derived rows).

`seal` is the writer's half: called inside every write transaction, it chains the derived
rows written since the last digest and returns the anchor to write after the commit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

from memory.errors import DamagedBody, IntegrityError, StoreError
from memory.timeline import anchor as anchor_file
from memory.timeline import erasure, erasure_sqlite, record_body
from memory.timeline.anchor import DERIVED, GENESIS, Anchor, row_digest
from memory.timeline.connection import WriteTransaction, missing_triggers
from memory.timeline.entries import GENESIS_ID, Entry, entry_id
from memory.timeline.format_version import rewound_version
from memory.timeline.schema import APPLICATION_ID, READ_COLUMNS, READABLE_SCHEMAS, row_to_entry, rows_to_entries

_DERIVED_COLUMNS = {"records": "seq, kind, id, body", "snapshots": "seq, kind, id, meta, body"}
MAX_FINDINGS = 20  # a badly damaged file is summarised, not listed row by row


class Audit(NamedTuple):
    """What `audit` found."""

    entries: int  # timeline rows read
    head: str  # id of the last entry (GENESIS_ID when empty)
    findings: list[str]  # damage, each saying what and where; empty when the store is intact
    notes: list[str]  # facts worth knowing that are not damage (e.g. no anchor file)


# Digests are stored as their 32 bytes from schema 5 on (as 64 hex characters before), and read as hex.
BINARY_DIGESTS = 5
_HEX = "CASE typeof(digest) WHEN 'blob' THEN lower(hex(digest)) ELSE digest END"
_STATE = (
    "SELECT (SELECT MAX(seq) FROM records), (SELECT MAX(seq) FROM snapshots), "
    f"(SELECT seq || ' ' || {_HEX} FROM digests WHERE tbl = 'records' ORDER BY seq DESC LIMIT 1), "
    f"(SELECT seq || ' ' || {_HEX} FROM digests WHERE tbl = 'snapshots' ORDER BY seq DESC LIMIT 1), "
    "(SELECT seq || ' ' || id FROM timeline ORDER BY seq DESC LIMIT 1)"
)


def seal(db: sqlite3.Connection, *, chain: bool = True, state: tuple[Any, ...] | None = None) -> Anchor:
    """Inside a write transaction: digest the derived rows not yet chained; the anchor of the result.
    With `chain` False nothing is written: the anchor of the state as the digests cover it now.

    One query reads every head (this runs in every write transaction, appends included); `state` is its
    row when the caller already read it in this transaction.
    """
    *tops, head = db.execute(_STATE).fetchone() if state is None else state
    derived = {}
    for table, top, last in zip(DERIVED, tops[:2], tops[2:]):
        seq, prev = (int(last.split(" ")[0]), last.split(" ")[1]) if last else (0, GENESIS)
        if chain and top is not None and top > seq:
            new: list[tuple[str, int, str]] = []
            for row in db.execute(f"SELECT {_DERIVED_COLUMNS[table]} FROM {table} WHERE seq > ? ORDER BY seq", (seq,)):
                prev = row_digest(prev, tuple(row[1:]))
                new.append((table, row[0], prev))
                seq = row[0]
            stored: list[tuple[str, int, str]] | list[tuple[str, int, bytes]] = new
            if db.execute("PRAGMA user_version").fetchone()[0] >= BINARY_DIGESTS:  # else older code reads the store
                stored = [(tbl, seq, bytes.fromhex(digest)) for tbl, seq, digest in new]
            db.executemany("INSERT INTO digests (tbl, seq, digest) VALUES (?,?,?)", stored)
        derived[table] = (seq, prev)
    if head is None:
        return Anchor(0, GENESIS_ID, derived)
    head_seq, head_id = head.split(" ")
    return Anchor(int(head_seq) + 1, head_id, derived)


class Sealing:
    """The body's side of a `sealed` transaction: the state it started from, and what it appended."""

    def __init__(self, before: Anchor) -> None:
        self.before = before  # the store's state under the write lock, before the body wrote anything
        self.appended: tuple[int, str] | None = None  # (entries, head id) when the body wrote timeline rows alone

    def appended_only(self, entries: int, head: str) -> None:
        """The body wrote timeline rows alone, up to `entries` with head `head`: no need to read what it commits."""
        self.appended = (entries, head)


# Derived records are served once a digest covers them (a store without digests yet: all of them); a row
# written past the store's writer is never sealed (`refuse_unsealed`), so it is never served.
SEALED = "seq <= COALESCE((SELECT MAX(seq) FROM digests WHERE tbl = 'records'), seq)"


@contextmanager
def sealed(
    db: sqlite3.Connection, path: str, anchor: anchor_file.Writer | None, lock_timeout: float
) -> Iterator[Sealing]:
    """One ``BEGIN IMMEDIATE`` write transaction that refuses rows written past the writer, seals the derived
    rows it wrote, and anchors what it commits (`memory.timeline.anchor`): the pending anchor before
    ``COMMIT``, the committed one after, both under the anchor file's lock, taken first.

    Raises:
        StoreError: the store is locked, holds unsealed rows, or its anchor cannot be written (then
            nothing is committed).
    """
    with anchor.locked(lock_timeout) if anchor is not None else nullcontext():
        with WriteTransaction(db, path, lock_timeout):
            state = db.execute(_STATE).fetchone()
            refuse_unsealed(db, path, state)
            before = seal(db, chain=False, state=state)  # the state the store is in: its slot is kept until commit
            if anchor is not None:  # a writer opened before rows were forged must not anchor them either
                anchor.refuse_unanchored(before)
            sealing = Sealing(before)
            yield sealing
            # Timeline rows alone leave the digest chains as they were (but a pre-digest store's rows to chain).
            chained = all(top is None or top <= before.derived[t][0] for t, top in zip(DERIVED, state[:2]))
            anchored = Anchor(*sealing.appended, before.derived) if sealing.appended and chained else seal(db)
            try:
                anchor.write(anchored, pending=True, keep=before) if anchor is not None else None
            except OSError as exc:
                raise StoreError(
                    f"{path}: cannot write the store's anchor ({exc.strerror}); nothing was written"
                ) from exc
        with suppress(OSError):  # the pending anchor stands for this one: the store equals it
            anchor.write(anchored, pending=False, keep=anchored) if anchor is not None else None


def refuse_unsealed(db: sqlite3.Connection, path: str, state: tuple[Any, ...] | None = None) -> None:
    """At the start of a write transaction: a derived row no digest covers was written past the store's
    writer (every write seals its own rows before it commits), so sealing it now would vouch for it.
    Both derived tables: a foreign state run (`snapshots`) would only cost time when read (one is used
    only when its own digest and the records it covers match), but sealing it would make `verify`
    stop naming it. `state`: the row of the query `seal` reads, when the caller read it in this transaction.

    Raises:
        StoreError: naming the first such row; nothing is written, and `verify` keeps reporting it.
    """
    tops = db.execute(_STATE).fetchone() if state is None else state
    for table, top, last in zip(DERIVED, tops[:2], tops[2:4]):
        upto = int(last.split(" ")[0]) if last else None  # None: no digest yet
        if upto is None or top is None or top <= upto:
            continue
        row = db.execute(f"SELECT seq, kind, id FROM {table} WHERE seq > ? ORDER BY seq LIMIT 1", (upto,)).fetchone()
        raise StoreError(
            f"{path}: {table} seq={row[0]} kind={row[1]} id={row[2]} was written past the store's "
            "writer (no digest covers it); refusing to write, which would seal it "
            "(python -m memory verify lists every such row)"
        )


def unpacked(path: str, seq: int, kind: str, record_id: str, body: str | bytes) -> str:
    """A stored record body's JSON text (`record_body.unpack`) for a reader that parses it later.

    Raises:
        DamagedBody: the bytes do not decompress; the message names the file and the row.
    """
    try:
        return record_body.unpack(body)
    except IntegrityError as exc:
        what = f"the stored record body is damaged: it does not decompress ({exc.__cause__})"
        raise DamagedBody(str(record_body.malformed(path, kind, record_id, what, seq))) from exc


def _last_digest(db: sqlite3.Connection, table: str) -> tuple[int, str]:
    row = db.execute(f"SELECT seq, {_HEX} FROM digests WHERE tbl = ? ORDER BY seq DESC LIMIT 1", (table,)).fetchone()
    return (row[0], row[1]) if row else (0, GENESIS)


def refuse_open(db: sqlite3.Connection, path: str, lock_timeout: float = 30.0) -> None:
    """On open: refuse a store that lost rows its anchor records, or whose schema version was rewound
    below what its rows were written with (the first write would mark the current version again and
    hide it; `memory.timeline.format_version`). Both are cheap on an intact store.

    Raises:
        StoreError: naming what is wrong (a `DamagedStore` for a damaged file).
    """
    try:
        problem = lost_tail(db, path, lock_timeout) or next(iter(rewound_version(db)), "")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a memory store ({exc})") from exc
    if problem:
        raise StoreError(f"{path}: {problem} (run `python -m memory verify {path}`)")


def lost_tail(db: sqlite3.Connection, path: str, lock_timeout: float = 30.0) -> str:
    """A cheap check on open: how the store differs from its anchor ("" when it equals or merely holds it)."""
    marks = erasure_sqlite.sqlite_marks(db)
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    with anchor_file.settled(path, lock_timeout):  # no writer between its two anchor writes while both are read
        read = anchor_file.read(path)
        if read.damage:
            return read.damage
        found = _against_anchors(db, read, tables, marks)
    return found[0] if found else ""


def audit(path: str | Path) -> Audit:
    """Check a store file read-only; never raises for damage (see the module docstring).

    Raises:
        StoreError: the path is missing, a directory or not a regular file (a user's mistake).
    """
    path = str(path)
    file = Path(path)
    if not file.exists():
        raise StoreError(f"{path}: no such memory store")
    if not file.is_file():
        raise StoreError(f"{path}: not a regular file, not a memory store")
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
    except OSError as exc:
        raise StoreError(f"{path}: cannot read ({exc.strerror})") from exc
    if not header:
        return Audit(0, GENESIS_ID, ["the file is empty: not a memory store"], [])
    if not header.startswith(b"SQLite format 3\x00"):
        return Audit(0, GENESIS_ID, ["file header: not an SQLite database"], [])
    try:
        db = sqlite3.connect(f"file:{quote(str(file.resolve()))}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        return Audit(0, GENESIS_ID, [f"cannot open the database read-only: {exc}"], [])
    # Damaged text must reach the checks as text that no longer hashes to its id, not as a decode error.
    db.text_factory = lambda data: data.decode("utf-8", "surrogateescape")
    try:
        return _audit(db, path)
    except (sqlite3.Error, ValueError) as exc:
        return Audit(0, GENESIS_ID, [f"the database cannot be read: {exc}"], [])
    finally:
        db.close()


def _audit(db: sqlite3.Connection, path: str) -> Audit:
    """Every check on one snapshot of the file, taken with the anchor while no writer is between its two
    anchor writes (`anchor.settled`): writers may go on meanwhile, and none of their rows shows."""
    with anchor_file.settled(path) as held:
        db.execute("BEGIN")
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # the snapshot starts at the first read
        read = anchor_file.read(path)
    try:
        return _audit_snapshot(db, path, read, held)
    finally:
        db.execute("ROLLBACK")


def _audit_snapshot(db: sqlite3.Connection, path: str, read: anchor_file.Read, held: bool) -> Audit:
    findings: list[str] = []
    notes: list[str] = []
    if db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
        return Audit(0, GENESIS_ID, ["not a memory store (SQLite file without the store's application id)"], [])
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version not in READABLE_SCHEMAS:
        findings.append(f"schema version {version}, readable: {', '.join(map(str, READABLE_SCHEMAS))}")
    damage = [row[0] for row in db.execute("PRAGMA integrity_check(10)")]
    if damage != ["ok"]:
        findings += [f"SQLite integrity_check: {line}" for line in damage]
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in ("timeline", "records"):
        if table not in tables:
            findings.append(f"schema: table {table} is missing")
    if "timeline" not in tables:
        return Audit(0, GENESIS_ID, findings, notes)
    findings += [
        f"schema: refusal trigger {name} is missing (UPDATE/DELETE were possible)" for name in missing_triggers(db)
    ]
    marks = erasure_sqlite.sqlite_marks(db)
    findings += marks.findings
    count, head, chain = _chain(db, marks.entries)
    findings += chain
    if "records" in tables:
        findings += _malformed(db)
    if "digests" in tables:
        bounds = {"records": marks.records_before - 1, "snapshots": marks.snapshots_upto}
        findings += [line for table in DERIVED if table in tables for line in _derived(db, table, bounds[table])]
    else:
        notes.append(
            "derived records are not digest-chained yet (a store written before digests; the next write chains them)"
        )
    findings += [read.damage] if read.damage else []
    findings += _against_anchors(db, read, tables, marks)
    notes += [read.note] if read.note else []
    if not held and read.anchor is not None:
        notes.append("the anchor was compared while another writer held it (a write in progress may show)")
    return Audit(
        count,
        head,
        findings[:MAX_FINDINGS]
        + ([f"… and {len(findings) - MAX_FINDINGS} more"] if len(findings) > MAX_FINDINGS else []),
        notes,
    )


def _chain(db: sqlite3.Connection, erased: dict[int, str]) -> tuple[int, str, list[str]]:
    """(rows, head id, findings) of the timeline's hash chain, stopping at the first break.

    A row `erased` lists is checked for its id, its link and its blank content; the next row's
    id covers its id.
    """
    prev_id, expected, count = GENESIS_ID, 0, 0
    cursor = db.execute(f"SELECT {READ_COLUMNS} FROM timeline ORDER BY seq")
    while rows := cursor.fetchmany(256):
        readable = [row for row in rows if row[0] not in erased]
        try:  # derived vectors are recomputed a batch at a time; a damaged batch is read row by row
            batch: dict[int, Entry] | None = dict(zip((row[0] for row in readable), rows_to_entries(readable)))
        except Exception:  # the row that fails is reported below
            batch = None
        for row in rows:
            count += 1
            where = f"timeline seq={row[0]} id={str(row[1])[:16]}…"
            if row[0] != expected:
                return count, prev_id, [f"{where}: sequence number {row[0]}, expected {expected} (rows missing)"]
            if row[0] in erased:
                wrong = erasure.blank_row_finding(row, erased[row[0]])
                if wrong or row[2] != prev_id:
                    return count, prev_id, [wrong or f"{where}: previous id does not link to {prev_id[:12]}…"]
                prev_id, expected = row[1], expected + 1
                continue
            try:
                entry = batch[row[0]] if batch is not None else row_to_entry(row)
                recomputed = entry_id(entry, prev_id=prev_id, seq=entry.seq)
            except Exception as exc:  # any damage to a row is reported, never raised
                return count, prev_id, [f"{where}: unreadable row ({type(exc).__name__}: {exc})"]
            if entry.prev_id != prev_id:
                return count, prev_id, [f"{where}: previous id does not link to {prev_id[:12]}…"]
            if recomputed != entry.id:
                return count, prev_id, [f"{where}: content does not match its id (recomputed {recomputed[:12]}…)"]
            prev_id, expected = entry.id, expected + 1
    return count, prev_id, []


def _malformed(db: sqlite3.Connection) -> list[str]:
    """Findings of derived records whose bodies are not JSON objects (`record_body.parse`), every one."""
    found = []
    for seq, kind, record_id, body in db.execute("SELECT seq, kind, id, body FROM records ORDER BY seq"):
        wrong = record_body.parse(body).problem
        if wrong:
            found.append(f"records seq={seq} kind={kind} id={record_id}: malformed: {wrong}")
    return found


def _derived(db: sqlite3.Connection, table: str, erased_upto: int) -> list[str]:
    """Findings of one derived table's digest chain (first break only).

    Rows up to seq `erased_upto` may be absent (an erasure deleted them): the chain goes on
    from their stored digests, which the next present row's digest covers.
    """
    digests = _digest_rows(db, table)
    prev = GENESIS
    for row in db.execute(f"SELECT {_DERIVED_COLUMNS[table]} FROM {table} ORDER BY seq"):
        stored = next(digests, None)
        while stored is not None and stored[0] < row[0] and stored[0] <= erased_upto:
            prev, stored = stored[1], next(digests, None)
        if stored is None:
            return [
                f"{table} seq={row[0]} kind={row[1]} id={row[2]}: not covered by the digest chain "
                f"(inserted outside the store)"
            ]
        if stored[0] != row[0]:
            return [f"{table} seq={min(stored[0], row[0])}: a row and its digest are missing"]
        prev = row_digest(prev, tuple(row[1:]))
        if prev != stored[1]:
            return [f"{table} seq={row[0]} kind={row[1]} id={row[2]}: content does not match its digest"]
    extra = next(digests, None)
    while extra is not None and extra[0] <= erased_upto:
        extra = next(digests, None)
    return [f"{table} seq={extra[0]}: digested row is missing (deleted)"] if extra else []


def _digest_rows(db: sqlite3.Connection, table: str) -> Iterator[tuple[int, str]]:
    rows = db.execute(f"SELECT seq, {_HEX} FROM digests WHERE tbl = ? ORDER BY seq", (table,)).fetchall()
    return iter([(row[0], row[1]) for row in rows])


def _against_anchors(
    db: sqlite3.Connection, read: anchor_file.Read, tables: set[str], marks: erasure.Marks
) -> list[str]:
    """Findings of the store against its anchors: none when it equals the committed state or the pending
    one after it (a crash between a pending write and its confirmation); of the first format, none when
    it holds the anchored state."""
    if read.anchor is None:
        return []
    found = _against_anchor(db, read.anchor, tables, marks, exact=read.exact)
    if found and any(not _against_anchor(db, pending, tables, marks, exact=True) for pending in read.pending):
        return []
    return found


def _against_anchor(
    db: sqlite3.Connection, anchor: Anchor, tables: set[str], marks: erasure.Marks, *, exact: bool
) -> list[str]:
    """Findings of the store against one anchored state. The timeline is judged by the anchored head's row,
    not by how far the hash chain was read: a chain broken earlier (or a row missing before the head) is
    the chain's finding, not a lost tail. With `exact`, rows past the anchored state are findings too:
    the writer anchors every state it commits, so they were written past it."""
    findings = []
    if anchor.entries:
        row = db.execute("SELECT id FROM timeline WHERE seq = ?", (anchor.entries - 1,)).fetchone()
        if row is None:
            count = db.execute("SELECT COUNT(*) FROM timeline").fetchone()[0]
            findings.append(f"timeline: {count} entries, the anchor records {anchor.entries}: the tail was lost")
        elif row[0] != anchor.head:
            findings.append(f"timeline seq={anchor.entries - 1}: not the anchored head {anchor.head[:16]}…")
    if exact:
        top = db.execute("SELECT MAX(seq) FROM timeline").fetchone()[0]
        if top is not None and top >= anchor.entries:
            findings.append(
                f"timeline seq={anchor.entries}..{top}: entries past the anchored head "
                "(written past the store's writer)"
            )
    for table, (seq, digest) in anchor.derived.items():
        if exact and "digests" in tables:
            past = db.execute(
                "SELECT MIN(seq), MAX(seq) FROM digests WHERE tbl = ? AND seq > ?", (table, seq)
            ).fetchone()
            if past[0] is not None:
                first = (
                    db.execute(f"SELECT kind, id FROM {table} WHERE seq = ?", (past[0],)).fetchone()
                    if table in tables
                    else None
                )
                named = f" kind={first[0]} id={first[1]}" if first else ""
                findings.append(
                    f"{table} seq={past[0]}..{past[1]}{named}: digested rows past the anchored digest "
                    "(written past the store's writer, digests and all)"
                )
        if not seq:
            continue
        row = (
            db.execute(f"SELECT {_HEX} FROM digests WHERE tbl = ? AND seq = ?", (table, seq)).fetchone()
            if "digests" in tables
            else None
        )
        if row is None or row[0] != digest:
            findings.append(
                f"{table} seq={seq}: the anchored digest {digest[:16]}… is "
                f"{'missing' if row is None else 'different'} (rows lost or rewritten)"
            )
        elif (
            table in tables
            and db.execute(f"SELECT 1 FROM {table} WHERE seq = ?", (seq,)).fetchone() is None
            and seq > (marks.records_before - 1 if table == "records" else marks.snapshots_upto)
        ):
            findings.append(f"{table} seq={seq}: the anchored row is missing")
    return findings
