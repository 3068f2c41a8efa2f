"""Per-row values of one recall over a large partition, held for the rows it looks at only.

Recall through an approximate index (`memory.retrieval.relevance.NeighbourScores`) bounds and
scores a few thousand rows of a partition that may hold a million. A column of the partition's
length per value (relevance, bounds, graph part, total) cost a zeroed allocation and its page
faults on every recall, which at a million rows took longer than the rows it held. These hold
the rows looked at, ascending, and read like the dense columns they replace: a row never looked at
reads 0 (False), as it did there, so every comparison and every total comes out the same.

`OtherParts` is the other score parts' total per row (float32), with the rows the graph part
raised: it answers which rows clear two thresholds by comparing every row, or, once the same
column has served enough recalls, through the rows' ascending order kept with it (`Ascending`).
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
        return _read(self.rows, self.high, rows)

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
    """The rows of a float32 column in ascending order of their values, found once the column has been asked
    for `after` times (a column a recall uses once, as a memory that closes episodes between recalls does, is
    never sorted: sorting a million values costs as much as comparing them a few dozen times)."""

    def __init__(self, values: np.ndarray, after: int = 16) -> None:
        self.values = values
        self.after = after
        self.asked = 0
        self.order: np.ndarray | None = None  # rows (int32 where they fit), ascending by value; empty: not usable

    def rows(self) -> np.ndarray | None:
        """The rows in ascending order of their values, once asked for often enough; None before, or when a
        value is NaN (it sorts last, unordered)."""
        self.asked += 1
        if self.order is None and self.asked >= self.after:
            order = np.argsort(self.values)  # equal values in any order: rows are taken by value, then sorted
            usable = not (len(order) and np.isnan(self.values[order[-1]]))
            self.order = order.astype(np.int32 if len(order) < 2**31 else np.intp) if usable else EMPTY_ROWS
        return self.order if self.order is not None and len(self.order) == len(self.values) else None


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
        order = self.ascending.rows() if self.ascending is not None else None
        if order is None:
            column = self.dense()
            return np.flatnonzero((column > over) & (column >= least))
        rows = order[_first_clearing(self.rest, order, over, least) :].astype(np.intp)
        raised, value = self.raised.rows, self.raised.values
        if len(raised):  # a raised row clears them or not by its raised value
            rows = rows[~_positions(raised, rows)[1]]
            rows = np.concatenate([rows, raised[(value > over) & (value >= least)]])
        return np.sort(rows)


def _first_clearing(values: np.ndarray, order: np.ndarray, over: float, least: np.float32) -> int:
    """The first place in `order` (rows ascending by `values`) from which every row's value clears both
    thresholds, by the comparison `OtherParts.above` makes of every row (the length of `order` when none does).

    Both tests pass from some value up, so in ascending order they pass from some place on: found by testing
    64 places of the interval left at a time.
    """
    lo, hi = 0, len(order)  # every place before `lo` fails, every place from `hi` on clears
    while lo < hi:
        places = np.arange(lo, hi) if hi - lo <= 64 else lo + np.arange(1, 64) * (hi - lo) // 64
        value = values[order[places]]
        clears = (value > over) & (value >= least)
        if not clears.any():
            lo = int(places[-1]) + 1
            continue
        first = int(np.argmax(clears))
        hi = int(places[first])
        lo = int(places[first - 1]) + 1 if first else lo
    return lo
