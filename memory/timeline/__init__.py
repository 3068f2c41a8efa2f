"""Layer [1], the timeline: append-only, content-addressed, hash-chained entries.

`Timeline` (`writer`) redacts (`Redactor`), embeds (`Encoder`) and appends `Entry` values, each
addressed by the SHA-256 of its content and its predecessor's id (`entries`). A `Store`
keeps them: `SQLiteStore` is one SQLite file whose triggers refuse UPDATE and DELETE,
holding the timeline, the derived records of each `RecordKind` and binary snapshots
(`store`, `schema`, `protocols`); `PostgresStore` keeps the same on a server shared by
many processes (`postgres`), and `open_store` opens either by its name (`stores`);
embeddings are packed by `blob`. Encoders (`encoder`, `semantic`) are chosen by name
with `named_encoder`; a `Timeline` refuses a store another encoder embedded. `erasure` forgets
an entry's or a principal's content on request while the rest still verifies. Every later
layer is a projection of this one.
"""

from memory.timeline.encoder import ENCODER_NAMES, Encoder, HashingEncoder, SentenceTransformerEncoder, named_encoder
from memory.timeline.entries import ChainBreak, Entry, EntryDraft, Kind, Role, format_timestamp, parse_timestamp
from memory.timeline.integrity import Audit, audit
from memory.timeline.protocols import EntryLog, EntryParts, RecordLog, SnapshotLog, Store, StoreStats
from memory.timeline.redaction import NoRedaction, PatternRedactor, Redactor
from memory.timeline.schema import RecordKind
from memory.timeline.semantic import SemanticEncoder
from memory.timeline.store import SQLiteStore
from memory.timeline.stores import open_store
from memory.timeline.validation import check_label
from memory.timeline.writer import Timeline

__all__ = [
    "ENCODER_NAMES",
    "Audit",
    "ChainBreak",
    "Encoder",
    "Entry",
    "EntryDraft",
    "EntryLog",
    "EntryParts",
    "HashingEncoder",
    "Kind",
    "NoRedaction",
    "PatternRedactor",
    "RecordKind",
    "RecordLog",
    "Redactor",
    "Role",
    "SQLiteStore",
    "SemanticEncoder",
    "SentenceTransformerEncoder",
    "SnapshotLog",
    "Store",
    "StoreStats",
    "Timeline",
    "audit",
    "check_label",
    "format_timestamp",
    "named_encoder",
    "open_store",
    "parse_timestamp",
]
