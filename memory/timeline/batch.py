"""A batch of drafts as columns, and the chain links of a batch: the lean form of an append.

`Timeline.append_many` builds a `DraftBatch` without an object per entry; a store's
`memory.timeline.schema.prepare` reads its columns, writes each entry's id text less its links
(`id_texts`) before taking its write lock, and under it computes only the ids (`chained_ids`) and
rows; the entries are made once the lock is released (`chained_entries`). Every id equals what
`memory.timeline.entries.entry_id` computes for the entry (the tests replay a recorded corpus).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple, overload

import numpy as np

from memory.timeline.entries import (
    _QUOTE,
    _QUOTED_KIND,
    _QUOTED_ROLE,
    Canonical,
    Entry,
    EntryDraft,
    Kind,
    Role,
    _dumped_id_text,
    canonical_fields,
    embedding_digest,
    to_utc,
)


class DraftBatch(Sequence[EntryDraft]):
    """The drafts of one append as columns, already in canonical form: what `Timeline.append_many` makes
    without an object per entry. A store reads the columns (`memory.timeline.schema.prepare`); read as a
    sequence, the batch gives an `EntryDraft` per entry, made on access.

    Every column holds one item per entry, in order.

    Args:
        timestamps: UTC datetimes.
        timestamp_texts: their `format_timestamp`.
        principals: tenant labels.
        situations: situation labels.
        roles: `Role` members.
        kinds: `Kind` members.
        texts: redacted texts.
        metadata: metadata as it reads back from its canonical JSON (`read_back`), a dict per entry.
        metadata_json: that canonical JSON.
        encoders: the names of the encoders that made the embeddings.
        embeddings: float32 vectors.
        encoded: whether each vector is its encoder's encoding of the entry's text (`EntryDraft.encoded`).
        digests: `embedding_digest` of each vector when already computed, else None.
    """

    __slots__ = (
        "timestamps",
        "timestamp_texts",
        "principals",
        "situations",
        "roles",
        "kinds",
        "texts",
        "metadata",
        "metadata_json",
        "encoders",
        "embeddings",
        "encoded",
        "digests",
    )

    def __init__(
        self,
        timestamps: list[datetime],
        timestamp_texts: list[str],
        principals: list[str],
        situations: list[str],
        roles: list[Role],
        kinds: list[Kind],
        texts: list[str],
        metadata: list[dict[str, Any]],
        metadata_json: list[str],
        encoders: list[str],
        embeddings: Sequence[np.ndarray],
        encoded: list[bool],
        digests: list[str] | None = None,
    ) -> None:
        self.timestamps = timestamps
        self.timestamp_texts = timestamp_texts
        self.principals = principals
        self.situations = situations
        self.roles = roles
        self.kinds = kinds
        self.texts = texts
        self.metadata = metadata
        self.metadata_json = metadata_json
        self.encoders = encoders
        self.embeddings = embeddings
        self.encoded = encoded
        self.digests = digests

    @classmethod
    def of(cls, drafts: Sequence[EntryDraft]) -> DraftBatch:
        """The columns of `drafts` (a `DraftBatch` is returned as it is)."""
        if isinstance(drafts, DraftBatch):
            return drafts
        fields = [canonical_fields(draft) for draft in drafts]
        embeddings = [np.asarray(draft.embedding, dtype=np.float32) for draft in drafts]
        return cls(
            [to_utc(draft.timestamp) for draft in drafts],
            [canonical.timestamp for canonical in fields],
            [draft.principal for draft in drafts],
            [draft.situation for draft in drafts],
            [canonical.role for canonical in fields],
            [canonical.kind for canonical in fields],
            [draft.text for draft in drafts],
            [canonical.metadata for canonical in fields],
            [canonical.metadata_json for canonical in fields],
            [draft.encoder for draft in drafts],
            embeddings,
            [draft.encoded_from_text() for draft in drafts],
        )

    def part(
        self, start: int, texts: list[str], embeddings: Sequence[np.ndarray], digests: list[str] | None = None
    ) -> DraftBatch:
        """The entries from `start` on, as many as `texts`, with these texts, embeddings and digests (for a batch
        whose other columns were made first, `memory.timeline.writer.Timeline`)."""
        stop = start + len(texts)
        whole = start == 0 and stop == len(self.timestamps)  # (no copy of the columns)

        def cut(column: list[Any]) -> list[Any]:
            return column if whole else column[start:stop]

        return DraftBatch(
            cut(self.timestamps),
            cut(self.timestamp_texts),
            cut(self.principals),
            cut(self.situations),
            cut(self.roles),
            cut(self.kinds),
            texts,
            cut(self.metadata),
            cut(self.metadata_json),
            cut(self.encoders),
            embeddings,
            cut(self.encoded),
            digests,
        )

    def __len__(self) -> int:
        return len(self.texts)

    @overload
    def __getitem__(self, index: int) -> EntryDraft: ...

    @overload
    def __getitem__(self, index: slice) -> list[EntryDraft]: ...

    def __getitem__(self, index: int | slice) -> EntryDraft | list[EntryDraft]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        vector = self.embeddings[index]
        text, encoder = self.texts[index], self.encoders[index]
        return EntryDraft(
            timestamp=self.timestamps[index],
            principal=self.principals[index],
            situation=self.situations[index],
            role=self.roles[index],
            kind=self.kinds[index],
            text=text,
            metadata=dict(self.metadata[index]),
            embedding=vector,
            encoder=encoder,
            encoded=(text, encoder, vector) if self.encoded[index] else None,
        )

    def canonical(self, index: int) -> Canonical:
        """The canonical fields of one entry (what `canonical_fields` gives for its draft)."""
        return Canonical(
            self.timestamp_texts[index],
            self.roles[index],
            self.kinds[index],
            self.metadata[index],
            self.metadata_json[index],
        )


_LITTLE_ENDIAN = sys.byteorder == "little"


def embedding_digests(vectors: Sequence[np.ndarray]) -> list[str]:
    """`embedding_digest` of each vector; a contiguous float32 vector on a little-endian machine is hashed
    in place, without the conversions `embedding_digest` makes for any other."""
    sha256 = hashlib.sha256
    out = []
    for vector in vectors:
        if _LITTLE_ENDIAN and type(vector) is np.ndarray and vector.dtype.char == "f" and vector.flags.c_contiguous:
            out.append(sha256(vector.data).hexdigest())
        else:
            out.append(embedding_digest(vector))
    return out


class IdText(NamedTuple):
    """The text an entry's id hashes, less the two parts the chain decides: ``head + quoted previous id +
    middle + seq + tail`` (see `id_from_canonical`). None for an entry whose fields are not all of their
    usual types (its text is then written by ``json.dumps`` once its links are known)."""

    head: str | None  # from the opening brace to ``"prev_id":``
    middle: str  # from ``,"principal":`` to ``"seq":``
    tail: str  # from ``,"situation":`` to the closing brace


def id_texts(batch: DraftBatch, digests: Sequence[str]) -> list[IdText]:
    """The id texts of a batch's entries, all but their links (written as `_written_id_text` writes them)."""
    quoted: dict[str, str] = {}  # labels and encoder names repeat from entry to entry

    def quote(value: str) -> str:
        found = quoted.get(value)
        if found is None:
            found = quoted[value] = _QUOTE(value)
        return found

    out = []
    for digest, encoder, kind, metadata_json, principal, role, situation, text, timestamp in zip(
        digests,
        batch.encoders,
        batch.kinds,
        batch.metadata_json,
        batch.principals,
        batch.roles,
        batch.situations,
        batch.texts,
        batch.timestamp_texts,
    ):
        if type(principal) is str and type(situation) is str and type(text) is str and type(encoder) is str:
            out.append(
                IdText(
                    f'{{"embedding_sha256":{_QUOTE(digest)},"encoder":{quote(encoder)},"kind":{_QUOTED_KIND[kind]}'
                    f',"metadata":{metadata_json},"prev_id":',
                    f',"principal":{quote(principal)},"role":{_QUOTED_ROLE[role]},"seq":',
                    f',"situation":{quote(situation)},"text":{_QUOTE(text)},"timestamp":{_QUOTE(timestamp)}}}',
                )
            )
        else:
            out.append(IdText(None, "", ""))
    return out


