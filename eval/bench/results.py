"""Benchmark results as plain data: sample statistics, targets, the JSON document and its table.

Compute, then render: `summarize` turns samples into a `Stat`, `judge` attaches the issue's
targets to a results document, and `BenchReport` renders that document with rich.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from rich.console import Group, JustifyMethod
from rich.table import Table
from rich.text import Text

METRICS = (
    "append_durable_ms",
    "append_batch_per_s",
    "recall_ms",
    "recall_index_peer",
    "store_bytes_per_entry",
    "resident_mb",
    "open_ms",
    "round_ms",
    "compare_wall_s",
    "compare_peak_rss_mb",
    "compare_jobs_speedup",
)  # top-level keys, table order
TARGET_SIZE = "100000"  # the store size the recall and open targets are stated for
LARGE_SIZE = "1000000"  # the size --million adds, with its own targets
# Judged per store size: (recall p50, recall p95, bytes per entry, resident MB after open + first recall)
SIZE_TARGETS = {TARGET_SIZE: (5.0, 15.0, 1200.0, 350.0), LARGE_SIZE: (10.0, 25.0, 1200.0, 2048.0)}


class Stat(NamedTuple):
    """Summary of one metric's samples."""

    median: float | None  # 50th percentile; None without samples
    p95: float | None  # 95th percentile (linear interpolation, numpy's default)
    n: int  # number of samples

    def to_json(self, digits: int = 3) -> dict[str, Any]:
        rnd = lambda v: None if v is None else round(float(v), digits)  # noqa: E731
        return {"median": rnd(self.median), "p95": rnd(self.p95), "n": self.n}


def summarize(samples: Sequence[float]) -> Stat:
    """Median and 95th percentile of `samples` (lower is better)."""
    if not len(samples):
        return Stat(None, None, 0)
    values = np.asarray(samples, dtype=float)
    return Stat(float(np.median(values)), float(np.percentile(values, 95)), len(values))


def summarize_rate(seconds: Sequence[float], items: int) -> Stat:
    """Throughput (items per second) of batches that took `seconds` each.

    The median is the rate of the median batch; ``p95`` is the rate of the 95th-percentile
    (slow) batch, so for a rate it is the tail on the bad side, as for latencies.
    """
    times = summarize(seconds)
    if times.n == 0:
        return times
    rate = lambda s: items / s if s > 0 else float("inf")  # noqa: E731
    return Stat(rate(times.median), rate(times.p95), times.n)


def metric(stat: Stat, digits: int = 3, **extra: Any) -> dict[str, Any]:
    """A metric object of the JSON document: median, p95, n, then `extra` fields."""
    return {**stat.to_json(digits), "target": None, "passed": None, **extra}


def _check(entry: dict[str, Any], rules: Iterable[tuple[str, str, float | None, str]]) -> None:
    """Set ``target`` and ``passed`` from (stat, op, bound, text) rules; no value → not judged."""
    rules = list(rules)
    entry["target"] = " and ".join(text for *_, text in rules)
    verdicts: list[bool | None] = []
    for stat, op, bound, _ in rules:
        value = entry.get(stat)
        if value is None or bound is None:
            verdicts.append(None)
        else:
            verdicts.append(value <= bound if op == "<=" else value >= bound)
    entry["passed"] = None if None in verdicts else all(verdicts)


