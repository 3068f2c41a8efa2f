"""Timeline entries through the SQLite store: round trips, immutability, integrity."""

import dataclasses
import json
import multiprocessing
import re
import sqlite3
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory import Kind, NoRedaction, Role, SQLiteStore
from memory.errors import ImmutableRecordError, ImportFailed, IntegrityError, StoreError
from memory.timeline import audit
from memory.timeline.connection import WriteTransaction
from memory.timeline.entries import GENESIS_ID, Entry, entry_id, format_timestamp
from memory.timeline.schema import READ_COLUMNS
from tests.builders import T0, at, open_timeline

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.text(max_size=20),
    st.floats(allow_nan=False, allow_infinity=False),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
entry_fields = st.fixed_dictionaries(
    {
        "text": st.text(max_size=200),
        "kind": st.sampled_from(list(Kind)),
        "role": st.sampled_from(list(Role)),
        "situation": st.text(min_size=1, max_size=20),
        "principal": st.text(min_size=1, max_size=10),
        "metadata": st.dictionaries(st.text(max_size=8), json_values, max_size=4),
        "timestamp": st.datetimes(
            min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
        ),
    }
)


def _assert_same(a, b):
    assert a == b
    # every field set on the instance, as the constructor sets them: the batch path fills the instance's dict
    # directly (`memory.timeline.batch`), and a field it missed would read the class's default unnoticed
    assert vars(a).keys() == vars(b).keys() == {f.name for f in dataclasses.fields(Entry)}
    assert a.embedding.dtype == np.float32 and np.array_equal(a.embedding, b.embedding)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entry_fields, min_size=1, max_size=6))
def test_entries_round_trip_through_store_and_jsonl(tmp_path_factory, items):
    tmp = tmp_path_factory.mktemp("rt")
    timeline = open_timeline(tmp / "a.db")
    written = [timeline.append(**item) for item in items]
    store = timeline.store
    for entry in written:
        _assert_same(store.get(entry.id), entry)
    assert [e.id for e in store.entries()] == [e.id for e in written]
    assert store.verify() is None
    store.export_jsonl(tmp / "out.jsonl")
    copy = SQLiteStore(tmp / "b.db")
    assert copy.import_jsonl(tmp / "out.jsonl") == len(written)
    for original, restored in zip(written, copy.entries()):
        _assert_same(restored, original)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entry_fields, min_size=1, max_size=8), st.booleans())
def test_the_batch_path_writes_the_entries_single_appends_write(items, redact):
    from memory import PatternRedactor

    redactor = PatternRedactor() if redact else NoRedaction()
    one_by_one = open_timeline(redactor=redactor)
    batched = open_timeline(redactor=redactor)
    drafted = open_timeline(redactor=redactor)
    singles = [one_by_one.append(**item) for item in items]
    together = batched.append_many(items)
    # the plain definition: each entry drafted (`Timeline.draft`) and appended by the store on its own
    reference = [drafted.store.append(drafted.draft(**item)) for item in items]
    assert [e.id for e in together] == [e.id for e in singles] == [e.id for e in reference]
    for a, b, c in zip(together, singles, reference):
        _assert_same(a, c)
        _assert_same(b, c)
    assert [e.id for e in batched.store.entries()] == [e.id for e in singles]
    assert one_by_one.store.entry_rows() == drafted.store.entry_rows() == batched.store.entry_rows()


def test_id_is_recomputable_and_chained():
    timeline = open_timeline()
    first = timeline.append("pool exhausted", kind="observation", role="environment", timestamp=T0, situation="s")
    second = timeline.append("raise pool", kind="decision", role="agent", timestamp=T0, situation="s")
    assert first.prev_id == GENESIS_ID and second.prev_id == first.id
    assert entry_id(second, prev_id=first.id, seq=1) == second.id
    assert len(second.id) == 64 and int(second.id, 16) >= 0


