"""Opening from state runs gives the same memory as loading every record, and as the live memory.

Runs that do not check out (altered, truncated, of other records, of another configuration)
are ignored: the records they claim to stand for are loaded the exact way.
"""

import json
import sqlite3
from contextlib import closing
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory import EpisodicMemory, RetrieverConfig, pipeline
from memory.errors import StoreError
from memory.facts.evidence import NO_CITATIONS
from memory.graph import GraphConfig
from memory.persistence import Persistence, stored_bounds
from memory.persistence import runs as snapshot
from memory.persistence.digests import hex_digests, sorted_distinct
from memory.persistence.lazy import LazySet
from memory.persistence.loader import PROBLEMS
from memory.persistence.vectors import StoredRows
from memory.timeline import SQLiteStore
from tests.builders import T0
from tests.memory.retrieval.test_retriever import synthetic_texts
from tests.memory.retrieval.test_retriever_bounds import play

QUERIES = [t for t, _ in synthetic_texts(6, seed=11)]


SMALL = Persistence(run_episodes=16, open_run_min=4)  # runs every few episodes
PRUNED = replace(RetrieverConfig(), prune_from=20)  # relevance bounds from 20 episodes on


def state(memory: EpisodicMemory):
    """Everything an open derives, as plain values (recalls included)."""
    recalls = [
        [(e.episode.id, e.score, e.why, e.chain) for e in memory.recall(q, situation="ops", k=5, principal=p).episodes]
        for q in QUERIES
        for p in ("p0", "p1")
    ]
    derived = memory.state.snapshot()  # evidence first: before anything reads every episode
    parts = {}
    for who in ("p0", "p1"):
        part = memory.index.partition(who)
        parts[who] = (
            part.matrix.tobytes(),
            part.ends.tolist(),
            part.outcomes.tolist(),
            part.situations.tolist(),
            part.position,
            [ep.id for ep in part.episodes],
            part.situation_codes,
        )
    return {"recalls": recalls, "derived": derived, "parts": parts, "projection": memory.projection()}


def exact(path, **options):
    """The state of an open that ignores every run."""
    ignore = Persistence(use_runs=False, open_run_min=10**9)
    options.setdefault("retriever", PRUNED)
    with EpisodicMemory(path, principal="p0", persistence=ignore, **options) as memory:
        assert memory.stored.covered == 0
        return state(memory)


def runs_of(path):
    with opened(path) as memory:
        return memory.store.snapshot_index(snapshot.RUN)


def raw(path, sql, *params):
    """Change the file behind the store's back (as damage would), bypassing the insert-only triggers."""
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER IF EXISTS snapshots_no_update")
    db.execute(sql, params)
    db.executescript(RESTORE_TRIGGERS)  # damage to the bytes, not to the schema (a missing trigger refuses the open)
    db.close()


RESTORE_TRIGGERS = """
CREATE TRIGGER IF NOT EXISTS snapshots_no_update BEFORE UPDATE ON snapshots
BEGIN SELECT RAISE(ABORT, 'snapshots are insert-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS snapshots_no_delete BEFORE DELETE ON snapshots
BEGIN SELECT RAISE(ABORT, 'snapshots are insert-only: DELETE refused'); END;
"""


def opened(path, **options):
    """A memory on `path` with small runs and early bounds."""
    return EpisodicMemory(path, principal="p0", persistence=SMALL, retriever=PRUNED, **options)


def test_open_from_runs_equals_the_exact_open_and_the_live_memory(tmp_path):
    path = tmp_path / "m.sqlite"
    with opened(path) as live:
        play(live, 90)
        expected = state(live)
        assert live.stored.covered > 0  # runs were written while recording
    with opened(path) as reopened:
        assert reopened.stored.covered == reopened.store.last_record()  # the open covered the rest
        assert reopened.index.partition("p0").bounds is not None  # bounds from stored projections
        assert state(reopened) == expected
    with opened(path) as again:  # from runs only
        assert not list(again.store.records_after("episode", again.stored.covered))
        assert state(again) == expected
    assert exact(path) == expected


