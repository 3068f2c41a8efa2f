"""State runs keep their episodes' vectors in the store's ``-vectors`` sidecar and recall reads
them on demand: an open memory holds none of them, and a damaged, missing or older-format
sidecar never changes what the memory recalls."""

import json
import logging
import os
import sqlite3

import numpy as np

from memory.persistence import runs as snapshot
from memory.persistence.vectors import DIGEST_BYTES, StoredRows, VectorFile, row_checksums, row_digests
from tests.test_open_snapshot import exact, opened, runs_of, state
from tests.test_retriever_bounds import play


def stored_metas(path) -> list[dict]:
    """The stored runs' metas, read without opening a memory (which writes runs)."""
    db = sqlite3.connect(path)
    try:
        return [json.loads(m) for (m,) in db.execute("SELECT meta FROM snapshots WHERE kind = ?", (snapshot.RUN,))]
    finally:
        db.close()


def assert_reopens_from_the_sidecar(path, expected) -> None:
    """A later open reads every row of p0 from the sidecar (or a format 1 run) and gives `expected`."""
    with opened(path) as again:
        assert again.index.partition("p0").stored == len(again.index.partition("p0"))
        assert state(again) == expected


def sidecar(path) -> str:
    return f"{path}-vectors"


def test_runs_point_into_the_sidecar_and_an_open_memory_holds_no_stored_vector(tmp_path):
    path = tmp_path / "m.sqlite"
    with opened(path) as live:
        play(live, 60)
        held_live = {who: live.index.partition(who).stored for who in ("p0", "p1")}
        first = live.index.partition("p0").episodes[0].id
        assert live.state.problems.unread(first)  # released with its row: no copy of the vector is kept...
        assert type(live.index.partition("p0").episodes).__name__ == "EpisodeList"  # nor its rows' episodes
        assert np.array_equal(live.problem(first).vector, live.index.partition("p0").vectors(np.array([0]))[0])
        expected = state(live)
    assert all(n > 0 for n in held_live.values())  # rows written to runs were released while recording
    metas = [meta for _, _, meta in runs_of(path)]
    assert metas and all(meta["format"] == 2 and not any(n.startswith("vectors:") for n in meta["sections"])
                         for meta in metas)
    rows = sum(int(k) for meta in metas for k in meta["rows"].values())
    assert os.path.getsize(sidecar(path)) == rows * 1024 * 4  # one float32 row per episode of a run, nothing else
    with opened(path) as reopened:
        for who in ("p0", "p1"):
            part = reopened.index.partition(who)
            assert part.stored == len(part)  # every row is read from the sidecar
            assert isinstance(part.source, StoredRows) and part.source.resident_bytes() == 0
            assert part.held_bytes <= 16 * 1024 * 4  # room for a few new rows, nothing more
        assert state(reopened) == expected
    assert exact(path) == expected
    with opened(path) as more:
        play(more, 3)  # new episodes after the stored ones: held here, and only they
        part = more.index.partition("p0")
        assert part.stored < len(part) and part.held_bytes <= 16 * 1024 * 4


def test_a_damaged_sidecar_row_is_recomputed_from_the_entries(tmp_path, caplog):
    path = tmp_path / "m.sqlite"
    with opened(path) as live:
        play(live, 60)
    expected = exact(path)
    with open(sidecar(path), "r+b") as f:  # one float of the third row
        f.seek(2 * 4096 + 40)
        f.write(b"\x7f\x7f\x7f\x7f")
    with caplog.at_level(logging.WARNING, logger="memory.persistence.vectors"), opened(path) as reopened:
        assert state(reopened) == expected
    assert any("does not match its checksum" in r.getMessage() for r in caplog.records)


def test_a_missing_sidecar_makes_its_runs_unusable_and_they_are_written_again(tmp_path):
    path = tmp_path / "m.sqlite"
    with opened(path) as live:
        play(live, 60)
    expected = exact(path)
    before = len(runs_of(path))
    os.remove(sidecar(path))
    with opened(path) as reopened:  # loaded the exact way...
        assert state(reopened) == expected
    assert len(runs_of(path)) == 2 * before  # ...and its runs written again, with a new sidecar
    assert os.path.getsize(sidecar(path)) > 0
    assert_reopens_from_the_sidecar(path, expected)


