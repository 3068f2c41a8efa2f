"""Building a memory from a seeded stream gives the same memory, release after release.

A faster write path must not change what it writes: the bench's builder
(`eval.bench.corpus.build_store`) and the facade (`EpisodicMemory.record`) each build a memory
from the bench's seeded incident stream, and a digest of its episodes, edges, marks and fact
versions (every version, lessons included, in order) must equal the one recorded in
``tests/golden/build-identity.json``. Regenerate the file only for an intended change of
behaviour: ``python -m tests.memory.test_build_identity --write``.
"""

from __future__ import annotations

import gc
import hashlib
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from eval.bench.corpus import PRINCIPALS, build_store, incident_stream
from memory.agent_memory import EpisodicMemory
from memory.timeline import RecordKind, SQLiteStore

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "build-identity.json"
BUILT = {"episodes": 290, "seed": 11}  # enough for the larger team to fill the graph rules' window (200)
RECORDED = {"episodes": 120, "seed": 4}
TWO_TEAMS = (("team-core", 0.8), ("team-data", 0.2))  # principals of the built store
ONE_TEAM = (("team-core", 1.0),)  # one principal: its closes read a full window sooner


def _digest(bodies: Iterable[Any]) -> dict[str, Any]:
    """How many bodies and the SHA-256 of their canonical JSON lines, in order."""
    sha, count = hashlib.sha256(), 0
    for body in bodies:
        sha.update(json.dumps(body, sort_keys=True, ensure_ascii=False, default=str).encode() + b"\n")
        count += 1
    return {"count": count, "sha256": sha.hexdigest()}


def built_digests(folder: Path, *, parallel: bool = False) -> dict[str, Any]:
    """Digests of the derived records `build_store` writes, per kind, in storing order."""
    built = build_store(
        folder / "built.sqlite",
        BUILT["episodes"],
        seed=BUILT["seed"],
        batch=300,
        principals=TWO_TEAMS,
        parallel=parallel,
    )
    with SQLiteStore(built.path, create=False) as store:
        digests = {
            kind.value: _digest([record_id, body] for record_id, body in store.records(kind))
            for kind in (RecordKind.EPISODE, RecordKind.EDGE, RecordKind.MARK, RecordKind.FACT, RecordKind.FLUSH)
        }
    return {"stream": BUILT, "principals": built.principals, "records": digests}


def recorded_digests(principals: tuple[tuple[str, float], ...] = PRINCIPALS) -> dict[str, Any]:
    """Digests of what the facade's projection holds after recording the stream entry by entry."""
    memory = EpisodicMemory(None)
    try:
        made, stream = 0, incident_stream(RECORDED["seed"], principals=principals)
        while made < RECORDED["episodes"]:
            count, block = next(stream)
            if made + count > RECORDED["episodes"]:
                continue
            made += count
            for item in block:
                memory.record(
                    item["text"],
                    kind=item["kind"],
                    role=item["role"],
                    timestamp=item["timestamp"],
                    situation=item["situation"],
                    metadata=item["metadata"],
                    principal=item["principal"],
                )
        memory.flush()
        projection = memory.projection()
        return {
            "stream": {**RECORDED, "principals": [name for name, _ in principals]},
            "episodes": _digest(e.to_record() for e in projection.episodes),
            "edges": _digest(e.to_record() for e in projection.edges),
            "facts": _digest(f.to_record() for f in projection.facts),
            "lessons": sum(1 for f in projection.facts if f.kind == "lesson"),
        }
    finally:
        memory.close()


def _golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.mark.parametrize("parallel", [False, True], ids=["one process", "with a worker process"])
def test_the_bench_builder_writes_the_recorded_memory(tmp_path, parallel):
    assert built_digests(tmp_path, parallel=parallel) == _golden()["built"]


def test_recording_the_stream_through_the_facade_learns_the_recorded_memory():
    recorded = recorded_digests(ONE_TEAM)
    assert recorded["lessons"] > 0 and recorded["edges"]["count"] > 0  # the stream exercises every layer
    assert recorded == _golden()["recorded"]


def test_a_build_leaves_the_cycle_collector_as_it_found_it(tmp_path):
    frozen, enabled = gc.get_freeze_count(), gc.isenabled()
    build_store(tmp_path / "small.sqlite", 12, seed=3, batch=20, parallel=True)
    assert (gc.get_freeze_count(), gc.isenabled()) == (frozen, enabled)


def main(argv: list[str] | None = None) -> int:
    """Print the digests; with ``--write``, store them as the golden file."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        found = {"built": built_digests(Path(folder)), "recorded": recorded_digests(ONE_TEAM)}
    text = json.dumps(found, indent=2, sort_keys=True) + "\n"
    if "--write" in (sys.argv[1:] if argv is None else argv):
        GOLDEN.write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
