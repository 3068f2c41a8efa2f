"""The anchor written before and after every commit: a writer stopped at any point leaves a store that
opens and verifies, and the store never gets past its anchor without a finding."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from memory.errors import StoreError
from memory.timeline import HashingEncoder, SQLiteStore, Timeline, audit
from memory.timeline import anchor as anchor_file
from tests.builders import T0

ROOT = Path(__file__).resolve().parents[3]


def _append(store: SQLiteStore, n: int, start: int = 0) -> None:
    timeline = Timeline(store, HashingEncoder(dim=64))
    for i in range(start, start + n):
        timeline.append(
            f"disk {i} full", kind="observation", role="environment", situation="s", timestamp=T0 + timedelta(minutes=i)
        )


class Stop(BaseException):
    """What a process killed at that point leaves: nothing after it runs (not caught as an error)."""


@pytest.mark.parametrize("stop_at", ["pending", "committed"])
def test_a_writer_stopped_between_its_anchor_writes_leaves_a_store_that_opens_and_verifies(tmp_path, stop_at):
    path = tmp_path / "m.sqlite"
    with SQLiteStore(path) as store:
        _append(store, 3)
    real = anchor_file.Writer.write

    def write(self, anchor, *, pending, keep=None):
        if not pending and stop_at == "committed":
            raise Stop  # after COMMIT, before the confirmation
        real(self, anchor, pending=pending, keep=keep)
        if pending and stop_at == "pending":
            raise Stop  # after the pending write, before COMMIT

    with SQLiteStore(path) as store:
        anchor_file.Writer.write = write  # type: ignore[method-assign]
        try:
            with pytest.raises(Stop):
                _append(store, 1, start=3)
        finally:
            anchor_file.Writer.write = real  # type: ignore[method-assign]
    read = anchor_file.read(str(path))
    assert read.exact and [p.entries for p in read.pending] == [4] and read.anchor.entries == 3
    assert audit(path).findings == []
    with SQLiteStore(path) as store:
        assert len(store) == (3 if stop_at == "pending" else 4)  # the commit happened or it did not
        _append(store, 2, start=10)
    assert audit(path).findings == [] and audit(path).entries == len(SQLiteStore(path, read_only=True))


@pytest.mark.parametrize(
    "stops",
    [
        ("pending",) * 4,
        ("committed",) * 4,
        ("pending", "committed", "pending", "committed", "pending"),
        ("committed", "pending", "pending", "committed", "committed", "pending"),
    ],
)
def test_many_writers_stopped_in_a_row_never_leave_a_store_its_anchor_disowns(tmp_path, stops):
    """Every cut-short write leaves a slot the store equals: the state it was in (kept while a pending
    write goes out) or the one it committed (kept while its confirmation goes out)."""
    path = tmp_path / "m.sqlite"
    with SQLiteStore(path) as store:
        _append(store, 2)
    real = anchor_file.Writer.write
    for n, stop_at in enumerate(stops):

        def write(self, anchor, *, pending, keep=None, stop_at=stop_at):
            if not pending and stop_at == "committed":
                raise Stop
            real(self, anchor, pending=pending, keep=keep)
            if pending and stop_at == "pending":
                raise Stop

        with SQLiteStore(path) as store:  # opens: no refusal after any of the stops before
            anchor_file.Writer.write = write  # type: ignore[method-assign]
            try:
                with pytest.raises(Stop):
                    _append(store, 1, start=10 + n)
            finally:
                anchor_file.Writer.write = real  # type: ignore[method-assign]
        assert audit(path).findings == [], (n, stops)
    with SQLiteStore(path) as store:
        _append(store, 1, start=100)
    assert audit(path).findings == [] and audit(path).entries == 3 + stops.count("committed")


WRITER = """
import sys
from datetime import datetime, timedelta, timezone
from memory.timeline import HashingEncoder, SQLiteStore, Timeline
store = SQLiteStore(sys.argv[1])
timeline = Timeline(store, HashingEncoder(dim=64))
print("ready", flush=True)
t = datetime(2026, 1, 1, tzinfo=timezone.utc)
i = 0
while True:
    timeline.append(f"queue {i} backed up", kind="observation", role="environment", situation="s",
                    timestamp=t + timedelta(seconds=i))
    store.add_records("edge", [(f"e{i}", {"n": i})])
    i += 1
