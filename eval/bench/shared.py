"""``python -m eval.bench.shared``: several agent processes writing one memory store at once.

Each process plays observe → recall → decide → outcome cycles through its own
`EpisodicMemory` on the same store (a SQLite file, a ``postgresql://`` URL, or both side by
side), waits for the others, then checks its projection against `rebuild()`. Reported:
appends per second over all processes, recall latency, whether nothing was lost, whether
the chain verifies, and whether every process's projection equals the rebuild.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import closing
from datetime import UTC, datetime, timedelta
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from memory import EpisodicMemory
from memory.errors import EpisodicMemoryError
from memory.timeline import open_store

_START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
_SYMPTOMS = ("latency high", "error rate rising", "queue backlog growing", "disk almost full", "memory climbing")
_CAUSES = ("pool", "cache", "deploy", "config", "network")
_Figures = tuple[
    str, float, list[float], bool
]  # an agent's name, seconds appending, recall seconds, projection == rebuild


def _agent(target: str, name: str, appends: int, barrier: Barrier, results: Queue[_Figures]) -> None:
    """One agent: `appends` entries in cycles of three (the last may be cut short), a recall before each decision."""
    recalls: list[float] = []
    with EpisodicMemory(target, principal=name) as memory:
        clock = _START
        started = time.perf_counter()
        for cycle in range(-(-appends // 3)):
            symptom, cause = _SYMPTOMS[cycle % len(_SYMPTOMS)], _CAUSES[(cycle * 7) % len(_CAUSES)]
            clock += timedelta(minutes=10)
            memory.observe(f"service {cycle % 4}: {symptom}", timestamp=clock, situation="incident")
            began = time.perf_counter()
            context = memory.recall()
            recalls.append(time.perf_counter() - began)
            guess = _CAUSES[(cycle * 3) % len(_CAUSES)]
            if 3 * cycle + 1 < appends:
                memory.decide(
                    f"Decision: check the {guess}",
                    choice=guess,
                    retrieved=context.item_ids(),
                    timestamp=clock + timedelta(minutes=1),
                    situation="incident",
                )
            if 3 * cycle + 2 < appends:
                memory.outcome(
                    "fixed" if guess == cause else "still failing",
                    status="success" if guess == cause else "failure",
                    timestamp=clock + timedelta(minutes=2),
                    situation="incident",
                )
        elapsed = time.perf_counter() - started
        barrier.wait(timeout=3600)
        memory.recall()  # picks up what the others appended after this agent's last entry
        equal = memory.projection() == memory.rebuild()
    results.put((name, elapsed, recalls, equal))


def run(target: str, processes: int, appends: int) -> dict[str, Any]:
    """Run the agents on one store; the measured figures."""
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(processes), context.Queue()
    workers = [
        context.Process(target=_agent, args=(target, f"agent-{i}", appends, barrier, results), daemon=True)
        for i in range(processes)
    ]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    try:
        outcomes = [results.get(timeout=3600) for _ in workers]
    finally:
        barrier.abort()
        for worker in workers:
            worker.join(timeout=60)
    wall = max(elapsed for _, elapsed, _, _ in outcomes)
    recalls = sorted(r for _, _, rs, _ in outcomes for r in rs)
    with closing(open_store(target, create=False)) as store:
        entries = list(store.entries())
        intact = store.verify() is None
    expected = processes * appends
    return {
        "store": target.split("?")[0],
        "processes": processes,
        "entries": len(entries),
        "expected": expected,
        "linear": [e.seq for e in entries] == list(range(len(entries))),
        "chain_intact": intact,
        "projections_equal_rebuild": all(equal for *_, equal in outcomes),
        "appends_per_s": round(expected / wall, 1),
        "total_s": round(time.perf_counter() - started, 1),
        "recall_p50_ms": round(1000 * statistics.median(recalls), 2),
        "recall_p95_ms": round(1000 * recalls[int(0.95 * (len(recalls) - 1))], 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; 0 when every check holds, 1 when one does not, 2 on a usage error."""
    parser = argparse.ArgumentParser(prog="python -m eval.bench.shared", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "stores",
        nargs="*",
        metavar="STORE",
        help="empty stores to write (SQLite files or postgresql:// URLs); "
        "default: a fresh SQLite file in a temporary folder",
    )
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--appends", type=int, default=2000, help="entries each process appends")
    args = parser.parse_args(argv)
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        for target in args.stores or [str(Path(folder) / "shared.sqlite")]:
            try:
                with closing(open_store(target)) as store:
                    if len(store):
                        raise EpisodicMemoryError(f"{store.path.split('?')[0]}: not empty ({len(store)} entries)")
                figures = run(target, args.processes, args.appends)
            except EpisodicMemoryError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            print(" ".join(f"{key}={value}" for key, value in figures.items()))
            ok &= (
                figures["entries"] == figures["expected"]
                and figures["linear"]
                and figures["chain_intact"]
                and figures["projections_equal_rebuild"]
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
