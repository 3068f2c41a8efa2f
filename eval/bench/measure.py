"""Timed measurements; each returns raw samples (summaries are `eval.bench.results`' job)."""

from __future__ import annotations

import gc
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from eval.bench.corpus import SITUATION, incident_stream, log_lines
from eval.bench.ingest_peer import RawInserts, stored_rows
from memory.timeline import HashingEncoder, SQLiteStore, Timeline

if TYPE_CHECKING:  # imported where they are used, so importing the measurements stays light
    from memory import EpisodicMemory
    from simulator import Prompt

ROOT = Path(__file__).resolve().parents[2]  # the repository (cwd of the eval.compare subprocess)
RECALL_K = 6  # evidence items per decision: the harness's default context budget


def _ms(seconds: float) -> float:
    return seconds * 1000.0


class Durable(NamedTuple):
    """Single committed appends to one brand-new file store, timed in two phases."""

    steady_ms: list[float]  # after the store's first WAL checkpoint, once commits reuse the WAL file (judged)
    steady_cpu_ms: list[float]  # the same appends' process CPU time (no waiting on the disk or for a core)
    new_store_ms: list[float]  # right after creation (after the warm-ups), while the WAL file still grows
    wal_grew_until: int  # appends since creation when the WAL file last grew (its first reuse followed)
    settle_appends: int  # untimed appends between the two phases
    settled: bool  # whether the WAL file stopped growing within the allowed settling appends


def _lines(seed: int) -> Iterator[dict[str, Any]]:
    """The items of `log_lines(n, seed)`, as an endless stream."""
    for _, batch in incident_stream(seed, principals=(("team-core", 1.0),)):
        yield from batch


def durable_appends(
    directory: Path,
    n: int,
    *,
    synchronous: str = "FULL",
    seed: int = 0,
    warmup: int = 20,
    max_settle: int = 20_000,
    quiet: int = 50,
) -> Durable:
    """Milliseconds of single `Timeline.append` calls, each its own committed transaction.

    A new SQLite store in WAL mode appends to its WAL file until the first automatic
    checkpoint (about 1,000 pages); later commits overwrite the WAL from its start, which
    costs less to make durable than growing the file. A long-lived store is in that second
    state, so `n` appends are timed on the brand-new store (after `warmup`) and `n` more once
    the WAL file has not grown for `quiet` consecutive appends (at most `max_settle` untimed
    appends in between).
    """
    items = _lines(seed)
    path = directory / f"durable-{synchronous.lower()}-{seed}.sqlite"
    wal = Path(f"{path}-wal")
    with SQLiteStore(path, synchronous=synchronous) as store:
        timeline = Timeline(store, HashingEncoder())
        count, grew, size = 0, 0, 0

        cpu: list[float] = []

        def append() -> float:
            nonlocal count, grew, size
            item = next(items)
            fields = {k: v for k, v in item.items() if k != "text"}
            start, used = time.perf_counter(), time.process_time()
            timeline.append(item["text"], **fields)
            elapsed = _ms(time.perf_counter() - start)
            cpu.append(_ms(time.process_time() - used))
            count += 1
            now = wal.stat().st_size if wal.exists() else 0
            if now > size:
                grew, size = count, now
            return elapsed

        for _ in range(warmup):
            append()
        new_store = [append() for _ in range(n)]
        settle = 0
        while count - grew < quiet and settle < max_settle:
            append()
            settle += 1
        settled = count - grew >= quiet
        cpu.clear()
        steady = [append() for _ in range(n)]
    return Durable(steady, cpu, new_store, grew, settle, settled)


class Batches(NamedTuple):
    """Batch appends, and the same rows written by SQLite alone, in the same run."""

    seconds: list[float]  # per `Timeline.append_many` call (judged)
    cpu_seconds: list[float]  # the same calls' process CPU time
    raw_seconds: list[float]  # the rows each call stored, by plain executemany right after it (`ingest_peer`)
    storage_seconds: list[float]  # per transaction inserting the stored rows of one call through a second store


def batch_appends(directory: Path, batches: int, size: int, *, seed: int = 0, workers: int = 0) -> Batches:
    """Seconds per `Timeline.append_many` call of `size` entries, over `batches` calls (one warm-up).

    Right after each call, the rows it stored are inserted unchanged by plain ``executemany`` into a
    file with the same schema and indexes (`eval.bench.ingest_peer`), so each call has its peer under
    the same load. Then the storage floor: the same rows inserted through a second new store in
    transactions of the same size (its anchors and digests, no redaction, embedding or hashing).
    `workers` is the timeline's (`Timeline`).
    """
    items = log_lines((batches + 1) * size, seed)
    source = directory / f"batch-{seed}-{workers}.sqlite"
    times, cpu, raw_times = [], [], []
    with SQLiteStore(source) as store, RawInserts(directory / f"batch-{seed}-{workers}-raw.sqlite") as raw:
        timeline = Timeline(store, HashingEncoder(), workers=workers)
        try:
            for b in range(batches + 1):
                chunk = items[b * size : (b + 1) * size]
                start, used = time.perf_counter(), time.process_time()
                entries = timeline.append_many(chunk)
                elapsed, spent = time.perf_counter() - start, time.process_time() - used
                inserted = raw.insert(stored_rows(source, entries[0].seq))
                if b:
                    times.append(elapsed)
                    cpu.append(spent)
                    raw_times.append(inserted)
        finally:
            timeline.close()
        rows = store.entry_rows()
    floor = []
    with SQLiteStore(directory / f"batch-{seed}-{workers}-storage.sqlite") as copy:
        for b in range(batches + 1):
            start = time.perf_counter()
            copy.insert_entry_rows(rows[b * size : (b + 1) * size])
            if b:
                floor.append(time.perf_counter() - start)
    return Batches(times, cpu, raw_times, floor)