def test_an_opened_memory_builds_its_evidence_without_reading_a_problem_vector(tmp_path, monkeypatch):
    """The evidence log needs each problem's text only: an opened store's vectors stay in the sidecar,
    also for episodes whose records were read before (the verdict columns of a run no longer serve them)."""
    path = tmp_path / "m.sqlite"
    with opened(path) as live:
        play(live, 90)
        expected = {who: list(live.state.evidence.get(who)) for who in ("p0", "p1")}
    with opened(path):
        pass  # this open covers the rest with runs
    reads = []
    original = StoredRows.read
    monkeypatch.setattr(StoredRows, "read", lambda self, rows: reads.append(len(rows)) or original(self, rows))
    with opened(path) as again:
        assert again.stored.covered == again.store.last_record()
        for episode_id in again.state.order["p0"]:
            assert again.state.episodes[episode_id] is not None  # records read: the text comes from the run
        assert {who: list(again.state.evidence.get(who)) for who in ("p0", "p1")} == expected
        assert reads == []


def test_an_evidence_log_holds_each_repeated_term_set_once(tmp_path):
    """Incidents repeat their pictures with other numbers: a principal's evidence log, built on first
    use and grown by closes, in a live memory and an opened one, holds one set per distinct terms and
    one empty citation set (a million-episode store's first decision held GBs of copies)."""
    path = tmp_path / "m.sqlite"

    def held_once(log):
        items = list(log)
        for field in ("terms", "affirmed"):
            sets = [getattr(ev, field) for ev in items]
            assert len({id(s) for s in sets}) == len(set(sets)) < len(sets)
        assert all(ev.cited is NO_CITATIONS for ev in items if not ev.cited)

    pictures = [
        "checkout latency high, pool waits climbing",
        "disk full on the log volume, not the data volume",
        "DNS lookups time out for the payments host",
    ]

    def incidents(memory, first, n):
        clock = T0 + timedelta(hours=first)
        for i in range(first, first + n):
            clock += timedelta(hours=1)
            memory.observe(
                f"{pictures[i % 3]} ({i * 37} ms)", timestamp=clock, situation="ops"
            )  # other texts, same terms
            memory.decide(
                f"Decision: fix {i % 4}", choice=f"fix-{i % 4}", timestamp=clock + timedelta(minutes=1), situation="ops"
            )
            memory.outcome("resolved", status="success", timestamp=clock + timedelta(minutes=2), situation="ops")
        memory.flush()

    with opened(path) as live:
        incidents(live, 0, 12)
        held_once(live.state.evidence.get("p0"))  # built here, on first use
        incidents(live, 12, 12)
        held_once(live.state.evidence.get("p0"))  # grown by the closes since
    with opened(path):
        pass
    with opened(path) as again:
        held_once(again.state.evidence.get("p0"))


def test_an_open_from_runs_holds_each_repeated_string_once(tmp_path, played):
    """Edge evidence repeats: a reopened memory shares those strings instead of holding a copy
    per edge (a million-episode store holds over a hundred MB of them)."""
    path = played(tmp_path / "m.sqlite", 40)
    with opened(path) as again:
        assert not list(again.store.records_after("episode", again.stored.covered))  # from runs only
        texts = [d["evidence"] for _, _, d in again.state.graph.edges(data=True)]
        assert len(set(texts)) < len(texts)
        assert len({id(t) for t in texts}) == len(set(texts))
        episode = again.episodes()[-1]
        assert again.state.prior(episode)[-1].id == again.episodes()[-2].id  # places still known


def test_runs_then_more_records_then_reopen(tmp_path, played):
    path = played(tmp_path / "m.sqlite", 40)
    with opened(path) as second:  # opened from runs, then records more
        second.observe("db pool exhausted on orders", situation="ops", principal="p1")
        second.decide("Decision: raise the pool", choice="pool", situation="ops", principal="p1")
        second.outcome("p99 back to normal", status="success", situation="ops", principal="p1")
        second.flush()
        expected = state(second)
    with opened(path) as third:
        assert state(third) == expected
    assert exact(path) == expected


