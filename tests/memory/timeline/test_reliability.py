"""Reliability under hostile input: each case replays a failure an adversarial pass found.

Validation at the boundary, tenant isolation of every read path, a `verify` that is
read-only and sees every tampering, atomic creation, clean CLI errors, bounded scenario
loading. The corpus of hostile files is in tests/hostile/.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.__main__ import main as cli
from memory.agent_memory import EpisodicMemory
from memory.errors import IntegrityError, InvalidEntry, StoreError
from memory.timeline import SQLiteStore, audit
from tests.builders import INCIDENTS, T0
from tests.builders import play_incidents as play

UTC = UTC
ROOT = Path(__file__).resolve().parents[3]


# -- validation at the boundary ------------------------------------------------------------


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"timestamp": datetime.min.replace(tzinfo=UTC)}, "outside years 1970..9998"),
        ({"timestamp": datetime.max.replace(tzinfo=UTC)}, "outside years"),
        ({"timestamp": datetime(2026, 1, 1)}, "has no timezone"),
        ({"timestamp": "2026-01-01"}, "timestamp must be a datetime"),
        ({"situation": 5}, "situation must be a non-empty str, not int"),
        ({"situation": ""}, "situation must be a non-empty str"),
        ({"principal": 7}, "principal must be a non-empty str, not int"),
        ({"principal": ""}, "principal must be a non-empty str, not ''"),
        ({"metadata": {"x": math.nan}}, "metadata.x: nan is not a finite number"),
        ({"metadata": {"x": math.inf}}, "not a finite number"),
        ({"metadata": {1: "a"}}, "key 1 is not a str"),
        ({"metadata": {"x": object()}}, "object is not a JSON value"),
        ({"metadata": {"x": "\udc80"}}, "UTF-8 cannot encode"),
        ({"metadata": [1, 2]}, "metadata must be a mapping"),
        ({"metadata": {"x": 10**30}}, "does not fit in 64 bits"),
    ],
)
def test_bad_fields_are_refused_and_the_store_stays_usable(tmp_path, fields, message):
    path = tmp_path / "m.db"
    with EpisodicMemory(path) as memory:
        with pytest.raises(InvalidEntry, match=message):
            memory.observe("x", **fields)
        memory.observe("still fine")
    with EpisodicMemory(path) as memory:  # reopens: nothing unreadable was stored
        assert [e.text for e in memory.recent(5)] == ["still fine"]
        assert memory.store.verify() is None


def test_deeply_nested_metadata_and_bad_text_are_refused():
    deep: dict = {}
    node = deep
    for _ in range(5000):
        node["a"] = {}
        node = node["a"]
    with EpisodicMemory() as memory:
        with pytest.raises(InvalidEntry, match="nested deeper than 32 levels"):
            memory.observe("x", metadata=deep)
        with pytest.raises(InvalidEntry, match="text must be a str, not bytes"):
            memory.observe(b"x")
        with pytest.raises(InvalidEntry, match="UTF-8 cannot encode"):
            memory.observe("bad \ud800 surrogate")


def test_a_ten_megabyte_observation_is_refused_before_encoding():
    with EpisodicMemory() as memory:
        with pytest.raises(InvalidEntry, match="text of 10,000,000 characters exceeds the limit of 1,000,000"):
            memory.observe("x" * 10_000_000)
        assert len(memory.store) == 0


def test_an_empty_principal_is_an_error_not_the_default_tenant():
    with pytest.raises(InvalidEntry, match="principal must be a non-empty str"):
        EpisodicMemory(principal="")
    with EpisodicMemory(principal="team-a") as memory:
        memory.observe("a")
        for call in (
            lambda: memory.recent(principal=""),
            lambda: memory.recall("a", principal=""),
            lambda: memory.episodes(""),
            lambda: memory.facts(""),
            lambda: memory.edges(""),
        ):
            with pytest.raises(InvalidEntry):
                call()


# -- tenant isolation ------------------------------------------------------------------------


def _two_tenants() -> EpisodicMemory:
    memory = EpisodicMemory(principal="team-a")
    play(memory, INCIDENTS[:3], principal="team-a")
    play(memory, INCIDENTS[3:], principal="team-b", start=T0 + timedelta(days=30))
    memory.flush()
    return memory


def _leaks(
    memory: EpisodicMemory, reader: str, other_ids: set[str], other_facts: set[str], other_texts: set[str]
) -> list[str]:
    """What of another tenant's a memory whose principal is `reader` answers on every public read path."""
    found: list[str] = []
    graph = memory.graph
    found += [n for n in graph if n in other_ids]
    found += [f"{u}->{v}" for u, v in graph.edges() if u in other_ids or v in other_ids]
    found += [str(d) for _, d in graph.nodes(data=True) if any(t and t in str(d) for t in other_texts)]
    for episode_id in other_ids:
        for answer in (memory.episode(episode_id), memory.problem(episode_id), memory.resolution(episode_id)):
            if answer is not None:
                found.append(f"{episode_id}: {answer}")
    for fact_id in other_facts:
        found += [v.id for v in memory.fact_history(fact_id)]
    found += [e.id for e in memory.episodes() if e.id in other_ids]
    found += [e.source for e in memory.edges() if e.source in other_ids or e.target in other_ids]
    found += [f.id for f in memory.facts(include_retired=True) if f.fact_id in other_facts]
    found += [e.id for e in memory.recent(200) if e.principal != reader]
    context = memory.recall("spool jobs stuck, driver garbled printer queue", k=20)
    found += [i for i in context.item_ids() if i in other_ids or i.split("@")[0] in other_facts]
    return found


