"""Stored embedding layouts: exact round trips, old dense blobs, damage detection, unchanged ids."""

import dataclasses
import hashlib
import json
import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from memory import HashingEncoder, NoRedaction, SQLiteStore, Timeline
from memory.errors import StoreError
from memory.timeline import audit
from memory.timeline import blob as embedding_blob
from memory.timeline.entries import Kind, Role, canonical_metadata, embedding_digest, entry_id, format_timestamp
from memory.timeline.schema import SCHEMA_VERSION
from tests.builders import T0


def _bits(vector):
    return np.asarray(vector, dtype="<f4").view("<u4")


# Any float32 bit pattern (NaNs, infinities, -0.0, subnormals), mostly zeros so both layouts occur.
vectors = st.integers(1, 300).flatmap(
    lambda dim: hnp.arrays(
        np.uint32, dim, elements=st.one_of(st.just(0), st.just(0x80000000), st.integers(0, 2**32 - 1)), fill=st.just(0)
    ).map(lambda bits: bits.view("<f4"))
)


@settings(max_examples=200, deadline=None)
@given(st.lists(vectors, min_size=1, max_size=5))
def test_pack_unpack_is_bit_identical(batch):
    for vector in batch:
        blob = embedding_blob.pack(vector)
        assert len(blob) <= 4 * vector.size
        assert np.array_equal(_bits(embedding_blob.unpack(blob)), _bits(vector))
    same_dim = [v for v in batch if v.size == batch[0].size]
    assert embedding_blob.pack_rows(np.stack(same_dim)) == [embedding_blob.pack(v) for v in same_dim]
    many = embedding_blob.unpack_rows([embedding_blob.pack(v) for v in batch])
    assert all(np.array_equal(_bits(got), _bits(v)) and not got.flags.writeable for got, v in zip(many, batch))


def test_layouts_are_told_apart_by_length():
    sparse = np.zeros(1024, np.float32)
    sparse[[3, 700]] = [0.6, -0.8]
    sparse[5] = -0.0
    blob = embedding_blob.pack(sparse)
    assert len(blob) == 6 * 3 + 7 and len(blob) % 2 == 1 and blob[-1:] == b"S"
    dense = np.linspace(-1, 1, 64, dtype=np.float32)
    assert embedding_blob.pack(dense) == dense.astype("<f4").tobytes()
    assert _bits(embedding_blob.unpack(blob))[5] == 0x80000000
    view = embedding_blob.unpack(dense.tobytes())
    assert not view.flags.writeable and embedding_blob.unpack(dense.tobytes(), writable=True).flags.writeable


@pytest.mark.parametrize(
    "blob", [b"S", b"\x00" * 9, b"\x00" * 13 + b"S", b"\x00\x00\x00\x00\x05\x00\x01\x00\x04\x00\x00\x00S"]
)
def test_malformed_blobs_raise_value_error(blob):
    with pytest.raises(ValueError):
        embedding_blob.unpack(blob)


@pytest.mark.parametrize("blob", [b"S", b"\x00" * 13 + b"S", b"\x00\x00\x00\x00\x05\x00\x01\x00\x04\x00\x00\x00S"])
def test_unpack_rows_raises_like_unpack(blob):
    good = embedding_blob.pack(np.eye(1, 64, 3, dtype=np.float32)[0])
    with pytest.raises(ValueError):
        embedding_blob.unpack_rows([good, blob, good])


def _timeline(path):
    return Timeline(SQLiteStore(path), HashingEncoder(dim=256), redactor=NoRedaction())


def _append(timeline, n, *, from_text=False):
    """`n` entries; unless `from_text`, their drafts do not say their vectors encode their text, so those are stored."""
    drafts = [
        timeline.draft(
            f"entry {i} pool exhausted on api-{i}",
            kind="observation",
            role="environment",
            timestamp=T0 + timedelta(minutes=i),
            situation="s",
            metadata={"i": i},
        )
        for i in range(n)
    ]
    return [timeline.store.append(d if from_text else dataclasses.replace(d, encoded=None)) for d in drafts]


def test_new_rows_are_compact(tmp_path):
    timeline = _timeline(tmp_path / "m.db")
    _append(timeline, 3)
    sizes = [row[0] for row in sqlite3.connect(tmp_path / "m.db").execute("SELECT length(embedding) FROM timeline")]
    assert sizes and all(size % 2 == 1 and size < 4 * 256 for size in sizes)