"""


def test_writers_killed_at_random_moments_leave_stores_that_open_and_verify(tmp_path):
    path = tmp_path / "m.sqlite"
    delays = [0.004 + 0.017 * k for k in range(4)]  # spread over the steps of the writes (about 1-2 ms each)
    for delay in delays:
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=ROOT, stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        report = audit(path)
        assert report.findings == [], (delay, report.findings)
        with SQLiteStore(path) as store:  # opens (no refusal) and takes a write
            store.add_records("edge", [(f"after-{delay}", {"ok": True})])
    assert audit(path).findings == [] and audit(path).entries > 0


def test_verify_while_writers_append_sees_one_snapshot_and_no_finding(tmp_path):
    """verify reads the file while other processes write: every check sees the same snapshot, taken with
    the anchor between two writes (a record committed between reading the digests and the records was
    once reported as not covered by the digest chain)."""
    path = tmp_path / "m.sqlite"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=ROOT, stdout=subprocess.PIPE) for _ in range(2)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        while not Path(anchor_file.sidecar(str(path))).exists():  # until the first write (else: a note, no anchor)
            time.sleep(0.005)
        reports = [audit(path)]
        deadline = time.monotonic() + 30  # a loaded machine may let the writers fall behind
        while len(reports) < 10 or (reports[-1].entries == reports[0].entries and time.monotonic() < deadline):
            time.sleep(0.01)
            reports.append(audit(path))
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert [(r.findings, r.notes) for r in reports if r.findings or r.notes] == []
    assert reports[-1].entries > reports[0].entries  # the writers wrote meanwhile


def test_a_writer_opened_before_a_forgery_refuses_to_anchor_it(tmp_path):
    """A row inserted with plain SQL, digest and all, while a writer holds the store open: that writer's next
    write refuses (the open's check is behind it), so no honest write ever anchors the forgery."""
    import sqlite3

    path = tmp_path / "m.sqlite"
    with SQLiteStore(path) as writer, SQLiteStore(path) as other:
        _append(writer, 2)
        other.add_records("edge", [("e1", {"n": 1})])  # another honest writer: no refusal
        _append(writer, 1, start=5)
        with sqlite3.connect(path, isolation_level=None) as db:  # forged after both opened, digest and all
            body = db.execute("SELECT body FROM records ORDER BY seq DESC LIMIT 1").fetchone()[0]
            last = db.execute("SELECT digest FROM digests WHERE tbl = 'records' ORDER BY seq DESC LIMIT 1").fetchone()
            seq = db.execute("INSERT INTO records (kind, id, body) VALUES ('edge', 'forged', ?)", (body,)).lastrowid
            digest = anchor_file.row_digest(last[0].hex(), ("edge", "forged", body))
            db.execute("INSERT INTO digests (tbl, seq, digest) VALUES ('records', ?, ?)", (seq, bytes.fromhex(digest)))
        for store in (writer, other):
            with pytest.raises(StoreError, match="not a state its anchor records .*refusing to write"):
                _append(store, 1, start=9)
    findings = audit(path).findings
    assert any("kind=edge id=forged: digested rows past the anchored digest" in line for line in findings), findings


def test_a_write_keeps_the_slots_the_store_may_equal():
    """A writer killed during its COMMIT can leave its transaction in the WAL unseen by the live processes
    (SQLite recovers it later): a live writer that sees the state before must not overwrite that pending
    state, nor the last copy of the state it sees. Found by killing two writers at random moments."""
    state = [anchor_file.Anchor(n, f"{n:064x}", {"records": (n, "0" * 64)}) for n in range(4)]
    pending, committed = (lambda a, c: anchor_file.Slot(a, c, True)), (lambda a, c: anchor_file.Slot(a, c, False))
    # the state seen (1) twice, as pending and confirmed; a later pending (2) whose COMMIT may have happened
    assert anchor_file._target([pending(state[1], 7), committed(state[1], 8), pending(state[2], 9)], state[1]) == 0
    # a normal write: the oldest slot; a torn slot first
    assert anchor_file._target([pending(state[1], 7), committed(state[1], 8), committed(state[0], 6)], state[1]) == 2
    assert anchor_file._target([None, committed(state[1], 8), pending(state[1], 7)], state[1]) == 0
    # the confirmation keeps its own pending state and any other unconfirmed one
    slots = [pending(state[2], 9), committed(state[1], 8), pending(state[3], 10)]
    assert anchor_file._target(slots, state[3]) == 1


def _state(path: Path) -> anchor_file.Anchor:
    """The state the store file holds, as its writer anchors it (read in one snapshot, nothing written)."""
    import sqlite3

    from memory.timeline.integrity import seal

    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("BEGIN")
        try:
            return seal(db, chain=False)
        finally:
            db.execute("ROLLBACK")


def test_every_write_anchors_the_state_it_commits(tmp_path):
    """An append anchors the head it chained without reading the state again: after appends, batches and
    derived records in turn, the newest committed slot is the state the file holds, and no slot is pending."""
    path = tmp_path / "m.sqlite"
    with SQLiteStore(path) as store:
        timeline = Timeline(store, HashingEncoder(dim=64))
        for step in range(6):
            if step % 3 == 1:
                store.add_records("edge", [(f"e{step}", {"n": step})])
            elif step % 3 == 2:
                timeline.append_many([{**_item(i), "text": f"batch {step} {i}"} for i in range(3)])
            else:
                timeline.append(**_item(step))
            found = anchor_file.read(str(path))
            assert found.anchor == _state(path) and found.pending == [], step
    assert audit(path).findings == []


def _item(i: int) -> dict[str, object]:
    return {
        "text": f"disk {i} full",
        "kind": "observation",
        "role": "environment",
        "situation": "s",
        "timestamp": T0 + timedelta(minutes=i),
    }


def test_an_append_chains_the_derived_rows_of_a_store_written_before_digests(tmp_path):
    """The first write to a store written before digests chains its derived rows, an append as any other."""
    import sqlite3

    path = tmp_path / "m.sqlite"
    with SQLiteStore(path) as store:
        _append(store, 2)
        store.add_records("edge", [("e1", {"n": 1}), ("e2", {"n": 2})])
    with sqlite3.connect(path, isolation_level=None) as db:  # as a store of a release without digests
        db.execute("DROP TABLE digests")
    Path(anchor_file.sidecar(str(path))).unlink()
    assert any("not digest-chained yet" in note for note in audit(path).notes)
    with SQLiteStore(path) as store:
        _append(store, 1, start=5)
    report = audit(path)
    assert report.findings == [] and not any("not digest-chained yet" in note for note in report.notes), report
    assert _state(path).derived["records"][0] == 2 and anchor_file.read(str(path)).anchor == _state(path)
