"""Bounds loaded from stored parts (`Bounds.from_parts`, a chunk of rows at a time) hold each row as it was
given, whatever the chunk it falls in."""

import numpy as np

from memory.retrieval import Bounds


def test_bounds_loaded_over_several_chunks_hold_every_row_and_bound_it():
    rng = np.random.default_rng(5)
    rows = rng.normal(size=(20_000, 24)).astype(np.float32)  # over two chunks and a part of one
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    fitted = Bounds(rows[:512], rank=12)
    proj, resid = fitted.split(rows)
    loaded = Bounds.from_parts(fitted.basis, proj, resid)
    pieces = [Bounds.from_parts(fitted.basis, proj[a:b], resid[a:b]) for a, b in ((0, 9000), (9000, 20_000))]
    held = loaded.projections(0, 20_000)
    assert np.array_equal(held, np.concatenate([piece.projections(0, piece.size) for piece in pieces]))
    assert np.allclose(held, proj, atol=1e-3)  # second halves in half precision
    query = rows[11]
    low, high = loaded.relevance(query)
    exact = np.clip(rows @ query, 0.0, 1.0)
    assert (low <= exact + 1e-6).all() and (exact <= high + 1e-6).all() and high[11] >= 1 - 1e-5
