"""The vectors sidecar's row layout: each float32 row stored sparse and exact, and the checks on it.

A row is a bitmap of which floats are non-zero (by their bits, so -0.0 and NaN are kept),
then those floats as little-endian float32, or, when smaller, the row's distinct floats and a
few bits per float indexing them (`pack_rows`; `unpack_rows` and `palette_values` read them
back). `row_sizes` and `row_offsets` say where stored rows begin. Every row has a CRC-32
(`row_checksums`, checked on read) and a truncated SHA-256 (`row_digests`, checked by
``python -m memory verify``), both of the dense float32 row. `memory.persistence.vectors`
writes and reads the file.
"""

from __future__ import annotations

import hashlib
import zlib

import numpy as np

DIGEST_BYTES = 16  # bytes of each row's SHA-256 kept in the run


def row_checksums(rows: np.ndarray) -> np.ndarray:
    """CRC-32 of each float32 row (what a read checks: cheap, and catches damage and a wrong file)."""
    data = np.ascontiguousarray(rows, dtype="<f4")
    return np.array([zlib.crc32(row) for row in data], dtype="<u4")  # each row is contiguous: no copy


def row_digests(rows: np.ndarray) -> np.ndarray:
    """Truncated SHA-256 of each float32 row, as a ``(n, DIGEST_BYTES)`` uint8 array."""
    data = np.ascontiguousarray(rows, dtype="<f4")
    out = np.empty((len(data), DIGEST_BYTES), dtype=np.uint8)
    for n, row in enumerate(data):
        out[n] = np.frombuffer(hashlib.sha256(row.tobytes()).digest()[:DIGEST_BYTES], dtype=np.uint8)
    return out


def bitmap_bytes(dim: int) -> int:
    """Bytes of a sparse row's bitmap."""
    return (dim + 7) // 8


def index_bits(palettes: np.ndarray) -> np.ndarray:
    """Bits of each palette index of rows with `palettes` distinct values (0 for one value)."""
    return np.frexp(np.maximum(np.asarray(palettes, dtype=np.int64) - 1, 0))[1].astype(np.int64)


def row_sizes(dim: int, counts: np.ndarray, palettes: np.ndarray | None = None) -> np.ndarray:
    """Bytes each stored row takes: a sparse row with `counts` floats (as `palettes` distinct values
    and indices into them, or the floats themselves where the palette size is 0), or a dense one
    where the count is negative."""
    counts = np.asarray(counts, dtype=np.int64)
    palettes = np.zeros_like(counts) if palettes is None else np.asarray(palettes, dtype=np.int64)
    indexed = 4 * palettes + (counts * index_bits(palettes) + 7) // 8
    return np.where(counts < 0, 4 * dim, bitmap_bytes(dim) + np.where(palettes > 0, indexed, 4 * counts))


def row_offsets(first: int, dim: int, counts: np.ndarray, palettes: np.ndarray | None = None) -> np.ndarray:
    """Where each of a block of sparse rows written together begins, the first at byte `first`."""
    sizes = row_sizes(dim, counts, palettes)
    return int(first) + np.cumsum(sizes) - sizes


def pack_rows(rows: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray]:
    """float32 rows in the sidecar's sparse layout, how many floats each row keeps, and the size
    of each row's palette (0: the floats are stored as they are).

    Per row: a bitmap of the floats whose bits are not all zero (bit ``i % 8`` of byte
    ``i // 8``), then either those floats in order or, when it is smaller, the row's distinct
    floats (its palette, by their bits, so nothing is rounded) followed by one index into the
    palette per float, packed little-endian with as few bits as the palette needs (at most 8).
    Hashing vectors repeat a few dozen values (log counts over one norm), so a palette row takes
    about a third of the floats' bytes. `unpack_rows` restores every bit.
    """
    data = np.ascontiguousarray(rows, dtype="<f4")
    bits = data.view("<u4")
    present = bits != 0
    counts = present.sum(axis=1)
    bitmaps = np.packbits(present, axis=1, bitorder="little")
    palettes = np.zeros(len(data), dtype=np.uint32)
    parts: list[bytes] = []
    for n, (bitmap, row) in enumerate(zip(bitmaps, bits)):
        values = row[present[n]]
        palette, index = np.unique(values, return_inverse=True)
        width = index_bits(np.array([len(palette)]))[0]
        parts.append(bitmap.tobytes())
        if width <= 8 and 4 * len(palette) + (len(values) * width + 7) // 8 < 4 * len(values):
            palettes[n] = len(palette)
            spread = (index.reshape(-1, 1) >> np.arange(width)) & 1
            parts += [
                palette.astype("<u4").tobytes(),
                np.packbits(spread.astype(np.uint8), bitorder="little").tobytes(),
            ]
        else:
            parts.append(values.tobytes())
    return b"".join(parts), counts.astype(np.uint32), palettes


def unpack_rows(bitmaps: np.ndarray, counts: np.ndarray, values: np.ndarray, dim: int) -> np.ndarray:
    """Dense float32 rows from sparse ones: their bitmaps (one row of `bitmap_bytes` each), float
    counts and floats (concatenated in row order). A row whose bitmap does not hold `counts` bits
    (damage) reads as NaN."""
    counts = np.asarray(counts, dtype=np.int64)
    present = np.unpackbits(bitmaps, axis=1, count=dim, bitorder="little").view(bool)
    out = np.zeros((len(counts), dim), dtype=np.float32)
    fits = present.sum(axis=1) == counts
    if not fits.all():
        present[~fits] = False
        out[~fits] = np.nan
        values = values[np.repeat(fits, counts)]
    out.reshape(-1)[np.flatnonzero(present)] = values  # twice as fast as a boolean assignment
    return out


def palette_values(
    floats: np.ndarray,
    starts: np.ndarray,
    counts: np.ndarray,
    palettes: np.ndarray,
    indexes: np.ndarray,
    index_starts: np.ndarray,
) -> np.ndarray:
    """The floats of sparse rows, in row order, from what was read of them: `floats` holds each
    row's floats or palette from `starts`, `indexes` each palette row's packed indices from byte
    `index_starts` (followed by two spare bytes). A damaged index reads some other float, which
    the row's checksum then catches."""
    counts = np.asarray(counts, dtype=np.int64)
    palettes = np.asarray(palettes, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    firsts = np.cumsum(counts) - counts  # each row's first float in the output
    width = index_bits(palettes)
    # The bit of float number i (counted over all rows) is i * width + base, per row.
    base = np.asarray(index_starts, dtype=np.int64) * 8 - firsts * width
    per_float = np.repeat(
        np.stack([width, base, (1 << width) - 1, starts]), counts, axis=1
    )  # intp: gathers need no copy
    bit = np.arange(int(counts.sum()), dtype=np.int64)
    bit *= per_float[0]
    bit += per_float[1]
    pairs = indexes[:-1].astype(np.uint16) | (indexes[1:].astype(np.uint16) << 8)  # the two bytes from each byte
    index = pairs[bit >> 3].astype(np.int64)
    index >>= bit & 7
    index &= per_float[2]
    index += per_float[3]
    out = floats[np.minimum(index, len(floats) - 1, out=index)] if len(floats) else np.zeros(0, np.float32)
    for row in np.flatnonzero(palettes == 0).tolist():  # rows stored as their floats
        out[firsts[row] : firsts[row] + counts[row]] = floats[starts[row] : starts[row] + counts[row]]
    return out
