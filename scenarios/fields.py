"""Field-level checks shared by the scenario loader.

Each check takes the problem collector, the raw YAML value and its location, records a
located problem when the value is wrong, and returns the parsed value or None.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
DURATION_HELP = "a duration like 45s, 30m, 6h, 1d or 1h30m"
TIMESTAMP_HELP = "an ISO-8601 timestamp with a timezone, e.g. 2026-02-03T10:00:00Z"


MAX_PROBLEMS = 200  # problems listed per file; the rest are counted
MAX_MESSAGE = 500  # characters of one problem's message


class Problems:
    """Collects located problems for one source, formatted ``FILE: PATH: message``."""

    def __init__(self, source: str):
        self.source = source  # file path or "<string>", the FILE part of each line
        self.lines: list[str] = []  # problems found so far, in discovery order (at most MAX_PROBLEMS + 1)
        self.more = 0  # problems found beyond MAX_PROBLEMS, counted in the last line

    def add(self, path: str, message: str) -> None:
        """Records one problem at `path`; past `MAX_PROBLEMS` only a count is kept (a hostile file stays cheap)."""
        if len(self.lines) < MAX_PROBLEMS:
            self.lines.append(f"{self.source}: {path}: {message[:MAX_MESSAGE]}")
            return
        self.more += 1
        summary = f"{self.source}: (file): … and {self.more} more problem(s) not shown"
        if self.more == 1:
            self.lines.append(summary)
        else:
            self.lines[-1] = summary


def listing(items: Sequence[str], most: int = 12) -> str:
    """A comma-separated list of at most `most` items, saying how many were left out."""
    shown = ", ".join(items[:most]) if items else "none"
    return shown + (f", … ({len(items) - most} more)" if len(items) > most else "")


def describe(value: Any) -> str:
    """Names a YAML value's type (and a short preview of scalars) for messages."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {value}" if abs(value) < 10**12 else "a very large integer"
    if isinstance(value, float):
        return f"number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"string {shown!r}"
    if isinstance(value, datetime):
        return f"timestamp {value.isoformat()}"
    if isinstance(value, date):
        return f"date {value.isoformat()}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__} value"


def join(path: str, key: Any) -> str:
    """Appends a mapping key to a location path."""
    shown = key if isinstance(key, str) else repr(key)
    return f"{path}.{shown}" if path else str(shown)


def check_keys(p: Problems, mapping: dict, path: str, allowed: tuple[str, ...], required: tuple[str, ...]) -> None:
    """Reports unknown keys and missing required keys of a mapping."""
    for key in mapping:
        if key not in allowed:
            p.add(join(path, key), f"unknown key (expected one of: {', '.join(allowed)})")
    for key in required:
        if key not in mapping:
            p.add(join(path, key), "required key is missing")


def text(p: Problems, value: Any, path: str, *, pattern: str | None = None, what: str = "a string") -> str | None:
    """A non-empty string, optionally fully matching `pattern`."""
    if not isinstance(value, str):
        p.add(path, f"expected {what}, found {describe(value)}")
        return None
    if not value.strip():
        p.add(path, f"expected {what}, found an empty string")
        return None
    if pattern is not None and not re.fullmatch(pattern, value):
        p.add(path, f"{value!r} must match {pattern}")
        return None
    return value


def text_list(p: Problems, value: Any, path: str, *, allow_empty: bool = False) -> tuple[str, ...] | None:
    """A list of non-empty strings (non-empty list unless `allow_empty`)."""
    if not isinstance(value, list):
        p.add(path, f"expected a list of strings, found {describe(value)}")
        return None
    if not value and not allow_empty:
        p.add(path, "expected a non-empty list of strings, found an empty list")
        return None
    items = [text(p, item, f"{path}[{i}]") for i, item in enumerate(value)]
    if any(item is None for item in items):
        return None
    return tuple(items)  # type: ignore[arg-type]


def duration(p: Problems, value: Any, path: str) -> timedelta | None:
    """A duration string such as 30m, 6h, 1d, 45s or 1h30m."""
    if not isinstance(value, str):
        p.add(path, f"expected {DURATION_HELP}, found {describe(value)}")
        return None
    if len(value) > 40:
        p.add(path, f"{value[:20]!r}… is too long a duration ({len(value)} characters)")
        return None
    m = _DURATION.fullmatch(value.strip())
    if not value.strip() or m is None:
        p.add(path, f"{value!r} is not {DURATION_HELP}")
        return None
    d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    try:
        return timedelta(days=d, hours=h, minutes=mi, seconds=s)
    except OverflowError:
        p.add(path, f"{value!r} is too long a duration")
        return None


def timestamp(p: Problems, value: Any, path: str) -> datetime | None:
    """An ISO-8601 timestamp with a timezone, returned in UTC."""
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            p.add(path, f"{value!r} is not {TIMESTAMP_HELP}")
            return None
        value = parsed
    elif not isinstance(value, datetime):
        p.add(path, f"expected {TIMESTAMP_HELP}, found {describe(value)}")
        return None
    if value.tzinfo is None or value.utcoffset() is None:
        p.add(path, f"timestamp {value.isoformat()} has no timezone; add one, e.g. {value.isoformat()}Z")
        return None
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError):
        p.add(path, f"timestamp {value.isoformat()} is out of range")
        return None


def positive_int(p: Problems, value: Any, path: str) -> int | None:
    """An integer >= 1 (booleans are not integers here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        p.add(path, f"expected an integer >= 1, found {describe(value)}")
        return None
    if value < 1:
        p.add(path, f"expected an integer >= 1, found {value}")
        return None
    return value
