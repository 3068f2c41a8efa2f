"""``python -m eval.bench.retention``: a retention policy applied to a large store, checked end to end.

It builds a store of print-server incidents (observations naming a unique host, a decision, its
outcome, and after a wrong guess a correction and the right decision), keeps the newest entries
with `RetentionPolicy(max_entries=..., keep_lessons=False)`, and checks what the policy promises:
none of the expired texts is left in any file of the store, `verify` passes, and recall and facts
equal those of a store built from the kept entries alone. Reported: the time of the retention, the
files' size before and after, and each check.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory import EpisodicMemory
from memory.retention import RetentionPolicy
from memory.timeline import HashingEncoder, NoRedaction, SQLiteStore, Timeline, audit

ENCODER = HashingEncoder(dim=64)
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
# (observations, truth, first guess, what the correction says after a wrong guess)
PROBLEMS = [
    (
        ("spool directory full on {host}", "jobs stuck in the spool queue of {host}"),
        "spool",
        "driver",
        "the jobs were stuck in the spool queue",
    ),
    (("print jobs stuck on {host}, spool partition at 100%",), "spool", "spool", ""),
    (
        ("garbled output on {host} after the driver update", "driver version changed on {host}"),
        "driver",
        "spool",
        "the driver update garbled the output",
    ),
    (("new driver package on {host}, pages print garbled",), "driver", "driver", ""),
]
QUERIES = ["spool queue stuck", "garbled pages after a driver update", "print server disk full"]


def incident(n: int, start: datetime) -> list[dict[str, Any]]:
    """The entries (as `Timeline.append_many` items) of incident `n`: observations naming a unique host, a
    decision, an outcome, and after a wrong guess a correction and the right decision."""
    observations, truth, guess, said = PROBLEMS[n % len(PROBLEMS)]
    host, clock, items = f"prn-{n:05d}", start, []

    def add(kind: str, role: str, text: str, **metadata: Any) -> None:
        nonlocal clock
        clock += timedelta(minutes=3)
        items.append(
            dict(
                text=text,
                kind=kind,
                role=role,
                timestamp=clock,
                situation="support",
                principal="team-a",
                metadata={"service": "print", **metadata},
            )
        )

    for text in observations:
        add("observation", "environment", text.format(host=host))
    for choice in [guess] if guess == truth else [guess, truth]:
        add("decision", "agent", f"Decision: {choice} on {host}", choice=choice, retrieved=[], relied_on=[])
        ok = choice == truth
        add(
            "outcome",
            "environment",
            f"{host}: fixed" if ok else f"{host}: still broken",
            status="success" if ok else "failure",
        )
        if not ok:
            add("correction", "user", f"Not {choice} on {host}: {said}")
    return items


def items(incidents: int, first: int = 0) -> list[dict[str, Any]]:
    """Items of `incidents` incidents numbered from `first`, one every 12 hours (5 entries an incident)."""
    return [item for n in range(first, first + incidents) for item in incident(n, START + timedelta(hours=12 * n))]


def build(path: Path, entries: Sequence[dict[str, Any]]) -> None:
    """A store holding `entries` (appended in one batch), opened once through the facade (which learns from
    them) and flushed; closed."""
    store = SQLiteStore(path)
    Timeline(store, ENCODER, redactor=NoRedaction()).append_many(entries)
    store.close()
    with memory_of(path) as memory:
        memory.flush()


def memory_of(path: Path) -> EpisodicMemory:
    """The memory these stores are read with: team-a's, the encoder they were written with, no redaction."""
    return EpisodicMemory(path, principal="team-a", encoder=ENCODER, redactor=NoRedaction())


def files_of(path: Path) -> bytes:
    """Every byte of a store file and its sidecars (-wal, -anchor, ...)."""
    return b"".join(p.read_bytes() for p in sorted(path.parent.iterdir()) if p.name.startswith(path.name))


def recalled(memory: EpisodicMemory) -> list[str]:
    """Rendered recall for `QUERIES`, episode ids left out (they hash entry ids, which hash the chain)."""
    return [re.sub(r"\[[0-9a-f]{64}\]", "[…]", memory.recall(q, k=5).render(max_chars=100_000)) for q in QUERIES]


def facts(memory: EpisodicMemory) -> list[tuple[Any, ...]]:
    """Every fact, retired ones too, as what a store built from other entries could equal."""
    return sorted(
        (f.condition, f.conclusion, len(f.support), len(f.contradict), f.status)
        for f in memory.facts(include_retired=True)
    )


def run(folder: Path, entries: int, keep: int) -> dict[str, Any]:
    """Build, retain, check; the figures."""
    played = items(-(-entries // 5))[:entries]
    path = folder / "policy" / "m.sqlite"
    path.parent.mkdir(parents=True)
    build(path, played)
    before = len(files_of(path))
    with memory_of(path) as memory:
        started = time.perf_counter()
        done = memory.retain(RetentionPolicy(max_entries=keep, keep_lessons=False))
        seconds = time.perf_counter() - started
        equal_rebuild = memory.projection() == memory.rebuild()
        answers, learned = recalled(memory), facts(memory)
    kept = played[len(played) - keep :]
    gone = {item["text"] for item in played[: len(played) - keep]} - {item["text"] for item in kept}
    stored = files_of(path)
    left = sum(text.encode() in stored for text in gone)
    report = audit(path)
    alone = folder / "alone" / "m.sqlite"
    alone.parent.mkdir()
    build(alone, kept)
    with memory_of(alone) as memory:
        same_recall, same_facts = recalled(memory) == answers, facts(memory) == learned
    return {
        "entries": len(played),
        "erased": done.entries,
        "retain_s": round(seconds, 2),
        "files_mb_before": round(before / 1e6, 2),
        "files_mb_after": round(len(stored) / 1e6, 2),
        "expired_texts": len(gone),
        "expired_texts_left": left,
        "verify_findings": len(report.findings),
        "projection_equals_rebuild": equal_rebuild,
        "recall_equals_kept_alone": same_recall,
        "facts_equal_kept_alone": same_facts,
        "facts": len(learned),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; 0 when every check holds, 1 when one does not, 2 on a usage error."""
    parser = argparse.ArgumentParser(prog="python -m eval.bench.retention", description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000, help="entries in the store (default 10000)")
    parser.add_argument("--keep", type=int, default=3_000, help="newest entries the policy keeps (default 3000)")
    args = parser.parse_args(argv)
    if not 0 < args.keep < args.entries:
        print(f"error: --keep must be between 1 and --entries - 1, not {args.keep}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        figures = run(Path(folder), args.entries, args.keep)
    print(" ".join(f"{key}={value}" for key, value in figures.items()))
    ok = (
        figures["expired_texts_left"] == 0
        and figures["verify_findings"] == 0
        and figures["projection_equals_rebuild"]
        and figures["recall_equals_kept_alone"]
        and figures["facts_equal_kept_alone"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
