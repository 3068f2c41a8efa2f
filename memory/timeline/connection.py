"""Opening the store's SQLite file and its write transactions."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple
from urllib.parse import quote

from memory.errors import DamagedStore, ImmutableRecordError, StoreError
from memory.timeline.schema import APPLICATION_ID, DIGESTS, READABLE_SCHEMAS, SCHEMA, SCHEMA_VERSION, SNAPSHOTS


class OpenedDatabase(NamedTuple):
    """An open store database."""

    db: sqlite3.Connection  # autocommit connection (transactions are explicit)
    schema: int  # the schema version the file is marked with


# Every table of the store and the triggers that make it insert-only; a table of ours without
# them has been tampered with (they are created together, in one transaction).
GUARDED = ("timeline", "records", "snapshots", "digests", "erased")  # erased: see memory.timeline.erasure


def missing_triggers(db: sqlite3.Connection) -> list[str]:
    """Names of the refusal triggers missing on the store's existing tables."""
    rows = db.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE type IN ('table', 'trigger')"
    ).fetchall()
    tables = {name for kind, name, _, _ in rows if kind == "table"}
    triggers = {name for kind, name, _, sql in rows if kind == "trigger" and "RAISE(ABORT" in (sql or "")}
    return [
        f"{table}_no_{verb}"
        for table in GUARDED
        if table in tables
        for verb in ("update", "delete")
        if f"{table}_no_{verb}" not in triggers
    ]


def damage(path: str, exc: BaseException) -> DamagedStore | None:
    """The project error for an SQLite error that says the file is damaged (None for any other error).

    SQLite reports a damaged page or header when a statement first reads it, so this is what
    every read of a store raises for a flipped bit, not only its open.
    """
    text = str(exc)
    if type(exc) is sqlite3.DatabaseError or text.startswith("Could not decode to UTF-8"):
        return DamagedStore(f"{path}: the database file is damaged ({text}); run `python -m memory verify {path}`")
    return None


