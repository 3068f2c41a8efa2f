"""What a store costs to keep: bytes per entry (and where they go), resident memory once opened.

`store_bytes` counts the store's files (the SQLite file, its WAL and the anchor sidecar);
`breakdown` splits the SQLite file by table and index with SQLite's ``dbstat`` virtual table;
`resident_after_open` opens a store in a fresh interpreter, recalls once and reports that
process's resident set (so nothing the benchmark itself holds is counted). `cached_store`
builds a store once into a folder the user names and reuses it on later runs.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple

from eval.bench.corpus import BuiltStore, build_store
from memory.retrieval.neighbour_store import SUFFIX as ANN_FOLDER

ROOT = Path(__file__).resolve().parents[2]  # the repository (cwd of the child interpreter)
STORE_FILES = ("", "-wal", "-anchor", "-vectors", ANN_FOLDER)  # suffixes of a store's files (-ann: a folder)


def store_bytes(path: Path) -> int:
    """Bytes of a store on disk: the SQLite file, its WAL (when present), the anchor and vector sidecars
    and the approximate indexes' folder."""
    return sum(_bytes_of(Path(f"{path}{suffix}")) for suffix in STORE_FILES)


def _bytes_of(path: Path) -> int:
    """Bytes of a file, or of the files in a folder (0 when missing)."""
    if path.is_dir():
        return sum(file.stat().st_size for file in path.iterdir() if file.is_file())
    return path.stat().st_size if path.exists() else 0


def copy_store(path: Path, copy: Path) -> None:
    """Copy the store at `path` (every file of `STORE_FILES` present) to `copy`."""
    for suffix in STORE_FILES:
        source = Path(f"{path}{suffix}")
        if source.is_dir():
            shutil.copytree(source, f"{copy}{suffix}", dirs_exist_ok=True)
        elif source.exists():
            shutil.copyfile(source, f"{copy}{suffix}")


def remove_store(path: Path) -> None:
    """Remove the store at `path`: its files, its ``-shm`` and its approximate indexes' folder."""
    for suffix in (*STORE_FILES, "-shm"):
        file = Path(f"{path}{suffix}")
        if file.is_dir():
            shutil.rmtree(file, ignore_errors=True)
        else:
            file.unlink(missing_ok=True)


def breakdown(path: Path) -> dict[str, int]:
    """Bytes of the SQLite file per table and index (pages, from ``dbstat``), largest first; {} without dbstat."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    except sqlite3.OperationalError:  # an SQLite built without the dbstat table
        return {}
    finally:
        db.close()
    return {name: int(size) for name, size in rows}


def footprint(path: Path, entries: int) -> dict[str, Any]:
    """Bytes on disk, bytes per entry and the per-table split of one store."""
    total = store_bytes(path)
    return {"bytes": total, "bytes_per_entry": round(total / max(entries, 1), 1), "tables": breakdown(path)}


def has_state_runs(path: Path) -> bool:
    """Whether a store holds state runs (read-only: opening a memory would write them)."""
    from memory.persistence.runs import RUN

    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:  # no such file
        return False
    try:
        return db.execute("SELECT 1 FROM snapshots WHERE kind = ? LIMIT 1", (RUN,)).fetchone() is not None
    except sqlite3.Error:  # no snapshots table yet
        return False
    finally:
        db.close()


class Resident(NamedTuple):
    """A fresh process that opened a store and recalled once."""

    rss_mb: float  # resident set after the first recall (VmRSS)
    peak_mb: float  # the process's peak resident set (VmHWM)
    open_s: float  # EpisodicMemory(path) plus the first recall


_CHILD = """
import json, logging, sys, time
from memory.agent_memory import EpisodicMemory
logging.basicConfig(level=logging.INFO, format="          %(message)s")  # a long first open shows its progress
path, principal, situation, k, query = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), json.loads(sys.argv[5])
start = time.perf_counter()
memory = EpisodicMemory(path, principal=principal)
memory.recall(query, situation=situation, k=k)
elapsed = time.perf_counter() - start
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
kb = lambda key: float(status[key].split()[0])
print(json.dumps({"rss_mb": kb("VmRSS") / 1024, "peak_mb": kb("VmHWM") / 1024, "open_s": elapsed}))
memory.close()
"""


def resident_after_open(path: Path, principal: str, query: Sequence[str], *, situation: str, k: int) -> Resident | None:
    """Open `path` in a new interpreter, recall `query` once; its memory (None where /proc is missing)."""
    if not os.path.exists("/proc/self/status"):
        return None
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), principal, situation, str(k), json.dumps(list(query))],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    if done.returncode != 0:  # its traceback went to this process's stderr
        raise RuntimeError(f"opening {path} in a child process failed (exit code {done.returncode})")
    values = json.loads(done.stdout.strip().splitlines()[-1])
    return Resident(values["rss_mb"], values["peak_mb"], values["open_s"])


class Decisions(NamedTuple):
    """The episodic agent's decisions in a fresh process that opened a copy of a store."""

    first_s: float  # the first decision (it builds what the agent reads of the whole memory)
    later_ms: list[float]  # every later decision
    peak_mb: float  # the process's peak resident set (VmHWM)


