"""The reads of a SQLite store shaped by its indexes, so that none scales with the rows it skips.

`memory.timeline.store.SQLiteStore` runs them on its connection: entries by id in chunks under
SQLite's parameter limit, a principal's last entries and the distinct principals found by
seeking the (principal, situation, seq) index, derived records in insertion order along the
primary key or by a range of seqs, and the rows `verify` recomputes the chain from.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from memory.timeline import integrity as anchors
from memory.timeline.entries import ChainBreak, Entry
from memory.timeline.schema import READ_COLUMNS, row_to_entry, rows_to_entries

IDS_PER_QUERY = 900  # SQLite's limit on parameters of one query: 999
UNREADABLE = (ValueError, KeyError, TypeError, json.JSONDecodeError)  # what a malformed row raises on conversion


def by_ids(db: sqlite3.Connection, columns: str, entry_ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """`columns` of the entries among `entry_ids`, `IDS_PER_QUERY` ids a query."""
    rows: list[tuple[Any, ...]] = []
    for start in range(0, len(entry_ids), IDS_PER_QUERY):
        chunk = list(entry_ids[start : start + IDS_PER_QUERY])
        rows += db.execute(f"SELECT {columns} FROM timeline WHERE id IN ({','.join('?' * len(chunk))})", chunk)
    return rows


def tail(db: sqlite3.Connection, principal: str, n: int) -> list[Entry]:
    """The last `n` (> 0) entries of a principal, oldest first (reads only those rows).

    The (principal, situation, seq) index gives each situation's last rows without a sort;
    the situations are found by seeking, so nothing scales with the principal's history.
    """
    seqs: list[int] = []
    situation = ""
    while True:
        row = db.execute(
            "SELECT situation FROM timeline WHERE principal = ? AND situation > ? ORDER BY situation LIMIT 1",
            (principal, situation),
        ).fetchone()
        if row is None:
            break
        situation = row[0]
        seqs += [
            r[0]
            for r in db.execute(
                "SELECT seq FROM timeline WHERE principal = ? AND situation = ? ORDER BY seq DESC LIMIT ?",
                (principal, situation, n),
            )
        ]
    last = sorted(seqs)[-n:]
    if not last:
        return []
    marks = ",".join("?" * len(last))
    rows = db.execute(f"SELECT {READ_COLUMNS} FROM timeline WHERE seq IN ({marks}) ORDER BY seq", last)
    return rows_to_entries(rows.fetchall())


def principals(db: sqlite3.Connection) -> list[str]:
    """Distinct tenants in the timeline, sorted (one index seek each)."""
    found: list[str] = []
    row = db.execute("SELECT principal FROM timeline ORDER BY principal LIMIT 1").fetchone()
    while row is not None:
        found.append(row[0])
        row = db.execute(
            "SELECT principal FROM timeline WHERE principal > ? ORDER BY principal LIMIT 1", (row[0],)
        ).fetchone()
    return found


def records_in_order(db: sqlite3.Connection, kind: str, columns: str) -> sqlite3.Cursor:
    """`columns` of the sealed records of one kind in insertion order, read along the primary key.

    Filtering on the (kind, id) index would sort every body in a temporary B-tree (seconds
    at 100,000 episodes); the kind's seq range is found from the index, then scanned in order.
    """
    low, high = db.execute("SELECT MIN(seq), MAX(seq) FROM records WHERE kind = ?", (kind,)).fetchone()
    if low is None:
        return db.execute("SELECT NULL WHERE 0")
    return db.execute(
        f"SELECT {columns} FROM records WHERE seq BETWEEN ? AND ? AND +kind = ? AND {anchors.SEALED} ORDER BY seq",
        (low, high, kind),
    )


def record_rows(
    db: sqlite3.Connection, path: str, after: int, upto: int, bodies: Collection[str] | None
) -> list[tuple[int, str, str, str | None]]:
    """(seq, kind, id, body JSON text) of the records ``after < seq <= upto`` of the store at `path`.

    The body is selected only for kinds in `bodies` (every kind when None); the others' is None.
    """
    wanted = "1" if bodies is None else f"kind IN ({','.join('?' * len(bodies))})" if bodies else "0"
    rows = db.execute(
        f"SELECT seq, kind, id, CASE WHEN {wanted} THEN body END FROM records WHERE seq > ? AND seq <= ? ORDER BY seq",
        (*(bodies or ()), after, upto),
    )
    return [
        (seq, kind, i, None if body is None else anchors.unpacked(path, seq, kind, i, body))
        for seq, kind, i, body in rows
    ]


def readable_entries(db: sqlite3.Connection, unreadable: list[ChainBreak]) -> Iterator[Entry]:
    """Every entry in timeline order, up to the first row that cannot be read: its break is put in `unreadable`."""
    cursor = db.execute(f"SELECT {READ_COLUMNS} FROM timeline ORDER BY seq")
    while rows := cursor.fetchmany(256):
        try:  # derived vectors are recomputed a batch at a time
            converted: list[Entry] | None = rows_to_entries(rows)
        except UNREADABLE:
            converted = None  # read row by row: the first unreadable row names the break
        for index, row in enumerate(rows):
            try:
                entry = converted[index] if converted is not None else row_to_entry(row)
            except UNREADABLE as exc:
                unreadable.append(ChainBreak(row[0], str(row[1]), f"unreadable row: {exc}"))
                return
            yield entry
