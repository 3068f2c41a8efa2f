"""The schema a store's rows show they were written with, against the version the file records.

A SQLite store records its file-format version in ``PRAGMA user_version``
(`memory.timeline.schema`), and code refuses a version it cannot read. Every schema since the
first writes something the ones before it never do, in the same transaction that marks the
file with its version; so a row of such a kind under an older recorded version means the
version was rewound, and code of that older version would misread the file. ``python -m
memory verify`` reports it (`rewound_version`).
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

from memory.timeline.blob import DERIVED
from memory.timeline.schema import LINKED


class Mark(NamedTuple):
    """Rows only a schema of at least `version` writes."""

    version: int  # the first schema that writes them
    what: str  # what they are, for the finding
    query: str  # SQL returning a row when the store holds one


MARKS = (
    Mark(5, "previous ids stored as links", f"SELECT 1 FROM timeline WHERE prev_id = '{LINKED}' LIMIT 1"),
    Mark(5, "digests stored as bytes", "SELECT 1 FROM digests WHERE typeof(digest) = 'blob' LIMIT 1"),
    Mark(4, "compressed record bodies", "SELECT 1 FROM records WHERE typeof(body) = 'blob' LIMIT 1"),
    Mark(3, "derived embeddings", f"SELECT 1 FROM timeline WHERE embedding = x'{DERIVED.hex()}' LIMIT 1"),
    # dense vectors take a multiple of 4 bytes, the derived layout 1: any other odd length is sparse
    Mark(
        2,
        "sparse embeddings",
        "SELECT 1 FROM timeline WHERE length(embedding) % 2 = 1 AND length(embedding) > 1 LIMIT 1",
    ),
)


def rewound_version(db: sqlite3.Connection) -> list[str]:
    """A finding when `db` records an older schema than its rows were written with; [] otherwise.

    Only marks newer than the recorded version are looked for, the newest first, so a store
    whose version is current costs no query. A table that is missing or unreadable shows no mark
    (other checks of the audit name it).
    """
    recorded = db.execute("PRAGMA user_version").fetchone()[0]
    for mark in (m for m in MARKS if m.version > recorded):
        try:
            found = db.execute(mark.query).fetchone() is not None
        except sqlite3.Error:
            continue
        if found:
            return [
                f"schema version {recorded} recorded (PRAGMA user_version), but the store holds {mark.what}, "
                f"which only schema {mark.version} and later write: the version was rewound, and code of "
                f"schema {recorded} would misread the file"
            ]
    return []
