"""How much ``python -m eval.bench`` measures: the `Plan`, its presets (`FULL`, and `QUICK` for ``--quick``)
and the size ``--million`` adds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Plan:
    """How much to measure."""

    quick: bool  # the --quick preset
    durable: int  # single appends per synchronous level
    batches: int  # append_many calls
    batch_size: int  # entries per append_many call
    sizes: tuple[int, ...]  # store sizes (episodes) for recall; the largest is also opened
    queries: int  # timed recalls per store size
    opens: int  # opens of the largest store (fewer when they exceed the open budget)
    rounds: int  # rounds of the generated scenario
    compare_runs: int  # eval.compare subprocess runs
    seed: int = 0  # seed of every generator
    round_runs: int = 1  # plays of the generated scenario; each window pools its rounds over all plays
    durable_settle: int = 20_000  # most untimed single appends while waiting for the WAL's steady state
    jobs_runs: int = 0  # paired runs of the shipped scenarios × 5 seeds with --jobs 1 and --jobs 2
    cache: Path | None = None  # folder keeping the built stores between runs (None: a temporary folder)
    agent_rounds: int = 12  # generated rounds the episodic agent decides on a copy of the largest store


FULL = Plan(
    False,
    durable=1000,
    batches=20,
    batch_size=1000,
    sizes=(1000, 10_000, 100_000),
    queries=300,
    opens=3,
    rounds=1000,
    compare_runs=3,
    round_runs=3,
    jobs_runs=3,
)
QUICK = Plan(
    True,
    durable=200,
    batches=5,
    batch_size=1000,
    sizes=(1000, 10_000),
    queries=100,
    opens=1,
    rounds=200,
    compare_runs=1,
    jobs_runs=1,
)
MILLION = 1_000_000  # episodes of the size --million adds
