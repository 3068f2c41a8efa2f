"""The store's SQLite schema, its record kinds, and how an entry maps to a timeline row.

The `timeline` table holds chained entries (embeddings in the layouts of
`memory.timeline.blob`); the `records` table holds derived, insert-only records keyed by
``(kind, id)`` with a `RecordKind`; the `snapshots` table holds derived binary snapshots.
Triggers make SQLite itself refuse UPDATE and DELETE on all three.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from enum import Enum
from typing import Any, NamedTuple, cast

import numpy as np

from memory.timeline import blob as embedding_blob
from memory.timeline.batch import DraftBatch, IdText, chained_entries, chained_ids, embedding_digests, id_texts
from memory.timeline.encoder import rebuildable
from memory.timeline.entries import (
    Entry,
    EntryDraft,
    Kind,
    Role,
    canonical_metadata,
    format_timestamp,
    parse_timestamp,
)

APPLICATION_ID = 0x45504D31  # "EPM1": marks a file as a store of this project
# Schema 2 adds the compact (sparse) embedding layout of `memory.timeline.blob`, schema 3 its
# derived layout (the vector recomputed from the entry's text), schema 4 compressed record
# bodies (`memory.timeline.record_body`), schema 5 linked previous ids (`LINKED`) and digests
# as bytes (`memory.timeline.integrity`); each reads the stores of the schemas before it. An
# older store is marked with the current version by the first transaction that writes entries
# or records into it, so older code refuses it with a clear message instead of misreading it.
SCHEMA_VERSION = 5
READABLE_SCHEMAS = (1, 2, 3, 4, 5)

SCHEMA = """
CREATE TABLE IF NOT EXISTS timeline (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    prev_id TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    principal TEXT NOT NULL,
    situation TEXT NOT NULL,
    role TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    encoder TEXT NOT NULL,
    embedding BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS timeline_scope ON timeline (principal, situation, seq);
CREATE TRIGGER IF NOT EXISTS timeline_no_update BEFORE UPDATE ON timeline
BEGIN SELECT RAISE(ABORT, 'timeline is append-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS timeline_no_delete BEFORE DELETE ON timeline
BEGIN SELECT RAISE(ABORT, 'timeline is append-only: DELETE refused'); END;
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (kind, id)
);
CREATE TRIGGER IF NOT EXISTS records_no_update BEFORE UPDATE ON records
BEGIN SELECT RAISE(ABORT, 'records are insert-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS records_no_delete BEFORE DELETE ON records
BEGIN SELECT RAISE(ABORT, 'records are insert-only: DELETE refused'); END;
"""

# Derived binary snapshots (e.g. precomputed episode vectors), insert-only like records. Added
# after schema 1 without changing it: created on open when missing.
SNAPSHOTS = """
CREATE TABLE IF NOT EXISTS snapshots (
    seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    meta TEXT NOT NULL,
    body BLOB NOT NULL,
    UNIQUE (kind, id)
);
CREATE TRIGGER IF NOT EXISTS snapshots_no_update BEFORE UPDATE ON snapshots
BEGIN SELECT RAISE(ABORT, 'snapshots are insert-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS snapshots_no_delete BEFORE DELETE ON snapshots
BEGIN SELECT RAISE(ABORT, 'snapshots are insert-only: DELETE refused'); END;
"""

# The digest chains of the derived tables (`memory.timeline.anchor`): one row per derived row,
# insert-only. Added after schema 2 without changing it: created on open when missing; the
# first write chains the derived rows already stored.
DIGESTS = """
CREATE TABLE IF NOT EXISTS digests (
    tbl TEXT NOT NULL,
    seq INTEGER NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (tbl, seq)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS digests_no_update BEFORE UPDATE ON digests
BEGIN SELECT RAISE(ABORT, 'digests are insert-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS digests_no_delete BEFORE DELETE ON digests
BEGIN SELECT RAISE(ABORT, 'digests are insert-only: DELETE refused'); END;
"""

COLUMNS = "seq, id, prev_id, timestamp, principal, situation, role, kind, text, metadata, encoder, embedding"
# A row whose previous id is the id of the row before it (every row an append writes after the
# first) stores LINKED instead: the chain already says it, and the 64 characters were a sixth of
# the row. Reads put the id back (`READ_COLUMNS`), so an entry reads exactly as it was written,
# and `python -m memory verify` still recomputes every id from the one before it.
LINKED = ""
READ_COLUMNS = COLUMNS.replace(
    "prev_id",
    f"CASE WHEN prev_id <> '{LINKED}' THEN prev_id ELSE COALESCE("
    "(SELECT before.id FROM timeline AS before WHERE before.seq = timeline.seq - 1), "
    f"'{LINKED}') END",
)  # a missing row before (damage) leaves the link empty


ROLE_TEXT = {role: role.value for role in Role}  # the stored text of each role (enum .value is a slow descriptor)
KIND_TEXT = {kind: kind.value for kind in Kind}  # the stored text of each kind


class RecordKind(str, Enum):
    """What a derived record in the ``records`` table is; the value is the stored ``kind`` text."""

    EPISODE = "episode"  # an episode (`memory.episodes.Episode.to_record`)
    EDGE = "edge"  # a typed causal edge between episodes
    FACT = "fact_version"  # one version of a learned fact
    MARK = "reinforcement"  # an episode a reinforcement learned from
    FLUSH = "flush"  # the timeline seq up to which every episode was closed


def kind_text(kind: RecordKind | str) -> str:
    """The stored text of a record kind (a plain string passes through unchanged)."""
    return kind.value if isinstance(kind, RecordKind) else kind


def row_to_entry(row: Sequence[Any]) -> Entry:
    """The entry stored in a timeline row (columns in `COLUMNS` order)."""
    return rows_to_entries([row])[0]


def rows_to_entries(rows: Sequence[Sequence[Any]]) -> list[Entry]:
    """The entries stored in timeline rows (columns in `COLUMNS` order); derived vectors are recomputed together."""
    vectors = vectors_of([row[11] for row in rows], [row[8] for row in rows], [row[10] for row in rows])
    return [
        Entry(
            id=id_,
            prev_id=prev_id,
            seq=seq,
            timestamp=parse_timestamp(ts),
            principal=principal,
            situation=situation,
            role=Role(role),
            kind=Kind(kind),
            text=text,
            metadata=json.loads(metadata),
            embedding=vector,
            encoder=encoder,
        )
        for (seq, id_, prev_id, ts, principal, situation, role, kind, text, metadata, encoder, _), vector in zip(
            rows, vectors
        )
    ]


def stream_entries(rows: Iterable[Sequence[Any]], batch: int = 256) -> Iterator[Entry]:
    """The entries of timeline rows as they arrive, converted a batch at a time (derived vectors are
    recomputed together); a batch holding an unreadable row is converted row by row, so every
    entry before that row comes out before its error is raised."""
    rows = iter(rows)
    while chunk := list(itertools.islice(rows, batch)):
        try:
            converted = rows_to_entries(chunk)
        except (ValueError, KeyError, TypeError, json.JSONDecodeError):
            converted = None
        if converted is None:
            for row in chunk:
                yield row_to_entry(row)
        else:
            yield from converted


def vectors_of(
    blobs: Sequence[bytes], texts: Sequence[str], encoders: Sequence[str], *, writable: bool = True
) -> list[np.ndarray]:
    """The embeddings of stored rows: unpacked from their blobs, or recomputed from their texts.

    Derived blobs (`memory.timeline.blob`) are encoded in one batch per encoder. Raises
    `ValueError` for a damaged blob or a derived one whose encoder cannot be rebuilt.
    """
    out: list[np.ndarray | None] = [None] * len(blobs)
    derived: dict[str, list[int]] = {}
    packed: list[int] = []
    for index, blob in enumerate(blobs):
        if len(blob) == 1 and embedding_blob.is_derived(blob):
            derived.setdefault(encoders[index], []).append(index)
        else:
            packed.append(index)
    if packed:
        unpacked = embedding_blob.unpack_rows([blobs[i] for i in packed])
        for index, vector in zip(packed, unpacked):
            out[index] = vector.copy() if writable else vector
    for name, indexes in derived.items():
        encoder = rebuildable(name)
        if encoder is None:
            raise ValueError(f"a derived embedding of encoder {name!r}, which cannot be rebuilt from its name")
        matrix = encoder.encode([texts[i] for i in indexes])
        for index, vector in zip(indexes, matrix):
            out[index] = vector.copy() if writable or len(indexes) > 1 else vector
    return cast(list[np.ndarray], out)  # every slot was filled above


def linked_rows(rows: Sequence[tuple[Any, ...]], before: str | None) -> list[tuple[Any, ...]]:
    """Timeline rows (in `COLUMNS` order, consecutive) as stored: `LINKED` for each previous id that is the
    id of the row before (`before`: the id of the row preceding the first, None when there is none)."""
    stored = []
    for row in rows:
        stored.append((row[0], row[1], LINKED, *row[3:]) if before is not None and row[2] == before else tuple(row))
        before = row[1]
    return stored


def entry_to_row(
    entry: Entry, blob: bytes | None = None, timestamp: str | None = None, metadata: str | None = None
) -> tuple[Any, ...]:
    """The timeline row of an entry; parts already computed by the caller are passed in."""
    return (
        entry.seq,
        entry.id,
        entry.prev_id,
        format_timestamp(entry.timestamp) if timestamp is None else timestamp,
        entry.principal,
        entry.situation,
        entry.role.value,
        entry.kind.value,
        entry.text,
        canonical_metadata(entry.metadata) if metadata is None else metadata,
        entry.encoder,
        embedding_blob.pack(entry.embedding) if blob is None else blob,
    )


def pack_embeddings(vectors: Sequence[np.ndarray]) -> list[bytes]:
    """Stored blobs of many embeddings, vectorized when they share one dimension."""
    if len(vectors) > 1 and len({np.shape(v) for v in vectors}) == 1 and np.ndim(vectors[0]) == 1:
        return embedding_blob.pack_rows(np.stack(vectors))
    return [embedding_blob.pack(v) for v in vectors]


def entry_to_json(entry: Entry) -> dict[str, Any]:
    """JSON form of an entry (embedding as base64 of little-endian float32)."""
    return {
        "seq": entry.seq,
        "id": entry.id,
        "prev_id": entry.prev_id,
        "timestamp": format_timestamp(entry.timestamp),
        "principal": entry.principal,
        "situation": entry.situation,
        "role": entry.role.value,
        "kind": entry.kind.value,
        "text": entry.text,
        "metadata": entry.metadata,
        "encoder": entry.encoder,
        "embedding": base64.b64encode(np.asarray(entry.embedding, dtype="<f4").tobytes()).decode("ascii"),
    }


def entry_from_json(data: Mapping[str, Any]) -> Entry:
    """Inverse of `entry_to_json`; raises KeyError/ValueError/TypeError on bad input."""
    return Entry(
        id=str(data["id"]),
        prev_id=str(data["prev_id"]),
        seq=int(data["seq"]),
        timestamp=parse_timestamp(str(data["timestamp"])),
        principal=str(data["principal"]),
        situation=str(data["situation"]),
        role=Role(data["role"]),
        kind=Kind(data["kind"]),
        text=str(data["text"]),
        metadata=dict(data["metadata"]),
        embedding=np.frombuffer(base64.b64decode(data["embedding"], validate=True), dtype="<f4").astype(np.float32),
        encoder=str(data["encoder"]),
    )


class Prepared(NamedTuple):
    """Drafts with everything but their chain links computed (done before a store takes its write lock)."""

    batch: DraftBatch  # the drafts, as columns
    digests: list[str]  # embedding digests
    blobs: list[bytes]  # packed embeddings (or the derived tag)
    id_texts: list[IdText]  # the texts their ids hash, less the links


def prepare(drafts: Sequence[EntryDraft], *, derive: bool = False) -> Prepared:
    """Canonical fields, embedding digests, stored embeddings and id texts of `drafts`.

    A draft whose vector was made from its own text by an encoder `rebuildable` from its name
    (`EntryDraft.encoded_from_text`) keeps only the derived tag when `derive` asks for it: its
    vector is recomputed when read.
    """
    batch = DraftBatch.of(drafts)
    vectors = batch.embeddings
    digests = batch.digests if batch.digests is not None else embedding_digests(vectors)
    if derive and all(batch.encoded) and len(set(batch.encoders)) == 1 and _all_rebuild(batch.encoders[0], vectors):
        blobs = [embedding_blob.DERIVED] * len(vectors)  # a `Timeline` batch of the hashing encoder
    else:
        derived = [
            derive and encoded and _rebuilds(encoder, vector)
            for encoded, encoder, vector in zip(batch.encoded, batch.encoders, vectors)
        ]
        packed = iter(pack_embeddings([v for v, d in zip(vectors, derived) if not d]))
        blobs = [embedding_blob.DERIVED if d else next(packed) for d in derived]
    return Prepared(batch, digests, blobs, id_texts(batch, digests))


def _all_rebuild(encoder: str, vectors: Sequence[np.ndarray]) -> bool:
    """Whether `_rebuilds(encoder, vector)` holds for every vector."""
    rebuilt = rebuildable(encoder)
    return rebuilt is not None and all(vector.shape == (rebuilt.dim,) for vector in vectors)


def imported_blobs(entries: Sequence[Entry]) -> list[bytes]:
    """Stored embeddings of entries read from an export: derived where the vector is, bit for bit,
    its text's encoding by an encoder rebuildable from its name (checked here, in one batch per
    encoder), packed otherwise."""
    vectors = [np.asarray(entry.embedding, dtype=np.float32) for entry in entries]
    derived = [False] * len(entries)
    groups: dict[str, list[int]] = {}
    for index, (entry, vector) in enumerate(zip(entries, vectors)):
        if _rebuilds(entry.encoder, vector):
            groups.setdefault(entry.encoder, []).append(index)
    for name, indexes in groups.items():
        encoder = rebuildable(name)
        assert encoder is not None  # `_rebuilds` found that `name` rebuilds
        rebuilt = encoder.encode([entries[i].text for i in indexes])
        for index, row in zip(indexes, rebuilt):
            derived[index] = row.tobytes() == vectors[index].tobytes()
    packed = iter(pack_embeddings([v for v, d in zip(vectors, derived) if not d]))
    return [embedding_blob.DERIVED if d else next(packed) for d in derived]


def _rebuilds(encoder: str, vector: np.ndarray) -> bool:
    """Whether vectors named `encoder` of this shape can be recomputed from their text."""
    rebuilt = rebuildable(encoder)
    return rebuilt is not None and vector.shape == (rebuilt.dim,)


def chain_rows(prepared: Prepared, seq: int, prev_id: str) -> tuple[list[Entry], list[tuple[Any, ...]]]:
    """The entries and timeline rows of `prepared`, chained after the entry `prev_id` at `seq`."""
    ids = chained_ids(prepared.batch, prepared.id_texts, prepared.digests, prev_id=prev_id, seq=seq)
    rows = chained_rows(prepared, ids, seq=seq, prev_id=prev_id)
    return chained_entries(prepared.batch, ids, prev_id=prev_id, seq=seq), rows


def chained_rows(
    prepared: Prepared, ids: Sequence[str], *, seq: int, prev_id: str, linked: bool = False
) -> list[tuple[Any, ...]]:
    """The timeline rows of `prepared` with the ids `chained_ids` gave after `prev_id` at `seq`.

    With `linked`, each previous id that is the id of the row before is stored as `LINKED`
    (`linked_rows`): every row's but the first entry's of a timeline.
    """
    batch = prepared.batch
    previous = [prev_id, *ids[:-1]]
    if linked:
        previous = [LINKED] * len(ids)
        if seq == 0 and ids:
            previous[0] = prev_id
    return list(
        zip(
            range(seq, seq + len(ids)),
            ids,
            previous,
            batch.timestamp_texts,
            batch.principals,
            batch.situations,
            [ROLE_TEXT[role] for role in batch.roles],
            [KIND_TEXT[kind] for kind in batch.kinds],
            batch.texts,
            batch.metadata_json,
            batch.encoders,
            prepared.blobs,
        )
    )
