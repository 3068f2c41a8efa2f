"""Moving a timeline between stores as JSON lines (export, import all or nothing); a SQLite store's counts.

Export writes a temporary file next to the target and moves it into place, so a failure
(a disk error, an unreadable row) never leaves a partial file. Import parses and checks
every line before anything is written: JSON without NaN or Infinity, bounded nesting,
fields that pass the timeline's boundary checks, ids that recompute, a chain that
continues the store's head. The first bad line is named in an `ImportFailed`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.errors import EpisodicMemoryError, ImportFailed, StoreError
from memory.timeline.entries import Entry
from memory.timeline.erasure import is_erased
from memory.timeline.protocols import StoreStats
from memory.timeline.schema import entry_from_json, entry_to_json
from memory.timeline.validation import check_label, check_metadata, check_text, check_timestamp

if TYPE_CHECKING:  # the store imports this module
    from memory.timeline.store import SQLiteStore

MAX_IMPORT_BYTES = 2 * 1024**3  # a larger file is refused before it is read
# Rows whose content was not erased: an erased row is blank and the timeline refuses an empty situation.
KEPT = "situation <> ''"


def export_jsonl(store: SQLiteStore, out: str | Path) -> int:
    """Write every entry of `store` as one JSON line into `out`, atomically; the number written."""
    target = Path(out)
    if target.is_dir():
        raise StoreError(f"{out}: is a directory")
    try:
        handle, temp = tempfile.mkstemp(prefix=f".{target.name}-", suffix=".tmp", dir=target.parent)
    except OSError as exc:  # the temporary file is ours: name the folder the user gave
        raise StoreError(f"{out}: cannot write into {target.parent} ({exc.strerror})") from exc
    count = 0
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            for entry in _readable(store):
                stream.write(json.dumps(entry_to_json(entry), ensure_ascii=False, sort_keys=True) + "\n")
                count += 1
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return count


def _readable(store: SQLiteStore) -> Iterator[Entry]:
    seq = -1
    try:
        for entry in store.entries():
            seq = entry.seq
            yield entry
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(
            f"{store.path}: timeline row after seq={seq} cannot be read ({exc}); "
            f"run `python -m memory verify {store.path}`"
        ) from exc


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def parse_jsonl(source: str | Path) -> tuple[list[Entry], list[int]]:
    """The entries of an export and the line number of each; `ImportFailed` on the first bad line."""
    path = str(source)
    try:
        if not Path(path).exists():
            raise ImportFailed(path, 0, "cannot read file (no such file)")
        if not Path(path).is_file():
            raise ImportFailed(path, 0, "not a regular file")
        if Path(path).stat().st_size > MAX_IMPORT_BYTES:
            raise ImportFailed(path, 0, f"larger than {MAX_IMPORT_BYTES:,} bytes")
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFailed(path, 0, f"cannot read file ({exc})") from exc
    parsed: list[Entry] = []
    numbers: list[int] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line, parse_constant=_no_constant)
            entry = entry_from_json(data)
            erased = is_erased(entry)
            if not erased:
                check_text(entry.text)
                check_label("principal", entry.principal)
                check_label("situation", entry.situation)
                check_metadata(entry.metadata)
                check_timestamp(entry.timestamp)
        except json.JSONDecodeError as exc:
            raise ImportFailed(path, number, f"not a complete JSON record ({exc.msg})") from exc
        except RecursionError as exc:
            raise ImportFailed(path, number, "nested too deeply to be a timeline entry") from exc
        except EpisodicMemoryError as exc:
            raise ImportFailed(path, number, f"not a valid timeline entry ({exc})") from exc
        except (KeyError, ValueError, TypeError, AttributeError, OverflowError) as exc:
            raise ImportFailed(path, number, f"not a timeline entry ({exc!r})") from exc
        if erased:
            raise ImportFailed(
                path,
                number,
                "an erased entry (`python -m memory erase`): an export of a store "
                "with erasures cannot be imported yet; copy the store file instead",
            )
        parsed.append(entry)
        numbers.append(number)
    return parsed, numbers


def sqlite_stats(db: sqlite3.Connection, entries: int) -> StoreStats:
    """Counts of a SQLite store's entries, tenants, situations, derived records and encoders."""
    return store_stats(lambda query: db.execute(query).fetchall(), entries)


def store_stats(rows: Callable[[str], list[Any]], entries: int) -> StoreStats:
    """Counts of a store whose SQL `rows` runs; erased rows are counted apart from situations and encoders."""
    first, last = rows(
        "SELECT (SELECT timestamp FROM timeline ORDER BY seq LIMIT 1), "
        "(SELECT timestamp FROM timeline ORDER BY seq DESC LIMIT 1)"
    )[0]
    return StoreStats(
        entries=entries,
        principals=rows("SELECT COUNT(DISTINCT principal) FROM timeline")[0][0],
        situations=dict(
            rows(f"SELECT situation, COUNT(*) FROM timeline WHERE {KEPT} GROUP BY situation ORDER BY 2 DESC, 1")
        ),
        records=dict(rows("SELECT kind, COUNT(*) FROM records GROUP BY kind ORDER BY kind")),
        first=first,
        last=last,
        encoders=[row[0] for row in rows(f"SELECT DISTINCT encoder FROM timeline WHERE {KEPT} ORDER BY 1")],
        erased=rows(f"SELECT COUNT(*) FROM timeline WHERE NOT ({KEPT})")[0][0],
    )
