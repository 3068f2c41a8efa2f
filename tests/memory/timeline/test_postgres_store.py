"""`PostgresStore` against a real server started here: SQLite's semantics, server-enforced invariants,
one chain under concurrent writer processes, and the harness and CLI on a ``postgresql://`` URL."""

import itertools
import multiprocessing
from datetime import timedelta

import pytest

from tests.builders import INCIDENTS, T0, play_incidents
from tests.pg_server import LocalServer

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed: pip install -e '.[postgres]'")

from memory import EpisodicMemory  # noqa: E402
from memory.errors import ImmutableRecordError, ImportFailed, IntegrityError, StoreError  # noqa: E402
from memory.timeline import HashingEncoder, RecordKind, SQLiteStore, Timeline, open_store  # noqa: E402
from memory.timeline.postgres import PostgresStore, grant_writer  # noqa: E402

_names = itertools.count()


_running: dict[str, LocalServer] = {}


def running_server() -> LocalServer:
    """The one server of this test process, started on first use; the test modules on PostgreSQL share it
    (their session-scoped `server` fixtures), so it starts once per worker. Skips, with
    `LocalServer.find`'s reason, when none can start here."""
    if "server" not in _running:
        bindir, user, reason = LocalServer.find()
        if bindir is None:
            pytest.skip(reason)
        local = LocalServer(bindir, user)
        local.start()
        _running["server"] = local
    return _running["server"]


def stop_server() -> None:
    """Stop the process's server, if one runs (the first session fixture torn down does it)."""
    if (local := _running.pop("server", None)) is not None:
        local.stop()


@pytest.fixture(scope="session")
def server():
    yield running_server()
    stop_server()


@pytest.fixture
def url(server):
    """A fresh, empty database on the session's server."""
    name = f"store{next(_names)}"
    server.admin(f"CREATE DATABASE {name}")
    return server.url(name)


def _fill(store):
    """The same entries, records and snapshot written into any store; what was appended."""
    timeline = Timeline(store, HashingEncoder(dim=64))
    entries = [
        timeline.append(
            f"orders p99 at {i} s; pool exhausted",
            kind="observation",
            role="environment",
            situation="incident",
            principal=f"team-{i % 2}",
            timestamp=T0 + timedelta(minutes=i),
            metadata={"service": "orders", "n": i},
        )
        for i in range(6)
    ]
    store.add_records(RecordKind.EPISODE, [("ep1", {"entries": [e.id for e in entries[:3]]}), ("ep2", {"x": 1})])
    store.add_records(RecordKind.EDGE, [("e1", {"from": "ep1", "to": "ep2"})])
    store.add_snapshot("vectors", "run1", {"upto": 2}, b"\x00\x01binary\xff")
    return entries


def _contents(store):
    kinds = (RecordKind.EPISODE, RecordKind.EDGE)
    return (
        [(e.id, e.seq, e.text, e.metadata, e.embedding.tolist()) for e in store.entries()],
        {k: list(store.records(k)) for k in kinds},
        list(store.snapshots("vectors")),
        store.record_rows(0, store.last_record()),
        store.record_rows(0, store.last_record(), bodies=("edge",)),
        store.record_rows(1, store.last_record(), bodies=()),
        store.stats()._replace(first=None, last=None),
        [e.id for e in store.tail("team-1", 2)],
        store.principals(),
    )


def test_the_server_store_holds_what_sqlite_holds_with_the_same_ids(url, tmp_path):
    with PostgresStore(url) as server, SQLiteStore(tmp_path / "m.sqlite") as local:
        assert [e.id for e in _fill(server)] == [e.id for e in _fill(local)]
        assert _contents(server) == _contents(local)
        ids = [e.id for e in local.entries()]
        assert [e.id for e in server.get_many(ids[::-1])] == ids[::-1]
        assert server.entry_parts(ids[:2]).keys() == local.entry_parts(ids[:2]).keys()
        assert server.get(ids[3]).timestamp == local.get(ids[3]).timestamp
        assert server.record(RecordKind.EPISODE, "ep2") == {"x": 1} and server.record_at(3) == local.record_at(3)
        assert server.snapshot_body(server.snapshot_index("vectors")[0][0]) == b"\x00\x01binary\xff"
        assert server.add_records(RecordKind.EDGE, [("e1", {"from": "ep1", "to": "ep2"})]) == 0
        with pytest.raises(IntegrityError):
            server.add_records(RecordKind.EDGE, [("e1", {"from": "ep2"})])
        assert not server.add_snapshot("vectors", "run1", {}, b"other")
        assert server.verify() is None and len(server) == 6
        decided = [
            Timeline(store, HashingEncoder(dim=64))
            .append(
                "chose pool",
                kind="decision",
                role="agent",
                situation="incident",
                principal="team-0",
                timestamp=T0 + timedelta(hours=1),
                metadata={"attempt": 1, "favoured": {"prior": "pool"}},
            )
            .seq
            for store in (server, local)
        ]
        assert decided[0] == decided[1]
        assert (
            server.decisions_between("team-0", 0, decided[0])
            == local.decisions_between("team-0", 0, decided[0])
            == [(decided[0], {"attempt": 1, "favoured": {"prior": "pool"}})]
        )
        assert server.decisions_between("team-1", 0, decided[0]) == []


