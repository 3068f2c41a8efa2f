"""The write path of the timeline: redact, embed, then append durably through a store.

`Timeline` is what callers write with; `memory.timeline.entries` holds the entries it makes
and the chain they form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from memory.errors import EncoderMismatch
from memory.timeline.encoder import Encoder, HashingEncoder
from memory.timeline.entries import FLAT_METADATA_ITEMS, Entry, EntryDraft, Kind, Role, canonical_metadata
from memory.timeline.redaction import PatternRedactor, Redactor
from memory.timeline.redaction_values import leaves_unchanged, redact_value
from memory.timeline.validation import (
    MAX_METADATA_CHARS,
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

    Raises:
        EncoderMismatch: the store's entries were embedded by another encoder.
    """

    def __init__(self, store: EntryLog, encoder: Encoder, redactor: Redactor | None = None) -> None:
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
        # Only the hashing encoder itself is known to make what its name says (a store may rebuild it).
        self._rebuildable = type(encoder) is HashingEncoder
        self._principals: set[str] = set()  # principal labels already checked
        self._situations: dict[str, str] = {}  # situation labels already checked, and their redacted form
        self._clean_metadata: set[tuple[tuple[str, str], ...]] = (
            set()
        )  # flat metadata of strings redaction leaves alone
        self._memo_redactor: Redactor = self.redactor  # the redactor the two memos above are of

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

    def _checked_metadata(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        if is_plain(metadata):
            try:
                text: str | None = canonical_metadata(metadata)
            except ValueError:  # NaN or infinity: the full check below names it
                text = None
            if (
                text is not None
                and len(text) <= MAX_METADATA_CHARS
                and _utf8(text)
                and leaves_unchanged(self.redactor, text)
            ):
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
