"""Relevance of a query to a partition's rows: exact, or bounded and scored only where recall needs it.

`RelevanceScores` holds the clipped cosine of one query with a partition's rows. Without a
`Probe` (`memory.retrieval.bounds`) every row is scored exactly; with one, the rows keep their
bounds until a stage of recall (the graph's seeds, the pool's candidates) needs them exact, which
changes the speed of recall, never its result. `top`, `kth` and `at_most_kth` select among scores.
"""

from __future__ import annotations

import numpy as np

from memory.retrieval.bounds import Probe, RowBounds
from memory.retrieval.index import Partition
from memory.retrieval.row_values import Column, ConsideredRows, OtherParts


def exact_relevance(part: Partition | _ReadOnce, qvec: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Exact clipped cosine of the query with all rows, or with `rows` (same values either way)."""
    # einsum runs single-threaded in numpy's own kernel: steadier than a threaded BLAS
    # call on a busy machine; it sums each row alone, so a subset gets the same values
    matrix = part.vectors(rows)
    return np.clip(np.einsum("ij,j->i", matrix, qvec), 0.0, 1.0).astype(np.float64)


class _ReadOnce:
    """A partition whose rows come from a source, as one recall reads them: each row read once.

    The rows read are kept in one matrix (`held`, room doubled as it fills), so that rows asked for
    again come out of it by one gather rather than as a stack of separate rows.
    """

    def __init__(self, part: Partition) -> None:
        self.part = part
        self.place: dict[int, int] = {}  # row → its row in `held`
        self.held = np.empty((0, part.dim), dtype=np.float32)

    def vectors(self, rows: np.ndarray | None = None) -> np.ndarray:
        if rows is None:
            return self.part.vectors()
        wanted = np.asarray(rows, dtype=np.intp).reshape(-1).tolist()
        missing = [r for r in dict.fromkeys(wanted) if r not in self.place]
        if missing:
            self._hold(missing, self.part.vectors(np.array(missing, dtype=np.intp)))
        place = self.place
        return self.held[np.array([place[r] for r in wanted], dtype=np.intp)]

    def _hold(self, rows: list[int], vectors: np.ndarray) -> None:
        """Keep `vectors`, those of `rows`, after the ones held."""
        n = len(self.place)
        if n + len(rows) > len(self.held):
            grown = np.empty((max(2 * len(self.held), n + len(rows), 64), self.part.dim), dtype=np.float32)
            grown[:n] = self.held[:n]
            self.held = grown
        self.held[n : n + len(rows)] = vectors
        self.place.update(zip(rows, range(n, n + len(rows))))


class RelevanceScores:
    """Relevance of one query to a partition's rows.

    Without a `Probe` every row is scored exactly at once. With one, rows are scored exactly
    only when a stage of recall needs them (`known`); the others keep the probe's bounds,
    which the stages tighten in place where they need to.
    """

    def __init__(
        self, part: Partition, qvec: np.ndarray, probe: Probe | None, eligible: np.ndarray | None = None
    ) -> None:
        self.part = part
        self.rows: Partition | _ReadOnce = _ReadOnce(part) if part.stored else part  # vectors, each read once
        self.qvec = qvec
        self.probe = probe
        self.known: np.ndarray | None = None  # rows scored exactly (None: all of them)
        self.scored: list[np.ndarray] = []  # batches of rows scored exactly so far (with a probe)
        self.complete = probe is None  # every row (every eligible one) scored exactly
        if probe is None and eligible is not None:  # only the rows a filter keeps are read and scored
            self.relevance = np.zeros(len(part))
            rows = np.flatnonzero(eligible)
            self.relevance[rows] = exact_relevance(self.rows, qvec, rows)
        elif probe is None:
            self.relevance = exact_relevance(self.rows, qvec)
        else:
            self.relevance = np.zeros(len(part))
            self.known = np.zeros(len(part), dtype=bool)

    def score(self, rows: np.ndarray) -> np.ndarray:
        """Score `rows` exactly where not done yet; returns `rows`."""
        if self.known is not None:
            todo = rows[~self.known[rows]]
            if len(todo):
                self.relevance[todo] = exact_relevance(self.rows, self.qvec, todo)
                self.known[todo] = True
                self.scored.append(todo)
        return rows

    def _bounded(self) -> tuple[Probe, np.ndarray]:
        """The probe and the rows scored exactly: what the bounded stages read (there is a probe)."""
        assert self.probe is not None and self.known is not None, "bounds read without a probe"
        return self.probe, self.known

    def seeds(self, n: int, score_first: int) -> np.ndarray:
        """The `n` most relevant rows, best first (with a probe, only rows that can be among them are scored)."""
        relevance = self.relevance
        if self.probe is None:
            return top(relevance, n)
        probe, known = self._bounded()
        low, high = probe.low, probe.high
        rows = np.flatnonzero(high >= at_most_kth(low, n))
        first = max(score_first // 4, n)
        if len(rows) > 2 * first:
            # the likeliest rows first: their exact values raise the cut the others must reach
            best = self.score(rows[top(high[rows], first)])
            rows = rows[high[rows] >= kth(relevance[best], n)]
        probe.refine(rows)
        # rows hold the best lower bounds (exact where scored), so their n-th is a valid cut
        rows = self.score(rows[high[rows] >= kth(np.where(known[rows], relevance[rows], low[rows]), n)])
        return rows[top(relevance[rows], n)]

    def candidates(self, weight: np.float32, rest: np.ndarray | OtherParts, size: int, score_first: int) -> np.ndarray:
        """The rows whose total ``weight·relevance + rest`` (float32) can be among the `size` best, scored."""
        rest = rest.dense() if isinstance(rest, OtherParts) else rest
        probe, _ = self._bounded()
        high = probe.high
        rows = np.flatnonzero(weight * high + rest >= self._floor(weight, rest, None, size))
        probe.refine(rows)
        rows = rows[weight * high[rows] + rest[rows] >= self._floor(weight, rest, rows, size)]  # best lower bounds
        if len(rows) > 2 * max(score_first, size):
            upper = weight * high[rows] + rest[rows]
            self.score(rows[top(upper, max(score_first, size))])
            rows = rows[upper >= self._floor(weight, rest, rows, size)]
        return self.score(rows)

    def _floor(self, weight: np.float32, rest: np.ndarray, rows: np.ndarray | None, size: int) -> float:
        """A total the `size`-th best reaches: lower bounds, exact where scored (rounding slack)."""
        probe, known = self._bounded()
        low = probe.low
        value = weight * (low if rows is None else low[rows]) + (rest if rows is None else rest[rows])
        done = np.concatenate(self.scored) if self.scored else np.zeros(0, dtype=np.intp)
        at = done if rows is None else np.flatnonzero(known[rows])
        exact = done if rows is None else rows[at]
        value[at] = weight * self.relevance[exact].astype(np.float32) + rest[exact]
        return at_most_kth(value, size) - 1e-5  # 1e-5: float32 rounding and summation order


class NeighbourScores:
    """Relevance of one query to a large partition, from the rows an approximate index found nearest.

    Every other row is taken to be at most as relevant as the least relevant of the `nearest`
    (below `cut`, the least of their upper bounds): that is the approximation, and it holds
    whenever the index found the truly nearest rows. On it the stages of recall are exact, as with
    a `Probe`: the graph's seeds come from the nearest rows, and the pool's candidates from the
    nearest rows and every other row whose other score parts could lift it into the pool: above
    those of all but fewer than the pool's size of the nearest rows, and enough to reach the pool
    with a relevance of `cut`. Those rows are bounded (`RowBounds`) and only the ones whose bounds
    reach what a stage needs are scored exactly.

    Only the rows considered are held (`memory.retrieval.row_values.ConsideredRows`); `relevance` and
    `known` read like columns of the partition (0 and False for the others).
    """

    probe = None  # bounds of the rows considered only (`RowBounds`), not of every row
    complete = False  # rows outside the nearest are not scored: recall chooses among `candidates`

    def __init__(self, part: Partition, qvec: np.ndarray, bounds: RowBounds, nearest: np.ndarray) -> None:
        self.part = part
        self.rows: Partition | _ReadOnce = _ReadOnce(part) if part.stored else part  # vectors, each read once
        self.qvec = qvec
        self.bounds = bounds
        self.blank = not qvec.any()  # a query without text: every row's relevance is exactly 0
        self.held = ConsideredRows()  # the rows considered so far: bounds, relevance, whether scored
        self.relevance = Column(self.held, "relevance")
        self.known = Column(self.held, "known")
        self.nearest = self._consider(sorted_unique(nearest))  # ascending: ties go to the lower row, as in a full scan
        outside = 0 < len(self.nearest) < len(part)
        self.cut = np.float32(self._high(self.nearest).min()) if outside else np.float32(0.0)

    def _consider(self, rows: np.ndarray) -> np.ndarray:
        """Bound `rows` (ascending); returns them."""
        self.held.bound(rows, *self.bounds.of(rows))
        return rows

    def _high(self, rows: np.ndarray) -> np.ndarray:
        """Upper bounds (float32) of considered `rows`."""
        return self.held.high[self.held.at(rows)]

    def score(self, rows: np.ndarray) -> np.ndarray:
        """Score considered `rows` exactly where not done yet; returns `rows`."""
        self._score(rows, self.held.at(rows))
        return rows

    def _score(self, rows: np.ndarray, at: np.ndarray) -> None:
        """`score` of considered `rows`, held `at`."""
        held = self.held
        todo = ~held.known[at]
        if todo.any() and not self.blank:
            held.relevance[at[todo]] = exact_relevance(self.rows, self.qvec, rows[todo])
        held.known[at] = True

    def _lowest(self, at: np.ndarray) -> np.ndarray:
        """Lower bounds (float32) of the considered rows held `at`, exact where scored."""
        held = self.held
        return np.where(held.known[at], held.relevance[at].astype(np.float32), held.low[at])

    def seeds(self, n: int, score_first: int) -> np.ndarray:
        """The `n` most relevant of the nearest rows, best first (only those that can be among them are scored)."""
        held, rows = self.held, self.nearest
        at = held.at(rows)
        keep = held.high[at] >= kth(held.low[at], n)
        rows, at = rows[keep], at[keep]
        first = max(score_first // 4, n)
        if len(rows) > 2 * first:  # the likeliest rows first: their exact values raise the cut the others must reach
            best = top(held.high[at], first)
            self._score(rows[best], at[best])
            keep = held.high[at] >= kth(held.relevance[at[best]].astype(np.float32), n)
            rows, at = rows[keep], at[keep]
        keep = held.high[at] >= kth(self._lowest(at), n)
        rows, at = rows[keep], at[keep]
        self._score(rows, at)
        return rows[top(held.relevance[at], n)]

    def candidates(self, weight: np.float32, rest: np.ndarray | OtherParts, size: int, score_first: int) -> np.ndarray:
        """The rows whose total ``weight·relevance + rest`` (float32) can be among the `size` best, scored
        (ascending), given that no row outside the nearest is more relevant than `cut`."""
        other = rest if isinstance(rest, OtherParts) else OtherParts(rest)
        held, rows = self.held, self.nearest
        others = other[rows]
        floor = _floor(weight * self._lowest(held.at(rows)) + others, size)
        # another row is less relevant than every nearest one: `size` of those with at least its other parts
        # outscore it, and so does the floor unless its other parts make up for a relevance of `cut`
        dominated = _floor(others, size) + 1e-5
        lifted = other.above(dominated, np.float32(floor) - weight * self.cut)
        lifted = lifted[held.high_or_zero(lifted) == 0]  # not considered yet (a considered row's bound is > 0)
        if len(lifted):
            rows = sorted_unique(rows, self._consider(lifted))
        at, others = held.at(rows), other[rows]
        upper = weight * held.high[at] + others
        keep = upper >= floor
        rows, at, others, upper = rows[keep], at[keep], others[keep], upper[keep]
        if len(rows) > 2 * max(score_first, size):  # the likeliest first: their exact totals raise the floor
            best = top(upper, max(score_first, size))
            self._score(rows[best], at[best])
        floor = _floor(weight * self._lowest(at) + others, size)
        keep = upper >= floor
        self._score(rows[keep], at[keep])
        return rows[keep]


def _floor(totals: np.ndarray, size: int) -> float:
    """A total the `size`-th best of all rows reaches, from lower bounds of some rows' totals (-inf when they
    are fewer than `size`); 1e-5 below it for float32 rounding and summation order."""
    return kth(totals, size) - 1e-5 if len(totals) >= size else -np.inf


def sorted_unique(*arrays: np.ndarray) -> np.ndarray:
    """The distinct values of `arrays`, ascending: ``np.unique`` of their concatenation (``np.union1d`` of two),
    by a sort and a comparison of neighbours, which for a few thousand rows takes a tenth of numpy's hashing."""
    merged = np.sort(np.concatenate([np.asarray(a).reshape(-1) for a in arrays]))
    if len(merged) < 2:
        return merged
    return merged[np.concatenate(([True], merged[1:] != merged[:-1]))]