def test_update_delete_and_truncate_are_refused_by_the_server(server, url):
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with PostgresStore(url) as owner:
        _fill(owner)
    with psycopg.connect(url, autocommit=True) as raw:  # the tables' owner (here the superuser)
        for statement in ("UPDATE timeline SET text = 'x'", "DELETE FROM records", "TRUNCATE snapshots"):
            with pytest.raises(psycopg.errors.RestrictViolation, match="insert-only"):
                raw.execute(statement)
    server.admin(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'agent') "
        "THEN CREATE ROLE agent LOGIN; END IF; END $$"
    )
    grant_writer(url, "agent", principals=["default"])
    app_url = server.url(name, user="agent")
    with PostgresStore(app_url, create=False) as app:
        Timeline(app, HashingEncoder(dim=64)).append(
            "an agent may append", kind="note", role="user", situation="s", timestamp=T0
        )
        assert app.add_records(RecordKind.MARK, [("m1", {"episode": "ep1"})]) == 1
        with psycopg.connect(app_url, autocommit=True) as raw:
            for statement in (
                "UPDATE timeline SET text = 'x'",
                "DELETE FROM timeline",
                "UPDATE records SET body = ''",
                "DELETE FROM snapshots",
                "TRUNCATE records",
                "DROP TABLE timeline",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    raw.execute(statement)
        assert app.verify() is None and len(app) == 7


def _writer(url, principal, rounds, barrier, results):
    """One agent process: play incidents on the shared store, wait for the others, compare with rebuild()."""
    with EpisodicMemory(url, principal=principal, encoder=HashingEncoder(dim=64)) as memory:
        for day in range(rounds):
            play_incidents(memory, start=T0 + timedelta(days=day * len(INCIDENTS)))
        barrier.wait(timeout=120)
        memory.recall()  # picks up what the others appended after this process's last entry
        projection = memory.projection()
        results.put((principal, projection == memory.rebuild(), len(projection.episodes)))


def test_concurrent_writer_processes_keep_one_chain_and_each_projection_equals_rebuild(url):
    processes, rounds = 4, 3
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(processes), context.Queue()
    workers = [
        context.Process(target=_writer, args=(url, f"agent-{i}", rounds, barrier, results), daemon=True)
        for i in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        outcomes = sorted(results.get(timeout=120) for _ in workers)
    finally:
        barrier.abort()  # a worker that failed leaves the others waiting
        for worker in workers:
            worker.join(timeout=30)
    with PostgresStore(url, create=False) as store:
        entries = list(store.entries())
        assert [e.seq for e in entries] == list(range(len(entries)))  # linear: no gap, no fork
        per_agent = {p: sum(e.principal == p for e in entries) for p in store.principals()}
        assert store.verify() is None
    assert len(set(per_agent.values())) == 1 and len(per_agent) == processes and len(entries) > 100, per_agent
    assert [ok for _, ok, _ in outcomes] == [True] * processes, outcomes
    assert len({count for _, _, count in outcomes}) == 1 and outcomes[0][2] > 0, outcomes


def test_a_memory_on_a_url_reopens_with_what_it_learned(url):
    with EpisodicMemory(url, principal="p", encoder=HashingEncoder(dim=64)) as memory:
        play_incidents(memory)
        memory.flush()
        before = memory.projection()
    with EpisodicMemory(url, principal="p", encoder=HashingEncoder(dim=64)) as reopened:
        assert reopened.projection() == before == reopened.rebuild()
        assert reopened.recall("spool queue stuck").episodes


def test_compare_on_the_server_store_gives_the_sqlite_run_log(url, tmp_path):
    from eval import runlog
    from eval.compare import main
    from tests.eval.test_parallel import _timeless

    logs = []
    for name, store in (("sqlite", str(tmp_path / "m.sqlite")), ("server", url)):
        path = tmp_path / f"{name}.json"
        assert (
            main(
                [
                    "pool-vs-deploy",
                    "--seeds",
                    "1",
                    "--agents",
                    "episodic",
                    "--store",
                    store,
                    "--json",
                    str(path),
                    "--quiet",
                ],
                now=lambda: T0,
            )
            == 0
        )
        logs.append(_timeless(runlog.read(path)))
    assert logs[0] == logs[1] and logs[0]["agents"]["episodic"]["rounds"]


def test_export_then_import_moves_a_store_to_the_server_and_back(url, tmp_path, capsys):
    from memory.__main__ import main

    local = tmp_path / "m.sqlite"
    with SQLiteStore(local) as store:
        _fill(store)
    assert main(["export", str(local), str(tmp_path / "out.jsonl")]) == 0
    assert main(["import", str(tmp_path / "out.jsonl"), url]) == 0
    assert main(["verify", url]) == 0
    assert main(["export", url, str(tmp_path / "back.jsonl")]) == 0
    assert (tmp_path / "back.jsonl").read_bytes() == (tmp_path / "out.jsonl").read_bytes()
    capsys.readouterr()
    assert main(["import", str(tmp_path / "out.jsonl"), url]) == 2  # does not continue the server's chain
    assert "already holds 6 entries" in capsys.readouterr().err  # a store is imported into only when new
    with open_store(url, create=False) as store:
        assert len(store) == 6
        with pytest.raises(ImportFailed):
            store.import_jsonl(tmp_path / "out.jsonl")


def test_a_wrong_url_is_a_message_not_a_traceback(server, capsys):
    from memory.__main__ import main

    assert main(["stats", server.url("no_such_database")]) == 2
    assert "cannot connect" in capsys.readouterr().err


@pytest.mark.extra("mcp")
def test_the_mcp_server_serves_a_store_named_by_url(url, monkeypatch):
    from memory.mcp import __main__ as cli
    from memory.mcp import server as mcp_server

    served = {}

    class Stub:
        def run(self, transport, **options):
            memory = served["memory"]
            memory.observe("orders p99 at 4 s; pool exhausted", situation="incident", timestamp=T0)
            served["transport"], served["entries"] = transport, len(memory.store)

    def build(memory, **options):
        served["memory"] = memory
        return Stub()

    monkeypatch.setattr(mcp_server, "build_server", build)
    assert cli.main(["--store", url, "--principal", "team-a"]) == 0
    assert served["transport"] == "stdio" and served["entries"] == 1
    assert type(served["memory"].store).__name__ == "PostgresStore"
    with open_store(url, create=False) as store:
        assert [e.principal for e in store.entries()] == ["team-a"]


def test_forgetting_on_the_server_store(server, url):
    secret = "payroll export for Ingrid Vasquez"
    server.admin(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'agent') "
        "THEN CREATE ROLE agent LOGIN; END IF; END $$"
    )
    app_url = server.url(psycopg.conninfo.conninfo_to_dict(url)["dbname"], user="agent")
    with EpisodicMemory(url, principal="p", encoder=HashingEncoder(dim=64)) as memory:
        grant_writer(url, "agent", principals=["p"])  # before the first erasure
        play_incidents(memory)
        entry = memory.observe(secret, timestamp=T0 + timedelta(days=2), situation="support")
        play_incidents(memory, start=T0 + timedelta(days=3))
        memory.flush()
        done = memory.forget(entry_id=entry.id, reason="request", requested_by="dpo")
        assert done.entries == 1 and done.purged  # the owner's VACUUM FULL ran
        assert memory.projection() == memory.rebuild()
        assert memory.store.verify() is None
        other = memory.observe("another note", timestamp=T0 + timedelta(days=9), situation="support")
    with EpisodicMemory(app_url, principal="p", encoder=HashingEncoder(dim=64)) as app:
        assert app.store.verify() is None  # the application role reads the erasure listing
        with pytest.raises(ImmutableRecordError):  # but may not erase
            app.forget(entry_id=other.id)
    with psycopg.connect(url, autocommit=True) as conn:
        for table, column in (("timeline", "text"), ("records", "body")):
            assert conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {column} LIKE '%%Ingrid%%'").fetchone()[0] == 0
        with pytest.raises(psycopg.errors.RestrictViolation):
            conn.execute("UPDATE timeline SET text = 'x' WHERE seq = 0")
        conn.execute("ALTER TABLE timeline DISABLE TRIGGER timeline_no_change")
        conn.execute(
            "UPDATE timeline SET text = '', situation = '', metadata = '{}', encoder = '', "
            "embedding = ''::bytea WHERE seq = 1"
        )  # emptied without an erasure record
    with open_store(url, create=False) as store:
        brk = store.verify()
        assert brk is not None and brk.seq == 1 and "content does not match" in brk.reason


def test_a_flush_point_stored_before_a_crash_is_applied_when_the_server_store_reopens(url):
    from tests.memory.test_agent_memory import check_flush_point_survives_a_crash

    check_flush_point_survives_a_crash(url)


def test_a_memory_opened_between_a_flush_point_and_its_episodes_closes_them_there_on_the_server(url):
    from tests.memory.timeline.test_shared_writers import check_open_between_a_flush_point_and_its_episodes

    check_open_between_a_flush_point_and_its_episodes(url)


def test_a_flush_while_others_write_keeps_projections_equal_on_the_server(url):
    from tests.memory.timeline.test_shared_writers import check_writers

    check_writers(url)


def test_the_bench_reports_the_server_store_beside_sqlite(server, tmp_path):
    from eval.bench import server as bench_server
    from tests.eval.test_bench import TINY

    section = bench_server.measure_server(TINY, tmp_path, server.url(), lambda message: None)
    for kind in ("sqlite", "postgresql"):
        figures = section[kind]
        assert figures["append_ms"]["n"] == TINY.durable and figures["append_batch_per_s"]["n"] == TINY.batches
        assert figures["recall_ms"]["n"] == TINY.queries and figures["recall_ms"]["median"] > 0
    assert section["episodes"] == 30
    assert "PostgreSQL p50" in str(bench_server.table(section).columns[3].header)
    with psycopg.connect(server.url(), autocommit=True) as conn:  # the bench dropped its databases
        assert not conn.execute("SELECT 1 FROM pg_database WHERE datname LIKE 'memory_bench_%'").fetchall()


def test_the_bench_says_why_it_skips_the_server(monkeypatch, tmp_path):
    from eval.bench import server as bench_server
    from tests.eval.test_bench import TINY

    monkeypatch.setattr(bench_server.LocalServer, "find", staticmethod(lambda: (None, None, "no binaries here")))
    assert bench_server.measure_server(TINY, tmp_path, None, print) == {"skipped": "no binaries here"}
    assert bench_server.measure_server(TINY, tmp_path, "off", print) == {"skipped": "--server off"}
    assert "skipped — no binaries here" in bench_server.table({"skipped": "no binaries here"})


def test_projections_of_runs_before_a_basis_are_stored_on_the_server_and_read_back(url):
    from memory.persistence import stored_bounds
    from tests.memory.persistence.test_open_snapshot import PRUNED, SMALL, bounds_of
    from tests.memory.retrieval.test_retriever_bounds import play

    def opened():
        return EpisodicMemory(url, principal="p0", persistence=SMALL, retriever=PRUNED)

    with opened() as live:
        play(live, 60)
        live.stored.write_runs(1)
    with opened() as first:
        projected = list(first.store.snapshot_index(stored_bounds.PROJECTIONS))
        installed = bounds_of(first)
    assert projected  # the first runs preceded the basis: their projections were stored
    with opened() as second:
        assert second.store.snapshot_index(stored_bounds.PROJECTIONS) == projected  # read, not stored again
        assert bounds_of(second) == installed


def test_a_store_that_lost_its_tail_opens_read_only_for_inspection_and_export(url, tmp_path, capsys):
    from memory.__main__ import main

    with PostgresStore(url) as store:
        entries = _fill(store)
    with psycopg.connect(url, autocommit=True) as raw:  # the owner deletes the last entry, triggers disabled
        raw.execute("ALTER TABLE timeline DISABLE TRIGGER USER")
        raw.execute("DELETE FROM timeline WHERE seq = (SELECT MAX(seq) FROM timeline)")
        raw.execute("ALTER TABLE timeline ENABLE TRIGGER USER")
    with pytest.raises(StoreError, match="tail was lost"):
        PostgresStore(url)
    with PostgresStore(url, read_only=True) as store:
        assert [e.id for e in store.entries()] == [e.id for e in entries[:-1]]
        with pytest.raises(StoreError, match="opened read-only"):
            store.add_records(RecordKind.EDGE, [("e9", {"from": "a", "to": "b"})])
    out = tmp_path / "rescued.jsonl"
    assert main(["export", url, str(out)]) == 0 and len(out.read_text().splitlines()) == len(entries) - 1
    assert main(["stats", url]) == 0
    capsys.readouterr()
    assert main(["verify", url]) == 1 and "the tail was lost" in capsys.readouterr().out
