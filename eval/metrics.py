"""Metrics over round records: plain data, computed once, rendered elsewhere."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Sequence

from eval.runner import RoundRecord
from eval.stats import Interval, McNemar, mcnemar_exact, wilson


def accuracy(records: Sequence[RoundRecord]) -> Interval:
    """First-attempt accuracy with its Wilson 95% interval (over seeds × rounds)."""
    return wilson(sum(r.first_correct for r in records), len(records))


def by_kind(records: Iterable[RoundRecord]) -> dict[str, list[RoundRecord]]:
    """Records grouped by round kind, kinds in order of first appearance."""
    groups: dict[str, list[RoundRecord]] = defaultdict(list)
    for record in records:
        groups[record.kind].append(record)
    return dict(groups)


def summary(records: Sequence[RoundRecord]) -> dict[str, Any]:
    """The run log's per-agent summary."""
    n = len(records)
    first = accuracy(records)
    solved = wilson(sum(r.solved for r in records), n)
    retrieved = sum(r.retrieved for r in records)
    relied = [r for r in records if r.relied_on_memory]
    return {
        "rounds": n,
        "first_attempt_accuracy": first.value if n else None,
        "first_attempt_ci95": [first.low, first.high] if n else None,
        "solve_rate": solved.value if n else None,
        "solve_rate_ci95": [solved.low, solved.high] if n else None,
        "mean_attempts": (sum(r.attempts for r in records) / n) if n else None,
        "per_kind": {kind: {"n": len(group), "first_attempt_accuracy": accuracy(group).value,
                            "ci95": [accuracy(group).low, accuracy(group).high]}
                     for kind, group in by_kind(records).items()},
        "retrieval": {
            "items_retrieved": retrieved,
            "labelled_share": (sum(r.labelled for r in records) / retrieved) if retrieved else None,
            "pattern_applications": sum(1 for r in relied if r.first_correct),
            "false_positives": sum(1 for r in relied if not r.first_correct),
        },
        "latency_ms_per_round": (sum(r.latency_ms for r in records) / n) if n else None,
        "input_tokens": sum(r.input_tokens for r in records),
        "output_tokens": sum(r.output_tokens for r in records),
        "cost_usd": round(sum(r.cost_usd for r in records), 6),
    }


def paired_test(a: Sequence[RoundRecord], b: Sequence[RoundRecord]) -> McNemar | None:
    """Exact McNemar on first-attempt correctness, paired by (scenario, seed, round)."""
    right_b = {(r.scenario, r.seed, r.round): r.first_correct for r in b}
    pairs = [(r.first_correct, right_b[(r.scenario, r.seed, r.round)]) for r in a
             if (r.scenario, r.seed, r.round) in right_b]
    if not pairs:
        return None
    return mcnemar_exact([x for x, _ in pairs], [y for _, y in pairs])