class StoreConnection(sqlite3.Connection):
    """A connection whose statements raise `DamagedStore` naming the file for a damaged database."""

    path = ""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self._named(super().execute, sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        return self._named(super().executemany, sql, parameters)

    def _named(self, run: Any, sql: str, parameters: Any) -> sqlite3.Cursor:
        """`run(sql, parameters)`, a damaged database's error raised as `DamagedStore` naming the file."""
        try:
            return run(sql, parameters)
        except sqlite3.DatabaseError as exc:
            found = damage(self.path, exc)
            if found is None:
                raise
            raise found from exc


def _refuse_unreadable(db: sqlite3.Connection, path: str, version: int) -> None:
    """Close `db` and raise `StoreError` when this code cannot read its schema `version`."""
    if version not in READABLE_SCHEMAS:
        db.close()
        raise StoreError(
            f"{path}: store schema version {version}, this code reads {', '.join(map(str, READABLE_SCHEMAS))}"
        )


def open_read_only(path: str) -> OpenedDatabase:
    """Open an existing store file for reading alone (``mode=ro``): nothing is created, migrated or
    checked beyond what reading needs, so a store an open refuses (missing triggers, a lost tail, rows
    past its anchor) can still be inspected; every statement that would write fails.

    Raises:
        StoreError: no such file, not a regular file, not a memory store, or a schema version this code
            cannot read.
    """
    file = Path(path)
    if not file.is_file():
        raise StoreError(f"{path}: no such memory store" if not file.exists() else f"{path}: not a regular file")
    try:
        db = sqlite3.connect(
            f"file:{quote(str(file.resolve()))}?mode=ro", uri=True, isolation_level=None, factory=StoreConnection
        )
        db.path = path
        if db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
            db.close()
            raise StoreError(f"{path}: not a memory store (SQLite file without the store's application id)")
        version = db.execute("PRAGMA user_version").fetchone()[0]
    except DamagedStore as exc:  # a foreign file, or a store whose header is damaged
        raise DamagedStore(f"{path}: not a memory store ({exc.__cause__})") from exc.__cause__
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a memory store ({exc})") from exc
    _refuse_unreadable(db, path, version)
    return OpenedDatabase(db, version)


def open_database(path: str, *, create: bool, synchronous: str, lock_timeout: float = 30.0) -> OpenedDatabase:
    """Open (creating when allowed and missing) a store file or ``":memory:"``; see `SQLiteStore`.

    Creation is one transaction taken under SQLite's write lock: several processes creating one
    new store agree on it, and a crash during creation leaves a file the next open completes.

    Raises:
        StoreError: a directory or special file, a missing file with ``create=False``, not a
            store, an unreadable schema version, missing refusal triggers, or a lock held longer
            than `lock_timeout` seconds.
    """
    if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
        raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
    if path != ":memory:":
        file = Path(path)
        if file.is_dir():
            raise StoreError(f"{path}: is a directory, not a memory store")
        if file.exists() and not file.is_file():
            raise StoreError(f"{path}: not a regular file, not a memory store")
        if not file.exists() and not create:
            raise StoreError(f"{path}: no such memory store")
    try:
        db = sqlite3.connect(path, isolation_level=None, timeout=lock_timeout, factory=StoreConnection)
        db.path = path
        db.execute(f"PRAGMA busy_timeout = {int(lock_timeout * 1000)}")
        _claim(db, path, create)
        if path != ":memory:":
            _enter_wal(db, lock_timeout)
        db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        _create_missing(db, path)
        version = db.execute("PRAGMA user_version").fetchone()[0]
        missing = missing_triggers(db)
    except sqlite3.OperationalError as exc:
        raise StoreError(locked_message(path, exc, lock_timeout)) from exc
    except DamagedStore as exc:
        if "not a database" in str(exc.__cause__):  # a foreign file, or a store whose header is damaged
            raise DamagedStore(f"{path}: not a memory store ({exc.__cause__})") from exc.__cause__
        raise
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a memory store ({exc})") from exc
    _refuse_unreadable(db, path, version)
    if missing:
        db.close()
        raise StoreError(
            f"{path}: the store was tampered with: trigger(s) {', '.join(missing)} missing "
            f"(run `python -m memory verify {path}`; SQLiteStore(path, read_only=True) opens it for inspection)"
        )
    return OpenedDatabase(db, version)


def _enter_wal(db: sqlite3.Connection, timeout: float) -> None:
    """Switch to WAL; while another process creates the file the switch fails at once, so it is retried."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def _claim(db: sqlite3.Connection, path: str, create: bool) -> None:
    """Refuse a file that is not (and cannot become) a store before anything is written to it."""
    app_id = db.execute("PRAGMA application_id").fetchone()[0]
    if app_id == APPLICATION_ID:
        return
    if db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]:
        # another process may have created the store between the two reads: its id is set in that commit
        if db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
            return
        db.close()
        raise StoreError(f"{path}: not a memory store (SQLite file without the store's application id)")
    if not create:
        db.close()
        raise StoreError(f"{path}: not a memory store (an empty file)")


def _create_missing(db: sqlite3.Connection, path: str) -> None:
    """Create the schema, or the tables added since a store was made, in one locked transaction."""

    def complete() -> bool:
        names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return (
            db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
            and {"timeline", "records", "snapshots", "digests"} <= names
        )

    if complete():
        return
    # executescript commits any open transaction first, so BEGIN and COMMIT are part of the script.
    db.executescript("BEGIN IMMEDIATE;")
    try:
        if db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
            if db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]:
                raise StoreError(f"{path}: not a memory store (SQLite file without the store's application id)")
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        for script in (SCHEMA, SNAPSHOTS, DIGESTS):
            for statement in _statements(script):
                db.execute(statement)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _statements(script: str) -> list[str]:
    """The statements of a schema script (CREATE TRIGGER bodies hold one ';' each, closed by 'END;')."""
    out, current = [], []
    for line in script.strip().splitlines():
        current.append(line)
        text = "\n".join(current)
        if text.rstrip().endswith(";") and (
            not text.lstrip().upper().startswith("CREATE TRIGGER") or text.rstrip().upper().endswith("END;")
        ):
            out.append(text)
            current = []
    return out


def locked_message(path: str, exc: BaseException, timeout: float) -> str:
    """The message of a lock or I/O failure of SQLite."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return f"{path}: the store is locked by another writer (waited {timeout:g} s; try again or raise lock_timeout)"
    return f"{path}: cannot use the store ({text})"


class WriteTransaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``; rolls back on any error, translating trigger aborts."""

    def __init__(self, db: sqlite3.Connection, path: str = "", lock_timeout: float = 30.0) -> None:
        self._db = db
        self._path = path
        self._timeout = lock_timeout

    def __enter__(self) -> None:
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreError(locked_message(self._path, exc, self._timeout)) from exc

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            try:
                self._db.execute("COMMIT")
            except sqlite3.OperationalError as error:
                self._db.execute("ROLLBACK") if self._db.in_transaction else None
                raise StoreError(locked_message(self._path, error, self._timeout)) from error
            return
        self._db.execute("ROLLBACK")
        if isinstance(exc, sqlite3.IntegrityError) and "refused" in str(exc):
            raise ImmutableRecordError(str(exc)) from exc


def is_refusal(error: BaseException) -> bool:
    """True when a raw SQLite error is the store refusing UPDATE/DELETE."""
    return isinstance(error, sqlite3.DatabaseError) and "refused" in str(error)