def chained_ids(
    batch: DraftBatch, texts: Sequence[IdText], digests: Sequence[str], *, prev_id: str, seq: int
) -> list[str]:
    """The ids of a batch's entries chained after `prev_id` at `seq` (what `entry_id` gives for each)."""
    sha256 = hashlib.sha256
    ids = []
    for index, (head, middle, tail) in enumerate(texts):
        if head is not None and type(prev_id) is str:
            blob = f"{head}{_QUOTE(prev_id)}{middle}{seq}{tail}"
        else:
            blob = _dumped_id_text(batch[index], batch.canonical(index), digests[index], prev_id=prev_id, seq=seq)
        prev_id = sha256(blob.encode("utf-8")).hexdigest()
        ids.append(prev_id)
        seq += 1
    return ids


def chained_entries(batch: DraftBatch, ids: Sequence[str], *, prev_id: str, seq: int) -> list[Entry]:
    """The entries of a batch whose ids `chained_ids` computed after `prev_id` at `seq`."""
    # A frozen dataclass's __init__ sets each field through object.__setattr__ (about 1.8 us for twelve);
    # filling the instance's dict at once leaves the same object (about 0.2 us).
    make = object.__new__
    out = []
    for entry_id_, timestamp, principal, situation, role, kind, text, metadata, vector, encoder in zip(
        ids,
        batch.timestamps,
        batch.principals,
        batch.situations,
        batch.roles,
        batch.kinds,
        batch.texts,
        batch.metadata,
        batch.embeddings,
        batch.encoders,
    ):
        entry = make(Entry)
        entry.__dict__.update(
            id=entry_id_,
            prev_id=prev_id,
            seq=seq,
            timestamp=timestamp,
            principal=principal,
            situation=situation,
            role=role,
            kind=kind,
            text=text,
            metadata=metadata,
            embedding=vector,
            encoder=encoder,
        )
        out.append(entry)
        prev_id, seq = entry_id_, seq + 1
    return out
