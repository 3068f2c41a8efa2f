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
"""

from __future__ import annotations

import zlib

from memory.errors import IntegrityError

# Least useful first: zlib finds the end of the dictionary cheapest to refer to.
DICTIONARY = (
    '{"conclusion":"","condition":[],"confidence":0.5,"contradict":[],"created_at":"","fact_id":"fact-",'
    '"principal":"","reason":"extracted: shared by episodes confirming the conclusion, rare elsewhere",'
    '"since":null,"status":"active","supersedes":null,"support":[],"version":1}'
    '{"episode":""}'
    '{"evidence":"choice \'\' instead of \'\' after the correction \\"\\"; outcome SUCCESS","source":"",'
    '"target":"","type":"LEARNED_FROM","weight":0.9}'
    '"type":"CAUSED_BY""type":"LED_TO""type":"RETRY_OF""type":"CONTINUATION""type":"CONTRADICTED"'
    '"outcome":"PARTIAL""outcome":"UNKNOWN","outcome_evidence":"no outcome signal"'
    '"outcome":"SUCCESS","outcome_evidence":"structured status \'success\' on outcome \\"'
    '"outcome":"FAILURE","outcome_evidence":"structured status \'failure\' on outcome \\"'
    '{"actions":[],"assumptions":[],"choices":[""],"corrections":[""],"decisions":["Decision: "],'
    '"end":"2026-01-01T00:00:00.000000Z","entry_ids":["'
).encode("utf-8")

LEVEL = 6


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
