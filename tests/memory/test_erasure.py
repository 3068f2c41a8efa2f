"""Forgetting on request: erased content is gone from the store's files and from recall, the derived
state equals a rebuild, and `verify` still proves everything else (and sees an erasure without a record)."""

import sqlite3
from datetime import timedelta

import pytest

from memory import EpisodicMemory
from memory.__main__ import main
from memory.timeline import HashingEncoder, audit
from memory.timeline.erasure import is_erased
from tests.builders import INCIDENTS, T0, copy_store, play_incidents

SECRET = "quarterly payroll export for Ingrid Vasquez"


def _files(path):
    """Every byte of a store file and its sidecars."""
    return b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name))


def _memory(path, principal="team-a"):
    return EpisodicMemory(path, principal=principal, encoder=HashingEncoder(dim=64))


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A store of two principals' incidents, one entry holding the secret text, built once; (path, that entry)."""
    path = tmp_path_factory.mktemp("template") / "m.sqlite"
    return path, _build(path)


@pytest.fixture
def two_tenants(template, tmp_path):
    """A fresh copy of the template store (with its anchor); (path, the secret entry)."""
    source, secret = template
    return copy_store(source, tmp_path), secret


def _build(path):
    """Incidents of two principals, one of them holding the secret text; the secret entry."""
    with _memory(path) as memory:
        play_incidents(memory)
        secret = memory.observe(
            SECRET, timestamp=T0 + timedelta(days=2), situation="support", metadata={"service": "print", "note": SECRET}
        )
        play_incidents(memory, start=T0 + timedelta(days=3))
        play_incidents(memory, principal="team-b", start=T0 + timedelta(days=5))
        memory.flush()
    return secret


def test_an_erased_entry_is_gone_from_the_files_recall_and_rebuild_while_verify_passes(two_tenants):
    path, secret = two_tenants
    assert SECRET.encode() in _files(path)
    with _memory(path) as memory:
        before_b = memory.episodes("team-b")
        done = memory.forget(entry_id=secret.id, reason="request #12", requested_by="dpo")
        assert done.entries == 1 and done.purged
        assert memory.projection() == memory.rebuild()
        assert all(SECRET not in str(e.to_record()) for e in memory.episodes())
        context = memory.recall("quarterly payroll export")
        assert "Ingrid" not in context.render(max_chars=100_000) and "Ingrid" not in str(context.to_dict())
        assert memory.episodes("team-b") == before_b  # the other tenant's state is what it was
        assert is_erased(memory.store.get(secret.id))
    assert SECRET.encode() not in _files(path)
    report = audit(path)
    assert report.findings == [] and report.entries > 0
    assert main(["verify", str(path)]) == 0
    with _memory(path) as reopened:  # a new process sees the erased state, equal to a rebuild
        assert reopened.projection() == reopened.rebuild()
        assert reopened.store.verify() is None


def test_erasing_a_principal_leaves_the_other_tenant_and_a_verifiable_store(two_tenants):
    path, _ = two_tenants
    with _memory(path, "team-b") as memory:
        memory.observe("team-b still here", timestamp=T0 + timedelta(days=9), situation="support")
        done = memory.forget(principal="team-a", reason="tenant left", requested_by="admin")
        assert done.entries > 10
        assert memory.episodes("team-a") == [] and memory.facts("team-a") == []
        assert memory.episodes("team-b")
        assert memory.projection() == memory.rebuild()
        later = memory.observe("after the erasure", timestamp=T0 + timedelta(days=10), situation="support")
        memory.flush()
        assert memory.projection() == memory.rebuild()
    assert SECRET.encode() not in _files(path)
    report = audit(path)  # the appends after the erasure continue the same chain
    assert report.findings == [] and report.head == later.id


def _tamper_after_erasing(path, secret, trigger, statement):
    """Erase `secret`, then drop one insert-only trigger and run `statement` (SQL, or a function of the
    connection) as an attacker with file access would."""
    with _memory(path) as memory:
        memory.forget(entry_id=secret.id)
    db = sqlite3.connect(path)
    db.execute(f"DROP TRIGGER {trigger}")
    statement(db) if callable(statement) else db.execute(statement)
    db.commit()
    db.close()


def test_verify_sees_an_erasure_without_a_record_and_tampering_after_one(two_tenants):
    path, secret = two_tenants
    _tamper_after_erasing(
        path,
        secret,
        "timeline_no_update",  # content emptied without any erasure record
        "UPDATE timeline SET situation = '', text = '', metadata = '{}', encoder = '', embedding = X'' WHERE seq = 3",
    )
    findings = audit(path).findings
    assert any("timeline seq=3" in f and "content does not match its id" in f for f in findings)
    assert any("timeline_no_update" in f for f in findings)
    assert main(["verify", str(path)]) == 1


