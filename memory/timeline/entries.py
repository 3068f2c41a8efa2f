"""Layer 1, the timeline: append-only, content-addressed, hash-chained entries.

An entry's id is the SHA-256 of a canonical JSON serialization of every field (text,
metadata, timestamp, principal, situation, role, kind, sequence number, encoder name and
a digest of the embedding) together with the previous entry's id. Changing any stored
byte changes the id, and every later id through the chain; `verify_chain` names the first
entry that no longer matches. The timeline is the only source of truth: episodes, the
graph and facts are projections of it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any, NamedTuple

import numpy as np

GENESIS_ID = "0" * 64  # the "previous id" of the first entry


class Role(str, Enum):
    """Who produced an entry."""

    ENVIRONMENT = "environment"
    AGENT = "agent"
    USER = "user"
    SYSTEM = "system"


class Kind(str, Enum):
    """What an entry is."""

    OBSERVATION = "observation"
    DECISION = "decision"
    ACTION = "action"
    OUTCOME = "outcome"
    CORRECTION = "correction"
    NOTE = "note"


@dataclass(frozen=True)
class EntryDraft:
    """An entry before it is chained: what the caller provides."""

    timestamp: datetime  # when it happened (timezone-aware; stored as UTC)
    principal: str  # tenant the entry belongs to; recall never crosses principals
    situation: str  # situation label, e.g. "incident_response"
    role: Role  # who produced it
    kind: Kind  # what it is
    text: str  # the content, already redacted
    metadata: Mapping[str, Any] = field(default_factory=dict)  # JSON-serializable extras
    embedding: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32), compare=False)  # unit vector
    encoder: str = ""  # name of the encoder that made `embedding`
    # (text, encoder, embedding) when `Timeline` made `embedding` by encoding `text` with the
    # hashing encoder: while all three are still this draft's own (a `dataclasses.replace` of
    # any of them breaks the match), a store may keep the text alone and recompute the vector
    # (`memory.timeline.blob`'s derived layout; see `encoded_from_text`)
    encoded: tuple[str, str, np.ndarray] | None = field(default=None, compare=False, repr=False)

    def encoded_from_text(self) -> bool:
        """Whether `embedding` is known to be `encoder`'s encoding of `text` (see `encoded`)."""
        made = self.encoded
        return made is not None and made[2] is self.embedding and made[1] == self.encoder and made[0] == self.text


@dataclass(frozen=True)
class Entry:
    """A chained, immutable timeline entry."""

    id: str  # SHA-256 hex of the canonical serialization (see module docstring)
    prev_id: str  # id of the previous entry, GENESIS_ID for the first
    seq: int  # 0-based position in the timeline
    timestamp: datetime  # UTC, timezone-aware
    principal: str  # tenant
    situation: str  # situation label
    role: Role  # who produced it
    kind: Kind  # what it is
    text: str  # redacted content
    metadata: Mapping[str, Any]  # JSON-serializable extras
    embedding: np.ndarray = field(compare=False, repr=False)  # float32 unit vector; covered by the id
    encoder: str = ""  # name of the encoder that made `embedding`


def to_utc(timestamp: datetime) -> datetime:
    """Return `timestamp` in UTC; naive datetimes are rejected, not guessed."""
    if timestamp.tzinfo is UTC:
        return timestamp
    if timestamp.tzinfo is None or timestamp.utcoffset() is None:
        raise ValueError(f"timestamp {timestamp.isoformat()} has no timezone")
    return timestamp.astimezone(UTC)


