"""Derived record bodies are stored compressed in SQLite stores and read back as the same JSON;
stores whose bodies are text (schema 3 and before) read the same."""

import json
import sqlite3
import tarfile
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory import SQLiteStore
from memory.errors import IntegrityError
from memory.timeline import record_body
from memory.timeline.schema import SCHEMA_VERSION

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_a_packed_body_reads_back_as_its_text_and_is_never_longer(value):
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    stored = record_body.pack(text)
    assert record_body.unpack(stored) == text
    assert len(stored if isinstance(stored, bytes) else stored.encode("utf-8")) <= len(text.encode("utf-8"))


def test_a_body_packed_with_another_dictionary_or_cut_short_is_refused():
    text = json.dumps({"summary": "disk full on db-1 → Decision: rotate logs → resolved" * 3})
    stored = record_body.pack(text)
    assert isinstance(stored, bytes)
    with pytest.raises(IntegrityError, match="damaged"):
        record_body.unpack(stored[:-6])
    other = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS, 9, zlib.Z_DEFAULT_STRATEGY, b"another dictionary")
    with pytest.raises(IntegrityError, match="damaged"):
        record_body.unpack(other.compress(text.encode()) + other.flush())


def test_records_are_stored_packed_and_read_as_written(tmp_path):
    path = tmp_path / "m.sqlite"
    body = {
        "summary": "checkout latency doubled after the 14:02 rollout; rolled back and it recovered " * 4,
        "entry_ids": ["ab" * 32, "cd" * 32],
        "outcome": "SUCCESS",
    }
    with SQLiteStore(path) as store:
        assert store.add_records("episode", [("e1", body), ("e2", {"seq": 3})]) == 2
        assert store.record("episode", "e1") == body and dict(store.records("episode"))["e2"] == {"seq": 3}
        assert [row[3] for row in store.record_rows(0, 2)] == [
            json.dumps(body, sort_keys=True, separators=(",", ":")),
            '{"seq":3}',
        ]
        assert [row[3] for row in store.record_rows(0, 2, bodies=("note",))] == [None, None]  # bodies not read
        assert store.add_records("episode", [("e1", body)]) == 0  # the same record again: skipped
        with pytest.raises(IntegrityError, match="already stored with different content"):
            store.add_records("episode", [("e1", {**body, "outcome": "FAILURE"})])
    raw = sqlite3.connect(path)
    stored = dict(raw.execute("SELECT id, body FROM records"))
    assert isinstance(stored["e1"], bytes) and len(stored["e1"]) < len(json.dumps(body)) / 2
    assert stored["e2"] == '{"seq":3}'  # too short to gain: kept as text
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5


def test_a_store_with_text_bodies_reads_them_and_is_marked_when_written(tmp_path):
    with tarfile.open(Path(__file__).resolve().parents[2] / "golden" / "store-run-format-2.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")  # written by the version before packed bodies
    path = tmp_path / "m.sqlite"
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 3
    texts = raw.execute("SELECT kind, id, body FROM records ORDER BY seq").fetchall()
    raw.close()
    assert texts and all(isinstance(body, str) for _, _, body in texts)
    with SQLiteStore(path) as store:
        assert [(kind, record_id, body) for _, kind, record_id, body in store.record_rows(0, len(texts))] == texts
        assert all(store.record(kind, record_id) == json.loads(body) for kind, record_id, body in texts)
        store.add_records("note", [("n1", {"text": "a longer note that compresses well " * 5})])
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION  # older code now refuses the file
