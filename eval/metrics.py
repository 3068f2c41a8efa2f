"""Metrics over round records: plain data, computed once, rendered elsewhere."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from eval.runner import RoundRecord
from eval.stats import Interval, McNemar, SignTest, cluster_bootstrap, mcnemar_exact, sign_test, wilson


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
        "round_level": round_level(records),
        "per_kind": {
            kind: {
                "n": len(group),
                "first_attempt_accuracy": accuracy(group).value,
                "ci95": [accuracy(group).low, accuracy(group).high],
                **{
                    key: value
                    for key, value in evidence_hits(group).items()
                    if key in ("evidence_hit1", "evidence_hitk")
                },
            }
            for kind, group in by_kind(records).items()
        },
        "retrieval": {
            "items_retrieved": retrieved,
            "labelled_share": (sum(r.labelled for r in records) / retrieved) if retrieved else None,
            "pattern_applications": sum(1 for r in relied if r.first_correct),
            "false_positives": sum(1 for r in relied if not r.first_correct),
            **evidence_hits(records),
            **fact_precision(records),
        },
        "latency_ms_per_round": (sum(r.latency_ms for r in records) / n) if n else None,
        "input_tokens": sum(r.input_tokens for r in records),
        "output_tokens": sum(r.output_tokens for r in records),
        "cost_usd": round(sum(r.cost_usd for r in records), 6),
    }


def paired_test(a: Sequence[RoundRecord], b: Sequence[RoundRecord]) -> McNemar | None:
    """Exact McNemar on first-attempt correctness, paired by (scenario, seed, round)."""
    right_b = {(r.scenario, r.seed, r.round): r.first_correct for r in b}
    pairs = [
        (r.first_correct, right_b[(r.scenario, r.seed, r.round)]) for r in a if (r.scenario, r.seed, r.round) in right_b
    ]
    if not pairs:
        return None
    return mcnemar_exact([x for x, _ in pairs], [y for _, y in pairs])


# -- round level: the unit is scenario × round; seeds are repeated measures --------------------

RoundKey = tuple[str, str]  # (scenario, round id)


def round_means(records: Iterable[RoundRecord]) -> dict[RoundKey, float]:
    """First-attempt correctness per scenario round, averaged over its seeds (rounds in order)."""
    groups: dict[RoundKey, list[bool]] = defaultdict(list)
    for r in records:
        groups[(r.scenario, r.round)].append(r.first_correct)
    return {key: sum(values) / len(values) for key, values in groups.items()}


def round_level(records: Sequence[RoundRecord]) -> dict[str, Any]:
    """Accuracy over scenario rounds with a cluster-bootstrap 95% interval (rounds resampled)."""
    means = round_means(records)
    interval = cluster_bootstrap(list(means.values()))
    return {
        "rounds": len(means),
        "seeds_per_round": (len(records) / len(means)) if means else None,
        "first_attempt_accuracy": interval.value if means else None,
        "ci95": [interval.low, interval.high] if means else None,
    }


def compare_rounds(a: Sequence[RoundRecord], b: Sequence[RoundRecord]) -> dict[str, Any] | None:
    """Paired round-level comparison of A vs B: exact sign test and bootstrap interval of A − B.

    Rounds are paired by (scenario, round); each side is its mean over seeds. ``n`` is the
    number of scenario rounds both played, ``discordant`` those where the means differ.
    """
    mean_a, mean_b = round_means(a), round_means(b)
    keys = [key for key in mean_a if key in mean_b]
    if not keys:
        return None
    differences = [mean_a[key] - mean_b[key] for key in keys]
    test: SignTest = sign_test(differences)
    interval = cluster_bootstrap(differences)
    return {
        "n_rounds": len(keys),
        "discordant": test.a_better + test.b_better,
        "a_better": test.a_better,
        "b_better": test.b_better,
        "sign_test_p": test.p_value,
        "difference": interval.value,
        "difference_ci95": [interval.low, interval.high],
        "significant": test.p_value < 0.05,
    }


def comparisons(per_agent: Mapping[str, Sequence[RoundRecord]], subject: str) -> dict[str, Any]:
    """`compare_rounds(subject, other)` for every other agent that played rounds."""
    if subject not in per_agent:
        return {}
    out = {}
    for name, rows in per_agent.items():
        if name != subject:
            result = compare_rounds(per_agent[subject], rows)
            if result is not None:
                out[name] = result
    return out


# -- retrieval judged by provenance, apart from the reasoner ----------------------------------


def fact_precision(records: Sequence[RoundRecord]) -> dict[str, Any]:
    """How often the facts handed to first attempts concluded the round's truth.

    ``fact_firings`` counts fact items given to first decisions; ``fact_precision`` is the
    share whose conclusion was the truth (None when no fact fired).
    """
    fired = [item for r in records for item in r.retrieved_items if item.get("source") == "fact" and "right" in item]
    right = sum(1 for item in fired if item["right"])
    return {"fact_firings": len(fired), "fact_precision": right / len(fired) if fired else None}


def evidence_hits(records: Sequence[RoundRecord]) -> dict[str, Any]:
    """Did the memory surface the right experience? Judged from the simulator's provenance.

    Over first attempts of rounds whose true cause was the truth of an earlier round:
    ``evidence_hit1`` is the share whose top experience item (episode or chunk; facts are not
    traced) comes from an earlier round with the same true cause, ``evidence_hitk`` the share
    where any retrieved item does. ``other_cause_share`` is, over every first attempt, the
    share of traced retrieved items that come from a round of a different true cause.
    """
    eligible = [r for r in records if r.evidence_eligible]
    hit1 = hitk = 0
    for r in eligible:
        experience = [item for item in r.retrieved_items if item.get("source") != "fact"]
        hit1 += bool(experience) and experience[0].get("same_cause") is True
        hitk += any(item.get("same_cause") is True for item in experience)
    traced = [item for r in records for item in r.retrieved_items if item.get("same_cause") is not None]
    other = sum(1 for item in traced if item["same_cause"] is False)
    return {
        "evidence_rounds": len(eligible),
        "evidence_hit1": hit1 / len(eligible) if eligible else None,
        "evidence_hitk": hitk / len(eligible) if eligible else None,
        "traced_items": len(traced),
        "other_cause_share": other / len(traced) if traced else None,
    }
