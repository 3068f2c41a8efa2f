"""The run log's rounds as CSV: one row per scenario × seed × agent × round.

Numbers are written with Python's shortest round-trip form and booleans as ``True`` /
``False``, so ``float``, ``int`` and ``== "True"`` on the loaded strings give back the log's
values exactly; ``decisions`` joins every attempt's choice with ``|``.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from memory.outputs import write_atomic

LEADING = (
    "agent",
    "scenario",
    "seed",
    "position",
    "round",
    "kind",
    "truth",
    "first_decision",
    "first_correct",
    "solved",
    "attempts",
    "decisions",
)  # the decision fields first; every other round field follows


def rows(log: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """Column names and rows; ``position`` is the round's 1-based place in its run."""
    extra: list[str] = []
    out: list[dict[str, Any]] = []
    for agent, entry in log["agents"].items():
        position: dict[tuple[str, int], int] = {}
        for record in entry["rounds"]:
            run = (record["scenario"], record["seed"])
            position[run] = position.get(run, 0) + 1
            row = {"agent": agent, "position": position[run], **record}
            row["decisions"] = "|".join(record.get("decisions", []))
            extra += [key for key in record if key not in LEADING and key not in extra]
            out.append(row)
    return [*LEADING, *extra], out


def write_csv(log: dict[str, Any], path: str | Path) -> Path:
    """Write the rounds of `log` to `path` (atomically); the path."""
    columns, data = rows(log)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in data:
        writer.writerow({key: ("" if value is None else value) for key, value in row.items()})
    return write_atomic(path, buffer.getvalue())