def judge(results: dict[str, Any]) -> dict[str, Any]:
    """Attach the issue's targets (on this 2-core machine) to a results document, in place."""
    _check(results["append_durable_ms"], [("median", "<=", 0.5, "p50 ≤ 0.5 ms")])
    _check(results["append_batch_per_s"], [("median", ">=", 50_000, "p50 ≥ 50,000/s")])
    if results["append_batch_per_s"].get("raw_ratio"):
        _check(results["append_batch_per_s"]["raw_ratio"], [("median", ">=", 0.5, "p50 ≥ 0.5× raw executemany")])
    for size, (p50, p95, per_entry, resident) in SIZE_TARGETS.items():
        if size in results["recall_ms"]:
            _check(
                results["recall_ms"][size],
                [("median", "<=", p50, f"p50 ≤ {p50:g} ms"), ("p95", "<=", p95, f"p95 ≤ {p95:g} ms")],
            )
        peer = results.get("recall_index_peer", {}).get(size)
        if peer:  # the memory's recall against the bare index over the same rows, and against exact recall
            _check(peer["ratio"], [("median", "<=", 3.0, "recall p50 ≤ 3× the bare index p50")])
            _check(peer["recall_at_10"], [("median", ">=", 0.98, "≥ 0.98")])
        if size in results.get("store_bytes_per_entry", {}):
            _check(results["store_bytes_per_entry"][size], [("median", "<=", per_entry, f"≤ {per_entry:,.0f} B")])
        if size in results.get("resident_mb", {}):
            _check(results["resident_mb"][size], [("median", "<=", resident, f"≤ {resident:,.0f} MB")])
    opened = results["open_ms"]
    if str(opened.get("episodes")) == TARGET_SIZE:
        _check(opened, [("median", "<=", 2000.0, "p50 ≤ 2,000 ms")])
    else:
        opened["target"] = f"p50 ≤ 2,000 ms @{int(TARGET_SIZE):,} (not measured)"
    first, last = results["round_ms"]["first_100"], results["round_ms"]["last_100"]
    double = None if first.get("median") is None else 2 * first["median"]
    _check(last, [("median", "<=", double, "p50 ≤ 2× first-100 p50"), ("median", "<=", 20.0, "p50 ≤ 20 ms")])
    _check(results["compare_wall_s"], [("median", "<=", 3.0, "p50 ≤ 3 s")])
    _check(results["compare_peak_rss_mb"], [("median", "<=", 300.0, "p50 ≤ 300 MB")])
    if "compare_jobs_speedup" in results:
        _check(results["compare_jobs_speedup"], [("median", ">=", 1.6, "--jobs 2 ≥ 1.6× --jobs 1")])
    return results


def failures(results: Mapping[str, Any]) -> list[str]:
    """Names of the judged metrics that missed their target (``recall_ms[100000]`` style)."""
    return [label for _, label, entry in _rows(results) if entry.get("passed") is False]


