"""``python -m eval.bench``: how fast the memory is, against the targets it must reach."""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from eval.bench import footprint, index_peer, measure, server
from eval.bench.corpus import SITUATION, BuiltStore, query_texts
from eval.bench.plan import FULL, MILLION, QUICK, Plan
from eval.bench.results import BenchReport, failures, judge, metric, summarize, summarize_rate
from eval.runlog import code_version
from memory.outputs import output_problem, write_atomic

_EXAMPLES = """examples:
  python -m eval.bench --quick                    # under a minute: recall at 1k/10k, 200 rounds
  python -m eval.bench --json runs/bench.json     # full run: stores of 1k/10k/100k episodes (minutes)
  python -m eval.bench --sizes 1000 20000 --rounds 300 --compare-runs 0 --jobs-runs 0
  python -m eval.bench --quick --strict           # exit 1 when a judged target is missed (for CI)
  python -m eval.bench --million --store-cache ~/bench-stores   # adds 1,000,000 episodes, built once

Stores are built in a temporary directory and deleted at exit, or kept in --store-cache DIR
and reused by later runs. Numbers are wall-clock
times on this machine: run it on an idle machine for figures worth comparing."""


JOBS_ARGS = ("ci-failures", "dns-tls-clock", "memory-gc", "pool-vs-deploy", "--seeds", "5", "--quiet")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eval.bench",
        description="Benchmark the episodic memory: appends, recall, open, rounds, compare.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_size_arguments(parser)
    _add_store_arguments(parser)
    return parser


def _add_size_arguments(parser: argparse.ArgumentParser) -> None:
    """How much is measured: the preset, sizes, counts and seed (and where the results go)."""
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer samples (under a minute)")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the results here")
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=None,
        metavar="N",
        help="store sizes in episodes for recall (default 1000 10000 100000; quick: 1000 10000)",
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="rounds of the generated scenario (default 1000; quick 200)"
    )
    parser.add_argument(
        "--queries", type=int, default=None, help="timed recalls per store size (default 300; quick 100)"
    )
    parser.add_argument(
        "--compare-runs",
        type=int,
        default=None,
        metavar="N",
        help="runs of python -m eval.compare (default 3; quick 1; 0 skips it)",
    )
    parser.add_argument(
        "--jobs-runs",
        type=int,
        default=None,
        metavar="N",
        help="paired eval.compare runs with --jobs 1 and --jobs 2 on the four shipped scenarios × "
        "5 seeds, for the parallel speedup (default 3; quick 1; 0 skips it)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic stores and scenario (default 0)")


def _add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """The stores measured (the million-episode one, the cache, the server) and the exit on a missed target."""
    parser.add_argument(
        "--million",
        action="store_true",
        help=f"also measure a store of {MILLION:,} episodes (needs --store-cache: built once, "
        "reused by later runs; building it takes long)",
    )
    parser.add_argument(
        "--store-cache",
        default=None,
        metavar="DIR",
        help="keep the built stores in DIR and reuse them on later runs (same size and seed)",
    )
    parser.add_argument(
        "--server",
        default=None,
        metavar="URL|off",
        help="PostgreSQL server for the server-store figures beside SQLite's: a postgresql:// URL "
        "whose role may create databases, or off; default: start a local server from the "
        "system's binaries, skipped (saying why) when there are none",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a judged target is missed (without it, misses are reported and the exit is 0)",
    )


