"""Benchmarks: ``python -m eval.bench [--quick] [--json PATH]``.

Builds seeded synthetic stores of realistic incident logs (`eval.bench.corpus`), times
appends, recall, opening, agent rounds and the default comparison (`eval.bench.measure`),
and reports median, p95 and sample count of each against the targets
(`eval.bench.results`). Speed belongs here, not in timed unit tests.
"""

from eval.bench.cli import main, run
from eval.bench.results import BenchReport, Stat, judge, summarize

__all__ = ["BenchReport", "Stat", "judge", "main", "run", "summarize"]
