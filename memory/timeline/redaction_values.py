"""Redaction of JSON-like values (an entry's metadata): every string, keys included.

`Timeline` redacts metadata with `redact_value`, after `leaves_unchanged` has judged from the
canonical JSON alone whether any string of it could change (one pre-check instead of one per
string).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from memory.timeline.redaction import _SECRET_NAME, NoRedaction, PatternRedactor, Redactor, may_hold_secret

_SECRET_KEY = re.compile(_SECRET_NAME, re.IGNORECASE)


def redact_value(value: Any, redact: Callable[[str], str]) -> Any:
    """Apply `redact` to every string inside a JSON-like value, keys included.

    A string under a key that names a secret (``api_key``, ``password``, ``token``…) is
    redacted whole: ``{"api_key": "abc123"}`` holds no pattern, the key says what it is.
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(key, str) and isinstance(item, str) and item and _SECRET_KEY.search(key):
                item = "[SECRET]"  # no digest: a short password's unsalted digest could be guessed
            out[redact(key) if isinstance(key, str) else key] = redact_value(item, redact)
        return out
    if isinstance(value, (list, tuple)):
        return [redact_value(item, redact) for item in value]
    return value


def leaves_unchanged(redactor: Redactor, canonical_json: str) -> bool:
    """True only when ``redact_value(value, redactor.redact)`` returns `value` as it is (up to
    lists for tuples), judged from the canonical JSON of `value` alone: one pre-check instead
    of one per string.

    JSON writes every character a default pattern, a secret word or a key prefix is made of
    as itself (it escapes only quotes, backslashes and control characters), so a string of
    `value` that `may_hold_secret` flags is flagged inside the JSON too; a key naming a secret
    holds a secret word. Only the default redactor without IP redaction and `NoRedaction` are
    known here; any other redactor is always asked.
    """
    if type(redactor) is PatternRedactor:
        return not redactor.ip and not may_hold_secret(canonical_json)
    return type(redactor) is NoRedaction and not may_hold_secret(canonical_json)