def test_runs_of_the_first_format_are_still_read(tmp_path):
    path = tmp_path / "m.sqlite"
    with opened(path) as live:
        live.stored.sidecar = None  # write runs the way earlier versions did: vectors in the body
        play(live, 60)
        expected = state(live)
    assert {meta["format"] for meta in stored_metas(path)} == {1}
    assert not os.path.exists(sidecar(path))
    with opened(path) as reopened:  # runs of both formats from now on: the rest is written to the sidecar
        assert reopened.stored.covered == reopened.store.last_record()
        assert state(reopened) == expected
    assert {meta["format"] for meta in stored_metas(path)} == {1, 2}
    assert_reopens_from_the_sidecar(path, expected)


def test_forgetting_a_principal_leaves_none_of_its_vectors_in_the_sidecar(tmp_path):
    path = tmp_path / "m.sqlite"
    with opened(path) as live:
        play(live, 60)
        gone = live.index.partition("p1").matrix.copy()
        kept = live.index.partition("p0").matrix.copy()
    with opened(path) as memory:
        memory.forget(principal="p1")
    rows = np.fromfile(sidecar(path), dtype="<f4").reshape(-1, 1024) if os.path.exists(sidecar(path)) else np.zeros((0, 1024))
    stored = {r.tobytes() for r in rows}
    assert not any(r.tobytes() in stored for r in gone)
    assert sum(r.tobytes() in stored for r in kept) > 0  # the other principal's runs were written again


def test_vector_file_appends_after_a_torn_row_and_reads_past_the_end_as_nan(tmp_path):
    file = VectorFile(str(tmp_path / "v"), dim=4)
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    assert file.append(a) == 0
    with open(file.path, "ab") as f:
        f.write(b"\1\2\3")  # a row cut short by a crash
    assert file.append(a + 10) == 3  # the torn row is skipped, not overwritten
    got = file.read(np.array([1, 3, 4, 9]))
    assert np.array_equal(got[:3], np.stack([a[1], a[0] + 10, a[1] + 10]))
    assert np.isnan(got[3]).all()


def test_stored_rows_read_across_segments_in_the_order_asked(tmp_path):
    file = VectorFile(str(tmp_path / "v"), dim=3)
    rng = np.random.default_rng(0)
    held, on_disk = rng.random((4, 3), dtype=np.float32), rng.random((5, 3), dtype=np.float32)
    rows = StoredRows(3)
    rows.add_array(held)
    rows.add_file(file, file.append(on_disk), row_checksums(on_disk))
    every = np.concatenate([held, on_disk])
    order = np.array([8, 0, 4, 3, 5, 8])
    assert len(rows) == 9 and np.array_equal(rows.read(order), every[order])
    assert row_digests(on_disk).shape == (5, DIGEST_BYTES)


def test_a_failing_row_without_a_way_to_recompute_it_is_an_error(tmp_path):
    file = VectorFile(str(tmp_path / "v"), dim=2)
    data = np.ones((2, 2), dtype=np.float32)
    rows = StoredRows(2)
    rows.add_file(file, file.append(data), row_checksums(data + 1))
    try:
        rows.read(np.array([1]))
    except ValueError as exc:
        assert "checksum" in str(exc)
    else:
        raise AssertionError("a row that fails its checksum was returned")


def test_verify_notes_sidecar_rows_that_fail_their_digest_without_calling_the_store_corrupt(tmp_path, capsys):
    from memory.__main__ import main

    path = tmp_path / "m.sqlite"
    with opened(path) as live:
        play(live, 60)
    assert main(["verify", str(path)]) == 0
    assert "vectors sidecar" not in capsys.readouterr().out
    with open(sidecar(path), "r+b") as f:  # two rows: one altered, one cut off at the end
        f.seek(4096 + 8)
        f.write(b"\x01\x02\x03\x04")
        f.truncate(os.path.getsize(sidecar(path)) - 100)
    assert main(["verify", str(path)]) == 0  # derived data: recomputed on read, not corruption
    out = capsys.readouterr().out
    assert "vectors sidecar: 2 of the" in out and "OK" in out