def test_vectors_made_from_their_text_are_not_stored_and_read_back_bit_for_bit(tmp_path):
    timeline = _timeline(tmp_path / "m.db")
    written = _append(timeline, 4, from_text=True) + timeline.append_many(
        [
            {"text": f"batch {i} disk full", "kind": "note", "role": "system", "timestamp": T0, "situation": "s"}
            for i in range(3)
        ]
    )
    raw = sqlite3.connect(tmp_path / "m.db")
    assert {row[0] for row in raw.execute("SELECT embedding FROM timeline")} == {embedding_blob.DERIVED}
    store = timeline.store
    assert store.verify() is None and audit(tmp_path / "m.db").findings == []
    for original, stored in zip(written, store.entries()):
        assert stored == original and np.array_equal(_bits(stored.embedding), _bits(original.embedding))
    parts = store.entry_parts([e.id for e in written])
    assert all(np.array_equal(_bits(parts[e.id].embedding), _bits(e.embedding)) for e in written)
    assert np.array_equal(_bits(store.get(written[2].id).embedding), _bits(written[2].embedding))


def test_a_derived_vector_is_checked_through_its_text(tmp_path):
    timeline = _timeline(tmp_path / "m.db")
    entries = _append(timeline, 3, from_text=True)
    raw = sqlite3.connect(tmp_path / "m.db")
    raw.execute("DROP TRIGGER timeline_no_update")
    # the stored vector of the same text reads back the same: the layout is no part of the id
    raw.execute("UPDATE timeline SET embedding = ? WHERE seq = 1", (embedding_blob.pack(entries[1].embedding),))
    raw.commit()
    assert timeline.store.verify() is None
    raw.execute("UPDATE timeline SET embedding = ? WHERE seq = 1", (embedding_blob.DERIVED,))
    raw.execute("UPDATE timeline SET text = 'entry 1 pool exhausted on api-7' WHERE seq = 1")
    raw.commit()
    brk = timeline.store.verify()
    assert brk.seq == 1 and brk.id == entries[1].id and "content does not match" in brk.reason
    raw.execute("UPDATE timeline SET text = ?, encoder = 'sentence-transformers:x' WHERE seq = 1", (entries[1].text,))
    raw.commit()
    brk = timeline.store.verify()
    assert brk.seq == 1 and "cannot be rebuilt" in brk.reason


def _as_schema_1(source, target):
    """A copy of `source` as the code before the compact layout wrote it: whole previous ids, dense blobs,
    user_version 1."""
    store = SQLiteStore(source)
    rows = store.entry_rows()
    entries = list(store.entries())
    store.close()
    SQLiteStore(target).close()
    raw = sqlite3.connect(target, isolation_level=None)
    for row, entry in zip(rows, entries):
        dense = entry.embedding.astype("<f4").tobytes()
        raw.execute(
            f"INSERT INTO timeline VALUES ({','.join('?' * len(row))})", (*row[:2], entry.prev_id, *row[3:-1], dense)
        )
    raw.execute("PRAGMA user_version = 1")
    raw.close()


def test_schema_1_store_with_dense_blobs_reads_verifies_and_keeps_growing(tmp_path):
    written = _append(_timeline(tmp_path / "new.db"), 4)
    _as_schema_1(tmp_path / "new.db", tmp_path / "old.db")
    raw = sqlite3.connect(tmp_path / "old.db")
    assert {row[0] for row in raw.execute("SELECT length(embedding) FROM timeline")} == {4 * 256}
    timeline = _timeline(tmp_path / "old.db")
    store = timeline.store
    assert store.verify() is None
    for original, stored in zip(written, store.entries()):
        assert stored == original and np.array_equal(_bits(stored.embedding), _bits(original.embedding))
        assert stored.embedding.flags.writeable
    parts = store.entry_parts([e.id for e in written])
    assert all(np.array_equal(parts[e.id].embedding, e.embedding) for e in written)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 1
    timeline.append("one more", kind="note", role="system", timestamp=T0, situation="s")
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION  # older code now refuses the file
    assert store.verify() is None and len(store) == 5


def test_a_rolled_back_append_leaves_schema_1_marked_1(tmp_path):
    _append(_timeline(tmp_path / "new.db"), 2)
    _as_schema_1(tmp_path / "new.db", tmp_path / "old.db")
    SQLiteStore(tmp_path / "old.db").close()
    raw = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    raw.execute("CREATE TRIGGER no_more BEFORE INSERT ON timeline BEGIN SELECT RAISE(ABORT, 'full'); END")
    with pytest.raises(sqlite3.IntegrityError, match="full"):
        _timeline(tmp_path / "old.db").append("x", kind="note", role="system", timestamp=T0, situation="s")
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 1