def top(values: np.ndarray, n: int) -> np.ndarray:
    """Indices of the `n` largest values, best first (ties: lower index first, also at the cut)."""
    if n <= 0:
        return np.zeros(0, dtype=np.intp)
    if n < len(values):
        cut = values[np.argpartition(-values, n - 1)[n - 1]]
        above = np.flatnonzero(values > cut)
        part = np.concatenate([above, np.flatnonzero(values == cut)[: n - len(above)]])
    else:
        part = np.arange(len(values))
    return part[np.lexsort((part, -values[part]))]


def at_most_kth(values: np.ndarray, n: int) -> float:
    """A value no larger than the `n`-th largest (the smallest when there are fewer than `n`).

    For long arrays, the `n`-th largest of the maxima of short blocks: these are values of
    distinct rows, so it cannot exceed the true one, and it equals it unless two of the best
    `n` share a block. One pass instead of a partition of the whole array.
    """
    block = len(values) // (64 * max(n, 1))
    if block < 4:
        return kth(values, n)
    whole = len(values) - len(values) % block
    maxima = values[:whole].reshape(-1, block).max(axis=1)
    return kth(np.concatenate([maxima, values[whole:]]), n)


def kth(values: np.ndarray, n: int) -> float:
    """The `n`-th largest value (the smallest when there are fewer than `n`)."""
    if n <= 0:
        return float("inf")
    if n >= len(values):
        return float(values.min())
    return float(np.partition(values, len(values) - n)[len(values) - n])
