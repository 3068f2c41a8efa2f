"""Opening the store's SQLite file and its write transactions."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import NamedTuple

from memory.errors import ImmutableRecordError, StoreError
from memory.timeline.schema import APPLICATION_ID, READABLE_SCHEMAS, SCHEMA, SCHEMA_VERSION, SNAPSHOTS


class Opened(NamedTuple):
    """An open store database."""

    db: sqlite3.Connection  # autocommit connection (transactions are explicit)
    schema: int  # the schema version the file is marked with


def open_database(path: str, *, create: bool, synchronous: str) -> Opened:
    """Open (creating when allowed and missing) a store file or ``":memory:"``; see `SQLiteStore`.

    Raises:
        StoreError: a directory, a missing file with ``create=False``, not a store, or an
            unreadable schema version.
    """
    if path != ":memory:":
        file = Path(path)
        if file.is_dir():
            raise StoreError(f"{path}: is a directory, not a memory store")
        if not file.exists() and not create:
            raise StoreError(f"{path}: no such memory store")
        fresh = not file.exists() or file.stat().st_size == 0
    else:
        fresh = True
    try:
        db = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        db.execute("PRAGMA busy_timeout = 30000")
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a memory store ({exc})") from exc
    if not fresh and app_id != APPLICATION_ID:
        db.close()
        raise StoreError(f"{path}: not a memory store (SQLite file without the store's application id)")
    if path != ":memory:":
        db.execute("PRAGMA journal_mode = WAL")
    if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
        raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
    db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
    if fresh:
        db.execute("BEGIN IMMEDIATE")
        db.executescript(SCHEMA.replace("\n\n", "\n") + f"PRAGMA application_id = {APPLICATION_ID};"
                         f"PRAGMA user_version = {SCHEMA_VERSION};")
        db.execute("COMMIT") if db.in_transaction else None
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version not in READABLE_SCHEMAS:
        raise StoreError(f"{path}: store schema version {version}, this code reads "
                         f"{', '.join(map(str, READABLE_SCHEMAS))}")
    if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'snapshots'").fetchone() is None:
        db.execute("BEGIN IMMEDIATE")
        db.executescript(SNAPSHOTS.replace("\n\n", "\n"))
        db.execute("COMMIT") if db.in_transaction else None
    return Opened(db, version)


class WriteTransaction:
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
