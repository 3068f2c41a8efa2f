"""The peer of batch appends: plain ``sqlite3`` ``executemany`` of the rows the store wrote.

A new file with the store's own schema (its timeline table, the same indexes, WAL, ``synchronous
= FULL``) takes the very row tuples a `SQLiteStore` stored, in transactions of the same size, with
nothing else: no redaction, embedding, hashing, chaining, anchors or digests. What the store does
above that is the price of its guarantees; the bench reports the ratio, measured in the same run.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory.timeline.schema import COLUMNS, SCHEMA

INSERT = f"INSERT INTO timeline ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"


class RawInserts:
    """A plain SQLite file with the store's schema, written by ``executemany`` alone.

    Args:
        path: the new file (it must not exist).
        synchronous: SQLite ``synchronous`` level, the store's default (``FULL``) unless told.
    """

    def __init__(self, path: Path, *, synchronous: str = "FULL") -> None:
        if path.exists():
            raise FileExistsError(f"{path}: the raw peer writes a new file")
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute(f"PRAGMA synchronous = {synchronous}")
        self._db.executescript(SCHEMA)

    def insert(self, rows: Sequence[tuple[Any, ...]]) -> float:
        """Seconds to insert `rows` in one transaction (``BEGIN IMMEDIATE`` … ``COMMIT``)."""
        start = time.perf_counter()
        self._db.execute("BEGIN IMMEDIATE")
        self._db.executemany(INSERT, rows)
        self._db.execute("COMMIT")
        return time.perf_counter() - start

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> RawInserts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def stored_rows(path: Path, start: int) -> list[tuple[Any, ...]]:
    """The timeline rows of a store file from seq `start` on, exactly as stored (read by a second, read-only
    connection, as the peer would receive them)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute(f"SELECT {COLUMNS} FROM timeline WHERE seq >= ? ORDER BY seq", (start,)).fetchall()
