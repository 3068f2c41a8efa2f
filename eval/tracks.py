"""Dataset tracks: the published papers' metrics, read from a run log.

``python -m eval.tracks LOG [LOG ...]`` reads run logs of imported datasets (PetShop,
ITBench; `scenarios.importers`) and prints, per dataset file, stream order and agent:

- **top-1 / top-3**: whether the truth is the first choice / among the three best-scored
  candidates of the *first* ranking (before any feedback), the measure of the PetShop paper;
- **attempts to the truth** over the rounds solved, and the solve rate;
- the same per round kind (PetShop: the symptom, latency / availability) and for the rounds
  whose id starts with ``test-`` (the issues the PetShop paper reports on);
- the **learning curve**: top-1 by quarter of the stream, in play order;
- **paired round-level statistics**: episodic against every other agent, per order, over the
  scenario rounds (seeds averaged per round; exact sign test on the rounds that differ);
- the **published figures** of the dataset's own non-memory method beside ours, where the
  dataset has them (``PUBLISHED``);
- the **recurrence ceiling**: the top-1 of a memory that is right on every round whose cause
  occurred earlier in the stream and follows the runbook (``no_memory``) elsewhere. Learning from
  recurrence cannot beat it: a cause's first occurrence is learned from no one.

Shuffled orders (``eval.compare --order shuffled``) are named ``NAME@shuffled-K``; they are
reported as the mean over K beside the data's own order, never pooled with it.
Everything here is computed from the log (no agent is run), then rendered.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, Group
from rich.table import Table

from eval.metrics import compare_rounds
from eval.runner import RoundRecord
from memory.outputs import output_problem, write_atomic

TOP_K = 3  # the PetShop paper's second measure: the truth among the three best-ranked candidates
CURVE_PARTS = 4  # the learning curve's bins over the stream
SUBJECT = "episodic"
RUNBOOK = "no_memory"  # the agent that answers with the runbook alone
TIME = "time"
SHUFFLED = "shuffled"
TEST_PREFIX = "test-"  # round ids of the issues a dataset's paper reports on (PetShop's test split)

# The PetShop paper's non-memory baseline (anomaly detection + call-graph traversal) on the test issues,
# top-1 / top-3 by traffic scenario and symptom: Hardt et al., arXiv 2311.04806, as the dataset's
# README reports them (the repository's RCA-Dataset-Eval notebook).
PUBLISHED: dict[str, dict[str, tuple[float, float]]] = {
    "petshop-high-traffic": {"latency": (0.571, 0.786), "availability": (0.667, 1.000)},
    "petshop-low-traffic": {"latency": (0.571, 0.571), "availability": (0.833, 1.000)},
    "petshop-temporal-traffic": {"latency": (1.000, 1.000), "availability": (0.750, 1.000)},
}


@dataclass(frozen=True)
class Cell:
    """One group of rounds' measures (over seeds × rounds of one or more orders)."""

    rounds: int  # round plays counted (rounds × seeds × orders)
    top1: float | None  # first choice right
    top3: float | None  # truth among the first ranking's best three (None when no scores were logged)
    attempts: float | None  # mean attempts over the solved rounds
    solved: float | None  # share solved within the round's attempts


def base_and_order(scenario: str) -> tuple[str, str]:
    """``NAME@shuffled-K`` → (NAME, "shuffled-K"); a plain name → (name, "time")."""
    name, _, order = scenario.partition("@")
    return name, order or TIME


def published_for(name: str) -> dict[str, tuple[float, float]] | None:
    """The published baseline of a dataset file, matched on its name's prefix (temporal_traffic1 → temporal)."""
    for key, figures in PUBLISHED.items():
        if name.startswith(key):
            return figures
    return None


def first_ranking(row: Mapping[str, Any]) -> list[str]:
    """The candidates best first at the first attempt, from the logged scores (ties: the choice first)."""
    scores = row.get("candidate_scores") or {}
    logged = {cid: parts.get("total") for cid, parts in scores.items() if isinstance(parts, Mapping)}
    totals = {cid: value for cid, value in logged.items() if isinstance(value, (int, float))}
    if not totals:
        return []
    first = row.get("first_decision")
    return sorted(totals, key=lambda cid: (-totals[cid], cid != first))


def in_top(row: Mapping[str, Any], k: int) -> bool | None:
    """Whether the truth is among the first ranking's best `k` (None without logged scores)."""
    ranking = first_ranking(row)
    if not ranking:
        return None
    return row["truth"] in ranking[:k]