@pytest.mark.parametrize(
    "change",
    [
        {"timestamp": T0.replace(tzinfo=None)},
        {"kind": "no-such-kind"},
        {"role": 3},
        {"situation": ""},
        {"principal": None},
        {"metadata": {"x": float("nan")}},
        {"metadata": ["not", "a", "mapping"]},
        {"colour": "red"},
    ],
)
def test_a_single_append_refuses_what_a_draft_refuses_with_the_same_error(change):
    item = {"text": "pool exhausted", "kind": "note", "role": "system", "timestamp": T0, "situation": "s", **change}
    timeline = open_timeline()
    with pytest.raises(Exception) as drafted:
        timeline.draft(**item)
    with pytest.raises(type(drafted.value), match=re.escape(str(drafted.value))):
        timeline.append(**item)
    assert len(timeline.store) == 0


def test_naive_timestamp_is_rejected():
    with pytest.raises(ValueError, match="has no timezone"):
        open_timeline().append("x", kind="note", role="system", timestamp=T0.replace(tzinfo=None), situation="s")


def test_update_and_delete_are_refused_by_the_database(tmp_path):
    timeline = open_timeline(tmp_path / "m.db")
    timeline.append("x", kind="note", role="system", timestamp=T0, situation="s")
    raw = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    with pytest.raises(sqlite3.DatabaseError, match="timeline is append-only: UPDATE refused"):
        raw.execute("UPDATE timeline SET text = 'y'")
    with pytest.raises(sqlite3.DatabaseError, match="timeline is append-only: DELETE refused"):
        raw.execute("DELETE FROM timeline")
    timeline.store.add_records("episode", [("e1", {"a": 1})])
    with pytest.raises(sqlite3.DatabaseError, match="records are insert-only: UPDATE refused"):
        raw.execute("UPDATE records SET body = '{}'")
    with pytest.raises(sqlite3.DatabaseError, match="records are insert-only: DELETE refused"):
        raw.execute("DELETE FROM records")


def test_records_are_insert_only_and_idempotent():
    store = SQLiteStore()
    assert store.add_records("edge", [("a", {"w": 1}), ("b", {"w": 2})]) == 2
    assert store.add_records("edge", [("a", {"w": 1})]) == 0
    with pytest.raises(IntegrityError, match="edge record a already stored with different content"):
        store.add_records("edge", [("a", {"w": 3})])
    assert list(store.records("edge")) == [("a", {"w": 1}), ("b", {"w": 2})]


@pytest.mark.parametrize(
    "column,value",
    [
        ("text", "pool exhausteD"),
        ("metadata", '{"service":"X"}'),
        ("timestamp", format_timestamp(at(seconds=1))),
        ("principal", "evil"),
        ("prev_id", "f" * 64),
    ],
)
def test_tampering_one_row_names_that_entry(tmp_path, column, value):
    timeline = open_timeline(tmp_path / "m.db")
    entries = [
        timeline.append(
            f"entry {i} pool exhausted",
            kind="observation",
            role="environment",
            timestamp=at(minutes=i),
            situation="s",
            metadata={"service": "api"},
        )
        for i in range(5)
    ]
    raw = sqlite3.connect(tmp_path / "m.db")
    raw.execute("DROP TRIGGER timeline_no_update")
    raw.execute(f"UPDATE timeline SET {column} = ? WHERE seq = 3", (value,))
    raw.commit()
    report = audit(tmp_path / "m.db")
    assert f"timeline seq=3 id={entries[3].id[:16]}…: " in report.findings[1]
    assert "trigger timeline_no_update is missing" in report.findings[0]
    with pytest.raises(StoreError, match="tampered with: trigger.s. timeline_no_update missing"):
        SQLiteStore(tmp_path / "m.db")


def test_a_row_stores_its_previous_id_only_when_it_is_not_the_row_before(tmp_path):
    timeline = open_timeline(tmp_path / "m.db")
    entries = [
        timeline.append(f"entry {i}", kind="note", role="system", timestamp=at(minutes=i), situation="s")
        for i in range(3)
    ]
    entries += timeline.append_many(
        [dict(text=f"batch {i}", kind="note", role="system", timestamp=at(hours=1), situation="s") for i in range(3)]
    )
    raw = sqlite3.connect(tmp_path / "m.db")
    assert [p for (p,) in raw.execute("SELECT prev_id FROM timeline ORDER BY seq")] == [GENESIS_ID] + [""] * 5
    timeline.store.close()
    reopened = open_timeline(tmp_path / "m.db")
    assert [reopened.store.get(e.id).prev_id for e in entries] == [GENESIS_ID] + [e.id for e in entries[:-1]]
    assert reopened.store.verify() is None and audit(tmp_path / "m.db").findings == []
    raw.execute("DROP TRIGGER timeline_no_delete")
    raw.execute("DELETE FROM timeline WHERE seq = 2")  # the row a linked id would be read from
    raw.commit()
    assert any(f.startswith("timeline seq=3 ") and "rows missing" in f for f in audit(tmp_path / "m.db").findings)
    row = raw.execute(f"SELECT {READ_COLUMNS} FROM timeline WHERE seq = 3").fetchone()
    assert row[1] == entries[3].id and row[2] == ""  # nothing to link to: an empty link, read as damage


