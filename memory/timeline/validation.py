"""Checks at the timeline's boundary: what an entry may hold before it is hashed and stored.

A stored value must always read back and re-hash to its id, so a caller's mistake is
refused here instead of being chained: text and labels must be strings that UTF-8 can
encode, labels non-empty and short, metadata JSON with finite numbers and bounded depth,
timestamps timezone-aware within years `MIN_YEAR`..`MAX_YEAR` (so every stored form
parses back), and sizes below caps that keep encoding cheap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from memory.errors import InvalidEntry

MAX_TEXT_CHARS = 1_000_000  # an entry's text; larger text is refused before redaction or encoding
MAX_LABEL_CHARS = 256  # principal and situation labels
MAX_METADATA_CHARS = 1_000_000  # the metadata's canonical JSON
MAX_METADATA_DEPTH = 32  # nesting of dicts and lists in metadata
MIN_YEAR, MAX_YEAR = 1970, 9998  # UTC years; 9998 leaves room for any offset before conversion


def check_text(text: Any) -> str:
    """The text when it is a str of at most `MAX_TEXT_CHARS` that UTF-8 encodes."""
    if type(text) is not str and not isinstance(text, str):
        raise InvalidEntry(f"text must be a str, not {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidEntry(f"text of {len(text):,} characters exceeds the limit of {MAX_TEXT_CHARS:,}")
    _encodable("text", text)
    return text


def check_label(name: str, value: Any) -> str:
    """A principal or situation label: a non-empty str of at most `MAX_LABEL_CHARS`."""
    if not isinstance(value, str):
        raise InvalidEntry(f"{name} must be a non-empty str, not {type(value).__name__}")
    if not value:
        raise InvalidEntry(f"{name} must be a non-empty str, not {value!r}")
    if len(value) > MAX_LABEL_CHARS:
        raise InvalidEntry(f"{name} of {len(value):,} characters exceeds the limit of {MAX_LABEL_CHARS}")
    _encodable(name, value)
    return value


def check_timestamp(timestamp: Any) -> datetime:
    """The timestamp in UTC, when timezone-aware and within years MIN_YEAR..MAX_YEAR."""
    if not isinstance(timestamp, datetime):
        raise InvalidEntry(f"timestamp must be a datetime, not {type(timestamp).__name__}")
    if timestamp.tzinfo is None or timestamp.utcoffset() is None:
        raise InvalidEntry(f"timestamp {timestamp.isoformat()} has no timezone")
    try:
        utc = timestamp.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise InvalidEntry(f"timestamp {timestamp.isoformat()} is out of range ({exc})") from exc
    if not MIN_YEAR <= utc.year <= MAX_YEAR:
        raise InvalidEntry(f"timestamp {timestamp.isoformat()} is outside years {MIN_YEAR}..{MAX_YEAR} (UTC)")
    return utc


def check_metadata(metadata: Any) -> None:
    """Refuse metadata that is not a mapping of JSON values with str keys, finite numbers, bounded depth."""
    if metadata is None:
        return
    if not isinstance(metadata, Mapping):
        raise InvalidEntry(f"metadata must be a mapping, not {type(metadata).__name__}")
    budget = [MAX_METADATA_CHARS]
    _check_value(metadata, "metadata", 0, budget)


_SCALARS = (str, float, bool, type(None))


def is_plain(metadata: Any) -> bool:
    """True for a dict of str keys whose values are str, 64-bit int, float, bool, None, or lists and
    dicts (str keys) of those, nested at most `MAX_METADATA_DEPTH` levels.

    Such metadata passes `check_metadata` exactly when its canonical JSON can be written (no
    NaN or infinity), UTF-8 encodes it and it is within `MAX_METADATA_CHARS`: the caller checks
    those on the JSON it writes anyway (`memory.timeline.Timeline`), which saves a pass per string.
    """
    return type(metadata) is dict and _plain(metadata, 0)


def _plain(value: Any, depth: int) -> bool:
    if depth > MAX_METADATA_DEPTH or (depth == MAX_METADATA_DEPTH and value):  # its items would be too deep
        return False
    items = value.values() if type(value) is dict else value
    if type(value) is dict:
        for key in value:
            if type(key) is not str:
                return False
    for item in items:
        kind = type(item)
        if kind is int:
            if not -(1 << 63) < item < 1 << 63:
                return False
        elif kind is dict or kind is list:
            if not _plain(item, depth + 1):
                return False
        elif kind not in _SCALARS:
            return False
    return True


def _check_value(value: Any, where: str, depth: int, budget: list[int]) -> None:
    if depth > MAX_METADATA_DEPTH:
        raise InvalidEntry(f"{where}: nested deeper than {MAX_METADATA_DEPTH} levels")
    if isinstance(value, str):
        _spend(budget, len(value), where)
        _encodable(where, value)
    elif value is None or isinstance(value, bool):
        _spend(budget, 5, where)
    elif isinstance(value, int):
        _spend(budget, 1, where)
        if abs(value) >= 1 << 63:  # SQLite's json functions and most readers stop at 64-bit integers
            raise InvalidEntry(f"{where}: integer {str(value)[:20]}… does not fit in 64 bits")
    elif isinstance(value, float):
        _spend(budget, 1, where)
        if not math.isfinite(value):
            raise InvalidEntry(f"{where}: {value} is not a finite number")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidEntry(f"{where}: key {key!r} is not a str")
            _spend(budget, len(key), where)
            _encodable(f"{where} key", key)
            _check_value(item, f"{where}.{key[:40]}", depth + 1, budget)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_value(item, f"{where}[{index}]", depth + 1, budget)
    else:
        raise InvalidEntry(f"{where}: {type(value).__name__} is not a JSON value")


def _spend(budget: list[int], amount: int, where: str) -> None:
    budget[0] -= amount
    if budget[0] < 0:
        raise InvalidEntry(f"{where}: metadata exceeds the limit of {MAX_METADATA_CHARS:,} characters")


def _encodable(name: str, text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidEntry(f"{name} holds a character UTF-8 cannot encode ({exc.reason} at {exc.start})") from exc