def test_every_damaged_byte_of_a_compact_blob_is_detected(tmp_path):
    entries = _append(_timeline(tmp_path / "m.db"), 3)
    raw = sqlite3.connect(tmp_path / "m.db")
    raw.execute("PRAGMA synchronous = OFF")  # hundreds of one-row edits: durability is not what is tested
    blob = raw.execute("SELECT embedding FROM timeline WHERE seq = 1").fetchone()[0]
    with SQLiteStore(tmp_path / "m.db") as store:  # verify reads the file afresh each time
        raw.execute("DROP TRIGGER timeline_no_update")  # after the open, which refuses a store without it
        for position in range(len(blob)):
            for flip in (0x01, 0x80):
                damaged = bytearray(blob)
                damaged[position] ^= flip
                raw.execute("UPDATE timeline SET embedding = ? WHERE seq = 1", (bytes(damaged),))
                raw.commit()
                brk = store.verify()
                assert brk is not None and brk.seq == 1 and brk.id == entries[1].id, (position, flip, brk)
        raw.execute("UPDATE timeline SET embedding = ? WHERE seq = 1", (blob,))
        raw.commit()
        assert store.verify() is None  # the open store saw every edit, this one included
    raw.execute("UPDATE timeline SET embedding = ? WHERE seq = 1", (blob[:-1],))  # torn
    raw.execute("CREATE TRIGGER timeline_no_update BEFORE UPDATE ON timeline BEGIN SELECT RAISE(ABORT, 'refused'); END")
    raw.commit()
    brk = SQLiteStore(tmp_path / "m.db").verify()
    assert brk.seq == 1 and brk.id == entries[1].id and "unreadable row" in brk.reason


def _reference_entry_id(draft, *, prev_id, seq):
    """The id as first defined: json.dumps of every field (kept here as the specification).

    A plain definition, not a copy: the library writes the same characters directly and
    through the C encoder, so stored ids stay what they were.
    """
    payload = {
        "prev_id": prev_id,
        "seq": seq,
        "timestamp": draft.timestamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "principal": draft.principal,
        "situation": draft.situation,
        "role": Role(draft.role).value,
        "kind": Kind(draft.kind).value,
        "text": draft.text,
        "metadata": json.loads(
            json.dumps(draft.metadata, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        ),
        "encoder": draft.encoder,
        "embedding_sha256": hashlib.sha256(np.asarray(draft.embedding, dtype="<f4").tobytes()).hexdigest(),
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.text(max_size=12),
    st.floats(allow_nan=False, allow_infinity=False),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=6), inner, max_size=3)
        | st.dictionaries(st.integers(-20, 20), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(max_size=120),
    principal=st.text(min_size=1, max_size=10),
    situation=st.text(max_size=10),
    metadata=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    seq=st.integers(0, 2**40),
    prev_id=st.text(max_size=70),
    role=st.sampled_from(list(Role) + [r.value for r in Role]),
    kind=st.sampled_from(list(Kind) + [k.value for k in Kind]),
    timestamp=st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]),
    ),
)
def test_entry_id_equals_the_reference_definition(
    text, principal, situation, metadata, seq, prev_id, role, kind, timestamp
):
    from memory.timeline import EntryDraft

    draft = EntryDraft(
        timestamp=timestamp,
        principal=principal,
        situation=situation,
        role=role,
        kind=kind,
        text=text,
        metadata=metadata,
        embedding=HashingEncoder(dim=32).encode([text])[0],
        encoder="hashing-v2-d32-c0.5",
    )
    assert entry_id(draft, prev_id=prev_id, seq=seq) == _reference_entry_id(draft, prev_id=prev_id, seq=seq)
    assert format_timestamp(timestamp) == timestamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert canonical_metadata(metadata) == json.dumps(
        metadata, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    assert embedding_digest(draft.embedding) == hashlib.sha256(draft.embedding.astype("<f4").tobytes()).hexdigest()


def test_a_newer_schema_is_refused_by_name(tmp_path):
    SQLiteStore(tmp_path / "m.db").close()
    raw = sqlite3.connect(tmp_path / "m.db")
    raw.execute("PRAGMA user_version = 6")
    raw.commit()
    with pytest.raises(StoreError, match=r"store schema version 6, this code reads 1, 2, 3, 4, 5"):
        SQLiteStore(tmp_path / "m.db")


def test_an_import_stores_a_vector_that_is_its_texts_encoding_as_derived(tmp_path):
    timeline = _timeline(tmp_path / "a.db")
    written = _append(timeline, 2, from_text=True) + _append(timeline, 1)
    other = dataclasses.replace(written[0], embedding=np.eye(1, 256, 7, dtype=np.float32)[0])  # not its text's
    written.append(
        timeline.store.append(
            dataclasses.replace(
                timeline.draft("not this vector", kind="note", role="user", timestamp=T0, situation="s"),
                embedding=other.embedding,
            )
        )
    )
    timeline.store.export_jsonl(tmp_path / "x.jsonl")
    with SQLiteStore(tmp_path / "b.db") as copy:
        assert copy.import_jsonl(tmp_path / "x.jsonl") == 4 and copy.verify() is None
        assert [e.id for e in copy.entries()] == [e.id for e in written]
    blobs = [row[0] for row in sqlite3.connect(tmp_path / "b.db").execute("SELECT embedding FROM timeline")]
    # the third entry's vector was stored in the source, yet it is its text's encoding: derived here;
    # the fourth's draft was made from its text, then given another vector: stored, at the source too
    assert blobs[:3] == [embedding_blob.DERIVED] * 3 and blobs[3] == embedding_blob.pack(other.embedding)