_DECIDING_CHILD = """
import json, sys, time
from datetime import datetime, timedelta
import scenarios
from agent.heuristic import HeuristicReasoner
from eval.presets import PRESETS, build_agent
from memory.timeline import HashingEncoder
from simulator import DebugEnv
from simulator.generate import generate, to_yaml
path, principal, rounds, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
encoder = HashingEncoder()
agent = build_agent(PRESETS["episodic"], HeuristicReasoner(encoder), encoder, store_path=path, principal=principal)
document = generate(rounds, seed)  # a generated scenario that starts the day after the store's last entry
last = datetime.fromisoformat(agent.memory.store.stats().last.replace("Z", "+00:00"))
document["start"] = (last + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
env = DebugEnv(scenarios.loads(to_yaml(document)))
prompt, _ = env.reset(seed=seed)
times = []
while prompt is not None:
    start = time.perf_counter()
    turn = agent.decide(prompt)
    times.append(time.perf_counter() - start)
    step = env.step(turn.decision.choice)
    agent.observe(step.events)
    prompt = step.prompt
agent.close()
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
print(json.dumps({"first_s": times[0], "later_ms": [t * 1000 for t in times[1:]],
                  "peak_mb": float(status["VmHWM"].split()[0]) / 1024}))
"""


def agent_decisions(path: Path, principal: str, rounds: int, *, seed: int, scratch: Path) -> Decisions | None:
    """Copy the store at `path` into `scratch` (the agent writes to what it opens), then, in a new
    interpreter, let the episodic agent (heuristic mode) open the copy as `principal` and play a generated
    scenario of `rounds` rounds after the store's last entry; None where /proc is missing."""
    if not os.path.exists("/proc/self/status"):
        return None
    copy = scratch / f"agent-{path.name}"
    try:
        copy_store(path, copy)
        done = subprocess.run(
            [sys.executable, "-c", _DECIDING_CHILD, str(copy), principal, str(rounds), str(seed)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            check=False,
        )
    finally:
        remove_store(copy)
    if done.returncode != 0:  # its traceback went to this process's stderr
        raise RuntimeError(
            f"the episodic agent on a copy of {path} failed in a child process (exit code {done.returncode})"
        )
    values = json.loads(done.stdout.strip().splitlines()[-1])
    return Decisions(values["first_s"], values["later_ms"], values["peak_mb"])


def cached_store(
    directory: Path, episodes: int, *, seed: int, cache: bool, progress: Callable[[str], None] = lambda message: None
) -> tuple[BuiltStore, bool]:
    """A bench store of `episodes` episodes in `directory`, and whether it was reused.

    With `cache`, a store built before (same size and seed, by this code's schema) is reused
    as it is, state runs included; otherwise one is built, and kept when `cache` is set.
    """
    path = directory / f"store-{episodes}-seed{seed}.sqlite"
    card = Path(f"{path}.json")
    if cache and path.exists() and card.exists():
        try:
            saved = json.loads(card.read_text(encoding="utf-8"))
            return BuiltStore(**{**saved, "path": path}), True
        except (ValueError, TypeError):
            pass
    remove_store(path)
    card.unlink(missing_ok=True)
    progress(f"building a store of {episodes:,} episodes" + (f" (kept in {directory})" if cache else ""))
    built = build_store(path, episodes, seed=seed, progress=progress)
    if cache:
        card.write_text(json.dumps({**asdict(built), "path": str(path)}), encoding="utf-8")
    return built, False