def test_a_store_of_schema_4_keeps_its_rows_and_links_the_rows_appended_after_them(tmp_path):
    import tarfile
    from pathlib import Path

    with tarfile.open(Path(__file__).resolve().parents[2] / "golden" / "store-run-format-3.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")  # written by the version that stored every previous id
    path = tmp_path / "m.sqlite"
    raw = sqlite3.connect(path)
    old = raw.execute("SELECT seq, id, prev_id FROM timeline ORDER BY seq").fetchall()
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 4 and all(prev for _, _, prev in old)
    timeline = open_timeline(path, dim=1024)
    new = timeline.append("one more", kind="note", role="system", timestamp=at(days=400), situation="s")
    assert new.prev_id == old[-1][1] and timeline.store.verify() is None
    assert raw.execute("SELECT prev_id FROM timeline WHERE seq = ?", (new.seq,)).fetchone()[0] == ""
    assert raw.execute("SELECT seq, id, prev_id FROM timeline WHERE seq < ? ORDER BY seq", (new.seq,)).fetchall() == old
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 5  # older code now refuses the file
    assert [e.prev_id for e in timeline.store.entries()][1:] == [e.id for e in timeline.store.entries()][:-1]


def test_derived_digests_are_stored_as_bytes_and_older_stores_keep_text_until_they_are_marked(tmp_path):
    import tarfile
    from pathlib import Path

    with SQLiteStore(tmp_path / "new.db") as store:
        store.add_records("edge", [("a", {"w": 1}), ("b", {"w": 2})])
    raw = sqlite3.connect(tmp_path / "new.db")
    assert [type(d) for (d,) in raw.execute("SELECT digest FROM digests")] == [bytes, bytes]
    assert audit(tmp_path / "new.db").findings == []
    raw.execute("DROP TRIGGER digests_no_update")
    raw.execute("UPDATE digests SET digest = ? WHERE seq = 1", (bytes(32),))
    raw.commit()
    assert any("records seq=1" in f and "does not match its digest" in f for f in audit(tmp_path / "new.db").findings)

    with tarfile.open(Path(__file__).resolve().parents[2] / "golden" / "store-run-format-3.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")  # schema 4: digests as hex text
    path = tmp_path / "m.sqlite"
    with SQLiteStore(path) as store:
        store.add_snapshot("note", "n1", {"k": 1}, b"body")  # no entries or records: the store stays 4
    old = sqlite3.connect(path)
    assert old.execute("PRAGMA user_version").fetchone()[0] == 4
    assert {type(d) for (d,) in old.execute("SELECT digest FROM digests")} == {str}
    with SQLiteStore(path) as store:
        store.add_records("edge", [("z", {"w": 9})])  # marks it 5: from now on digests as bytes
    assert old.execute("PRAGMA user_version").fetchone()[0] == 5
    assert type(old.execute("SELECT digest FROM digests ORDER BY tbl, seq DESC LIMIT 1").fetchone()[0]) is bytes
    assert audit(path).findings == []


def test_flipping_one_embedding_byte_is_detected(tmp_path):
    timeline = open_timeline(tmp_path / "m.db")
    # drafts not marked as made from their text: the store keeps their vectors
    entries = [
        timeline.store.append(
            dataclasses.replace(
                timeline.draft(f"entry {i}", kind="note", role="system", timestamp=T0, situation="s"), encoded=None
            )
        )
        for i in range(3)
    ]
    raw = sqlite3.connect(tmp_path / "m.db")
    blob = bytearray(raw.execute("SELECT embedding FROM timeline WHERE seq = 1").fetchone()[0])
    blob[5] ^= 0x01
    raw.execute("DROP TRIGGER timeline_no_update")
    raw.execute("UPDATE timeline SET embedding = ? WHERE seq = 1", (bytes(blob),))
    raw.commit()
    findings = audit(tmp_path / "m.db").findings
    assert f"timeline seq=1 id={entries[1].id[:16]}…: content does not match" in findings[1]