def plan_from(args: argparse.Namespace, *, quick: Plan = QUICK, full: Plan = FULL) -> Plan:
    """The preset chosen by --quick (`quick` or `full`), with any explicit sizes and counts applied."""
    base = quick if args.quick else full
    sizes = set(args.sizes) if args.sizes else set(base.sizes)
    if getattr(args, "million", False):
        sizes.add(MILLION)
    cache = getattr(args, "store_cache", None)
    return Plan(
        quick=base.quick,
        durable=base.durable,
        batches=base.batches,
        batch_size=base.batch_size,
        sizes=tuple(sorted(sizes)),
        cache=Path(cache) if cache else None,
        queries=args.queries if args.queries is not None else base.queries,
        opens=base.opens,
        rounds=args.rounds if args.rounds is not None else base.rounds,
        compare_runs=args.compare_runs if args.compare_runs is not None else base.compare_runs,
        seed=args.seed,
        durable_settle=base.durable_settle,
        round_runs=base.round_runs,
        agent_rounds=base.agent_rounds,
        jobs_runs=args.jobs_runs if args.jobs_runs is not None else base.jobs_runs,
    )


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run(plan: Plan, directory: Path, progress: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Measure everything in `plan`, building stores under `directory`; the results document (judged)."""
    started = time.perf_counter()
    machine: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_avg_start": _load(),
        **code_version(),
    }
    # small measurements first, while the process holds no large store
    durable, batch = _appends(plan, directory, progress)
    rounds = _rounds(plan, progress)
    runs = []
    for i in range(plan.compare_runs):
        progress(f"python -m eval.compare --quiet (run {i + 1} of {plan.compare_runs})")
        runs.append(measure.compare_run())
    compare_wall = metric(summarize([r.wall_s for r in runs]), command="python -m eval.compare --quiet")
    compare_rss = metric(summarize([r.peak_rss_mb for r in runs]), digits=1, source="wait4 rusage of the child")
    speedup = _speedup(plan, progress)
    recall, opened = _stores(plan, directory, progress)
    peers = {size: entry.pop("index_peer") for size, entry in recall.items()}
    machine.update(load_avg_end=_load(), elapsed_s=round(time.perf_counter() - started, 1))
    return judge(
        {
            "append_durable_ms": durable,
            "append_batch_per_s": batch,
            "recall_ms": recall,
            "recall_index_peer": peers,
            "store_bytes_per_entry": _per_size(recall, "footprint", "bytes_per_entry", 1),
            "resident_mb": _per_size(recall, "resident", "rss_mb", 1),
            "open_ms": opened,
            "round_ms": rounds,
            "compare_wall_s": compare_wall,
            "compare_peak_rss_mb": compare_rss,
            "compare_jobs_speedup": speedup,
            "machine": machine,
            "quick": plan.quick,
        }
    )


def _appends(plan: Plan, directory: Path, progress: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Durable single appends (FULL and NORMAL) and batch appends."""
    progress(
        f"single appends ({plan.durable} on a new store and {plan.durable} in steady state, per synchronous level)"
    )
    full = measure.durable_appends(
        directory, plan.durable, synchronous="FULL", seed=plan.seed, max_settle=plan.durable_settle
    )
    normal = measure.durable_appends(
        directory, plan.durable, synchronous="NORMAL", seed=plan.seed, max_settle=plan.durable_settle
    )
    durable = metric(
        summarize(full.steady_ms),
        synchronous="FULL",
        cpu_ms=summarize(full.steady_cpu_ms).to_json(),
        phase="steady state: after the store's first WAL checkpoint, commits reuse the WAL file",
        settled=full.settled,
        settle_appends=full.settle_appends,
        new_store={
            **summarize(full.new_store_ms).to_json(),
            "synchronous": "FULL",
            "wal_grew_until_append": full.wal_grew_until,
            "what": "brand-new file, the first appends after 20 warm-ups, while its WAL file still grows "
            "(once per store; not judged)",
        },
        normal={
            **summarize(normal.steady_ms).to_json(),
            "synchronous": "NORMAL",
            "new_store": summarize(normal.new_store_ms).to_json(),
        },
        what="Timeline.append on a file SQLiteStore (WAL): redaction, embedding, hash chain, commit",
    )
    return durable, _batch_appends(plan, directory, progress)


def _batch_appends(plan: Plan, directory: Path, progress: Callable[[str], None]) -> dict[str, Any]:
    """Batch appends, each beside its raw executemany peer, and the same calls with a worker process."""
    progress(f"batch appends ({plan.batches} × {plan.batch_size}), each followed by raw executemany of its rows")
    batches = measure.batch_appends(directory, plan.batches, plan.batch_size, seed=plan.seed)
    progress(f"batch appends with 1 worker process ({plan.batches} × {plan.batch_size})")
    helped = measure.batch_appends(directory, plan.batches, plan.batch_size, seed=plan.seed, workers=1)
    return metric(
        summarize_rate(batches.seconds, plan.batch_size),
        digits=1,
        batch_size=plan.batch_size,
        cpu_per_s={
            **summarize_rate(batches.cpu_seconds, plan.batch_size).to_json(1),
            "what": "entries per second of process CPU time (what a busy machine slows least)",
        },
        what="entries/s through Timeline.append_many; p95 = rate of the 95th-percentile (slow) batch",
        storage_only={
            **summarize_rate(batches.storage_seconds, plan.batch_size).to_json(1),
            "what": "the same stored rows inserted by SQLite alone, in transactions of the same "
            "size on a new store (no redaction, embedding or hashing): the ceiling "
            "for this storage on this machine",
        },
        raw_executemany={
            **summarize_rate(batches.raw_seconds, plan.batch_size).to_json(1),
            "what": "the rows each call stored, inserted right after it by plain sqlite3 executemany into a file "
            "with the store's schema and indexes (WAL, synchronous FULL): eval/bench/ingest_peer.py",
        },
        raw_ratio=metric(
            summarize([raw / own for raw, own in zip(batches.raw_seconds, batches.seconds)]),
            what="entries/s of each Timeline.append_many call over its raw executemany peer's (paired, same run)",
        ),
        with_worker={
            **summarize_rate(helped.seconds, plan.batch_size).to_json(1),
            "what": "the same calls on a Timeline with workers=1 (redaction, embedding and digests in a worker "
            "process); not the default",
        },
    )


def _rounds(plan: Plan, progress: Callable[[str], None]) -> dict[str, Any]:
    """Per-round time over a generated scenario: first and last 100 rounds, pooled over the plays."""
    first: list[float] = []
    last: list[float] = []
    for play in range(plan.round_runs):
        progress(
            f"{plan.rounds} generated rounds, episodic agent, heuristic mode (play {play + 1} of {plan.round_runs})"
        )
        per_round = measure.round_times(plan.rounds, seed=plan.seed)
        window = min(100, len(per_round))
        first += per_round[:window]
        last += per_round[-window:]
    rounds = {
        "first_100": metric(summarize(first)),
        "last_100": metric(summarize(last)),
        "rounds": plan.rounds,
        "plays": plan.round_runs,
        "what": "wall time per round (decisions with recall, environment steps, recording), in-memory store; "
        "the same scenario played `plays` times, each window pooling its rounds from every play, "
        "so a burst of load on the machine weighs less",
    }
    return rounds


def _speedup(plan: Plan, progress: Callable[[str], None]) -> dict[str, Any]:
    """Wall time of eval.compare with --jobs 1 over --jobs 2, runs alternating so load drifts hit both."""
    serial: list[float] = []
    parallel: list[float] = []
    for i in range(plan.jobs_runs):
        for jobs, times in ((1, serial), (2, parallel)):
            progress(
                f"python -m eval.compare (4 shipped scenarios × 5 seeds) --jobs {jobs} "
                f"(run {i + 1} of {plan.jobs_runs})"
            )
            times.append(measure.compare_run((*JOBS_ARGS, "--jobs", str(jobs))).wall_s)
    ratios = [s / p for s, p in zip(serial, parallel)]
    return metric(
        summarize(ratios),
        digits=2,
        jobs1_s=[round(t, 2) for t in serial],
        jobs2_s=[round(t, 2) for t in parallel],
        command="python -m eval.compare " + " ".join(JOBS_ARGS) + " --jobs 1|2",
        what="wall time with --jobs 1 divided by wall time with --jobs 2 (higher is better; p95 is the "
        "ratio at the 95th percentile, not the slow tail)",
    )


def _per_size(recall: dict[str, Any], part: str, field: str, digits: int) -> dict[str, Any]:
    """One metric per store size from a part of its recall entry (one sample each)."""
    out = {}
    for size, entry in recall.items():
        value = (entry.get(part) or {}).get(field)
        out[size] = metric(summarize([] if value is None else [value]), digits=digits)
    return out


def _stores(plan: Plan, directory: Path, progress: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Recall, footprint and resident memory at each store size, and opening the largest."""
    recall: dict[str, Any] = {}
    opened: dict[str, Any] = {}
    queries = query_texts(plan.queries, seed=plan.seed + 1)
    for size in plan.sizes:
        built, reused = footprint.cached_store(
            plan.cache or directory, size, seed=plan.seed, cache=plan.cache is not None, progress=progress
        )
        largest = size == max(plan.sizes)
        recall[str(size)], opening = _recall_at(plan, size, built, reused, queries, progress)
        if largest:
            opened = _opened(plan, size, built, opening, directory, progress)
        del opening
        gc.collect()
        if plan.cache is None:
            footprint.remove_store(built.path)
    if not opened:
        opened = metric(summarize([]), episodes=None)
    return recall, opened


def _recall_at(
    plan: Plan,
    size: int,
    built: BuiltStore,
    reused: bool,
    queries: list[list[str]],
    progress: Callable[[str], None],
) -> tuple[dict[str, Any], measure.StoreOpening]:
    """The recall entry of the store of `size` episodes, and its opening (its memory closed): resident
    memory in a fresh process, then opens (several for the largest store) and warm recalls in this one."""
    largest = size == max(plan.sizes)
    as_built = not footprint.has_state_runs(built.path)  # built now, or reused before its first open
    written = footprint.footprint(built.path, built.entries) if as_built else None
    first = None
    if as_built:  # a store without state runs writes them on its first open
        progress(f"first open of the store of {size:,} episodes in a fresh process (writes its state runs)")
        first = _resident(built, queries)
    progress(f"opening the store of {size:,} episodes in a fresh process (resident memory)")
    resident = _resident(built, queries)
    progress(f"opening it ({f'up to {plan.opens}' if largest else 1}×) and recalling ({plan.queries} queries)")
    opening = measure.open_store(built.path, built.largest, queries[0], plan.opens if largest else 1)
    memory = opening.memory
    try:
        times = measure.warm_recalls(memory, queries)
        scanned = len(memory.index.partition(built.largest))
        progress(f"the bare index over the same rows, and recall@10 against exact recall ({plan.queries} queries)")
        peer = index_peer.index_peer(memory, built.largest, queries)
    finally:
        memory.close()
    entry = metric(
        summarize(times),
        principal=built.largest,
        scanned=scanned,
        k=measure.RECALL_K,
        store=built.describe(),
        footprint={
            **footprint.footprint(built.path, built.entries),
            "as_built": written,
            "reused": reused,
            "what": "the store's files (SQLite file, WAL, anchor, vectors sidecar) once opened, state runs included; "
            "as_built: before its first open",
        },
        resident=_resident_json(resident, first),
        index_peer=index_peer.to_json(peer, summarize(times).median),
    )
    return entry, opening


def _resident(built: BuiltStore, queries: list[list[str]]) -> footprint.Resident | None:
    """A fresh interpreter's memory after opening the store and recalling the first query."""
    return footprint.resident_after_open(built.path, built.largest, queries[0], situation=SITUATION, k=measure.RECALL_K)


def _resident_json(resident: footprint.Resident | None, first: footprint.Resident | None) -> dict[str, Any] | None:
    """The recall entry's resident part (None where /proc is missing)."""
    if resident is None:
        return None
    return {
        "rss_mb": round(resident.rss_mb, 1),
        "peak_mb": round(resident.peak_mb, 1),
        "open_s": round(resident.open_s, 2),
        "first_open": None
        if first is None
        else {
            "rss_mb": round(first.rss_mb, 1),
            "peak_mb": round(first.peak_mb, 1),
            "open_s": round(first.open_s, 2),
        },
        "what": "a fresh interpreter: EpisodicMemory(path) and one recall, on a store whose state runs "
        "exist; VmRSS after it, VmHWM peak (first_open: the open that wrote them)",
    }


def _opened(
    plan: Plan,
    size: int,
    built: BuiltStore,
    opening: measure.StoreOpening,
    scratch: Path,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Opening the largest store, and the episodic agent's decisions on a copy of it."""
    opened = metric(
        summarize(opening.total_ms),
        digits=1,
        episodes=built.episodes,
        constructor_ms=summarize(opening.constructor_ms).to_json(1),
        first_recall_ms=summarize(opening.first_recall_ms).to_json(1),
        process_peak_rss_mb=round(measure.peak_rss_mb(), 1),
        what="EpisodicMemory(path) plus its first recall (until recall is ready), after the fresh-process open above",
    )
    progress(f"the episodic agent on a copy of the store of {size:,} episodes ({plan.agent_rounds} rounds)")
    opened.update(_agent(plan, built, scratch))
    return opened


def _agent(plan: Plan, built: BuiltStore, scratch: Path) -> dict[str, Any]:
    """The episodic agent's first and later decisions on a copy of a built store (nothing where /proc is missing)."""
    decided = footprint.agent_decisions(built.path, built.largest, plan.agent_rounds, seed=plan.seed, scratch=scratch)
    if decided is None:
        return {}
    what = (
        f"a fresh interpreter: the episodic agent (heuristic mode) opens a copy of the store as {built.largest} "
        f"and decides {plan.agent_rounds} generated rounds that start after its last entry"
    )
    return {
        "agent_first_decision_ms": metric(summarize([decided.first_s * 1000]), digits=1, what=what),
        "agent_later_decision_ms": metric(
            summarize(decided.later_ms), digits=1, peak_mb=round(decided.peak_mb, 1), what=what
        ),
    }


def main(argv: Sequence[str] | None = None, *, quick: Plan = QUICK, full: Plan = FULL) -> int:
    """Run the benchmark; 0 when it ran, 1 with ``--strict`` when a target was missed, 2 on a usage error.

    `quick` and `full` are the presets ``--quick`` and its absence choose.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    plan = plan_from(args, quick=quick, full=full)
    if (
        any(size < 1 for size in plan.sizes)
        or plan.rounds < 1
        or plan.queries < 1
        or plan.compare_runs < 0
        or plan.jobs_runs < 0
    ):
        print(
            "error: --sizes, --rounds and --queries must be at least 1, --compare-runs and --jobs-runs at least 0",
            file=sys.stderr,
        )
        return 2
    if args.million and plan.cache is None:
        print("error: --million needs --store-cache DIR (the store is built once and kept there)", file=sys.stderr)
        return 2
    if plan.cache is not None and not plan.cache.is_dir():
        print(f"error: --store-cache {plan.cache}: no such directory", file=sys.stderr)
        return 2
    out = Path(args.json) if args.json else None
    if out is not None and not out.parent.exists():
        print(f"error: --json {out}: directory {out.parent} does not exist", file=sys.stderr)
        return 2
    refused = output_problem("--json", out) if out else ""
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    # a pipe or a log file gets the whole table, never one wrapped to 80 columns
    console = Console() if sys.stdout.isatty() else Console(width=200)
    err = Console(stderr=True)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="eval-bench-") as tmp:

        def progress(message: str) -> None:
            err.print(f"[dim]{time.perf_counter() - began:6.1f} s[/dim]  {message}")

        results = run(plan, Path(tmp), progress=progress)
        results["server_store"] = server.measure_server(plan, Path(tmp), args.server, progress)
    console.print(BenchReport(results))
    console.print(server.table(results["server_store"]))
    missed = failures(results)
    console.print(f"targets missed: {', '.join(missed)}" if missed else "all judged targets met")
    if out is not None:
        write_atomic(out, json.dumps(results, indent=2) + "\n")
    return 1 if args.strict and missed else 0