def test_a_derived_record_rewritten_after_an_erasure_is_a_finding(two_tenants):
    path, secret = two_tenants
    from memory.timeline import record_body

    def rewrite(db):  # the bodies as stored (compressed), decompressed, edited and compressed again
        rows = db.execute("SELECT seq, body FROM records WHERE kind = 'episode'").fetchall()
        edited = [
            (record_body.pack(record_body.unpack(body).replace("SUCCESS", "FAILURE")), seq)
            for seq, body in rows
            if "SUCCESS" in record_body.unpack(body)
        ]
        assert edited
        db.executemany("UPDATE records SET body = ? WHERE seq = ?", edited)

    _tamper_after_erasing(path, secret, "records_no_update", rewrite)
    assert any("content does not match its digest" in f for f in audit(path).findings)


def test_the_store_refuses_other_updates_and_deletes_after_an_erasure(two_tenants):
    path, secret = two_tenants
    with _memory(path) as memory:
        memory.forget(entry_id=secret.id)
        newest = memory.store.last_record()
    db = sqlite3.connect(path)
    for statement in (
        "UPDATE timeline SET text = 'x' WHERE seq = 0",
        "UPDATE timeline SET text = '', situation = '', metadata = '{}', encoder = '', "
        "embedding = X'' WHERE seq = 0",  # blank form, but not listed as erased
        f"DELETE FROM records WHERE seq = {newest}",
        "DELETE FROM records WHERE kind = 'erasure'",
        "DELETE FROM erased",
    ):
        with pytest.raises(sqlite3.DatabaseError, match="refused"):
            db.execute(statement)
    db.close()


def test_blanking_and_deleting_need_a_sealed_erasure_record(two_tenants):
    """An erasure record and listing inserted with plain SQL (no digest seals the record) allow nothing."""
    path, secret = two_tenants
    with _memory(path) as memory:
        memory.forget(entry_id=secret.id)  # the narrowed triggers are installed
    db = sqlite3.connect(path, isolation_level=None)
    target = db.execute("SELECT seq, id FROM timeline WHERE principal = 'team-b' ORDER BY seq LIMIT 1").fetchone()
    newest = db.execute(
        "INSERT INTO records (kind, id, body) VALUES ('erasure', 'forged', '{\"snapshots_upto\": 0}')"
    ).lastrowid
    db.execute("INSERT INTO erased (seq, id, erasure) VALUES (?, ?, 'forged')", target)
    for statement in (
        f"UPDATE timeline SET text = '', situation = '', metadata = '{{}}', encoder = '', embedding = X'' "
        f"WHERE seq = {target[0]}",  # listed, blank form, but under an unsealed record
        f"DELETE FROM records WHERE seq = {newest - 1}",  # below the forged record, above the sealed one
    ):
        with pytest.raises(sqlite3.DatabaseError, match="refused"):
            db.execute(statement)
    db.close()
    report = audit(path)
    assert any("kind=erasure id=forged: not covered by the digest chain" in line for line in report.findings)


def test_a_store_that_erased_under_older_triggers_gets_the_sealed_ones_on_open(two_tenants):
    path, secret = two_tenants
    with _memory(path) as memory:
        memory.forget(entry_id=secret.id)
    db = sqlite3.connect(path, isolation_level=None)
    current = db.execute("SELECT sql FROM sqlite_master WHERE name = 'timeline_no_update'").fetchone()[0]
    db.execute("DROP TRIGGER timeline_no_update")  # the form before erasures needed a seal
    db.execute(
        "CREATE TRIGGER timeline_no_update BEFORE UPDATE ON timeline WHEN NOT (EXISTS (SELECT 1 FROM erased "
        "WHERE erased.seq = OLD.seq AND erased.id = OLD.id)) "
        "BEGIN SELECT RAISE(ABORT, 'timeline is append-only: UPDATE refused'); END"
    )
    db.close()
    with _memory(path):
        pass
    db = sqlite3.connect(path)
    assert db.execute("SELECT sql FROM sqlite_master WHERE name = 'timeline_no_update'").fetchone()[0] == current
    db.close()
    assert main(["verify", str(path)]) == 0


def test_forget_refuses_another_tenants_entry_and_a_missing_target(two_tenants):
    path, secret = two_tenants
    with _memory(path, "team-b") as memory:
        with pytest.raises(ValueError, match="no entry"):
            memory.forget(entry_id=secret.id)
        with pytest.raises(ValueError, match="exactly one"):
            memory.forget()
    with _memory(path) as memory:
        memory.forget(entry_id=secret.id)
        with pytest.raises(ValueError, match="already erased"):
            memory.forget(entry_id=secret.id)


def test_the_erase_command(two_tenants, capsys):
    path, secret = two_tenants
    assert main(["erase", str(path), "--entry", secret.id, "--reason", "request"]) == 0
    out = capsys.readouterr().out
    assert "erased 1 entry" in out
    assert main(["erase", str(path), "--principal", "team-b"]) == 0
    assert main(["verify", str(path)]) == 0
    assert main(["erase", str(path), "--entry", "f" * 64]) == 2
    assert "no entry" in capsys.readouterr().err
    assert SECRET.encode() not in _files(path)