def _rows(results: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    rows: list[tuple[str, str, dict[str, Any]]] = []
    durable = results["append_durable_ms"]
    rows.append(("append_durable_ms", f"append_durable_ms {durable.get('synchronous', 'FULL')}", durable))
    if durable.get("new_store"):
        rows.append(
            (
                "append_durable_ms",
                f"append_durable_ms {durable.get('synchronous', 'FULL')} new store (extra)",
                durable["new_store"],
            )
        )
    if durable.get("cpu_ms"):
        rows.append(
            (
                "append_durable_ms",
                f"append_durable_ms {durable.get('synchronous', 'FULL')} CPU (extra)",
                durable["cpu_ms"],
            )
        )
    if durable.get("normal"):
        rows.append(("append_durable_ms", "append_durable_ms NORMAL (extra)", durable["normal"]))
    batch = results["append_batch_per_s"]
    rows.append(("append_batch_per_s", "append_batch_per_s", batch))
    if batch.get("cpu_per_s"):
        rows.append(("append_batch_per_s", "append_batch_per_s CPU time (extra)", batch["cpu_per_s"]))
    if batch.get("storage_only"):
        rows.append(("append_batch_per_s", "append_batch_per_s SQLite alone (extra)", batch["storage_only"]))
    if batch.get("raw_executemany"):
        rows.append(("append_batch_per_s", "append_batch_per_s raw executemany (extra)", batch["raw_executemany"]))
        rows.append(("append_batch_ratio", "append_batch_per_s over raw executemany", batch["raw_ratio"]))
    if batch.get("with_worker"):
        rows.append(("append_batch_per_s", "append_batch_per_s with 1 worker (extra)", batch["with_worker"]))
    for size, entry in results["recall_ms"].items():
        rows.append(("recall_ms", f"recall_ms @{int(size):,}", entry))
    for size, peer in results.get("recall_index_peer", {}).items():
        at = f"@{int(size):,}"
        rows.append(("recall_index_peer", f"recall_ms {at}: the bare index (extra)", peer["bare_ms"]))
        rows.append(("recall_index_peer", f"recall_ms {at} over the bare index's", peer["ratio"]))
        rows.append(("recall_index_peer", f"recall@10 {at} against exact recall", peer["recall_at_10"]))
        rows.append(("recall_index_peer", f"recall_ms {at}: the retriever alone (extra)", peer["retriever_ms"]))
    for name in ("store_bytes_per_entry", "resident_mb"):
        for size, entry in results.get(name, {}).items():
            rows.append((name, f"{name} @{int(size):,}", entry))
    opened = results["open_ms"]
    rows.append(("open_ms", f"open_ms @{int(opened['episodes']):,}" if opened.get("episodes") else "open_ms", opened))
    for key, what in (("agent_first_decision_ms", "first decision"), ("agent_later_decision_ms", "later decisions")):
        if opened.get(key):
            rows.append(("open_ms", f"open_ms @{int(opened['episodes']):,}: the agent's {what} (extra)", opened[key]))
    for part in ("first_100", "last_100"):
        rows.append(("round_ms", f"round_ms {part}", results["round_ms"][part]))
    rows.append(("compare_wall_s", "compare_wall_s", results["compare_wall_s"]))
    rows.append(("compare_peak_rss_mb", "compare_peak_rss_mb", results["compare_peak_rss_mb"]))
    if "compare_jobs_speedup" in results:
        rows.append(("compare_jobs_speedup", "compare_jobs_speedup", results["compare_jobs_speedup"]))
    return rows


def _number(value: float | None, name: str) -> str:
    if value is None:
        return "—"
    if name in ("append_batch_per_s", "store_bytes_per_entry"):
        return f"{value:,.0f}"
    return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"


_COLUMNS: tuple[tuple[str, JustifyMethod], ...] = (
    ("metric", "left"),
    ("median", "right"),
    ("p95", "right"),
    ("n", "right"),
    ("target", "left"),
    ("", "left"),
)  # the results table's columns and how each is justified


class BenchReport:
    """The results table; ``rich.print(BenchReport(results))`` shows it."""

    def __init__(self, results: Mapping[str, Any]) -> None:
        self.results = results

    def table(self) -> Table:
        table = Table(
            title="eval.bench (episodes: @N)" + (" (quick)" if self.results.get("quick") else ""), title_justify="left"
        )
        for column, justify in _COLUMNS:
            table.add_column(column, justify=justify)
        for name, label, entry in _rows(self.results):
            passed = entry.get("passed")
            verdicts: dict[bool | None, Text] = {
                True: Text("PASS", style="green"),
                False: Text("FAIL", style="bold red"),
            }
            verdict = verdicts.get(passed, Text("—"))
            table.add_row(
                label,
                _number(entry.get("median"), name),
                _number(entry.get("p95"), name),
                str(entry.get("n", 0)),
                entry.get("target") or "",
                verdict,
            )
        return table

    def notes(self) -> Text:
        machine = self.results.get("machine", {})
        lines = [
            f"machine: {machine.get('cpu_count')} CPUs, Python {machine.get('python')}, {machine.get('platform')}; "
            f"load average {machine.get('load_avg_start')} → {machine.get('load_avg_end')}; "
            f"bench took {machine.get('elapsed_s')} s"
            + (
                f"; code at commit {machine['commit'][:12]}"
                + (" with uncommitted changes" if machine.get("tree") == "dirty" else "")
                if machine.get("commit")
                else ""
            )
        ]
        for size, entry in self.results["recall_ms"].items():
            store = entry.get("store") or {}
            lines.append(
                f"store {int(size):,}: {store.get('episodes', 0):,} episodes, {store.get('entries', 0):,} entries, "
                f"{store.get('edges', 0):,} edges, {store.get('facts', 0)} fact versions, "
                f"built in {store.get('build_s')} s; recall for {entry.get('principal')} "
                f"({entry.get('scanned', 0):,} episodes of its own)"
            )
        method = next((e.get("store", {}).get("method") for e in self.results["recall_ms"].values()), None)
        if method:
            lines.append(f"stores built by: {method}")
        rounds = self.results["round_ms"]
        plays = rounds.get("plays", 1)
        lines.append(
            f"round_ms: {rounds.get('rounds')} generated rounds"
            + (f" × {plays} plays" if plays != 1 else "")
            + f", {rounds.get('what', '')}"
        )
        speedup = self.results.get("compare_jobs_speedup") or {}
        if speedup.get("n"):
            lines.append(
                f"compare_jobs_speedup: {speedup.get('command')}; --jobs 1 took {speedup.get('jobs1_s')} s, "
                f"--jobs 2 took {speedup.get('jobs2_s')} s (a loaded machine lowers the ratio)"
            )
        return Text("\n".join(lines), style="dim")

    def __rich__(self) -> Group:
        return Group(self.table(), self.notes())