def test_truncated_jsonl_reports_line_and_imports_nothing(tmp_path):
    timeline = open_timeline(tmp_path / "m.db")
    for i in range(4):
        timeline.append(f"entry {i}", kind="note", role="system", timestamp=T0, situation="s")
    timeline.store.export_jsonl(tmp_path / "x.jsonl")
    text = (tmp_path / "x.jsonl").read_text()
    (tmp_path / "x.jsonl").write_text(text[: len(text) - 40])
    target = SQLiteStore(tmp_path / "t.db")
    with pytest.raises(ImportFailed) as info:
        target.import_jsonl(tmp_path / "x.jsonl")
    assert info.value.line == 4 and "not a complete JSON record" in str(info.value)
    assert str(info.value).startswith(f"{tmp_path / 'x.jsonl'}:4: ")
    assert len(target) == 0


def test_jsonl_with_edited_record_is_rejected_whole(tmp_path):
    timeline = open_timeline(tmp_path / "m.db")
    for i in range(3):
        timeline.append(f"entry {i}", kind="note", role="system", timestamp=T0, situation="s")
    timeline.store.export_jsonl(tmp_path / "x.jsonl")
    lines = (tmp_path / "x.jsonl").read_text().splitlines()
    record = json.loads(lines[1])
    record["text"] = "rewritten history"
    lines[1] = json.dumps(record)
    (tmp_path / "x.jsonl").write_text("\n".join(lines) + "\n")
    target = SQLiteStore(tmp_path / "t.db")
    with pytest.raises(ImportFailed, match=r"x\.jsonl:2: entry .*content does not match its id"):
        target.import_jsonl(tmp_path / "x.jsonl")
    assert len(target) == 0


def _append_worker(path, worker, count):
    timeline = open_timeline(path)
    for i in range(count):
        timeline.append(f"worker {worker} entry {i}", kind="note", role="agent", timestamp=T0, situation="s")


def test_two_processes_appending_lose_nothing(tmp_path):
    path = str(tmp_path / "shared.db")
    SQLiteStore(path).close()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_worker, args=(path, w, 60)) for w in range(2)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
        assert process.exitcode == 0
    store = SQLiteStore(path)
    texts = [entry.text for entry in store.entries()]
    assert len(texts) == 120
    assert sorted(texts) == sorted(f"worker {w} entry {i}" for w in range(2) for i in range(60))
    assert store.verify() is None


def test_reading_by_principal_situation_and_range():
    timeline = open_timeline()
    for i in range(6):
        timeline.append(f"e{i}", kind="note", role="system", timestamp=T0, situation=f"s{i % 2}", principal=f"p{i % 3}")
    store = timeline.store
    assert [e.text for e in store.entries(principal="p0")] == ["e0", "e3"]
    assert [e.text for e in store.entries(situation="s1")] == ["e1", "e3", "e5"]
    assert [e.text for e in store.entries(start=2, stop=4)] == ["e2", "e3"]


def test_decisions_between_are_a_principal_s_decisions_in_a_seq_range_in_order():
    timeline = open_timeline()
    written = [
        timeline.append(
            f"e{i}",
            kind="decision" if i % 3 else "observation",
            role="agent",
            timestamp=T0,
            situation=f"s{i % 2}",
            principal="p1" if i >= 8 else "p0",
            metadata={"attempt": i, "favoured": {"prior": f"c{i}"}},
        )
        for i in range(10)
    ]
    store = timeline.store
    wanted = [(e.seq, e.metadata) for e in written[2:8] if e.kind is Kind.DECISION and e.principal == "p0"]
    assert store.decisions_between("p0", written[2].seq, written[9].seq) == wanted  # both situations, p1's left out
    assert store.decisions_between("p1", written[0].seq, written[9].seq) == [
        (e.seq, e.metadata) for e in written[8:] if e.kind is Kind.DECISION
    ]
    assert store.decisions_between("p0", written[5].seq, written[4].seq) == []