class StoreOpening(NamedTuple):
    """Open-until-ready timings of one store."""

    total_ms: list[float]  # constructor plus first recall, per open
    constructor_ms: list[float]  # `EpisodicMemory(path)` alone
    first_recall_ms: list[float]  # the first recall after opening (lazy per-principal state)
    memory: EpisodicMemory  # the last opened memory, left open for warm recalls


def open_store(
    path: str | Path, principal: str, query: Sequence[str], n: int, *, budget_s: float = 120.0
) -> StoreOpening:
    """Open `path` with `EpisodicMemory` up to `n` times; each open ends when a first recall returned.

    Opens stop repeating once `budget_s` seconds are spent (at least one always runs), so a
    slow open is reported with fewer samples instead of stalling the run.
    """
    total: list[float] = []
    build: list[float] = []
    first: list[float] = []
    began = time.perf_counter()
    memory = _open_once(path, principal, query, total, build, first)
    for _ in range(1, n):
        if time.perf_counter() - began > budget_s:
            break
        memory.close()
        del memory  # collected before the next open
        gc.collect()
        memory = _open_once(path, principal, query, total, build, first)
    return StoreOpening(total, build, first, memory)


def _open_once(
    path: str | Path,
    principal: str,
    query: Sequence[str],
    total: list[float],
    build: list[float],
    first: list[float],
) -> EpisodicMemory:
    """Open `path` and recall `query` once; the open's milliseconds appended to `total` (both), `build`
    (the constructor) and `first` (the first recall)."""
    from memory.agent_memory import EpisodicMemory

    start = time.perf_counter()
    memory = EpisodicMemory(path, principal=principal)
    built = time.perf_counter()
    memory.recall(list(query), situation=SITUATION, k=RECALL_K)
    done = time.perf_counter()
    total.append(_ms(done - start))
    build.append(_ms(built - start))
    first.append(_ms(done - built))
    return memory


def warm_recalls(memory: EpisodicMemory, queries: Sequence[Sequence[str]], *, warmup: int = 10) -> list[float]:
    """Milliseconds per `EpisodicMemory.recall` of each query (after `warmup` untimed recalls)."""
    for query in queries[:warmup]:
        memory.recall(list(query), situation=SITUATION, k=RECALL_K)
    times = []
    for query in queries:
        start = time.perf_counter()
        memory.recall(list(query), situation=SITUATION, k=RECALL_K)
        times.append(_ms(time.perf_counter() - start))
    return times


def round_times(rounds: int, seed: int = 0) -> list[float]:
    """Milliseconds per round of a generated scenario played by the episodic agent (heuristic mode).

    A round's time runs from its first prompt to its last step: every attempt's decision
    (recall included), the environment's step and the recording of its events, as in
    `eval.runner.play` with the default (in-memory) store of ``eval.compare``.
    """
    import scenarios
    from agent.heuristic import HeuristicReasoner
    from eval.presets import PRESETS, build_agent
    from simulator import DebugEnv
    from simulator.generate import generate, to_yaml

    scenario = scenarios.loads(to_yaml(generate(rounds, seed)))
    encoder = HashingEncoder()
    agent = build_agent(PRESETS["episodic"], HeuristicReasoner(encoder), encoder)
    env = DebugEnv(scenario)
    prompt: Prompt | None = env.reset(seed=seed)[0]
    times: list[float] = []
    start = time.perf_counter()
    try:
        while prompt is not None:
            turn = agent.decide(prompt)
            step = env.step(turn.decision.choice)
            agent.observe(step.events)
            if step.round_done:
                now = time.perf_counter()
                times.append(_ms(now - start))
                start = now
            prompt = step.prompt
    finally:
        agent.close()
    return times


class CompareRun(NamedTuple):
    """One ``python -m eval.compare --quiet`` subprocess."""

    wall_s: float  # wall time from spawn to exit
    peak_rss_mb: float  # the child's own peak resident set size (wait4 rusage)
    exit_code: int  # its exit code


def compare_run(args: Sequence[str] = ("--quiet",)) -> CompareRun:
    """Run the default comparison in a fresh interpreter and measure it from outside."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "eval.compare", *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)  # this child's rusage, not every child's maximum
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode("utf-8", "replace")[-2000:]
            raise RuntimeError(f"python -m eval.compare exited with {proc.returncode}: {tail}")
    # ru_maxrss is in kilobytes on Linux, bytes on macOS
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    return CompareRun(wall, usage.ru_maxrss / scale, proc.returncode)


def peak_rss_mb() -> float:
    """This process's peak resident set size so far."""
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale
