"""Exact lower and upper bounds on the relevance of every row of a partition to a query.

Recall over a large partition scores exactly only the rows whose upper bound can reach the
best; `Bounds` explains why the bounds are true and `Probe` how one query refines them.

BLAS's threads are left alone unless a recall asks otherwise (`RetrieverConfig.blas_threads`,
see `blas_threads`): a thread limit is process-wide, so library code does not set one by itself.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

BASIS_SAMPLE = 4096  # leading vectors of a partition its bounding basis is fitted on
BASIS_DIM = 128  # dimensions of the bounding basis
BOUND_SLACK = 1e-3  # added to every relevance bound: covers float32 rounding of both dot products
GROWTH = 8  # full arrays grow by 1/GROWTH of their rows (amortized appends stay O(1))


class Bounds:
    """Exact lower and upper bounds on the cosine of every row of a partition with a query.

    With an orthonormal basis ``B`` (``dim × r``), a vector splits into its projection and a
    residual orthogonal to it, so ``q·m = (Bᵀq)·(Bᵀm) + q⊥·m⊥`` and, by Cauchy–Schwarz,
    ``|q⊥·m⊥| ≤ ‖q⊥‖‖m⊥‖``. Bounds for all rows cost one ``n × r`` product instead of
    ``n × dim``; only rows whose upper bound reaches what the lower bounds guarantee are
    scored exactly. Any orthonormal basis gives true bounds: the principal directions of the
    partition's first vectors (fitted once, then fixed) merely make them tight, so the basis
    changes speed, never results.

    The same split works on the leading ``r/2`` basis vectors alone (the rest of the
    projection joins the residual), so a `Probe` first bounds every row from the first half
    of the projection, then refines only the rows a recall still needs with the second half.

    Both halves are held in half precision, one row after another (at a million rows of rank
    128, 122 MB a half; the first halves took 244 MB in float32). Each row keeps the norm ``e``
    of what rounding each half lost, so a bound adds ``‖q₁‖·e₁`` (``q₁``: the query's first
    half), a refined one ``‖q₂‖·e₂`` as well, and they stay exact. The norms of the rows' parts
    are taken before rounding. BLAS has no half-precision product, so the first `Probe` of a
    partition widens its first halves for good to float32, one per column (rows rounded before
    keep their ``e₁``; rows appended after are held exactly). A partition whose recalls bound a
    few rows at a time (`RowBounds`, behind an approximate index) keeps them in half precision,
    where a row's half is 128 contiguous bytes to gather, not 64 values a column apart.
    """

    def __init__(self, sample: np.ndarray, rank: int = BASIS_DIM) -> None:
        x = np.asarray(sample, dtype=np.float64)
        rank = min(rank, x.shape[1])  # every basis of a dimension has this rank: stored runs rely on it
        if 0 < len(x) < x.shape[1]:  # fewer rows than dimensions: a thin SVD (n²·dim, against dim³ for eigh)
            vectors = np.linalg.svd(x, full_matrices=False)[2].T  # the row space, leading directions first
            if vectors.shape[1] < rank:  # completed to `rank` orthonormal columns (QR keeps the first ones' span)
                vectors = np.linalg.qr(np.hstack([vectors, np.eye(x.shape[1])[:, :rank]]))[0]
        else:
            vectors = np.linalg.eigh(x.T @ x)[1][:, ::-1]
        self.basis = np.ascontiguousarray(vectors[:, :rank])  # float64, orthonormal
        self.head = (self.basis.shape[1] + 1) // 2  # leading basis vectors of the first pass
        # halves one per row (a few rows are gathered at a time); the first halves one per column in
        # float32 once a first pass needs them (BLAS's matrix-vector product is fastest in this layout)
        self._head: np.ndarray | None = np.zeros((16, self.head), dtype=np.float16)  # None once widened
        self._wide: np.ndarray | None = None  # the first halves widened (`first_halves`)
        self._head_lost = np.zeros(16, dtype=np.float32)  # norm of what rounding each first half lost
        self._tail = np.zeros((16, self.basis.shape[1] - self.head), dtype=np.float16)
        self._tail_lost = np.zeros(16, dtype=np.float32)  # norm of what rounding each second half lost
        self._resid = np.zeros(16, dtype=np.float32)  # norm of the residual outside the basis
        self._outside = np.zeros(16, dtype=np.float32)  # norm of everything outside the first half
        self.size = 0

    def split(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Projections (float32) and residual norms (float64) of rows."""
        x = np.asarray(vectors, dtype=np.float64).reshape(-1, self.basis.shape[0])
        proj = x @ self.basis
        resid = np.sqrt(np.maximum(np.einsum("ij,ij->i", x, x) - np.einsum("ij,ij->i", proj, proj), 0.0))
        return proj.astype(np.float32), resid

    def extend(self, vectors: np.ndarray) -> None:
        """Append rows (in chunks, to keep float64 temporaries small)."""
        for start in range(0, len(vectors), 8192):
            proj, resid = self.split(vectors[start : start + 8192])
            end = self.size + len(proj)
            if end > len(self._resid):  # an eighth more: doubling a million rows' bounds would add 270 MB at once
                cap = max(end, len(self._resid) + max(len(self._resid) // GROWTH, 16))
                self._grow_head(cap)
                self._tail, self._tail_lost = _grown(self._tail, cap), _grown(self._tail_lost, cap)
                self._resid, self._outside = _grown(self._resid, cap), _grown(self._outside, cap)
            tail = proj[:, self.head :].astype(np.float64)
            if self._head is not None:
                self._head[self.size : end], self._head_lost[self.size : end] = _held(proj[:, : self.head])
            else:  # widened: held exactly, what was lost stays 0
                self.first_halves()[:, self.size : end] = proj[:, : self.head].T
            self._tail[self.size : end], self._tail_lost[self.size : end] = _held(proj[:, self.head :])
            self._resid[self.size : end] = resid
            self._outside[self.size : end] = np.sqrt(resid**2 + np.einsum("ij,ij->i", tail, tail))
            self.size = end

    def _grow_head(self, cap: int) -> None:
        """The first halves (and what rounding lost) grown to `cap` rows, as they are held."""
        if self._head is not None:
            self._head = _grown(self._head, cap)
        else:
            wide = np.zeros((self.head, cap), dtype=np.float32)
            wide[:, : self.size] = self.first_halves()[:, : self.size]
            self._wide = wide
        self._head_lost = _grown(self._head_lost, cap)

    def probe(self, query: np.ndarray, threads: int | None = None) -> Probe:
        """First-pass bounds of every row for `query` (see `Probe`); `threads` as in `blas_threads`."""
        return Probe(self, query, threads)

    @classmethod
    def from_parts(cls, basis: np.ndarray, proj: np.ndarray, resid: np.ndarray) -> Bounds:
        """Bounds over stored rows (bulk loading): a basis and the rows' `split` parts (projections
        in float32, residual norms)."""
        bounds = cls.__new__(cls)
        bounds.basis = np.ascontiguousarray(basis, dtype=np.float64)
        rank = bounds.basis.shape[1]
        bounds.head = (rank + 1) // 2
        proj = np.asarray(proj, dtype=np.float32).reshape(-1, rank)
        bounds._resid = np.ascontiguousarray(resid, dtype=np.float32).reshape(-1)
        n = len(bounds._resid)
        bounds._head, bounds._wide = np.zeros((n, bounds.head), dtype=np.float16), None
        bounds._tail = np.zeros((n, rank - bounds.head), dtype=np.float16)
        bounds._head_lost, bounds._tail_lost = np.zeros(n, dtype=np.float32), np.zeros(n, dtype=np.float32)
        bounds._outside = np.zeros(n, dtype=np.float32)
        for start in range(0, n, 8192):  # in chunks, as `extend`: a chunk's float64 temporaries take 4 MB
            rows = slice(start, start + 8192)
            bounds._head[rows], bounds._head_lost[rows] = _held(proj[rows, : bounds.head])
            bounds._tail[rows], bounds._tail_lost[rows] = _held(proj[rows, bounds.head :])
            tail = proj[rows, bounds.head :].astype(np.float64)
            resid64 = bounds._resid[rows].astype(np.float64)
            bounds._outside[rows] = np.sqrt(resid64**2 + np.einsum("ij,ij->i", tail, tail))
        bounds.size = n
        return bounds

    def projections(self, start: int, stop: int) -> np.ndarray:
        """Projections (float32, rows × rank) of rows `start` to `stop` as held (rounded to half precision)."""
        head = self._head
        rows = head[start:stop] if head is not None else self.first_halves()[:, start:stop].T
        return np.hstack([rows.astype(np.float32), self._tail[start:stop].astype(np.float32)])

    def first_halves(self) -> np.ndarray:
        """The first halves one per column (``head × rows``, float32), for a first pass over every row: widened
        from half precision the first time (a copy, once per partition), then kept and appended to so."""
        wide = self._wide
        if wide is None:
            assert self._head is not None, "first halves held neither way"
            wide = self._wide = np.ascontiguousarray(self._head.T, dtype=np.float32)
            self._head = None  # after `_wide` is set: readers look at `_head` first
        return wide

    def head_dots(self, query_head: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Dot products (float32) of `rows`' first halves, as held, with a query's first half (float32)."""
        head = self._head
        if head is not None:
            return head[rows].astype(np.float32) @ query_head
        return query_head @ self.first_halves()[:, rows]

    def relevance(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of ``clip(row·query, 0, 1)`` for every row, from the whole basis."""
        probe = self.probe(query)
        probe.refine(np.arange(self.size))
        return probe.low, probe.high


class Probe:
    """Bounds of ``clip(row·query, 0, 1)`` for one query: every row from the first half of
    the basis, refined on demand (`refine`) with the whole basis. `low` and `high` are
    updated in place and are valid bounds at every moment. `threads` limits BLAS's threads
    during a small first pass (`blas_threads`; None, the default, leaves them alone)."""

    def __init__(self, bounds: Bounds, query: np.ndarray, threads: int | None = None) -> None:
        self._bounds = bounds
        head = bounds.first_halves()[:, : bounds.size]
        with blas_threads(head.nbytes, threads):
            proj, resid = bounds.split(query)
            self._dot = proj[0, : bounds.head] @ head  # float32: rounding ≪ BOUND_SLACK
        self._tail = proj[0, bounds.head :]
        self._resid = np.float32(resid[0])
        self._head_norm = _norm(proj[0, : bounds.head])
        self._tail_norm = _norm(self._tail)
        outside = np.float32(np.sqrt(resid[0] ** 2 + float(self._tail_norm) ** 2))
        radius = bounds._outside[: bounds.size] * outside
        radius += bounds._head_lost[: bounds.size] * self._head_norm
        radius += np.float32(BOUND_SLACK)
        low = self._dot - radius
        radius += self._dot
        self.low = np.clip(low, 0.0, 1.0, out=low)  # lower bounds, float32
        self.high = np.clip(radius, 0.0, 1.0, out=radius)  # upper bounds, float32
        self._fine = np.zeros(bounds.size, dtype=bool)  # rows refined with the whole basis

    def refine(self, rows: np.ndarray) -> None:
        """Tighten the bounds of `rows` with the second half of the basis."""
        todo = rows[~self._fine[rows]]
        if not len(todo):
            return
        b = self._bounds
        dot = self._dot[todo] + np.einsum("ij,j->i", b._tail[todo].astype(np.float32), self._tail)
        radius = b._resid[todo] * self._resid + b._tail_lost[todo] * self._tail_norm
        radius += b._head_lost[todo] * self._head_norm + np.float32(BOUND_SLACK)
        self.low[todo] = np.clip(dot - radius, 0.0, 1.0)
        self.high[todo] = np.clip(dot + radius, 0.0, 1.0)
        self._fine[todo] = True


class RowBounds:
    """Bounds of ``clip(row·query, 0, 1)`` for one query, of the rows asked for only, each from the whole
    basis at once (the values `Probe.refine` gives them). For a few rows found another way (an approximate
    index's candidates), where a `Probe`'s first pass over every row would cost more than they do.
    `projection` is the query's projection on the basis (float32)."""

    def __init__(self, bounds: Bounds, query: np.ndarray) -> None:
        self._bounds = bounds
        proj, resid = bounds.split(query)
        self.projection = proj[0]
        self._head = proj[0, : bounds.head]
        self._tail = proj[0, bounds.head :]
        self._resid = np.float32(resid[0])
        self._head_norm, self._tail_norm = _norm(self._head), _norm(self._tail)

    def of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds (float32) of `rows`."""
        b = self._bounds
        dot = b.head_dots(self._head, rows) + np.einsum("ij,j->i", b._tail[rows].astype(np.float32), self._tail)
        radius = b._resid[rows] * self._resid + b._tail_lost[rows] * self._tail_norm
        radius += b._head_lost[rows] * self._head_norm + np.float32(BOUND_SLACK)
        return np.clip(dot - radius, 0.0, 1.0), np.clip(dot + radius, 0.0, 1.0)


def _grown(rows: np.ndarray, cap: int) -> np.ndarray:
    """`rows` followed by zero rows up to `cap` rows, in its dtype."""
    return np.concatenate([rows, np.zeros((cap - len(rows), *rows.shape[1:]), dtype=rows.dtype)])


def _held(halves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Halves of projections (float32 rows) in half precision, and the norm of what rounding lost per row.

    A float32 minus its float16 rounding is exact in float32; the norm is raised by 1e-5 of
    itself, more than float32 summation of 64 squares can lose, so it never falls short.
    """
    halves = np.asarray(halves, dtype=np.float32)
    half = halves.astype(np.float16)
    diff = halves - half
    return half, np.sqrt(np.einsum("ij,ij->i", diff, diff)) * np.float32(1 + 1e-5)


def _norm(half: np.ndarray) -> np.float32:
    """The norm of a query's half (float32), summed in float64."""
    return np.float32(np.sqrt(float(np.dot(half.astype(np.float64), half))))


PARALLEL_PASS_BYTES = 64 << 20  # a first pass that reads more than this runs on every BLAS thread


def blas_threads(read_bytes: int, threads: int | None = None) -> Any:
    """Context for a first pass that reads `read_bytes` of projections, on at most `threads` BLAS threads.

    `threads` None, the default, leaves BLAS alone (as recall does unless asked). With a number, a small pass
    runs on that many threads (1: the calling thread only): its product is bound by memory, so
    more threads barely help, and on a busy machine their synchronisation made it several times
    slower. A large one (a partition of a million episodes reads 179 MB) keeps BLAS's threads:
    there, on this 2-core machine, two threads took the recall's p50 from 30–33 ms to 24–27 ms
    (three alternating runs of 300 recalls each).

    The limit is threadpoolctl's, and BLAS's thread pool belongs to the process: while the pass
    runs, every other thread's numpy runs with it too. So it is for single-threaded hosts only
    (a benchmark, a batch job), never for a threaded one such as the MCP server. Bounds have
    slack for rounding, so the number of threads changes speed, never a recall's result.
    """
    if threads is None or read_bytes > PARALLEL_PASS_BYTES:
        return contextlib.nullcontext()
    return _controller().limit(limits=threads, user_api="blas")


@functools.cache
def _controller() -> ThreadpoolController:
    """The process's thread pools, found once (looking them up costs more than a small pass)."""
    return ThreadpoolController()