def format_timestamp(timestamp: datetime) -> str:
    """Canonical text form: ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    t = to_utc(timestamp)
    if t.year < 1000:  # strftime's %Y is not zero-padded below 1000 on every platform: keep its form
        return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return _TIMESTAMP % (t.year, t.month, t.day, t.hour, t.minute, t.second, t.microsecond)


_TIMESTAMP = "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ"  # %-formatting: twice as fast as the f-string it replaced


def parse_timestamp(text: str) -> datetime:
    """Inverse of `format_timestamp` (accepts any ISO-8601 form with an offset)."""
    return to_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_QUOTE = json.encoder.encode_basestring  # how json.dumps(..., ensure_ascii=False) writes a string
# The C encoder behind `_CANONICAL`, built once (JSONEncoder.encode builds one per call).
# Without a markers dict it does not look for cycles: a cyclic value ends in RecursionError,
# and `canonical_metadata` then lets `_CANONICAL` raise its usual ValueError. (`json.encoder`
# sets `c_make_encoder` to None without the C accelerator; typeshed does not declare it.)
_C_MAKE_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_C_CANONICAL = (
    _C_MAKE_ENCODER(None, _CANONICAL.default, _QUOTE, None, ":", ",", True, False, False)
    if _C_MAKE_ENCODER is not None
    else None
)


def canonical_metadata(metadata: Mapping[str, Any]) -> str:
    """Canonical JSON of metadata (sorted keys, no spaces); raises on non-JSON values."""
    if type(metadata) is dict:
        if not metadata:
            return "{}"
        if _C_CANONICAL is not None:
            try:
                return "".join(_C_CANONICAL(metadata, 0))
            except RecursionError:
                pass
    return _CANONICAL.encode(metadata)


def embedding_digest(embedding: np.ndarray) -> str:
    """SHA-256 of the little-endian float32 bytes of an embedding."""
    return hashlib.sha256(np.ascontiguousarray(embedding, dtype="<f4").reshape(-1).data).hexdigest()


_QUOTED_ROLE = {role: _QUOTE(role.value) for role in Role}  # enum .value is a slow descriptor
_QUOTED_KIND = {kind: _QUOTE(kind.value) for kind in Kind}


class Canonical(NamedTuple):
    """An entry's fields in the form its id covers (and the store keeps)."""

    timestamp: str  # `format_timestamp` of the timestamp
    role: Role  # the role as an enum member
    kind: Kind  # the kind as an enum member
    metadata: dict[str, Any]  # metadata as it reads back from its canonical JSON
    metadata_json: str  # canonical JSON of `metadata`


def canonical_fields(draft: EntryDraft | Entry) -> Canonical:
    """The canonical forms `entry_id` hashes: computed once, shared by the id and the stored row."""
    role = draft.role if type(draft.role) is Role else Role(draft.role)
    kind = draft.kind if type(draft.kind) is Kind else Kind(draft.kind)
    metadata, metadata_json = read_back(draft.metadata)
    return Canonical(format_timestamp(draft.timestamp), role, kind, metadata, metadata_json)


_READ_BACK: dict[tuple[tuple[str, str], ...], tuple[dict[str, str], str]] = {}  # see `read_back`
_READ_BACK_LIMIT = 4096  # remembered metadata before the memo starts over
FLAT_METADATA_ITEMS = 8  # metadata with more items than this is not remembered


