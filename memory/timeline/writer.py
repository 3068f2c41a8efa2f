"""The write path of the timeline: redact, embed, then append durably through a store.

`Timeline` is what callers write with; `memory.timeline.entries` holds the entries it makes
and the chain they form.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from memory.errors import EncoderMismatch
from memory.timeline.batch import DraftBatch
from memory.timeline.encoder import Encoder, HashingEncoder
from memory.timeline.entries import (
    FLAT_METADATA_ITEMS,
    Entry,
    EntryDraft,
    Kind,
    Role,
    canonical_fields,
    canonical_metadata,
    format_timestamp,
    read_back,
    to_utc,
)
from memory.timeline.ingest_worker import CHUNK, EncodingWorkers
from memory.timeline.redaction import PatternRedactor, Redactor
from memory.timeline.redaction_values import leaves_unchanged, redact_value
from memory.timeline.validation import (
    MAX_METADATA_CHARS,
    MAX_YEAR,
    MIN_YEAR,
    check_label,
    check_metadata,
    check_text,
    check_timestamp,
    is_plain,
)

if TYPE_CHECKING:  # the protocols module imports the entries module
    from memory.timeline.protocols import EntryLog

_LABEL_MEMORY = 4096  # checked labels a timeline remembers before it starts over


def _utf8(text: str) -> bool:
    """Whether UTF-8 can encode `text` (lone surrogates cannot)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
        workers: worker processes `append_many` hands the redaction, embedding and digests of a batch
            of more than 256 entries to, on a store that takes batches as they come (`SQLiteStore`);
            0 (the default) does all the work in this process. `close` stops them.

    Raises:
        EncoderMismatch: the store's entries were embedded by another encoder.
    """

    def __init__(
        self, store: EntryLog, encoder: Encoder, redactor: Redactor | None = None, *, workers: int = 0
    ) -> None:
        stored = stored_encoder(store)
        if stored and stored != encoder.name:
            raise EncoderMismatch(
                f"{getattr(store, 'path', 'the store')}: its entries were embedded by encoder "
                f"{stored!r}, not {encoder.name!r}; open it with the encoder that wrote it "
                "(vectors of two encoders cannot be compared)"
            )
        self.store = store
        self.encoder = encoder
        self.redactor: Redactor = redactor if redactor is not None else PatternRedactor()
        self.workers = workers  # processes that redact, embed and digest large batches (0: this one alone)
        self._pool: EncodingWorkers | None = None
        # Only the hashing encoder itself is known to make what its name says (a store may rebuild it).
        self._rebuildable = type(encoder) is HashingEncoder
        self._principals: set[str] = set()  # principal labels already checked
        self._situations: dict[str, str] = {}  # situation labels already checked, and their redacted form
        self._clean_metadata: set[tuple[tuple[str, str], ...]] = (
            set()
        )  # flat metadata of strings redaction leaves alone
        self._memo_redactor: Redactor = self.redactor  # the redactor the memos above and below are of
        # flat metadata of strings, and `read_back` of what `_metadata` makes of it
        self._flat_metadata: dict[tuple[tuple[str, str], ...], tuple[dict[str, Any], str]] = {}
        self._clean_json: set[str] = set()  # canonical JSON of plain metadata `_unchanged_text` passed

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
        vector = np.asarray(embedding, dtype=np.float32)
        return EntryDraft(
            timestamp=check_timestamp(timestamp),
            principal=principal
            if type(principal) is str and principal in self._principals
            else self._principal(principal),
            situation=(
                self._situations.get(situation)
                if type(situation) is str and self._memo_redactor is self.redactor
                else None
            )
            or self._situation(situation),
            role=role if type(role) is Role else Role(role),
            kind=kind if type(kind) is Kind else Kind(kind),
            text=clean_text,
            metadata=self._metadata(metadata),
            embedding=vector,
            encoder=self.encoder.name,
            encoded=(clean_text, self.encoder.name, vector) if self._rebuildable else None,
        )

    def _metadata(self, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
        """Checked, redacted metadata; flat metadata is checked and pre-checked through its canonical JSON once."""
        if not metadata:
            check_metadata(metadata)
            return {}
        key = tuple(metadata.items()) if type(metadata) is dict and len(metadata) <= FLAT_METADATA_ITEMS else ()
        if key and all([type(name) is str and type(value) is str for name, value in key]):
            self._forget_if_redactor_changed()
            if key in self._clean_metadata:  # flat metadata of strings seen before, and left as it was
                return dict(metadata)
            clean = self._checked_metadata(metadata)
            if clean == metadata:
                if len(self._clean_metadata) >= _LABEL_MEMORY:
                    self._clean_metadata.clear()
                self._clean_metadata.add(key)
            return clean
        return self._checked_metadata(metadata)

    def _unchanged_text(self, metadata: Mapping[str, Any]) -> str | None:
        """The canonical JSON of plain `metadata` that passes every check and that redaction leaves
        alone (so it is stored as given); None when the full check and redaction must run."""
        if not is_plain(metadata):
            return None
        try:
            text = canonical_metadata(metadata)
        except ValueError:  # NaN or infinity: the full check names it
            return None
        self._forget_if_redactor_changed()
        if text in self._clean_json:
            return text
        if len(text) <= MAX_METADATA_CHARS and _utf8(text) and leaves_unchanged(self.redactor, text):
            if len(self._clean_json) >= _LABEL_MEMORY:
                self._clean_json.clear()
            self._clean_json.add(text)
            return text
        return None

    def _checked_metadata(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        if self._unchanged_text(metadata) is not None:
            return {key: list(value) if type(value) is list else value for key, value in metadata.items()}
        check_metadata(metadata)
        clean_meta = redact_value(dict(metadata), self.redactor.redact)
        canonical_metadata(clean_meta)  # fail early on non-JSON metadata
        return clean_meta

    def _forget_if_redactor_changed(self) -> None:
        """Start the memos of redacted labels and metadata over when `redactor` was replaced."""
        if self._memo_redactor is not self.redactor:
            self._memo_redactor = self.redactor
            self._situations.clear()
            self._clean_metadata.clear()
            self._flat_metadata.clear()
            self._clean_json.clear()

    def _principal(self, principal: Any) -> str:
        """A checked principal label, remembered once checked (labels repeat)."""
        checked = check_label("principal", principal)
        if type(checked) is str:
            if len(self._principals) >= _LABEL_MEMORY:
                self._principals.clear()
            self._principals.add(checked)
        return checked

    def _situation(self, situation: Any) -> str:
        """A checked and redacted situation label, remembered by its raw form (labels repeat)."""
        self._forget_if_redactor_changed()
        clean = self.redactor.redact(check_label("situation", situation))
        if type(situation) is str and clean:
            if len(self._situations) >= _LABEL_MEMORY:
                self._situations.clear()
            self._situations[situation] = clean
        return clean

    def append(self, text: str, **fields: Any) -> Entry:
        """Redact, embed and durably append one entry; returns it once committed.

        A store that takes batches as they come (`SQLiteStore`) gets a batch of one, made as `batch` makes it:
        the entry `draft` makes, without the draft object and its conversion to columns in between.
        """
        if getattr(self.store, "append_batches", None) is None:
            return self.store.append(self.draft(text, **fields))
        clean_text = self.redactor.redact(check_text(text))
        fields["text"] = text  # (`batch` reads the keys of an item; its text is `clean_text`)
        return self.store.append_many(self.batch([fields], [clean_text], self.encoder.encode([clean_text])))[0]

    def append_many(self, items: Sequence[Mapping[str, Any]]) -> list[Entry]:
        """Batch path: embed all texts at once and append them in one transaction.

        Each item holds the keyword arguments of `draft`, including ``text``. With `workers`, a batch of
        more than one chunk is redacted, embedded and digested by the workers while this process makes,
        chains and inserts the drafts of the chunks they returned (`memory.timeline.ingest_worker`).

        Raises:
            WorkerLost: a worker died before it returned its part; nothing of the batch was stored.
        """
        append_batches = getattr(self.store, "append_batches", None)
        if self.workers > 0 and len(items) > CHUNK and append_batches is not None:
            texts = [check_text(item["text"]) for item in items]
            starts = range(0, len(items), CHUNK)
            encoded = self._workers().map(texts[start : start + CHUNK] for start in starts)
            try:
                try:  # the other fields of every entry, made while the workers start on the first chunks
                    columns = self._columns(items)
                except Exception:
                    for _ in encoded:  # their errors come first, as in one process (redaction and encoding do)
                        pass
                    raise
                return append_batches(
                    columns.part(start, part.clean, list(part.vectors), part.digests)
                    for start, part in zip(starts, encoded)
                )
            finally:
                encoded.close()  # (after an error: the workers still busy with this batch stop)
        clean_texts = [self.redactor.redact(check_text(item["text"])) for item in items]
        return self.store.append_many(self.batch(items, clean_texts, self.encoder.encode(clean_texts)))

    def _workers(self) -> EncodingWorkers:
        """The timeline's workers: started on first use, and again after one died or the redactor or encoder
        was replaced."""
        pool = self._pool
        if pool is None or pool.broken or pool.redactor is not self.redactor or pool.encoder is not self.encoder:
            self.close()
            self._pool = pool = EncodingWorkers(self.workers, self.redactor, self.encoder)
            weakref.finalize(self, pool.close)
        return pool

    def close(self) -> None:
        """Stop the workers this timeline started, if any (its store stays open)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def batch(
        self,
        items: Sequence[Mapping[str, Any]],
        clean_texts: Sequence[str],
        vectors: Any,
        digests: list[str] | None = None,
    ) -> DraftBatch:
        """The drafts of `items` as one `DraftBatch`, given their redacted texts, their vectors and (when
        already computed) the digests of those vectors (`_columns`, paired as `zip` pairs them)."""
        if type(vectors) is np.ndarray and vectors.dtype == np.float32 and vectors.ndim == 2:
            embeddings: list[np.ndarray] = list(vectors)
        else:
            embeddings = [np.asarray(vector, dtype=np.float32) for vector in vectors]
        count = min(len(items), len(clean_texts), len(embeddings))
        digests = None if digests is None else digests[:count]
        return self._columns(items[:count]).part(0, list(clean_texts[:count]), embeddings[:count], digests)

    def _columns(self, items: Sequence[Mapping[str, Any]]) -> DraftBatch:
        """Every column of `items` as a `DraftBatch` but their texts and embeddings (empty: `DraftBatch.part`
        adds them).

        Each entry is what `draft` makes of its item, in canonical form, with no object made for it:
        labels, enums and flat metadata are looked up in memos, plain metadata is written and parsed
        once, the timestamp formatted once. An item of any other shape goes through `_draft` (which
        raises the same errors the single path does).
        """
        batch = DraftBatch([], [], [], [], [], [], [], [], [], [self.encoder.name] * len(items), [], [])
        for item in items:
            if type(item) is not dict or not _REQUIRED <= item.keys() <= _ACCEPTED:
                # (`_add_draft` reads only the other fields of the draft: its text and embedding are added later)
                fields = {k: v for k, v in item.items() if k != "text"}
                self._add_draft(batch, self._draft("", _NO_VECTOR, **fields))
                continue
            timestamp = item["timestamp"]
            if not (type(timestamp) is datetime and timestamp.tzinfo is UTC and MIN_YEAR <= timestamp.year <= MAX_YEAR):
                timestamp = check_timestamp(timestamp)
            principal = item.get("principal", "default")
            if type(principal) is not str or principal not in self._principals:
                principal = self._principal(principal)
            situation = item["situation"]
            clean_situation = (
                self._situations.get(situation)
                if type(situation) is str and self._memo_redactor is self.redactor
                else None
            ) or self._situation(situation)
            role, kind = item["role"], item["kind"]
            role = role if type(role) is Role else (_ROLES.get(role) if type(role) is str else None) or Role(role)
            kind = kind if type(kind) is Kind else (_KINDS.get(kind) if type(kind) is str else None) or Kind(kind)
            metadata, metadata_json = self._canonical_metadata(item.get("metadata"))
            batch.timestamps.append(timestamp)
            batch.timestamp_texts.append(format_timestamp(timestamp))
            batch.principals.append(principal)
            batch.situations.append(clean_situation)
            batch.roles.append(role)
            batch.kinds.append(kind)
            batch.metadata.append(metadata)
            batch.metadata_json.append(metadata_json)
            batch.encoded.append(self._rebuildable)
        return batch

    def _add_draft(self, batch: DraftBatch, draft: EntryDraft) -> None:
        """Add the canonical fields of one draft `_draft` made to `batch` (its text, encoder and vector are there)."""
        fields = canonical_fields(draft)
        batch.timestamps.append(to_utc(draft.timestamp))
        batch.timestamp_texts.append(fields.timestamp)
        batch.principals.append(draft.principal)
        batch.situations.append(draft.situation)
        batch.roles.append(fields.role)
        batch.kinds.append(fields.kind)
        batch.metadata.append(fields.metadata)
        batch.metadata_json.append(fields.metadata_json)
        batch.encoded.append(self._rebuildable)

    def _canonical_metadata(self, metadata: Any) -> tuple[dict[str, Any], str]:
        """``read_back(self._metadata(metadata))``: checked, redacted metadata as it reads back, and its canonical
        JSON. Flat metadata of strings is remembered by content; plain metadata that redaction leaves alone
        is written once and parsed once (for such values, the JSON of the parsed value is the same text)."""
        if metadata is None or (type(metadata) is dict and not metadata):
            return {}, "{}"
        if type(metadata) is dict:
            if len(metadata) <= FLAT_METADATA_ITEMS:
                key = tuple(metadata.items())
                if all([type(name) is str and type(value) is str for name, value in key]):
                    self._forget_if_redactor_changed()
                    found = self._flat_metadata.get(key)
                    if found is None:
                        found = read_back(self._metadata(metadata))
                        if len(self._flat_metadata) >= _LABEL_MEMORY:
                            self._flat_metadata.clear()
                        self._flat_metadata[key] = found
                    return dict(found[0]), found[1]
            if (text := self._unchanged_text(metadata)) is not None:
                return json.loads(text), text
        return read_back(self._metadata(metadata))


_REQUIRED = frozenset({"text", "kind", "role", "timestamp", "situation"})  # the keys an item must have
_ACCEPTED = _REQUIRED | {"principal", "metadata"}  # and those it may have
_ROLES = {role.value: role for role in Role}
_KINDS = {kind.value: kind for kind in Kind}
_NO_VECTOR = np.zeros(0, dtype=np.float32)
