"""SHA-256 digests held as their 32 bytes (numpy ``S32``) instead of hex strings: read from a run's JSON
list of ids without a string per id (`hex_digests`), kept sorted and distinct (`sorted_distinct`)."""

from __future__ import annotations

import numpy as np

DIGEST = np.dtype("S32")  # a SHA-256 digest's bytes (numpy strips trailing zero bytes from one it reads)
_HEX_VALUE = np.full(256, 255, dtype=np.uint8)  # ASCII byte → its lower-case hex digit's value (255: none)
_HEX_VALUE[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = np.arange(16, dtype=np.uint8)


def hex_digests(raw: bytes) -> np.ndarray | None:
    """The digests of a JSON list of lower-case SHA-256 hex strings written without spaces, as numpy ``S32``
    (in the list's order); None when `raw` is anything else (then it is read as JSON)."""
    if raw == b"[]":
        return np.zeros(0, dtype=DIGEST)
    count, left = divmod(len(raw) - 1, 67)  # '[', then per id '"' + 64 digits + '"' and ',' (']' after the last)
    if left or not count or raw[:1] != b"[" or raw[-1:] != b"]":
        return None
    rows = np.frombuffer(raw[1:-1] + b",", dtype=np.uint8).reshape(count, 67)
    if (rows[:, 0] != ord('"')).any() or (rows[:, 65] != ord('"')).any() or (rows[:, 66] != ord(",")).any():
        return None
    digits = _HEX_VALUE[rows[:, 1:65]]
    if (digits == 255).any():
        return None
    return np.ascontiguousarray((digits[:, 0::2] << 4) | digits[:, 1::2]).view(DIGEST).reshape(count)


def sorted_distinct(digests: np.ndarray) -> np.ndarray:
    """`np.unique` of digests (numpy ``S32``), sorted on their first 8 bytes as one integer (several times
    faster than comparing 32-byte strings); where two share those, `np.unique` itself decides."""
    if len(digests) < 2:
        return digests.copy()
    heads = np.ascontiguousarray(digests).view(np.uint8).reshape(-1, 32)[:, :8].copy().view(">u8").reshape(-1)
    order = np.argsort(heads, kind="stable")
    if (np.diff(heads[order]) == 0).any():  # equal heads (a repeated digest, or a rare tie)
        return np.unique(digests)
    return digests[order]
