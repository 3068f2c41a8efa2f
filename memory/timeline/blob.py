"""How an embedding is kept in the store's ``timeline.embedding`` column.

Three self-describing layouts, told apart by the blob's length:

- dense: the little-endian float32 bytes of the vector (length a multiple of 4). Every
  store written before the compact layout existed holds only these.
- sparse: the values of the non-zero components (float32), their positions (uint16,
  strictly increasing), then a 7-byte trailer: their count (uint16), the dimension
  (uint32) and the tag ``b"S"``; all little-endian, 6·nnz + 7 bytes, always an odd
  length. Values come first so that both arrays are aligned for numpy. A hashing-encoder vector has a
  few hundred non-zeros of 1,024, so it takes about a quarter of the dense size.

- derived: the single byte ``b"T"``: the vector is the encoding of the entry's own text by
  the encoder its ``encoder`` column names, which `memory.timeline.encoder.rebuildable`
  rebuilds from that name (the hashing encoder). Nothing of the vector is stored; readers
  recompute it (`memory.timeline.schema`). Only a writer that made the vector from the text
  with that encoder (`memory.timeline.Timeline`) stores it so, and `verify` recomputes both
  the vector and the id: a vector that is not its text's encoding would fail there.

`pack` picks the smaller of the first two layouts; `unpack` gives back the exact float32 vector, bit for bit
(a component is "zero" only when all its bits are, so -0.0 survives). An entry's id
covers the dense bytes of the vector (`memory.timeline.entries.embedding_digest`), never the
blob, so the layout changes no id. A damaged blob either fails to unpack (`ValueError`)
or unpacks to another vector, whose digest no longer matches the id: a changed position
moves a non-zero value (or drops it when it collides with another), a changed value or
dimension changes the vector, a changed count or tag breaks the layout.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import cast

import numpy as np

_SPARSE = 0x53  # b"S"
DERIVED = b"T"  # the derived layout: recompute the vector from the entry's text
_TRAILER = struct.Struct("<HIB")  # non-zero count, dimension, tag
_MAX_SPARSE_DIM = 1 << 16  # positions are uint16


def pack(vector: np.ndarray) -> bytes:
    """The stored form of one float32 vector: sparse when smaller, dense otherwise."""
    dense = np.ascontiguousarray(vector, dtype="<f4").reshape(-1)
    dim = dense.shape[0]
    if dim > _MAX_SPARSE_DIM:
        return dense.tobytes()
    hits = dense.view("<u4").nonzero()[0]  # bit patterns: -0.0 counts as non-zero
    count = len(hits)
    if 6 * count + _TRAILER.size >= 4 * dim:
        return dense.tobytes()
    return dense[hits].tobytes() + hits.astype("<u2").tobytes() + _TRAILER.pack(count, dim, _SPARSE)


def pack_rows(matrix: np.ndarray) -> list[bytes]:
    """`pack` of every row of a 2-D float32 array, vectorized over the rows."""
    dense = np.ascontiguousarray(matrix, dtype="<f4")
    rows, dim = dense.shape
    if rows == 0:
        return []
    if dim > _MAX_SPARSE_DIM:
        return [row.tobytes() for row in dense]
    flat = dense.reshape(-1)
    hits = np.flatnonzero(flat.view("<u4") != 0)  # bit patterns: -0.0 counts as non-zero
    ends = np.searchsorted(hits, np.arange(1, rows + 1) * dim).tolist()
    positions = (hits % dim).astype("<u2").tobytes()
    values = flat[hits].tobytes()
    trailer = _TRAILER.pack
    out = []
    start = 0
    for row, end in enumerate(ends):
        count = end - start
        if 6 * count + _TRAILER.size < 4 * dim:
            out.append(values[4 * start : 4 * end] + positions[2 * start : 2 * end] + trailer(count, dim, _SPARSE))
        else:
            out.append(dense[row].tobytes())
        start = end
    return out


def is_derived(blob: bytes | memoryview) -> bool:
    """Whether a blob is the derived layout (the vector is recomputed from the entry's text)."""
    return len(blob) == 1 and bytes(blob) == DERIVED


def unpack(blob: bytes | memoryview, *, writable: bool = False) -> np.ndarray:
    """The float32 vector a blob holds; `ValueError` when the blob is not a valid layout.

    A dense blob comes back as a read-only view of `blob` unless `writable` asks for a copy.
    A derived blob holds no vector: it raises here (`memory.timeline.schema` recomputes it).
    """
    size = len(blob)
    if size % 4 == 0:
        vector = np.frombuffer(blob, dtype="<f4")
        return vector.copy() if writable else vector
    if size < _TRAILER.size:
        if is_derived(blob):
            raise ValueError("a derived embedding blob is recomputed from its entry's text, not unpacked")
        raise ValueError(f"embedding blob of {size} bytes is neither dense float32 nor sparse")
    count, dim, tag = _TRAILER.unpack_from(blob, size - _TRAILER.size)
    if tag != _SPARSE or size != 6 * count + _TRAILER.size or dim > _MAX_SPARSE_DIM:
        raise ValueError(f"embedding blob of {size} bytes is neither dense float32 nor sparse")
    vector = np.zeros(dim, dtype=np.float32)
    try:
        vector[np.frombuffer(blob, dtype="<u2", count=count, offset=4 * count)] = np.frombuffer(
            blob, dtype="<f4", count=count
        )
    except IndexError as exc:
        raise ValueError(f"sparse embedding blob has a position beyond dimension {dim}") from exc
    return vector


def unpack_rows(blobs: Sequence[bytes]) -> list[np.ndarray]:
    """`unpack` of many blobs, the sparse ones scattered in one step; every vector comes back read-only.

    Equal to ``[unpack(blob) for blob in blobs]`` (a damaged blob raises the same `ValueError`).
    """
    out: list[np.ndarray | None] = [None] * len(blobs)
    groups: dict[int, list[tuple[int, int, bytes]]] = {}  # dimension -> (index, count, blob)
    trailer = _TRAILER.unpack_from
    for index, blob in enumerate(blobs):
        size = len(blob)
        if size % 4 == 0 or size < _TRAILER.size:
            out[index] = unpack(blob)
            continue
        count, dim, tag = trailer(blob, size - _TRAILER.size)
        if tag != _SPARSE or size != 6 * count + _TRAILER.size or dim > _MAX_SPARSE_DIM:
            unpack(blob)  # raises the ValueError that names the problem
        groups.setdefault(dim, []).append((index, count, blob))
    for dim, members in groups.items():
        counts = [count for _, count, _ in members]
        values = np.frombuffer(b"".join([blob[: 4 * count] for _, count, blob in members]), dtype="<f4")
        positions = np.frombuffer(b"".join([blob[4 * count : 6 * count] for _, count, blob in members]), dtype="<u2")
        if positions.size and int(positions.max()) >= dim:
            for _, _, blob in members:
                unpack(blob)  # raises for the first blob with a position beyond its dimension
        matrix = np.zeros((len(members), dim), dtype=np.float32)
        matrix[np.repeat(np.arange(len(members)), counts), positions] = values
        matrix.flags.writeable = False
        for row, (index, _, _) in enumerate(members):
            out[index] = matrix[row]
    return cast(list[np.ndarray], out)  # every slot was filled above