def test_state_runs_are_deleted_with_the_records_and_written_again_after(tmp_path):
    from memory.persistence import Persistence

    path = tmp_path / "m.sqlite"
    runs = Persistence(run_episodes=2, open_run_min=2)
    with EpisodicMemory(path, principal="team-a", encoder=HashingEncoder(dim=64), persistence=runs) as memory:
        secret = memory.observe(SECRET, timestamp=T0, situation="support")
        play_incidents(memory, INCIDENTS[:3])
        memory.flush()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM snapshots").fetchone()[0] > 0
    with EpisodicMemory(path, principal="team-a", encoder=HashingEncoder(dim=64), persistence=runs) as memory:
        memory.forget(entry_id=secret.id)
        play_incidents(memory, INCIDENTS[3:], start=T0 + timedelta(days=6))
        memory.flush()
    with EpisodicMemory(path, principal="team-a", encoder=HashingEncoder(dim=64), persistence=runs) as memory:
        assert memory.projection() == memory.rebuild()
    with sqlite3.connect(path) as db:
        kinds = [row[0] for row in db.execute("SELECT kind FROM snapshots ORDER BY seq")]
    assert kinds[0] == "erasure" and len(kinds) > 1  # runs written after the erasure, past its marker
    assert audit(path).findings == [] and SECRET.encode() not in _files(path)


def test_an_export_of_an_erased_store_holds_no_content_and_is_refused_on_import(two_tenants, tmp_path, capsys):
    path, secret = two_tenants
    with _memory(path) as memory:
        memory.forget(entry_id=secret.id)
    assert main(["export", str(path), str(tmp_path / "out.jsonl")]) == 0
    assert "Ingrid" not in (tmp_path / "out.jsonl").read_text()
    capsys.readouterr()
    assert main(["import", str(tmp_path / "out.jsonl"), str(tmp_path / "copy.sqlite")]) == 2
    assert f":{secret.seq + 1}: an erased entry" in capsys.readouterr().err
    assert not (tmp_path / "copy.sqlite").exists()


def _erase_while_another_writes(memory, other, times):
    """The store's erase, with another process appending just before each of its first `times` calls."""
    real, calls = memory.store.erase, []

    def erase(plan):
        calls.append(plan.record_id)
        if len(calls) <= times:
            other.observe(
                f"meanwhile {len(calls)}", timestamp=T0 + timedelta(days=30, minutes=len(calls)), situation="support"
            )
        return real(plan)

    return erase, calls


def test_an_erasure_planned_while_another_process_appends_is_planned_again(two_tenants, monkeypatch):
    path, secret = two_tenants
    with _memory(path) as memory, _memory(path, "team-b") as other:
        erase, calls = _erase_while_another_writes(memory, other, times=2)
        monkeypatch.setattr(memory.store, "erase", erase)
        done = memory.forget(entry_id=secret.id, reason="request #13", requested_by="dpo")
        assert done.entries == 1 and len(calls) == 3  # two plans outgrown by the other writer, the third stands
        assert is_erased(memory.store.get(secret.id)) and memory.projection() == memory.rebuild()
    assert SECRET.encode() not in _files(path)
    assert main(["verify", str(path)]) == 0


def test_an_erasure_outgrown_every_time_gives_up_with_a_clear_error(two_tenants, monkeypatch):
    from memory.agent_memory import ERASE_ATTEMPTS
    from memory.errors import StoreChanged

    path, secret = two_tenants
    with _memory(path) as memory, _memory(path, "team-b") as other:
        erase, calls = _erase_while_another_writes(memory, other, times=ERASE_ATTEMPTS)
        monkeypatch.setattr(memory.store, "erase", erase)
        with pytest.raises(StoreChanged, match="another writer appended"):
            memory.forget(entry_id=secret.id, reason="request #14", requested_by="dpo")
        assert len(calls) == ERASE_ATTEMPTS and not is_erased(memory.store.get(secret.id))
    assert main(["verify", str(path)]) == 0


def test_an_erasure_leaves_no_erased_line_in_the_readers_caches(two_tenants):
    """The readers cache what they read of each line in the process; after `forget` the erased line is read afresh
    (a cache miss), so its text is no longer held there."""
    import memory.text as text

    path, secret = two_tenants
    with _memory(path) as memory:
        memory.recall(SECRET)  # recall and the rules read the secret line
        readers = (text.split_negation, text.affirmed_clauses, text.terms)
        for read in readers:
            read(SECRET)
            hit = read.cache_info().hits
            read(SECRET)
            assert read.cache_info().hits == hit + 1  # cached before the erasure
        memory.forget(entry_id=secret.id)
        for read in readers:
            missed = read.cache_info().misses
            read(SECRET)
            assert read.cache_info().misses == missed + 1, read
