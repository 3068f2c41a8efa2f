"""What recall's relevance bounds are made of, stored beside the state runs (`memory.persistence.runs`).

A partition's bounding basis (`memory.retrieval.bounds.Bounds`) is stored once per principal
and digest (kind ``bounds_basis/1``, float64, dim × rank); a run keeps its rows' projections on
the basis its partition had when the run was written. A partition's first runs are written
before it has a basis (one is fitted once it holds enough episodes), so the open that installs
the bounds projects those runs' rows itself; it then stores the projections (kind
``bounds_rows/1``, one snapshot per run and principal), and later opens read them instead of
every such row's vector. Both are derived data, checked by size and sha256 when read: one that
does not check out is ignored and computed again, and its replacement is stored beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memory.persistence.runs import Run, body_digest, free_id
from memory.timeline import Store

BASIS = "bounds_basis/1"  # snapshot kind of a partition's bounding basis (float64, dim × rank)
PROJECTIONS = "bounds_rows/1"  # snapshot kind of one run's rows of a principal projected on a later basis


def read_basis(store: Store, principal: str, digest: str) -> np.ndarray | None:
    """The bounding basis of `principal` with this digest, when stored intact."""
    for seq, _, meta in store.snapshot_index(BASIS):
        if meta.get("principal") == principal and meta.get("digest") == digest:
            body = store.snapshot_body(seq)
            if body_digest(body) == digest:
                try:
                    return np.frombuffer(body, dtype="<f8").reshape(meta["shape"])
                except (ValueError, TypeError):
                    continue
    return None


def projections_id(principal: str, basis: str, run: Run) -> str:
    """Snapshot id of a run's rows of `principal` projected on the basis with digest `basis`."""
    return f"{principal}:{basis[:32]}:{run.after}:{run.upto}:{run.meta['digest'][:32]}"


def projections_body(proj: np.ndarray, resid: np.ndarray) -> tuple[dict[str, Any], bytes]:
    """(meta, body) of stored projections: float32 projections (rows × rank), then float32 residual norms."""
    proj = np.ascontiguousarray(proj, dtype="<f4")
    body = proj.tobytes() + np.ascontiguousarray(resid, dtype="<f4").tobytes()
    return {"shape": list(proj.shape), "digest": body_digest(body)}, body


class StoredProjections:
    """The projection snapshots of a store, listed on first use (a copy stored beside a damaged one
    carries its id with a ``+`` added, and is listed under the id)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._index: dict[str, list[tuple[int, dict[str, Any]]]] | None = None

    def read(self, name: str, rows: int, rank: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The projections and residual norms stored under `name` for `rows` rows of `rank`, when a copy
        is intact (its size and sha256 check out); else None."""
        if self._index is None:
            self._index = {}
            for seq, stored, meta in self.store.snapshot_index(PROJECTIONS):
                self._index.setdefault(stored.rstrip("+"), []).append((seq, meta))
        for seq, meta in self._index.get(name, ()):
            if meta.get("shape") != [rows, rank]:
                continue
            body = self.store.snapshot_body(seq)
            if len(body) != 4 * rows * (rank + 1) or body_digest(body) != meta.get("digest"):
                continue
            data = np.frombuffer(body, dtype="<f4")
            return data[: rows * rank].reshape(rows, rank), data[rows * rank :]
        return None


def basis_digest(basis: np.ndarray) -> str:
    return body_digest(np.ascontiguousarray(basis, dtype="<f8").tobytes())


def store_basis(store: Store, principal: str, digest: str, basis: np.ndarray) -> None:
    """Store a partition's basis unless an intact copy is stored."""
    if read_basis(store, principal, digest) is not None:
        return
    data = np.ascontiguousarray(basis, dtype="<f8")
    name = free_id({i for _, i, _ in store.snapshot_index(BASIS)}, f"{principal}:{digest}")
    store.add_snapshot(
        BASIS, name, {"principal": principal, "digest": digest, "shape": list(data.shape)}, data.tobytes()
    )


def store_projections(store: Store, projected: Sequence[tuple[str, np.ndarray, np.ndarray]]) -> None:
    """Store (id, projections, residual norms) of runs' rows projected on a later basis (`projections_id`);
    nothing for a store in memory."""
    if store.path == ":memory:" or not projected:
        return
    known = {name for _, name, _ in store.snapshot_index(PROJECTIONS)}
    for name, proj, resid in projected:
        meta, body = projections_body(proj, resid)
        store.add_snapshot(PROJECTIONS, free_id(known, name), meta, body)
