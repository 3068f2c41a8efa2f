"""How a derived record's body is stored in a SQLite store: canonical JSON, compressed.

A body is stored as zlib data (RFC 1950, with its Adler-32 check) compressed against a
preset dictionary of this project's own record layouts: field names, outcome and edge
names, the wording the outcome detector and the reinforcer write. Nothing in it comes from
any scenario or corpus. Episode records repeat their observations inside their summary,
so they shrink to about half. A body that would not shrink is stored as its text, as all
bodies are in stores of schema 3 and before, and erasure records (SQL reads their fields);
`unpack` reads both.

The dictionary is part of the file format: changing it makes stored bodies unreadable.
A new one would need its own marker, which zlib keeps in each body anyway (the
dictionary's Adler-32), so `unpack` refuses a body made with another dictionary.

A stored body that does not decompress, is not JSON or is not a JSON object is malformed:
`decoded` raises `DamagedStore` naming its row (``records row seq=… kind=… id=…``) and
``python -m memory verify`` lists every one (`parse`). What each kind must hold is checked by
its readers (`memory.persistence.record_fields`).
"""

from __future__ import annotations

import json
import zlib
from typing import Any, NamedTuple

from memory.errors import DamagedBody, DamagedStore, IntegrityError

# Least useful first: zlib finds the end of the dictionary cheapest to refer to.
DICTIONARY = (
    b'{"conclusion":"","condition":[],"confidence":0.5,"contradict":[],"created_at":"","fact_id":"fact-",'
    b'"principal":"","reason":"extracted: shared by episodes confirming the conclusion, rare elsewhere",'
    b'"since":null,"status":"active","supersedes":null,"support":[],"version":1}'
    b'{"episode":""}'
    b'{"evidence":"choice \'\' instead of \'\' after the correction \\"\\"; outcome SUCCESS","source":"",'
    b'"target":"","type":"LEARNED_FROM","weight":0.9}'
    b'"type":"CAUSED_BY""type":"LED_TO""type":"RETRY_OF""type":"CONTINUATION""type":"CONTRADICTED"'
    b'"outcome":"PARTIAL""outcome":"UNKNOWN","outcome_evidence":"no outcome signal"'
    b'"outcome":"SUCCESS","outcome_evidence":"structured status \'success\' on outcome \\"'
    b'"outcome":"FAILURE","outcome_evidence":"structured status \'failure\' on outcome \\"'
    b'{"actions":[],"assumptions":[],"choices":[""],"corrections":[""],"decisions":["Decision: "],'
    b'"end":"2026-01-01T00:00:00.000000Z","entry_ids":["'
)

LEVEL = 6
_JSON_NAMES = {
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def pack(text: str) -> str | bytes:
    """The stored form of a body's JSON text: compressed bytes, or the text when that is no longer."""
    packer = zlib.compressobj(LEVEL, zlib.DEFLATED, zlib.MAX_WBITS, 9, zlib.Z_DEFAULT_STRATEGY, DICTIONARY)
    data = text.encode("utf-8")
    packed = packer.compress(data) + packer.flush()
    return packed if len(packed) < len(data) else text


def unpack(stored: str | bytes | memoryview) -> str:
    """A body's JSON text from its stored form (compressed bytes, or the text of older stores).

    Raises `IntegrityError` for bytes that are not a whole body packed with `DICTIONARY` (damage).
    """
    if isinstance(stored, str):
        return stored
    try:
        unpacker = zlib.decompressobj(zlib.MAX_WBITS, DICTIONARY)
        data = unpacker.decompress(stored) + unpacker.flush()
        if not unpacker.eof:
            raise zlib.error("it ends early")
        return data.decode("utf-8")
    except (zlib.error, UnicodeDecodeError) as exc:
        raise IntegrityError(f"a stored record body is damaged ({exc}); `python -m memory verify` names it") from exc


class Parsed(NamedTuple):
    """A stored record body as read."""

    body: Any  # the parsed JSON (None when it did not parse)
    problem: str  # what is wrong with it ("" when it is a JSON object)
    damaged: bool = False  # the stored bytes do not decompress (damage, not a record written wrong)


def parse(stored: str | bytes | memoryview) -> Parsed:
    """A stored record body parsed, and what is wrong with it."""
    try:
        body = json.loads(unpack(stored))
    except IntegrityError as exc:
        return Parsed(None, f"the stored record body is damaged: it does not decompress ({exc.__cause__ or exc})", True)
    except (ValueError, RecursionError) as exc:
        return Parsed(None, f"the body is not JSON ({exc})")
    if not isinstance(body, dict):
        return Parsed(body, f"the body is {_JSON_NAMES.get(type(body), type(body).__name__)}, not an object")
    return Parsed(body, "")


def where(path: str, kind: str, record_id: str, seq: int | None = None) -> str:
    """How a message names a row of the records table."""
    at = f"seq={seq} " if seq is not None else ""
    return f"{path}: records row {at}kind={kind} id={record_id}"


def malformed(path: str, kind: str, record_id: str, what: str, seq: int | None = None) -> DamagedStore:
    """The error for a record row that cannot be read as stored."""
    return DamagedStore(f"{where(path, kind, record_id, seq)}: {what}; run `python -m memory verify {path}`")


def decoded(path: str, kind: str, record_id: str, stored: str | bytes | memoryview, seq: int | None = None) -> Any:
    """The JSON object a stored record body holds.

    Raises:
        DamagedStore: the body is malformed (see the module docstring); the message names the row.
    """
    read = parse(stored)
    if read.problem:
        error = malformed(path, kind, record_id, read.problem, seq)
        raise DamagedBody(str(error)) if read.damaged else error
    return read.body
