"""What the figures show, computed from the run log alone (plain data; `plots` draws it).

The evidence unit is a scenario round, seeds being repeated measures of it: a round's
accuracy is the share of seeds whose first attempt was right, and the learning curve's
band is a Wilson 95% interval over *rounds* (round accuracies summed as successes, the
number of rounds as trials), so extra seeds of the same round do not narrow it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval.stats import wilson

MAX_WINDOW = 25  # rounds in the windowed curve at most (a bin of a long generated scenario)
# Rounds a scenario needs before the learning curve shows its bands: below this, a round-level
# 95% interval spans most of the axis (about ±0.25 at 14 rounds), every agent's band covers the
# others', and the curves, which are what a short scenario can show, are lost under them.
BAND_MIN_ROUNDS = 20


@dataclass(frozen=True)
class RoundPoint:
    """One round of one agent, over seeds."""

    round: str  # round id
    kind: str  # round kind
    accuracy: float  # share of seeds right at the first attempt
    attempts: float  # mean attempts used
    seeds: int  # seeds that played it


@dataclass(frozen=True)
class Curve:
    """An agent's learning curve over one scenario's rounds (x is the round's 1-based position)."""

    agent: str  # agent name
    x: tuple[int, ...]  # round positions
    cumulative: tuple[float, ...]  # first-attempt accuracy over rounds 1..x
    cumulative_band: tuple[tuple[float, float], ...]  # its round-level 95% interval
    windowed: tuple[float, ...]  # accuracy over the last `window` rounds up to x
    windowed_band: tuple[tuple[float, float], ...]  # its round-level 95% interval
    window: int  # rounds per window


def scenario_rounds(log: dict[str, Any], scenario: str, agent: str) -> list[RoundPoint]:
    """Per round of `scenario`, in play order: `agent`'s accuracy and attempts over seeds."""
    order: list[str] = []
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in log["agents"][agent]["rounds"]:
        if record["scenario"] != scenario:
            continue
        if record["round"] not in groups:
            order.append(record["round"])
            groups[record["round"]] = []
        groups[record["round"]].append(record)
    return [
        RoundPoint(
            r,
            groups[r][0]["kind"],
            sum(g["first_correct"] for g in groups[r]) / len(groups[r]),
            sum(g["attempts"] for g in groups[r]) / len(groups[r]),
            len(groups[r]),
        )
        for r in order
    ]


def shows_bands(rounds: int) -> bool:
    """Whether the learning curve of a scenario of `rounds` rounds draws its 95% bands."""
    return rounds >= BAND_MIN_ROUNDS


def window_for(rounds: int) -> int:
    """Rounds per window: an eighth of the scenario, between 3 and `MAX_WINDOW`."""
    return max(3, min(MAX_WINDOW, rounds // 8))


def _band(values: Sequence[float]) -> tuple[float, float]:
    interval = wilson(sum(values), len(values))  # type: ignore[arg-type]  # fractional successes: round shares
    return interval.low, interval.high


def learning_curve(agent: str, points: Sequence[RoundPoint], window: int | None = None) -> Curve:
    """Cumulative and windowed first-attempt accuracy with round-level bands."""
    window = window or window_for(len(points))
    shares = [p.accuracy for p in points]
    x, cumulative, cumulative_band, windowed, windowed_band = [], [], [], [], []
    for i in range(1, len(shares) + 1):
        seen, recent = shares[:i], shares[max(0, i - window) : i]
        x.append(i)
        cumulative.append(sum(seen) / i)
        cumulative_band.append(_band(seen))
        windowed.append(sum(recent) / len(recent))
        windowed_band.append(_band(recent))
    return Curve(
        agent, tuple(x), tuple(cumulative), tuple(cumulative_band), tuple(windowed), tuple(windowed_band), window
    )


def title(log: dict[str, Any], scenario: str | None = None) -> str:
    """Scenario (or all of the log's), mode and seeds: the title every figure carries."""
    names = scenario or ", ".join(s["name"] for s in log["scenarios"])
    seeds = log["seeds"]
    seed_text = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}–{seeds[-1]} ({len(seeds)})"
    return f"{names} · {log['mode']} mode · {seed_text}"


def kind_accuracy(log: dict[str, Any]) -> dict[str, dict[str, tuple[float, float, float, int]]]:
    """Per kind, per agent: (accuracy, low, high, n) from the log's summaries."""
    table: dict[str, dict[str, tuple[float, float, float, int]]] = {}
    for agent, entry in log["agents"].items():
        for kind, stats in entry.get("summary", {}).get("per_kind", {}).items():
            low, high = stats.get("ci95") or (stats["first_attempt_accuracy"],) * 2
            table.setdefault(kind, {})[agent] = (stats["first_attempt_accuracy"], low, high, stats["n"])
    return table


def layer_scores(log: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per episodic agent: boundary F1, outcome accuracy and edge precision/recall (scores present only)."""
    scores: dict[str, dict[str, float]] = {}
    for agent, entry in log["agents"].items():
        layers = entry.get("layers")
        if not layers:
            continue
        row = {"boundary F1": layers.get("boundary_f1"), "outcome acc.": layers.get("outcome_accuracy")}
        for edge_type, pr in layers.get("edges", {}).items():
            row[f"{edge_type} P"] = pr.get("precision")
            row[f"{edge_type} R"] = pr.get("recall")
        scores[agent] = {k: v for k, v in row.items() if v is not None and v == v}
    return scores
