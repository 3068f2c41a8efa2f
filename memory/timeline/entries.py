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
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import TYPE_CHECKING, Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from memory.errors import EncoderMismatch
from memory.timeline.encoder import Encoder
from memory.timeline.redaction import PatternRedactor, Redactor, redact_value
from memory.timeline.validation import check_label, check_metadata, check_text, check_timestamp

if TYPE_CHECKING:  # the protocols module imports this one
    from memory.timeline.protocols import EntryLog

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
    if timestamp.tzinfo is timezone.utc:
        return timestamp
    if timestamp.tzinfo is None or timestamp.utcoffset() is None:
        raise ValueError(f"timestamp {timestamp.isoformat()} has no timezone")
    return timestamp.astimezone(timezone.utc)


def format_timestamp(timestamp: datetime) -> str:
    """Canonical text form: ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    t = to_utc(timestamp)
    if t.year < 1000:  # strftime's %Y is not zero-padded below 1000 on every platform: keep its form
        return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (t.year, t.month, t.day, t.hour, t.minute, t.second,
                                                    t.microsecond)


def parse_timestamp(text: str) -> datetime:
    """Inverse of `format_timestamp` (accepts any ISO-8601 form with an offset)."""
    return to_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_QUOTE = json.encoder.encode_basestring  # how json.dumps(..., ensure_ascii=False) writes a string
# The C encoder behind `_CANONICAL`, built once (JSONEncoder.encode builds one per call).
# Without a markers dict it does not look for cycles: a cyclic value ends in RecursionError,
# and `canonical_metadata` then lets `_CANONICAL` raise its usual ValueError.
_C_CANONICAL = (json.encoder.c_make_encoder(None, _CANONICAL.default, _QUOTE, None, ":", ",", True, False, False)
                if json.encoder.c_make_encoder is not None else None)


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
    return hashlib.sha256(np.ascontiguousarray(embedding, dtype="<f4").reshape(-1)).hexdigest()


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
    metadata = json.loads(canonical_metadata(draft.metadata))
    return Canonical(format_timestamp(draft.timestamp), role, kind, metadata, canonical_metadata(metadata))


def entry_id(draft: EntryDraft | Entry, *, prev_id: str, seq: int) -> str:
    """Content address of an entry: SHA-256 over all fields and the previous id."""
    return id_from_canonical(draft, canonical_fields(draft), embedding_digest(draft.embedding), prev_id=prev_id,
                             seq=seq)


def id_from_canonical(draft: EntryDraft | Entry, fields: Canonical, digest: str, *, prev_id: str, seq: int) -> str:
    """`entry_id` from already computed canonical fields and embedding digest.

    The hashed text is the canonical JSON (sorted keys, no spaces, non-ASCII kept) of
    ``{prev_id, seq, timestamp, principal, situation, role, kind, text, metadata, encoder,
    embedding_sha256}``; it is written directly when every field has its usual type, which
    gives the same characters as ``json.dumps`` of that object (a test checks it).
    """
    principal, situation, text, encoder = draft.principal, draft.situation, draft.text, draft.encoder
    if (type(seq) is int and type(prev_id) is str and type(principal) is str and type(situation) is str
            and type(text) is str and type(encoder) is str):
        blob = "".join(('{"embedding_sha256":', _QUOTE(digest), ',"encoder":', _QUOTE(encoder), ',"kind":',
                        _QUOTED_KIND[fields.kind], ',"metadata":', fields.metadata_json, ',"prev_id":',
                        _QUOTE(prev_id), ',"principal":', _QUOTE(principal), ',"role":', _QUOTED_ROLE[fields.role],
                        ',"seq":', int.__repr__(seq), ',"situation":', _QUOTE(situation), ',"text":', _QUOTE(text),
                        ',"timestamp":', _QUOTE(fields.timestamp), "}"))
    else:
        blob = json.dumps({"prev_id": prev_id, "seq": seq, "timestamp": fields.timestamp, "principal": principal,
                           "situation": situation, "role": fields.role.value, "kind": fields.kind.value,
                           "text": text, "metadata": fields.metadata, "encoder": encoder,
                           "embedding_sha256": digest}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def chain(draft: EntryDraft, *, prev_id: str, seq: int) -> Entry:
    """Turn a draft into the entry that follows `prev_id` at position `seq`."""
    return chain_canonical(draft, canonical_fields(draft), prev_id=prev_id, seq=seq)


def chain_canonical(draft: EntryDraft, fields: Canonical, *, prev_id: str, seq: int,
                    digest: str | None = None) -> Entry:
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


def verify_chain(entries: Iterable[Entry], *, start_prev_id: str = GENESIS_ID, start_seq: int = 0) -> ChainBreak | None:
    """Recompute the chain; return the first break, or None when every entry matches."""
    prev_id, expected_seq = start_prev_id, start_seq
    for entry in entries:
        if entry.seq != expected_seq:
            return ChainBreak(entry.seq, entry.id, f"sequence number {entry.seq}, expected {expected_seq}")
        if entry.prev_id != prev_id:
            return ChainBreak(entry.seq, entry.id, f"previous id {entry.prev_id[:12]}… does not link to {prev_id[:12]}…")
        recomputed = entry_id(entry, prev_id=prev_id, seq=entry.seq)
        if recomputed != entry.id:
            return ChainBreak(entry.seq, entry.id, f"content does not match its id (recomputed {recomputed[:12]}…)")
        prev_id, expected_seq = entry.id, expected_seq + 1
    return None


def stored_encoder(store: EntryLog) -> str | None:
    """The name of the encoder that embedded a store's entries (None when it has none).

    It is that of the first entry: a `Timeline` never appends another encoder's vectors.
    """
    first = list(store.entries(stop=1))
    return first[0].encoder if first else None


class Timeline:
    """Writes entries: redacts, embeds, then appends durably through a store.

    Args:
        store: where entries are kept (see `memory.timeline.EntryLog`).
        encoder: makes the embedding of each entry's text; it must be the encoder that
            embedded the store's entries, if it has any (vectors of two encoders do not compare).
        redactor: applied to text and metadata strings before hashing and storage;
            `PatternRedactor` by default, `NoRedaction` to opt out explicitly.

    Raises:
        EncoderMismatch: the store's entries were embedded by another encoder.
    """

    def __init__(self, store: EntryLog, encoder: Encoder, redactor: Redactor | None = None) -> None:
        stored = stored_encoder(store)
        if stored and stored != encoder.name:
            raise EncoderMismatch(f"{getattr(store, 'path', 'the store')}: its entries were embedded by encoder "
                                  f"{stored!r}, not {encoder.name!r}; open it with the encoder that wrote it "
                                  "(vectors of two encoders cannot be compared)")
        self.store = store
        self.encoder = encoder
        self.redactor: Redactor = redactor if redactor is not None else PatternRedactor()

    def draft(self, text: str, **fields: Any) -> EntryDraft:
        """Build a redacted, embedded draft ready for `Store.append`.

        Keyword fields: ``kind``, ``role``, ``timestamp`` (timezone-aware), ``situation``,
        and optionally ``principal`` (default "default") and ``metadata``.
        """
        clean_text = self.redactor.redact(check_text(text))
        return self._draft(clean_text, self.encoder.encode([clean_text])[0], **fields)

    def _draft(
        self,
        clean_text: str,
        embedding: np.ndarray,
        *,
        kind: Kind | str,
        role: Role | str,
        timestamp: datetime,
        situation: str,
        principal: str = "default",
        metadata: Mapping[str, Any] | None = None,
    ) -> EntryDraft:
        check_metadata(metadata)
        clean_meta = redact_value(dict(metadata), self.redactor.redact) if metadata else {}
        canonical_metadata(clean_meta)  # fail early on non-JSON metadata
        return EntryDraft(
            timestamp=check_timestamp(timestamp),
            principal=check_label("principal", principal),
            situation=self.redactor.redact(check_label("situation", situation)),
            role=role if type(role) is Role else Role(role),
            kind=kind if type(kind) is Kind else Kind(kind),
            text=clean_text,
            metadata=clean_meta,
            embedding=np.asarray(embedding, dtype=np.float32),
            encoder=self.encoder.name,
        )

    def append(self, text: str, **fields: Any) -> Entry:
        """Redact, embed and durably append one entry; returns it once committed."""
        return self.store.append(self.draft(text, **fields))

    def append_many(self, items: Sequence[Mapping[str, Any]]) -> list[Entry]:
        """Batch path: embed all texts at once and append them in one transaction.

        Each item holds the keyword arguments of `draft`, including ``text``.
        """
        clean_texts = [self.redactor.redact(check_text(item["text"])) for item in items]
        vectors = self.encoder.encode(clean_texts)
        drafts = [
            self._draft(clean, vector, **{key: value for key, value in item.items() if key != "text"})
            for item, clean, vector in zip(items, clean_texts, vectors)
        ]
        return self.store.append_many(drafts)