def cell(rows: Sequence[Mapping[str, Any]]) -> Cell:
    """The measures of a group of round plays."""
    if not rows:
        return Cell(0, None, None, None, None)
    tops = [in_top(r, TOP_K) for r in rows]
    solved = [r for r in rows if r["solved"]]
    return Cell(
        rounds=len(rows),
        top1=sum(bool(r["first_correct"]) for r in rows) / len(rows),
        top3=None if any(t is None for t in tops) else sum(bool(t) for t in tops) / len(rows),
        attempts=sum(r["attempts"] for r in solved) / len(solved) if solved else None,
        solved=len(solved) / len(rows),
    )


def curve(rows: Sequence[Mapping[str, Any]], parts: int = CURVE_PARTS) -> list[float | None]:
    """Top-1 by part of the stream, in play order (each order's rounds split alike, then pooled)."""
    by_play: dict[tuple[str, int], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        by_play[(r["scenario"], r["seed"])].append(r)
    bins: list[list[bool]] = [[] for _ in range(parts)]
    for played in by_play.values():
        for i, r in enumerate(played):
            bins[min(parts - 1, i * parts // len(played))].append(bool(r["first_correct"]))
    return [sum(b) / len(b) if b else None for b in bins]


def ceiling(runbook_rows: Sequence[Mapping[str, Any]]) -> float | None:
    """Top-1 of an agent right on every recurrence of an earlier round's cause and the runbook's elsewhere."""
    by_play: dict[tuple[str, int], list[Mapping[str, Any]]] = defaultdict(list)
    for r in runbook_rows:
        by_play[(r["scenario"], r["seed"])].append(r)
    right = 0
    for played in by_play.values():
        seen: set[str] = set()
        for r in played:
            right += bool(r["first_correct"]) or r["truth"] in seen
            seen.add(r["truth"])
    return right / len(runbook_rows) if runbook_rows else None


def paired(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Round-level comparison of two agents' first attempts (`eval.metrics.compare_rounds`: seeds averaged
    per scenario round, exact sign test)."""
    found = compare_rounds(_as_records(a), _as_records(b))
    if found is None:
        return {"rounds": 0, "better": 0, "worse": 0, "p_value": 1.0, "difference": None}
    return {
        "rounds": found["n_rounds"],
        "better": found["a_better"],
        "worse": found["b_better"],
        "p_value": found["sign_test_p"],
        "difference": found["difference"],
    }


def _as_records(rows: Sequence[Mapping[str, Any]]) -> list[RoundRecord]:
    """Run-log rows as the harness's round records (the fields a record has; the rest is dropped)."""
    fields = RoundRecord.__dataclass_fields__
    return [RoundRecord(**{key: value for key, value in row.items() if key in fields}) for row in rows]


def tracks(log: Mapping[str, Any]) -> dict[str, Any]:
    """Every dataset file's measures, per order group ("time", "shuffled") and agent, as plain data."""
    agents = list(log["agents"])
    grouped: dict[str, dict[str, dict[str, list[Mapping[str, Any]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    orders: dict[str, set[str]] = defaultdict(set)
    for agent in agents:
        for row in log["agents"][agent]["rounds"]:
            name, order = base_and_order(row["scenario"])
            group = TIME if order == TIME else SHUFFLED
            grouped[name][group][agent].append(row)
            orders[name].add(order)
    result: dict[str, Any] = {}
    for name, groups in grouped.items():
        entry: dict[str, Any] = {"orders": sorted(orders[name]), "published": published_for(name), "groups": {}}
        for group, by_agent in groups.items():
            kinds = sorted({r["kind"] for rows in by_agent.values() for r in rows})
            measures: dict[str, Any] = {}
            for agent, rows in by_agent.items():
                tests = [r for r in rows if str(r["round"]).startswith(TEST_PREFIX)]
                measures[agent] = {
                    "all": cell(rows).__dict__,
                    "kinds": {kind: cell([r for r in rows if r["kind"] == kind]).__dict__ for kind in kinds},
                    "test": {kind: cell([r for r in tests if r["kind"] == kind]).__dict__ for kind in kinds}
                    if tests
                    else {},
                    "curve": curve(rows),
                }
            comparisons = {
                other: paired(by_agent[SUBJECT], by_agent[other])
                for other in by_agent
                if other != SUBJECT and SUBJECT in by_agent
            }
            entry["groups"][group] = {
                "kinds": kinds,
                "agents": measures,
                "paired": comparisons,
                "ceiling": ceiling(by_agent.get(RUNBOOK, [])),
            }
        result[name] = entry
    return result


# -- rendering ---------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


MAX_KIND_COLUMNS = 4  # beyond this many kinds, the per-kind figures go to a table of their own


def render(result: Mapping[str, Any]) -> Group:
    """Rich tables: per dataset file and order group, each agent's measures beside the published ones."""
    parts: list[Any] = []
    for name, entry in result.items():
        for group, data in entry["groups"].items():
            shuffles = [o for o in entry["orders"] if o != TIME]
            label = "the data's order" if group == TIME else f"shuffled orders (mean of {len(shuffles)})"
            wide = len(data["kinds"]) > MAX_KIND_COLUMNS
            published = (entry["published"] or {}) if group == TIME else {}
            parts.append(_agents_table(f"{name}: {label}", data, [] if wide else data["kinds"], published))
            if wide:
                parts.append(_kinds_table(f"{name}: {label}, top-1 / top-3 by kind", data))
            parts.extend(_paired_lines(data["paired"]))
    return Group(*parts)


def _agents_table(
    title: str, data: Mapping[str, Any], columns: Sequence[str], published: Mapping[str, tuple[float, float]]
) -> Table:
    """One row per agent: top-1/top-3 overall and per kind (and the test rounds'), attempts, curve."""
    tests = any(m["test"] for m in data["agents"].values())
    table = Table(title=title, title_justify="left")
    for column in ("agent", "top-1 all", "top-3 all"):
        table.add_column(column, justify="left" if column == "agent" else "right")
    for kind in columns:
        table.add_column(f"top-1/top-3 {kind}", justify="right")
        if tests:
            table.add_column(f"test {kind}", justify="right")
    table.add_column("attempts · solved", justify="right")
    table.add_column("curve (top-1 by quarter)", justify="right")
    for agent, m in data["agents"].items():
        row = [agent, _pct(m["all"]["top1"]), _pct(m["all"]["top3"])]
        for kind in columns:
            row.append(f"{_pct(m['kinds'][kind]['top1'])} / {_pct(m['kinds'][kind]['top3'])}")
            if tests:
                t = m["test"].get(kind)
                row.append(f"{_pct(t['top1'])} / {_pct(t['top3'])} (n={t['rounds']})" if t else "—")
        attempts = m["all"]["attempts"]
        row.append(f"{attempts:.2f} · {_pct(m['all']['solved'])}" if attempts is not None else "—")
        row.append(" ".join(_pct(v) for v in m["curve"]))
        table.add_row(*row)
    if published:
        row = ["published (paper, no memory)", "", ""]
        for kind in columns:
            figures = published.get(kind)
            row += ["", f"{_pct(figures[0])} / {_pct(figures[1])}" if figures else "—"] if tests else [""]
        table.add_row(*(row + ["", ""]))
    if data.get("ceiling") is not None:
        row = ["ceiling: every recurrence right", _pct(data["ceiling"])]
        table.add_row(*(row + [""] * (len(table.columns) - len(row))))
    return table


def _kinds_table(title: str, data: Mapping[str, Any]) -> Table:
    """Top-1/top-3 per kind, a row per kind and a column per agent (for data with many kinds)."""
    table = Table(title=title, title_justify="left")
    table.add_column("kind")
    for agent in data["agents"]:
        table.add_column(agent, justify="right")
    for kind in data["kinds"]:
        cells = [data["agents"][agent]["kinds"][kind] for agent in data["agents"]]
        table.add_row(
            f"{kind} ({cells[0]['rounds']} plays)", *(f"{_pct(c['top1'])} / {_pct(c['top3'])}" for c in cells)
        )
    return table


def _paired_lines(paired: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return [
        f"  {SUBJECT} vs {other}: n = {test['rounds']} scenario rounds, {SUBJECT} better in {test['better']}, "
        f"worse in {test['worse']}; sign test p = {test['p_value']:.3g}; difference "
        f"{100 * test['difference']:+.1f} points"
        for other, test in paired.items()
        if test["difference"] is not None
    ]


def markdown(result: Mapping[str, Any], *, commands: Sequence[str] = (), title: str = "Dataset results") -> str:
    """The tracks as Markdown tables (a results page rendered from the logs, never typed)."""
    lines = [
        f"# {title}",
        "",
        "<!-- written by python -m eval.tracks --markdown; do not edit by hand -->",
        "",
        "Rendered from the run logs made by these commands (top-1 / top-3 of the first ranking; "
        '"shuffled" rows are the mean over the shuffled orders):',
        "",
    ]
    if commands:
        lines += ["```bash", *commands, "```", ""]
    for name, entry in result.items():
        for group, data in entry["groups"].items():
            shuffles = [o for o in entry["orders"] if o != TIME]
            label = "the data's order" if group == TIME else f"shuffled orders (mean of {len(shuffles)})"
            tests = any(m["test"] for m in data["agents"].values())
            kinds = data["kinds"] if len(data["kinds"]) <= MAX_KIND_COLUMNS else []
            head = (
                ["agent", "top-1", "top-3"]
                + [f"test {k} top-1 / top-3" if tests else f"{k} top-1 / top-3" for k in kinds]
                + ["attempts (solved)", "top-1 by quarter"]
            )
            lines += [
                f"### {name}: {label}",
                "",
                "| " + " | ".join(head) + " |",
                "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|",
            ]
            for agent, m in data["agents"].items():
                cells = [agent, _pct(m["all"]["top1"]), _pct(m["all"]["top3"])]
                for kind in kinds:
                    c = (m["test"] if tests else m["kinds"]).get(kind)
                    cells.append(f"{_pct(c['top1'])} / {_pct(c['top3'])}" if c else "—")
                attempts = m["all"]["attempts"]
                cells.append(f"{attempts:.2f} ({_pct(m['all']['solved'])})" if attempts is not None else "—")
                cells.append(" · ".join(_pct(v) for v in m["curve"]))
                lines.append("| " + " | ".join(cells) + " |")
            published = (entry["published"] or {}) if group == TIME else {}
            if published and tests:
                cells = ["published (no memory)", "", ""] + [
                    f"{_pct(published[k][0])} / {_pct(published[k][1])}" if k in published else "—" for k in kinds
                ]
                lines.append("| " + " | ".join(cells + ["", ""]) + " |")
            if data.get("ceiling") is not None:
                lines.append(
                    "| "
                    + " | ".join(["ceiling: every recurrence right", _pct(data["ceiling"])] + [""] * (len(head) - 2))
                    + " |"
                )
            lines += [""] + [line.strip() + "  " for line in _paired_lines(data["paired"])] + [""]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog="python -m eval.tracks",
        description="The dataset papers' metrics (top-1/top-3 of the first ranking, attempts, learning curve, "
        "paired statistics, published baselines) from eval.compare run logs.",
        epilog="example:\n  python -m eval.compare runs/petshop-high.yaml --agents episodic flat_rag classifier "
        "no_memory --order time shuffled --json runs/petshop-high.json\n"
        "  python -m eval.tracks runs/petshop-high.json --json runs/petshop-high-tracks.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def merged(logs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The rounds of several logs under one agents mapping (each log's scenarios kept apart by name)."""
    agents: dict[str, dict[str, list[Any]]] = defaultdict(lambda: {"rounds": []})
    for log in logs:
        for agent, data in log["agents"].items():
            agents[agent]["rounds"].extend(data.get("rounds", []))
    return {"agents": dict(agents)}


def main(argv: Sequence[str] | None = None) -> int:
    """Print the tracks of the given logs; 0 on success, 2 when a log cannot be read."""
    parser = _parser()
    parser.add_argument("logs", nargs="+", metavar="LOG", help="run logs written by eval.compare --json")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the measures as JSON here")
    parser.add_argument(
        "--markdown",
        default=None,
        metavar="PATH",
        help="also write them as Markdown tables here (a results page rendered from the logs)",
    )
    parser.add_argument(
        "--command",
        action="append",
        default=[],
        metavar="TEXT",
        help="a command line to print above the Markdown tables (repeatable): how the logs were made",
    )
    args = parser.parse_args(argv)
    inputs = [("a run log this command reads", path) for path in args.logs]
    for flag, out in (("--json", args.json), ("--markdown", args.markdown)):
        problem = output_problem(flag, out, sources=inputs) if out else ""
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    loaded = []
    for path in args.logs:
        try:
            with open(path, encoding="utf-8") as handle:
                log = json.load(handle)
        except (OSError, ValueError) as exc:
            print(f"error: {path}: cannot read a run log ({exc})", file=sys.stderr)
            return 2
        if not isinstance(log, dict) or not isinstance(log.get("agents"), dict):
            print(f"error: {path}: not an eval.compare run log (no 'agents' object)", file=sys.stderr)
            return 2
        loaded.append(log)
    result = tracks(merged(loaded))
    if args.json:
        write_atomic(args.json, json.dumps(result, indent=1, sort_keys=True))
    if args.markdown:
        write_atomic(args.markdown, markdown(result, commands=args.command))
    Console(width=220 if not sys.stdout.isatty() else None).print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
