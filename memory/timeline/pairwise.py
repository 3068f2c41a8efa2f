"""numpy's pairwise sum of sparse rows, computed from their non-zero entries alone, bit for bit.

The hashing encoder's vectors are normalized by the norm numpy computes for a dense row
(``np.add.reduce(row * row)``), and a stored vector must keep every bit of it. numpy sums a row of
``n`` float64 values pairwise: below 8 values one after the other from 0; up to 128 in eight
interleaved lanes (lane ``j`` sums values ``j, j + 8, …`` one after the other) joined as
``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, then the last ``n % 8`` values one after the
other; above 128, the sum of the first ``n // 2`` values (rounded down to a multiple of 8) and the
sum of the rest. Adding 0 to a sum of squares leaves it as it is, so a row with a few hundred
non-zero entries of 1,024 needs only those: each lane is their sum in order (one ``bincount``),
and the same joins follow. `row_sums` does that for many rows at once; a test checks it against
``np.add.reduce`` for many widths.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

BLOCK = 128  # numpy's PW_BLOCKSIZE: the widest run summed in lanes
LANES = 8  # numpy's unrolling: lanes per run


class Lanes(NamedTuple):
    """A run of 8 to 128 values summed in eight lanes, then its last values one at a time."""

    run: int  # which run (its lanes are 8 * run … 8 * run + 7)
    singles: tuple[int, ...]  # the columns of its last values among those added one at a time


class Singles(NamedTuple):
    """A run of fewer than 8 values added one at a time to 0."""

    singles: tuple[int, ...]  # their columns among those added one at a time


class Pair(NamedTuple):
    """The sum of two halves."""

    left: Node
    right: Node


Node = Lanes | Singles | Pair  # a node of numpy's summation tree


class Plan(NamedTuple):
    """How numpy sums a row of `width` values, position by position."""

    lane: np.ndarray  # per position: the lane that sums it, or -1 when it is added one at a time
    column: np.ndarray  # per position added one at a time: its column among them, else -1
    runs: int  # runs summed in lanes (8 lanes each)
    singles: int  # positions added one at a time
    tree: Node  # the order of the joins


@functools.lru_cache(maxsize=16)
def plan(width: int) -> Plan:
    """The summation order of numpy's pairwise sum over `width` values."""
    lane = np.full(width, -1, dtype=np.int64)
    column = np.full(width, -1, dtype=np.int64)
    counts = [0, 0]  # runs and singles so far

    def singles(start: int, stop: int) -> tuple[int, ...]:
        first = counts[1]
        counts[1] += stop - start
        column[start:stop] = np.arange(first, counts[1])
        return tuple(range(first, counts[1]))

    def build(start: int, n: int) -> Node:
        if n < LANES:
            return Singles(singles(start, start + n))
        if n <= BLOCK:
            laned = n - n % LANES
            run = counts[0]
            counts[0] += 1
            lane[start : start + laned] = run * LANES + np.arange(laned) % LANES
            return Lanes(run, singles(start + laned, start + n))
        half = n // 2
        half -= half % LANES
        return Pair(build(start, half), build(start + half, n - half))

    tree = build(0, width)
    return Plan(lane, column, counts[0], counts[1], tree)


def row_sums(rows: np.ndarray, positions: np.ndarray, values: np.ndarray, count: int, width: int) -> np.ndarray:
    """``np.add.reduce(dense, axis=1)`` of the ``count × width`` float64 matrix `dense` that holds `values`
    at (`rows`, `positions`) and zeros elsewhere, bit for bit, for non-negative values.

    The entries must be in row-major order (by row, then position) with no position twice in a row.
    """
    layout = plan(width)
    lane = layout.lane[positions]
    singles = np.zeros((count, layout.singles))
    if layout.singles:  # (a width of 128 times a power of two has none)
        laned = lane >= 0
        alone = ~laned
        singles[rows[alone], layout.column[positions[alone]]] = values[alone]
        rows, lane, values = rows[laned], lane[laned], values[laned]
    width_lanes = layout.runs * LANES
    lanes = np.bincount(rows * width_lanes + lane, values, minlength=count * width_lanes)
    # each run's eight lanes joined pairwise, adjacent ones first: numpy's ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))
    joined = lanes.reshape(count, width_lanes)
    while joined.shape[1] > layout.runs:
        joined = joined[:, 0::2] + joined[:, 1::2]
    return _evaluate(layout.tree, joined, singles, count)


def _evaluate(node: Node, runs: np.ndarray, singles: np.ndarray, count: int) -> np.ndarray:
    """The sums of one node of the tree for every row."""
    if isinstance(node, Pair):
        return _evaluate(node.left, runs, singles, count) + _evaluate(node.right, runs, singles, count)
    total = runs[:, node.run] if isinstance(node, Lanes) else np.zeros(count)
    for column in node.singles:
        total = total + singles[:, column]
    return total
