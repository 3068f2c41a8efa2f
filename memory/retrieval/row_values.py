"""Per-row values of one recall over a large partition, held for the rows it looks at only.

Recall through an approximate index (`memory.retrieval.relevance.NeighbourScores`) bounds and
scores a few thousand rows of a partition that may hold a million. A column of the partition's
length per value (relevance, bounds, graph part, total) cost a zeroed allocation and its page
faults on every recall, which at a million rows took longer than the rows it held. These hold
the rows looked at, ascending, and read like the dense columns they replace: a row never looked at
reads 0 (False), as it did there, so every comparison and every total comes out the same.

`OtherParts` is the other score parts' total per row (float32), with the rows the graph part
raised: it answers which rows clear two thresholds through an ascending order of the rows kept
per partition and situation (`Ascending`), instead of comparing every row.
"""

from __future__ import annotations

import numpy as np

EMPTY_ROWS = np.zeros(0, dtype=np.intp)


def _positions(held: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where `rows` are in `held` (ascending), and which of them are there at all."""
    at = np.searchsorted(held, rows)
    if not len(held):
        return at, np.zeros(len(at), dtype=bool)
    found = held[np.minimum(at, len(held) - 1)] == rows
    return at, found


class RowValues:
    """Values of some rows (0 at every other one), indexed like a column: by a row or an array of rows."""

    def __init__(self, rows: np.ndarray, values: np.ndarray) -> None:
        rows = np.asarray(rows, dtype=np.intp).reshape(-1)
        values = np.asarray(values).reshape(-1)
        if len(rows) > 1 and not (rows[1:] > rows[:-1]).all():  # distinct rows, put in ascending order
            order = np.argsort(rows, kind="stable")
            rows, values = rows[order], values[order]
        self.rows, self.values = rows, values

    def __getitem__(self, rows: np.ndarray | int) -> np.ndarray:
        return _read(self.rows, self.values, rows)


def _read(held: np.ndarray, values: np.ndarray, rows: np.ndarray | int) -> np.ndarray:
    """The values of `rows` (a row or an array of them) among `held` rows (ascending) with `values`, 0 elsewhere."""
    wanted = np.asarray(rows, dtype=np.intp)
    at, found = _positions(held, wanted.reshape(-1))
    out = np.zeros(len(at), dtype=values.dtype)
    out[found] = values[at[found]]
    return out[0] if wanted.ndim == 0 else out


class ConsideredRows:
    """The rows one recall considered, ascending, with their bounds, exact relevance and whether it is known.

    `low` and `high` are float32, `relevance` float64 and `known` bool, one entry per row in `rows`.
    """

    def __init__(self) -> None:
        self.rows = EMPTY_ROWS
        self.low = np.zeros(0, dtype=np.float32)
        self.high = np.zeros(0, dtype=np.float32)
        self.relevance = np.zeros(0, dtype=np.float64)
        self.known = np.zeros(0, dtype=bool)

    def at(self, rows: np.ndarray) -> np.ndarray:
        """Where rows considered are held."""
        return np.searchsorted(self.rows, rows)

    def high_or_zero(self, rows: np.ndarray) -> np.ndarray:
        """Upper bounds of `rows`: 0 for a row not considered (as in a zeroed column)."""
        at, found = _positions(self.rows, rows)
        out = np.zeros(len(rows), dtype=np.float32)
        out[found] = self.high[at[found]]
        return out

    def bound(self, rows: np.ndarray, low: np.ndarray, high: np.ndarray) -> None:
        """Set the bounds of `rows` (ascending, distinct), considering those not considered yet."""
        _, found = _positions(self.rows, rows)
        if not found.all():
            merged = np.sort(np.concatenate([self.rows, rows[~found]]))  # each row once: `rows` are distinct
            kept = np.searchsorted(merged, self.rows)
            for name, dtype in (("low", np.float32), ("high", np.float32), ("relevance", np.float64), ("known", bool)):
                column = np.zeros(len(merged), dtype=dtype)
                column[kept] = getattr(self, name)
                setattr(self, name, column)
            self.rows = merged
        at = self.at(rows)
        self.low[at], self.high[at] = low, high


class Column:
    """One column of `ConsideredRows` (its name), read like a column of the partition."""

    def __init__(self, held: ConsideredRows, name: str) -> None:
        self.held, self.name = held, name

    def __getitem__(self, rows: np.ndarray | int) -> np.ndarray:
        return _read(self.held.rows, getattr(self.held, self.name), rows)


class Ascending:
    """The rows of a float32 column in ascending order of their values, found the first time they are asked for."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        self.found: tuple[np.ndarray, np.ndarray] | None = None

    def order(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(rows, their values) in ascending order; None when a value is NaN (it sorts last, unordered)."""
        if self.found is None:
            order = np.argsort(self.values, kind="stable")
            self.found = (order, self.values[order])
        return None if len(self.found[1]) and np.isnan(self.found[1][-1]) else self.found


class OtherParts:
    """The total of a row's other score parts (float32), some `raised` by the graph part: ``rest[rows] + add``.

    `ascending` orders `rest` (None: thresholds compare every row).
    """

    def __init__(
        self,
        rest: np.ndarray,
        raised: tuple[np.ndarray, np.ndarray] | None = None,
        ascending: Ascending | None = None,
    ) -> None:
        self.rest, self.ascending = rest, ascending
        rows, add = raised if raised is not None else (EMPTY_ROWS, np.zeros(0, dtype=np.float32))
        self.raised = RowValues(rows, rest[np.asarray(rows, dtype=np.intp)] + add)

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        out = self.rest[rows]
        at, found = _positions(self.raised.rows, rows)
        out[found] = self.raised.values[at[found]]
        return out

    def dense(self) -> np.ndarray:
        """The column over every row (a copy where rows are raised)."""
        if not len(self.raised.rows):
            return self.rest
        out = self.rest.copy()
        out[self.raised.rows] = self.raised.values
        return out

    def above(self, over: float, least: np.float32) -> np.ndarray:
        """``np.flatnonzero((column > over) & (column >= least))``: the rows that clear both, ascending."""
        found = self.ascending.order() if self.ascending is not None else None
        if found is None:
            column = self.dense()
            return np.flatnonzero((column > over) & (column >= least))
        order, values = found
        rows = order[_first_clearing(values, over, least) :]
        raised, value = self.raised.rows, self.raised.values
        if len(raised):  # a raised row clears them or not by its raised value
            rows = rows[~_positions(raised, rows)[1]]
            rows = np.concatenate([rows, raised[(value > over) & (value >= least)]])
        return np.sort(rows)


def _clears(values: np.ndarray, at: int, over: float, least: np.float32) -> bool:
    """Whether the value at `at` clears both thresholds, by the comparison `OtherParts.above` makes of every row."""
    value = values[at : at + 1]
    return bool(((value > over) & (value >= least))[0])


def _first_clearing(values: np.ndarray, over: float, least: np.float32) -> int:
    """The first place in ascending `values` from which each clears both thresholds (their length when none does).

    Both tests pass from some value up, so in ascending order they pass from some place on. That place is
    guessed by a binary search for the thresholds in float32 and taken when the value there clears and the
    one before does not; otherwise it is found by bisection, each step the same comparison.
    """
    n = len(values)
    guess = int(max(np.searchsorted(values, np.float32(over), side="right"), np.searchsorted(values, least)))
    starts = guess == n or _clears(values, guess, over, least)
    if starts and (guess == 0 or not _clears(values, guess - 1, over, least)):
        return guess
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if _clears(values, mid, over, least):
            hi = mid
        else:
            lo = mid + 1
    return lo