@pytest.mark.parametrize("damage", ["alter", "truncate", "meta"])
def test_a_damaged_run_is_ignored_and_replaced(tmp_path, damage, played):
    path = played(tmp_path / "m.sqlite", 60)
    expected = exact(path)
    seq, _, meta = runs_of(path)[1]
    if damage == "alter":  # one byte of the vectors' digests
        offset = meta["sections"]["digests:p0"][0] + 5
        raw(
            path,
            "UPDATE snapshots SET body = CAST(substr(body, 1, ?) || x'7f' || substr(body, ?) AS BLOB) WHERE seq = ?",
            offset,
            offset + 2,
            seq,
        )
    elif damage == "truncate":
        raw(path, "UPDATE snapshots SET body = CAST(substr(body, 1, length(body) / 2) AS BLOB) WHERE seq = ?", seq)
    else:  # a run claiming another range
        raw(
            path,
            "UPDATE snapshots SET meta = replace(meta, ?, ?) WHERE seq = ?",
            f'"upto":{meta["upto"]}',
            f'"upto":{meta["upto"] - 1}',
            seq,
        )
    with opened(path) as reopened:
        assert (
            reopened.stored.covered == reopened.store.last_record()
        )  # runs written again for what the damaged one held
        assert state(reopened) == expected
    with opened(path) as again:
        assert state(again) == expected


def bounds_of(memory: EpisodicMemory, who: str = "p0") -> list[bytes]:
    bounds = memory.index.partition(who).bounds
    arrays = (
        bounds.basis,
        bounds._head[: bounds.size],
        bounds._head_lost[: bounds.size],
        bounds._tail[: bounds.size],
        bounds._tail_lost[: bounds.size],
        bounds._resid[: bounds.size],
        bounds._outside[: bounds.size],
    )
    return [a.tobytes() for a in arrays]


def vectors_read_while_opening(path, monkeypatch) -> tuple[int, list[bytes]]:
    """Rows read from the vectors sidecar by an open (no recall), and the bounds it installed."""
    read = []
    original = StoredRows.read
    monkeypatch.setattr(StoredRows, "read", lambda self, rows: read.append(len(rows)) or original(self, rows))
    with opened(path) as memory:
        found = bounds_of(memory)
    monkeypatch.undo()
    return sum(read), found


def test_rows_projected_on_a_later_basis_are_stored_once_and_read_after(tmp_path, monkeypatch):
    """The first runs of a partition are written before its basis exists. The open that projects
    their rows stores the projections; later opens read them, not the rows' vectors, and install the
    same bounds."""
    path = tmp_path / "m.sqlite"
    with opened(path) as live:
        play(live, 60)
        live.stored.write_runs(1)  # runs cover every episode: each open below installs the same rows the same way
    projected, first = vectors_read_while_opening(path, monkeypatch)
    assert projected >= SMALL.run_episodes // 2  # p0's rows of the run before its basis
    stored = {name for _, name, _ in runs_store(path).snapshot_index(stored_bounds.PROJECTIONS)}
    assert stored and all(name.startswith("p0:") or name.startswith("p1:") for name in stored)
    read, second = vectors_read_while_opening(path, monkeypatch)
    assert read == 0
    assert second == first
    assert {name for _, name, _ in runs_store(path).snapshot_index(stored_bounds.PROJECTIONS)} == stored  # nothing more


def test_damaged_stored_projections_are_ignored_and_stored_again(tmp_path, monkeypatch):
    path = tmp_path / "m.sqlite"
    with opened(path) as live:
        play(live, 60)
        live.stored.write_runs(1)
    _, first = vectors_read_while_opening(path, monkeypatch)
    seq, name, meta = runs_store(path).snapshot_index(stored_bounds.PROJECTIONS)[0]
    raw(
        path,
        "UPDATE snapshots SET body = CAST(substr(body, 1, 9) || x'7f' || substr(body, 11) AS BLOB) WHERE seq = ?",
        seq,
    )  # one byte of a projection
    read, second = vectors_read_while_opening(path, monkeypatch)
    assert read > 0 and second == first
    assert name + "+" in {n for _, n, _ in runs_store(path).snapshot_index(stored_bounds.PROJECTIONS)}
    read, third = vectors_read_while_opening(path, monkeypatch)
    assert read == 0 and third == first


def runs_store(path):
    return SQLiteStore(path)