def read_back(metadata: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """Metadata as it reads back from its canonical JSON, and the canonical JSON of that.

    Flat metadata of strings (a service, a host, a ticket) reads back as itself, and it repeats
    from entry to entry: its result is remembered by content (a fresh dict is returned each time).
    """
    if type(metadata) is dict and len(metadata) <= FLAT_METADATA_ITEMS:
        if not metadata:
            return {}, "{}"
        key = tuple(metadata.items())
        if all([type(name) is str and type(value) is str for name, value in key]):
            found = _READ_BACK.get(key)
            if found is None:
                found = _read_back(metadata)
                if len(_READ_BACK) >= _READ_BACK_LIMIT:
                    _READ_BACK.clear()
                _READ_BACK[key] = found
            return dict(found[0]), found[1]
    return _read_back(metadata)


def _read_back(metadata: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    parsed = json.loads(canonical_metadata(metadata))
    return parsed, canonical_metadata(parsed)


def entry_id(draft: EntryDraft | Entry, *, prev_id: str, seq: int) -> str:
    """Content address of an entry: SHA-256 over all fields and the previous id."""
    return id_from_canonical(
        draft, canonical_fields(draft), embedding_digest(draft.embedding), prev_id=prev_id, seq=seq
    )


def id_from_canonical(draft: EntryDraft | Entry, fields: Canonical, digest: str, *, prev_id: str, seq: int) -> str:
    """`entry_id` from already computed canonical fields and embedding digest.

    The hashed text is the canonical JSON (sorted keys, no spaces, non-ASCII kept) of
    ``{prev_id, seq, timestamp, principal, situation, role, kind, text, metadata, encoder,
    embedding_sha256}``; it is written directly when every field has its usual type, which
    gives the same characters as ``json.dumps`` of that object (a test checks it).
    """
    principal, situation, text, encoder = draft.principal, draft.situation, draft.text, draft.encoder
    if (
        type(seq) is int
        and type(prev_id) is str
        and type(principal) is str
        and type(situation) is str
        and type(text) is str
        and type(encoder) is str
    ):
        blob = _written_id_text(draft, fields, digest, prev_id=prev_id, seq=seq)
    else:
        blob = _dumped_id_text(draft, fields, digest, prev_id=prev_id, seq=seq)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _written_id_text(draft: EntryDraft | Entry, fields: Canonical, digest: str, *, prev_id: str, seq: int) -> str:
    """The text `id_from_canonical` hashes, written field by field (every field of its usual type)."""
    return "".join(
        (
            '{"embedding_sha256":',
            _QUOTE(digest),
            ',"encoder":',
            _QUOTE(draft.encoder),
            ',"kind":',
            _QUOTED_KIND[fields.kind],
            ',"metadata":',
            fields.metadata_json,
            ',"prev_id":',
            _QUOTE(prev_id),
            ',"principal":',
            _QUOTE(draft.principal),
            ',"role":',
            _QUOTED_ROLE[fields.role],
            ',"seq":',
            int.__repr__(seq),
            ',"situation":',
            _QUOTE(draft.situation),
            ',"text":',
            _QUOTE(draft.text),
            ',"timestamp":',
            _QUOTE(fields.timestamp),
            "}",
        )
    )


def _dumped_id_text(draft: EntryDraft | Entry, fields: Canonical, digest: str, *, prev_id: str, seq: int) -> str:
    """The text `id_from_canonical` hashes, by ``json.dumps`` (for fields of other types)."""
    return json.dumps(
        {
            "prev_id": prev_id,
            "seq": seq,
            "timestamp": fields.timestamp,
            "principal": draft.principal,
            "situation": draft.situation,
            "role": fields.role.value,
            "kind": fields.kind.value,
            "text": draft.text,
            "metadata": fields.metadata,
            "encoder": draft.encoder,
            "embedding_sha256": digest,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


def chain(draft: EntryDraft, *, prev_id: str, seq: int) -> Entry:
    """Turn a draft into the entry that follows `prev_id` at position `seq`."""
    return chain_canonical(draft, canonical_fields(draft), prev_id=prev_id, seq=seq)


def chain_canonical(
    draft: EntryDraft, fields: Canonical, *, prev_id: str, seq: int, digest: str | None = None
) -> Entry:
    """`chain` from already computed canonical fields (and optionally the embedding digest)."""
    embedding = np.asarray(draft.embedding, dtype=np.float32)
    if digest is None:
        digest = embedding_digest(embedding)
    return Entry(
        id=id_from_canonical(draft, fields, digest, prev_id=prev_id, seq=seq),
        prev_id=prev_id,
        seq=seq,
        timestamp=to_utc(draft.timestamp),
        principal=draft.principal,
        situation=draft.situation,
        role=fields.role,
        kind=fields.kind,
        text=draft.text,
        metadata=fields.metadata,
        embedding=embedding,
        encoder=draft.encoder,
    )


class ChainBreak(NamedTuple):
    """The first entry whose stored id or link does not match its content."""

    seq: int  # position of the bad entry
    id: str  # the id as stored
    reason: str  # what did not match


def verify_chain(
    entries: Iterable[Entry],
    *,
    start_prev_id: str = GENESIS_ID,
    start_seq: int = 0,
    erased: Mapping[int, str] | None = None,
) -> ChainBreak | None:
    """Recompute the chain; return the first break, or None when every entry matches.

    `erased` maps the seq of each entry whose content was erased by record
    (`memory.timeline.erasure`) to its id: such an entry must keep that id and its link, and
    the next entry's id, which covers it, is recomputed as usual.
    """
    prev_id, expected_seq = start_prev_id, start_seq
    erased = erased or {}
    for entry in entries:
        if entry.seq != expected_seq:
            return ChainBreak(entry.seq, entry.id, f"sequence number {entry.seq}, expected {expected_seq}")
        if entry.prev_id != prev_id:
            return ChainBreak(
                entry.seq, entry.id, f"previous id {entry.prev_id[:12]}… does not link to {prev_id[:12]}…"
            )
        if entry.seq in erased:
            if erased[entry.seq] != entry.id or entry.text or entry.embedding.size:
                return ChainBreak(entry.seq, entry.id, "erased entry: another id, or its content is still stored")
            prev_id, expected_seq = entry.id, expected_seq + 1
            continue
        recomputed = entry_id(entry, prev_id=prev_id, seq=entry.seq)
        if recomputed != entry.id:
            return ChainBreak(entry.seq, entry.id, f"content does not match its id (recomputed {recomputed[:12]}…)")
        prev_id, expected_seq = entry.id, expected_seq + 1
    return None