def test_no_read_path_answers_for_another_tenant():
    with _two_tenants() as memory:
        for reader, other in (("team-a", "team-b"), ("team-b", "team-a")):
            memory.principal = reader
            theirs = memory.episodes(other)
            assert theirs
            texts = {e.text for e in memory.store.entries(principal=other) if len(e.text) > 12}
            facts = {f.fact_id for f in memory.facts(other, include_retired=True)}
            assert _leaks(memory, reader, {e.id for e in theirs}, facts, texts) == []
            assert memory.episode(theirs[0].id, principal=other) == theirs[0]  # explicit principal answers


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, len(INCIDENTS) - 1)), min_size=2, max_size=8)
)
def test_random_tenant_interleavings_never_leak(plan):
    with EpisodicMemory(principal="a") as memory:
        for index, (who, incident) in enumerate(plan):
            play(memory, INCIDENTS[incident : incident + 1], principal=who, start=T0 + timedelta(days=3 * index))
        memory.flush()
        tenants = {who for who, _ in plan}
        for reader in tenants:
            memory.principal = reader
            for other in tenants - {reader}:
                ids = {e.id for e in memory.episodes(other)}
                facts = {f.fact_id for f in memory.facts(other, include_retired=True)}
                assert _leaks(memory, reader, ids, facts, set()) == []


# -- verify: read-only, complete, clean on any damage ------------------------------------------


def _store(path, count=6, *, episodes=False):
    """A store with `count` entries (and closed episodes when asked); its entry ids."""
    with EpisodicMemory(path, principal="p") as memory:
        if episodes:
            play(memory, INCIDENTS[:2], principal="p")
            memory.flush()
        for i in range(count):
            memory.observe(f"entry {i}", timestamp=T0 + timedelta(minutes=i), situation="s")
        return [e.id for e in memory.store.entries()]


def _raw(path, *statements):
    db = sqlite3.connect(path)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()


def test_verify_on_an_empty_or_foreign_file_writes_nothing(tmp_path, capsys):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    assert cli(["verify", str(empty)]) == 1
    assert "the file is empty: not a memory store" in capsys.readouterr().out
    assert empty.read_bytes() == b""
    foreign = tmp_path / "foreign.db"
    _raw(foreign, "CREATE TABLE t (x)")
    before = foreign.read_bytes()
    assert cli(["verify", str(foreign)]) == 1
    assert "not a memory store" in capsys.readouterr().out
    assert foreign.read_bytes() == before