def test_opening_a_missing_or_foreign_file_is_a_store_error(tmp_path):
    with pytest.raises(StoreError, match="no such memory store"):
        SQLiteStore(tmp_path / "missing.db", create=False)
    (tmp_path / "junk.db").write_bytes(b"definitely not sqlite" * 100)
    with pytest.raises(StoreError, match="not a memory store"):
        SQLiteStore(tmp_path / "junk.db")
    other = sqlite3.connect(tmp_path / "other.db")
    other.execute("CREATE TABLE t (x)")
    other.commit()
    with pytest.raises(StoreError, match="without the store's application id"):
        SQLiteStore(tmp_path / "other.db")


def test_refusal_surfaces_as_immutable_record_error(tmp_path):
    store = SQLiteStore(tmp_path / "m.db")
    db = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    with pytest.raises(ImmutableRecordError, match="UPDATE refused"):
        with WriteTransaction(db):
            db.execute("UPDATE records SET body = 'x'")  # no rows, but the trigger is not reached
            db.execute("INSERT INTO records (kind, id, body) VALUES ('k', 'i', '{}')")
            db.execute("UPDATE records SET body = 'x'")
    assert list(store.records("k")) == []


def test_a_store_opens_only_with_the_encoder_that_embedded_it(tmp_path):
    from memory import EpisodicMemory, HashingEncoder
    from memory.errors import EncoderMismatch

    path = tmp_path / "memory.db"
    with EpisodicMemory(path, encoder=HashingEncoder(dim=64)) as memory:
        memory.observe("disk full on db-1", timestamp=T0)
    with pytest.raises(
        EncoderMismatch,
        match=r"memory\.db: its entries were embedded by encoder "
        r"'hashing-v2-d64-c0\.5', not 'hashing-v2-d1024-c0\.5'",
    ):
        EpisodicMemory(path)
    with EpisodicMemory(path, encoder=HashingEncoder(dim=64)) as memory:  # the refusal left the store usable
        memory.observe("disk full on db-2", timestamp=at(minutes=1))
        assert memory.store.stats().encoders == ["hashing-v2-d64-c0.5"]
    with EpisodicMemory(tmp_path / "empty.db") as memory:  # a new store takes any encoder
        assert len(memory.store) == 0


def test_flat_metadata_read_back_is_remembered_by_content_and_handed_out_fresh():
    from memory.timeline.entries import read_back

    first, text = read_back({"service": "checkout", "host": "db-1"})
    first["service"] = "changed by a caller"
    again, text_again = read_back({"service": "checkout", "host": "db-1"})
    assert again == {"host": "db-1", "service": "checkout"} and list(again) == ["host", "service"]
    assert text == text_again == '{"host":"db-1","service":"checkout"}'
    assert read_back({"n": True}) == ({"n": True}, '{"n":true}') and read_back({"n": 1}) == ({"n": 1}, '{"n":1}')


def test_replacing_a_timeline_s_redactor_forgets_what_the_old_one_left_alone(tmp_path):
    from memory import PatternRedactor

    timeline = open_timeline(tmp_path / "m.db", redactor=NoRedaction())
    secret = {"contact": "jane.doe@example.com"}
    plain = timeline.append(
        "paged the on-call",
        kind="note",
        role="user",
        timestamp=T0,
        situation="call jane.doe@example.com",
        metadata=secret,
    )
    assert plain.metadata == secret and "jane.doe" in plain.situation
    timeline.redactor = PatternRedactor()
    for entry in (
        timeline.append(
            "paged again",
            kind="note",
            role="user",
            timestamp=at(minutes=1),
            situation="call jane.doe@example.com",
            metadata=secret,
        ),
        *timeline.append_many(
            [
                {
                    "text": "and again",
                    "kind": "note",
                    "role": "user",
                    "timestamp": at(minutes=2),
                    "situation": "call jane.doe@example.com",
                    "metadata": secret,
                }
            ]
        ),
    ):
        assert "jane.doe" not in entry.metadata["contact"] and "[EMAIL#" in entry.metadata["contact"]
        assert "jane.doe" not in entry.situation