def test_concurrent_appends_each_get_the_rows_they_wrote(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    path = str(tmp_path / "v")
    blocks = [np.full((3 + n % 4, 8), float(n), dtype=np.float32) for n in range(40)]

    def write(block):  # a VectorFile of its own per writer, as separate processes have
        return VectorFile(path, dim=8).append(block)

    with ThreadPoolExecutor(8) as pool:
        firsts = list(pool.map(write, blocks))
    reader = VectorFile(path, dim=8)
    for first, block in zip(firsts, blocks):
        assert np.array_equal(reader.read(first + np.arange(len(block))), block)
    assert reader.rows() == sum(len(b) for b in blocks)


def test_a_sidecar_that_cannot_be_written_leaves_the_vectors_in_the_runs(tmp_path, caplog):
    path = tmp_path / "m.sqlite"
    os.mkdir(sidecar(path))  # a directory where the sidecar should be: appending to it fails
    with caplog.at_level(logging.WARNING, logger="memory.persistence.loader"), opened(path) as live:
        play(live, 60)  # recording goes on
        expected = state(live)
    assert any("cannot write the vectors sidecar" in r.getMessage() for r in caplog.records)
    assert {meta["format"] for meta in stored_metas(path)} == {1}
    os.rmdir(sidecar(path))
    with opened(path) as reopened:
        assert state(reopened) == expected


def test_an_unreadable_sidecar_reads_as_rows_that_fail_their_checksum(tmp_path):
    path = str(tmp_path / "v")
    os.mkdir(path)  # open() works on a directory; reading from it does not
    assert np.isnan(VectorFile(path, dim=4).read(np.array([0, 3]))).all()


def test_an_exact_open_stores_runs_as_it_goes_and_equals_the_live_memory(tmp_path, monkeypatch):
    from memory import EpisodicMemory
    from memory.persistence import Persistence
    from memory.persistence.loader import StoredState
    from tests.test_open_snapshot import PRUNED

    path = tmp_path / "m.sqlite"
    with EpisodicMemory(path, principal="p0", retriever=PRUNED,
                        persistence=Persistence(run_episodes=10**6, open_run_min=10**6)) as live:
        play(live, 60)  # no runs while recording
        expected = state(live)
    assert not stored_metas(path)
    covered_before_open_ended = []
    finish = StoredState.opened
    monkeypatch.setattr(StoredState, "opened", lambda self: (covered_before_open_ended.append(self.covered),
                                                             finish(self))[1])
    with opened(path) as reopened:  # run_episodes=16: the 30 episodes of each principal fill runs while indexing
        assert state(reopened) == expected
    assert covered_before_open_ended[0] > 0
    assert len(stored_metas(path)) >= 3
    assert_reopens_from_the_sidecar(path, expected)


def test_a_partition_without_bounds_holds_its_vectors_instead_of_reading_them_on_every_recall(tmp_path, monkeypatch):
    from memory import EpisodicMemory, RetrieverConfig
    from memory.persistence import Persistence
    from tests.test_open_snapshot import QUERIES, SMALL

    path = tmp_path / "m.sqlite"
    unpruned = RetrieverConfig()  # bounds from 4,096 episodes on: these partitions are scored in full
    with EpisodicMemory(path, principal="p0", persistence=SMALL, retriever=unpruned) as live:
        play(live, 60)
        assert live.index.partition("p0").stored == 0 and isinstance(live.index.partition("p0").spare, StoredRows)
    with EpisodicMemory(path, principal="p0", persistence=SMALL, retriever=unpruned) as reopened:
        assert reopened.stored.covered == reopened.store.last_record()  # runs cover every record now
    reads = []
    original = VectorFile.read
    monkeypatch.setattr(VectorFile, "read", lambda self, rows: (reads.append(len(rows)), original(self, rows))[1])
    with EpisodicMemory(path, principal="p0", persistence=SMALL, retriever=unpruned) as reopened:
        part = reopened.index.partition("p0")
        assert part.stored == 0 and len(part.spare) == len(part)  # read once while opening, held since
        opened_reads = len(reads)
        after = [[(e.episode.id, e.score) for e in reopened.recall(q, situation="ops", k=5).episodes] for q in QUERIES]
        assert len(reads) == opened_reads  # recall read nothing from the sidecar
    exact_way = Persistence(use_runs=False, open_run_min=10**9)
    with EpisodicMemory(path, principal="p0", persistence=exact_way, retriever=unpruned) as exact_memory:
        assert after == [[(e.episode.id, e.score) for e in exact_memory.recall(q, situation="ops", k=5).episodes]
                         for q in QUERIES]