def test_verify_is_read_only_on_a_store(tmp_path):
    path = tmp_path / "m.db"
    _store(path)

    def contents():  # SQLite's read-only open may leave an empty -wal and an -shm index: no data
        return {
            p.name: p.read_bytes()
            for p in tmp_path.iterdir()
            if not p.name.endswith("-shm") and not (p.name.endswith("-wal") and not p.stat().st_size)
        }

    before = contents()
    assert cli(["verify", str(path)]) == 0
    assert contents() == before


def test_an_episode_outcome_rewritten_with_triggers_dropped_is_seen(tmp_path, capsys):
    from memory.timeline import record_body

    path = tmp_path / "m.db"
    _store(path, episodes=True)
    db = sqlite3.connect(path)
    rewritten = [
        (record_body.pack(text.replace('"outcome":"FAILURE"', '"outcome":"SUCCESS"')), seq)
        for seq, stored in db.execute("SELECT seq, body FROM records WHERE kind = 'episode'")
        if '"outcome":"FAILURE"' in (text := record_body.unpack(stored))
    ]
    db.close()
    assert rewritten  # a body as this version stores it, decompressed, edited and compressed again
    _raw(path, "DROP TRIGGER records_no_update")
    db = sqlite3.connect(path)
    db.executemany("UPDATE records SET body = ? WHERE seq = ?", rewritten)
    db.commit()
    db.close()
    _raw(path, "CREATE TRIGGER records_no_update BEFORE UPDATE ON records BEGIN SELECT RAISE(ABORT, 'refused'); END")
    assert cli(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert "kind=episode" in out and "content does not match its digest" in out


def test_a_damaged_record_body_is_reported_by_verify_and_refused_by_name_on_read(tmp_path, capsys):
    path = tmp_path / "m.db"
    _store(path, episodes=True)
    _raw(
        path,
        "DROP TRIGGER records_no_update",
        "UPDATE records SET body = substr(body, 1, length(body) - 8) WHERE kind = 'episode'",
        "CREATE TRIGGER records_no_update BEFORE UPDATE ON records BEGIN SELECT RAISE(ABORT, 'refused'); END",
    )
    assert cli(["verify", str(path)]) == 1
    assert "content does not match its digest" in capsys.readouterr().out
    with SQLiteStore(path) as store, pytest.raises(IntegrityError, match="record body is damaged"):
        list(store.records("episode"))


def test_a_dropped_trigger_is_reported_and_the_store_refuses_to_open(tmp_path, capsys):
    path = tmp_path / "m.db"
    _store(path)
    _raw(path, "DROP TRIGGER timeline_no_delete")
    assert cli(["verify", str(path)]) == 1
    assert "refusal trigger timeline_no_delete is missing" in capsys.readouterr().out
    with pytest.raises(StoreError, match="tampered with: trigger.s. timeline_no_delete missing"):
        EpisodicMemory(path)


def test_deleting_the_last_rows_is_seen(tmp_path, capsys):
    path = tmp_path / "m.db"
    _store(path)
    _raw(
        path,
        "DROP TRIGGER timeline_no_delete",
        "DELETE FROM timeline WHERE seq >= 4",
        "CREATE TRIGGER timeline_no_delete BEFORE DELETE ON timeline BEGIN SELECT RAISE(ABORT, 'refused'); END",
    )
    assert cli(["verify", str(path)]) == 1
    assert "timeline: 4 entries, the anchor records 6: the tail was lost" in capsys.readouterr().out
    with pytest.raises(StoreError, match="4 entries, the anchor records 6: the tail was lost"):
        SQLiteStore(path)


def test_deleting_the_wal_after_a_crash_is_seen(tmp_path, capsys):
    path = tmp_path / "m.db"
    _store(path, count=3)  # closed: checkpointed into the main file
    code = (
        "import sys, os; from datetime import datetime, timezone; from memory import EpisodicMemory\n"
        "m = EpisodicMemory(sys.argv[1])\n"
        "[m.observe(f'entry {i}', timestamp=datetime(2026, 1, 1, tzinfo=timezone.utc)) for i in range(5)]\n"
        "os._exit(0)  # no close: the commits are in the -wal only\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, cwd=ROOT)
    wal = Path(f"{path}-wal")
    assert wal.exists() and wal.stat().st_size
    wal.unlink()
    Path(f"{path}-shm").unlink(missing_ok=True)
    assert cli(["verify", str(path)]) == 1
    assert "timeline: 3 entries, the anchor records 8: the tail was lost" in capsys.readouterr().out


def test_random_byte_overwrites_never_print_a_traceback_or_intact(tmp_path, capsys):
    path = tmp_path / "m.db"
    _store(path, count=40, episodes=True)
    pristine = path.read_bytes()
    rng = random.Random(19)
    intact = 0
    for trial in range(60):
        damaged = bytearray(pristine)
        start = rng.randrange(len(damaged) - 64)
        damaged[start : start + rng.choice((1, 8, 64))] = rng.randbytes(64)[: rng.choice((1, 8, 64))]
        target = tmp_path / f"d{trial}.db"
        target.write_bytes(bytes(damaged))
        shutil.copy(f"{path}-anchor", f"{target}-anchor")
        code = cli(["verify", str(target)])  # an exception here fails the test: no traceback path
        assert code in (0, 1)
        out = capsys.readouterr().out
        if code == 0:  # an overwrite that changed nothing SQLite or the chains read (e.g. free space)
            intact += 1
            check = sqlite3.connect(target).execute("PRAGMA integrity_check").fetchone()[0]
            assert check == "ok" and "chain intact" in out
    assert intact < 60


def test_three_processes_creating_one_store_all_succeed(tmp_path):
    path = tmp_path / "new.db"
    code = (
        "import sys; from datetime import datetime, timezone; from memory import EpisodicMemory\n"
        "for i in range(4):\n"
        "    with EpisodicMemory(sys.argv[1]) as m:\n"
        "        m.observe('hello', timestamp=datetime(2026, 1, 1, tzinfo=timezone.utc))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=ROOT, stderr=subprocess.PIPE) for _ in range(3)
    ]
    errors = [p.communicate()[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    assert audit(path).findings == [] and audit(path).entries == 12


def test_a_kill_during_creation_leaves_a_store_the_next_open_accepts(tmp_path):
    path = tmp_path / "new.db"
    db = sqlite3.connect(path, isolation_level=None)  # what a creator killed mid-transaction leaves behind
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("BEGIN IMMEDIATE")
    db.execute("CREATE TABLE timeline (x)")
    db.close()  # closing without COMMIT rolls back, as a killed process's transaction is
    with SQLiteStore(path) as store:
        assert len(store) == 0
    code = (
        "import sys, os, signal; from memory.timeline import connection\n"
        "real = connection._statements\n"
        "def dying(script):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "connection._statements = dying\n"
        "connection.open_database(sys.argv[1], create=True, synchronous='FULL')\n"
    )
    other = tmp_path / "killed.db"
    proc = subprocess.run([sys.executable, "-c", code, str(other)], cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL
    with SQLiteStore(other) as store:
        assert len(store) == 0 and store.verify() is None


def test_a_lock_held_too_long_is_a_clear_store_error(tmp_path):
    path = tmp_path / "m.db"
    _store(path, count=1)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with SQLiteStore(path, lock_timeout=0.2) as store:
            with pytest.raises(StoreError, match="locked by another writer .waited 0.2 s"):
                store.add_records("edge", [("x", {"w": 1})])
    finally:
        holder.execute("ROLLBACK")
        holder.close()


# -- hostile inputs to the command lines ----------------------------------------------------------

HOSTILE = Path(__file__).resolve().parents[2] / "hostile"
RUN = {"cwd": ROOT, "capture_output": True, "text": True, "timeout": 60}


def _bad_rounds(count: int) -> str:
    rounds = "".join(
        f"  - {{id: r{i}, kind: incident, service: s, observations: [o], truth: a, caused_by: nope{i}}}\n"
        for i in range(count)
    )
    return "schema: 1\nname: many-bad\nroot_causes:\n  a: {description: x, signals: [y]}\nrounds:\n" + rounds


@pytest.fixture(scope="module")
def hostile_scenarios(tmp_path_factory):
    """Every hostile scenario file: the committed corpus plus those too large to keep."""
    made = tmp_path_factory.mktemp("hostile")
    (made / "nesting_50000.yaml").write_text("schema: 1\nname: x\nrounds: " + "[" * 50000 + "]" * 50000 + "\n")
    (made / "bad_rounds_2000.yaml").write_text(_bad_rounds(2000))  # 20,000 behave alike, ten times slower to parse
    fifo = made / "fifo.yaml"
    os.mkfifo(fifo)
    files = sorted(HOSTILE.glob("*.yaml")) + sorted(made.glob("*.yaml"))
    return [str(p) for p in files] + ["/dev/zero"]


def test_hostile_scenarios_give_bounded_errors_in_one_process(hostile_scenarios):
    import scenarios
    from scenarios.schema import ScenarioError

    for ref in hostile_scenarios:
        with pytest.raises(ScenarioError) as caught:
            scenarios.load(ref)
        lines = str(caught.value).splitlines()
        assert 1 <= len(lines) <= 201, ref
        assert sum(map(len, lines)) < 200_000, ref
    messages = {}
    for ref in hostile_scenarios:
        try:
            scenarios.load(ref)
        except ScenarioError as exc:
            messages[Path(ref).name] = str(exc)
    assert "nesting deeper than 64 levels" in messages["nesting_50000.yaml"]
    assert "not a regular file" in messages["fifo.yaml"] and "not a regular file" in messages["zero"]
    assert "too long a duration" in messages["huge_duration.yaml"]
    assert "and 1801 more problem(s) not shown" in messages["bad_rounds_2000.yaml"]


def test_compare_cli_survives_every_hostile_scenario(hostile_scenarios):
    proc = subprocess.run([sys.executable, "-m", "eval.compare", *hostile_scenarios, "--seeds", "1", "--quiet"], **RUN)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr) < 500_000


def test_compare_refuses_to_write_its_log_over_the_store(tmp_path, capsys):
    from eval.compare import main as compare

    store = tmp_path / "s.db"
    _store(store, count=1)
    before = store.read_bytes()
    assert compare(["pool-vs-deploy", "--seeds", "1", "--json", str(store), "--store", str(store)]) == 2
    assert "is the --store file (the memory store): refusing to overwrite it" in capsys.readouterr().err
    assert compare(["pool-vs-deploy", "--seeds", "1", "--json", str(store)]) == 2
    assert "is an SQLite database" in capsys.readouterr().err
    under_a_file = tmp_path / "plain.txt"
    under_a_file.write_text("x")
    assert compare(["pool-vs-deploy", "--seeds", "1", "--json", str(under_a_file / "log.json")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert store.read_bytes() == before


@pytest.mark.parametrize(
    "name, message",
    [
        ("surrogate.jsonl", "1: not a valid timeline entry"),
        ("nan_metadata.jsonl", "1: not a timeline entry"),
        ("not_json.jsonl", "1: not a complete JSON record"),
    ],
)
def test_hostile_imports_are_refused_and_leave_no_store(tmp_path, capsys, name, message):
    target = tmp_path / "new.db"
    assert cli(["import", str(HOSTILE / name), str(target)]) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_hostile_import_corner_cases(tmp_path, capsys):
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"metadata": ' + "[" * 100000 + "]" * 100000 + "}\n")
    assert cli(["import", str(deep), str(tmp_path / "a.db")]) == 2
    assert "1: nested too deeply" in capsys.readouterr().err
    source = tmp_path / "m.db"
    _store(source, count=3)
    export = tmp_path / "x.jsonl"
    assert cli(["export", str(source), str(export)]) == 0
    lines = export.read_text().splitlines()
    duplicated = tmp_path / "dup.jsonl"
    duplicated.write_text("\n".join([lines[0], lines[1], lines[1], lines[2]]) + "\n")
    assert cli(["import", str(duplicated), str(tmp_path / "b.db")]) == 2
    assert "dup.jsonl:3: entry" in capsys.readouterr().err  # the duplicate's own line, not the first copy's
    assert cli(["import", str(export), str(source)]) == 2
    assert "already holds 3 entries" in capsys.readouterr().err
    assert cli(["export", str(source), str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_export_never_leaves_a_partial_file(tmp_path, capsys):
    source = tmp_path / "m.db"
    _store(source, count=3)
    _raw(
        source,
        "DROP TRIGGER timeline_no_update",
        "UPDATE timeline SET timestamp = 'garbage' WHERE seq = 2",
        "CREATE TRIGGER timeline_no_update BEFORE UPDATE ON timeline BEGIN SELECT RAISE(ABORT, 'refused'); END",
    )
    out = tmp_path / "x.jsonl"
    assert cli(["export", str(source), str(out)]) == 2
    assert "timeline row after seq=1 cannot be read" in capsys.readouterr().err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".x.jsonl")]


# -- secrets never reach disk ------------------------------------------------------------------------


def test_redaction_figures_on_the_labelled_corpus_and_ordinary_text():
    from eval.redaction import evaluate, labelled, ordinary_lines

    secrets = labelled()
    lines = ordinary_lines(2000)
    assert len(secrets) >= 100 and len(lines) == 2000
    assert sum("backoff" in line for line in lines) > 20  # the latency lists that once became card numbers
    result = evaluate(secrets, lines)
    assert result.recall >= 0.95, result.misses
    assert result.false_positive_rate <= 0.01, result.false_positives[:5]


def test_no_labelled_secret_reaches_the_store_file_through_any_field(tmp_path):
    from eval.redaction import labelled

    path = tmp_path / "m.db"
    secrets = [s for s in labelled() if s["class"] != "ip"]
    with EpisodicMemory(path, principal="p") as memory:
        for i, item in enumerate(secrets):
            memory.observe(
                item["text"],
                timestamp=T0 + timedelta(minutes=i),
                situation=f"s {item['text'][:200]}",
                metadata={"note": item["text"], item["text"][:200]: 1, "password": item["secret"], "api_key": "short1"},
            )
    on_disk = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    leaked = [s["secret"] for s in secrets if s["secret"].encode("utf-8") in on_disk]
    assert leaked == []
    assert b"short1" not in on_disk


def test_ids_in_metadata_are_not_mistaken_for_card_numbers():
    from memory.timeline import PatternRedactor

    ids = [
        "2305fcd8714798431399c8694b00237b7e0a39ca14691970ecd6c92775e4d207",  # a Luhn-valid run inside
        "ab4111111111111111cd" + "0" * 44,
    ]
    assert PatternRedactor().redact(" ".join(ids)) == " ".join(ids)
    with EpisodicMemory() as memory:
        entry = memory.decide("Decision: x", choice="x", retrieved=ids)
        assert entry.metadata["retrieved"] == ids


# -- bounded growth -----------------------------------------------------------------------------------


def test_fact_versions_store_changes_so_storage_grows_with_the_evidence(tmp_path):
    path = tmp_path / "m.db"
    with EpisodicMemory(path, principal="p") as memory:
        for round_ in range(4):
            play(memory, INCIDENTS, principal="p", start=T0 + timedelta(days=40 * round_))
        memory.flush()
        live = memory.projection()
        widest = max(live.facts, key=lambda v: len(v.support))
        bodies = [body for _, body in memory.store.records("fact_version")]
    assert len(widest.support) >= 4, [len(v.support) for v in live.facts]
    later = [b for b in bodies if "base" in b]
    assert later and all("support" not in b for b in later)
    assert max(len(b["support_add"]) + len(b["support_drop"]) for b in later) <= 2  # one episode's change each
    with EpisodicMemory(path, principal="p") as reopened:  # versions read back whole
        assert reopened.projection().facts == live.facts
        assert reopened.fact_history(widest.fact_id)[-1] == widest
