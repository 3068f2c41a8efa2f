"""Summaries recomputed from a run log's rounds, and several run logs merged into one.

A merged log holds every round of its sources, and its statistics are recomputed from
those rounds exactly as `eval.compare` computes them for one run (never averages of
averages): a comparison split over several logs and merged gives the numbers of the same
comparison run at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from eval.metrics import comparisons, summary
from eval.runner import RoundRecord

SUBJECT = "episodic"  # the agent every other one is compared with


def records(log: dict[str, Any], agent: str) -> list[RoundRecord]:
    """The round records of one agent, rebuilt from the log."""
    return [_round_record(row) for row in log["agents"][agent]["rounds"]]


def _round_record(row: dict[str, Any]) -> RoundRecord:
    """One logged round as a `RoundRecord` (keys it does not know are left out; lists back to tuples)."""
    fields = RoundRecord.__dataclass_fields__
    known: dict[str, Any] = {
        k: (tuple(v) if k in ("decisions", "retrieved_items") else v) for k, v in row.items() if k in fields
    }
    return RoundRecord(**known)


def mean_layers(items: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """Average layer-quality dicts over runs (None when there are none)."""
    items = [i for i in items if i]
    if not items:
        return None

    def avg(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None and v == v]  # v == v: not NaN
        return sum(present) / len(present) if present else None

    edges: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for item in items:
        for edge_type, score in item.get("edges", {}).items():
            for key in ("precision", "recall"):
                edges[edge_type][key].append(score.get(key))
    return {
        "boundary_f1": avg([i.get("boundary_f1") for i in items]),
        "boundary_precision": avg([i.get("boundary_precision") for i in items]),
        "boundary_recall": avg([i.get("boundary_recall") for i in items]),
        "outcome_accuracy": avg([i.get("outcome_accuracy") for i in items]),
        "edges": {t: {k: avg(v) for k, v in scores.items()} for t, scores in sorted(edges.items())},
    }


class MergeError(ValueError):
    """Logs that cannot be merged (different modes, conflicting scenarios, repeated runs)."""


def summarise(log: dict[str, Any], *, paired: bool = True) -> None:
    """Recompute every agent's ``summary`` (and ``layers``) and the round-level ``comparisons``, in place.

    `paired=False` leaves the paired statistics (a bootstrap, the costly part) as they are.
    """
    per_agent = {name: records(log, name) for name in log["agents"]}
    for name, entry in log["agents"].items():
        entry["summary"] = summary(per_agent[name])
        averaged = mean_layers(run.get("layers") for run in entry.get("runs", []))
        if averaged:
            entry["layers"] = averaged
    if not paired:
        return
    # Round-level paired results: the unit is scenario × round, seeds are repeated measures.
    log["comparisons"] = {
        "subject": SUBJECT,
        "unit": "scenario round (mean over seeds)",
        "versus": comparisons(per_agent, SUBJECT),
        "per_scenario": {
            s["name"]: comparisons(
                {n: [r for r in rows if r.scenario == s["name"]] for n, rows in per_agent.items()}, SUBJECT
            )
            for s in log["scenarios"]
        },
    }


def merge(logs: Sequence[dict[str, Any]], sources: Sequence[str]) -> dict[str, Any]:
    """One log holding every round of `logs` (named by `sources` in messages), statistics recomputed.

    Raises:
        MergeError: the logs differ in mode, a scenario name has two contents, or a
            scenario × seed × agent run appears twice.
    """
    if len(logs) == 1:
        return logs[0]
    modes = {log["mode"] for log in logs}
    if len(modes) > 1:
        raise MergeError(
            f"cannot merge logs of different modes ({', '.join(sorted(modes))}): "
            + ", ".join(f"{s} is {log['mode']}" for s, log in zip(sources, logs))
        )
    merged: dict[str, Any] = {
        "schema": logs[0]["schema"],
        "status": "success",
        "mode": logs[0]["mode"],
        "scenarios": _scenarios(logs, sources),
        "seeds": sorted({s for log in logs for s in log["seeds"]}),
        "agents": {},
        "config": _config(logs),
        "started_at": min((log.get("started_at") or "" for log in logs), default=None),
        "finished_at": max((log.get("finished_at") or "" for log in logs), default=None),
        "error": None,
        "environment": logs[0].get("environment"),
        "merged_from": [
            {
                "path": s,
                "status": log.get("status"),
                "started_at": log.get("started_at"),
                "finished_at": log.get("finished_at"),
            }
            for s, log in zip(sources, logs)
        ],
    }
    seen: dict[tuple[str, int, str], str] = {}
    for source, log in zip(sources, logs):
        for name, entry in log["agents"].items():
            target = merged["agents"].setdefault(name, {"rounds": [], "summary": {}, "runs": []})
            for run in entry.get("runs", []):
                key = (run["scenario"], run["seed"], name)
                if key in seen:
                    raise MergeError(
                        f"{source}: scenario {key[0]} seed {key[1]} agent {name} is already in {seen[key]}"
                    )
                seen[key] = source
            target["rounds"].extend(entry["rounds"])
            target["runs"].extend(entry.get("runs", []))
    errors = [f"{s}: {log.get('error')}" for s, log in zip(sources, logs) if log.get("status") != "success"]
    if errors:
        merged["status"], merged["error"] = "error", "; ".join(errors)
    summarise(merged)
    return merged


def _scenarios(logs: Sequence[dict[str, Any]], sources: Sequence[str]) -> list[dict[str, str]]:
    """The union of the logs' scenarios, in order; one name must mean one content."""
    found: dict[str, tuple[str, str]] = {}
    for source, log in zip(sources, logs):
        for scenario in log["scenarios"]:
            known = found.get(scenario["name"])
            if known and known[0] != scenario["sha256"]:
                raise MergeError(
                    f"scenario {scenario['name']} differs between {known[1]} and {source} (another version of the file)"
                )
            found.setdefault(scenario["name"], (scenario["sha256"], source))
    return [{"name": name, "sha256": sha} for name, (sha, _) in found.items()]


def _config(logs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The shared configuration, or each log's when they differ."""
    configs = [log.get("config") for log in logs]
    if all(c == configs[0] for c in configs):
        return configs[0] or {}
    return {"per_log": configs}