def test_runs_of_another_store_are_ignored(tmp_path):
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    with opened(a) as memory:
        play(memory, 50)
    no_runs = Persistence(use_runs=False, open_run_min=10**9, run_episodes=10**9)
    with EpisodicMemory(b, principal="p0", persistence=no_runs, retriever=PRUNED) as memory:  # no runs of its own
        memory.observe("cache hit ratio fell to 20 percent", situation="ops", principal="p0")
        memory.outcome("recovered", status="success", situation="ops", principal="p0")
        play(memory, 30)
    expected = exact(b)
    with closing(sqlite3.connect(a)) as db:
        foreign = db.execute("SELECT kind, id, meta, body FROM snapshots WHERE kind = ?", (snapshot.RUN,)).fetchall()
    assert foreign and not runs_of_file(b)
    with runs_store(b) as store:  # stored the writer's way (sealed and anchored): only their content is foreign
        for kind, run_id, meta, body in foreign:
            store.add_snapshot(kind, run_id, json.loads(meta), body)
    with opened(b) as reopened:
        assert state(reopened) == expected


def runs_of_file(path):
    """The state runs stored in a file, read without opening a memory."""
    with closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT id FROM snapshots WHERE kind = ?", (snapshot.RUN,)).fetchall()


def test_runs_of_another_graph_configuration_are_ignored(tmp_path, played):
    path = played(tmp_path / "m.sqlite", 50)
    other = GraphConfig(retry_window_s=60.0)
    expected = exact(path, links=other, retriever=PRUNED)
    with opened(path, links=other) as reopened:
        assert state(reopened) == expected


def test_a_crash_while_writing_a_run_leaves_a_valid_store(tmp_path, monkeypatch):
    path = tmp_path / "m.sqlite"

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed while writing a run")

    with opened(path) as live:
        play(live, 10)
        monkeypatch.setattr(live.store, "add_snapshot", crash)
        with pytest.raises(KeyboardInterrupt):
            play(live, 20)
    monkeypatch.undo()
    expected = exact(path, retriever=PRUNED)
    with opened(path) as reopened:
        assert reopened.store.verify() is None
        assert state(reopened) == expected


def test_legacy_problem_snapshots_are_still_read(tmp_path, monkeypatch):
    legacy = Persistence(legacy_problem_run=16, open_run_min=10**9)
    path = tmp_path / "m.sqlite"
    with EpisodicMemory(path, principal="p0", persistence=legacy) as live:
        play(live, 40)
    expected = exact(path)
    with EpisodicMemory(path, principal="p0", persistence=legacy) as memory:  # problem snapshots as earlier versions
        ids = list(memory.state.episodes)[16:32]
        problems = [memory.state.problems[i] for i in ids]
        memory.store.add_snapshot(
            PROBLEMS,
            "16:legacy",
            {
                "start": 16,
                "episodes": ids,
                "texts": [p.text for p in problems],
                "cites": {i: memory.state.cites[i] for i in ids if i in memory.state.cites},
            },
            np.stack([p.vector for p in problems]).astype("<f4").tobytes(),
        )
        memory.store.add_snapshot(
            PROBLEMS, "32:forged", {"start": 32, "episodes": ["x"] * 16, "texts": [""] * 16, "cites": {}}, b"\0" * 16
        )
    used = []
    real = pipeline.problem_of
    monkeypatch.setattr(
        pipeline, "problem_of", lambda state, ep, entries: used.append(ep.id) or real(state, ep, entries)
    )
    with EpisodicMemory(path, principal="p0", persistence=legacy, retriever=PRUNED) as reopened:
        assert not set(used) & set(ids) and len(used) == len(reopened.state.episodes) - 16
        assert state(reopened) == expected


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    episodes=st.integers(1, 45),
    run=st.sampled_from([1, 3, 16, 64]),
    least=st.sampled_from([1, 5, 40]),
    prune=st.sampled_from([1, 10, 10**9]),
)
def test_any_run_layout_opens_to_the_exact_state(tmp_path_factory, episodes, run, least, prune):
    path = tmp_path_factory.mktemp("runs") / "m.sqlite"
    options = {
        "persistence": Persistence(run_episodes=run, open_run_min=least),
        "retriever": replace(RetrieverConfig(), prune_from=prune),
    }
    with EpisodicMemory(path, principal="p0", **options) as live:
        play(live, episodes)
        expected = state(live)
    with EpisodicMemory(path, principal="p0", **options) as reopened:
        assert state(reopened) == expected
    with EpisodicMemory(path, principal="p0", **options) as again:
        assert state(again) == expected
    assert exact(path, retriever=options["retriever"]) == expected


