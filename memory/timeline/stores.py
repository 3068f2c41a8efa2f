"""Opening a store by what names it: a SQLite file (or ``":memory:"``) or a ``postgresql://`` URL."""

from __future__ import annotations

from pathlib import Path

from memory.errors import StoreError
from memory.timeline.protocols import Store
from memory.timeline.store import SQLiteStore

SERVER_SCHEMES = ("postgresql://", "postgres://")


def is_server_url(target: object) -> bool:
    """Whether a store argument names a PostgreSQL server rather than a SQLite file."""
    return isinstance(target, str) and target.startswith(SERVER_SCHEMES)


def open_store(target: str | Path | None, *, create: bool = True, read_only: bool = False) -> Store:
    """The store `target` names: a `PostgresStore` for a server URL, else a `SQLiteStore` (None: in memory;
    `read_only`: an existing store opened for reading alone, see either class).

    Raises:
        StoreError: the server store was asked for without psycopg installed, or cannot be opened.
    """
    if is_server_url(target):
        try:
            from memory.timeline.postgres import PostgresStore
        except ImportError as exc:
            raise StoreError(f"a postgresql:// store needs psycopg: pip install '.[postgres]' ({exc})") from exc
        return PostgresStore(str(target), create=create, read_only=read_only)
    if read_only and target is not None:
        return SQLiteStore(target, read_only=True)
    return SQLiteStore(target if target is not None else ":memory:", create=create)