def test_episodes_not_read_before_closing_cannot_be_read_after(tmp_path, played):
    path = played(tmp_path / "m.sqlite", 40)
    with opened(path) as reopened:
        first = reopened.episodes("p0")  # read while open: kept
    assert reopened.episodes("p0") == first
    with pytest.raises(StoreError, match="the store is closed"):
        reopened.episodes("p1")


def test_tail_is_the_last_entries_of_a_principal_in_order(tmp_path):
    with EpisodicMemory(tmp_path / "m.sqlite", principal="p0") as memory:
        play(memory, 30)
        for who in ("p0", "p1", "nobody"):
            every = list(memory.store.entries(principal=who))
            for n in (0, 1, 7, len(every) + 5):
                assert [e.id for e in memory.store.tail(who, n)] == ([e.id for e in every[-n:]] if n else [])


HEX_IDS = st.sampled_from(
    ["00" * 32, "ab" * 31 + "00", "ff" * 32, "0f" * 31 + "10", "12" * 32, "AB" * 32, "aB" * 32]
)  # zero bytes at the end, upper case
SOME_IDS = st.one_of(
    HEX_IDS, st.text(alphabet='0123456789abcdefABCDEF ,"', min_size=60, max_size=66), st.integers(0, 3)
)


def listed(ids):
    """What a run's id section gives its loader (`Run.id_list`): digests' bytes when it can, else the ids."""
    if not all(type(i) is str for i in ids):
        return list(ids)
    found = hex_digests(json.dumps(ids, separators=(",", ":")).encode())
    return found if found is not None else list(ids)


@settings(max_examples=200, deadline=None)
@given(st.lists(SOME_IDS, max_size=6))
def test_a_run_id_section_is_read_as_digests_exactly_when_every_id_is_one(ids):
    strings = [i for i in ids if type(i) is str]
    for spaced in (False, True):
        raw = json.dumps(strings, separators=(", ", ": ") if spaced else (",", ":")).encode()
        found = hex_digests(raw)
        canonical = all(len(i) == 64 and set(i) <= set("0123456789abcdef") for i in strings)
        if found is None:
            assert not canonical or (spaced and len(strings) > 1)
        else:
            assert [d.ljust(32, b"\0").hex() for d in found.tolist()] == strings


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(SOME_IDS, max_size=6), max_size=4),
    st.lists(SOME_IDS, max_size=4),
    st.lists(SOME_IDS, max_size=4),
    st.lists(SOME_IDS, max_size=3),
)
def test_the_lazy_id_set_behaves_as_a_set_of_the_ids_given(batches, before, after, dropped):
    """Deferred batches (digests as bytes when a run can give them so), ids added before and after they load,
    and ids dropped: the same members, size and iteration as a plain set, each id as it was given."""
    ids, plain = LazySet(), set()
    for batch in batches:
        ids.defer(lambda batch=batch: listed(batch))
        plain.update(batch)
    ids.update(before)
    plain.update(before)
    assert all(i in ids for i in plain)
    assert all((i in ids) == (i in plain) for i in ("ab" * 32, "AB" * 32, "00" * 32, "ff" * 32, 1))
    ids.update(after)
    plain.update(after)
    for i in dropped:
        ids.discard(i)
        plain.discard(i)
    assert len(ids) == len(plain) and sorted(map(str, ids)) == sorted(map(str, plain))
    assert set(ids) == plain and ids - {0} == plain - {0}


@given(
    st.lists(
        st.sampled_from([bytes([a]) * 8 + bytes([b]) * 24 for a in (0, 1, 255) for b in (0, 7)])
        | st.binary(min_size=32, max_size=32),
        max_size=12,
    )
)
def test_digests_sorted_and_distinct_as_numpy_unique_gives_them(digests):
    """Heads shared or not, repeats, zero bytes at the end: the same as `np.unique`."""
    array = np.array(digests, dtype="S32")
    assert sorted_distinct(array).tolist() == np.unique(array).tolist()
