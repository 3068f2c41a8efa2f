"""The flat vector-RAG baseline: raw text chunks, top-k by cosine, nothing else.

It stores exactly the text the episodic memory stores (every observation, decision,
outcome and correction), chunked and embedded with the same encoder, and retrieves the
top-k chunks by cosine similarity within the caller's principal. No time, no situation,
no outcome, no links: the honest version of what most agent memories do today.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from memory.timeline import Encoder, PatternRedactor, Redactor


@dataclass(frozen=True)
class Chunk:
    """One stored piece of raw text."""

    id: str  # "chunk-<n>"
    principal: str  # tenant
    text: str  # raw (redacted) text


class ScoredChunk(NamedTuple):
    """A retrieved chunk and its cosine similarity to the query."""

    chunk: Chunk  # the stored chunk
    score: float  # cosine similarity


class FlatRAGMemory:
    """Top-k cosine retrieval over raw text chunks.

    Args:
        encoder: the same encoder the episodic memory uses.
        chunk_chars: texts longer than this are split on word boundaries.
        redactor: the same write-time redaction as the episodic memory.
    """

    def __init__(self, encoder: Encoder, *, chunk_chars: int = 400, redactor: Redactor | None = None) -> None:
        self.encoder = encoder
        self.chunk_chars = chunk_chars
        self.redactor = redactor or PatternRedactor()
        self._chunks: list[Chunk] = []
        self._vectors = np.zeros((0, encoder.dim), dtype=np.float32)
        self._rows = 0

    def __len__(self) -> int:
        return len(self._chunks)

    def add(self, text: str, *, principal: str = "default") -> list[Chunk]:
        """Store `text` (split into chunks when long)."""
        pieces = _split(self.redactor.redact(text), self.chunk_chars)
        if not pieces:
            return []
        vectors = self.encoder.encode(pieces)
        if self._rows + len(pieces) > self._vectors.shape[0]:
            grown = np.zeros((max(64, 2 * (self._rows + len(pieces))), self.encoder.dim), dtype=np.float32)
            grown[: self._rows] = self._vectors[: self._rows]
            self._vectors = grown
        self._vectors[self._rows : self._rows + len(pieces)] = vectors
        self._rows += len(pieces)
        chunks = [Chunk(f"chunk-{len(self._chunks) + i}", principal, piece) for i, piece in enumerate(pieces)]
        self._chunks.extend(chunks)
        return chunks

    def search(self, query: str, *, principal: str = "default", k: int = 6) -> list[ScoredChunk]:
        """The `k` chunks of `principal` most similar to `query`, best first."""
        if not self._chunks:
            return []
        allowed = np.fromiter((c.principal == principal for c in self._chunks), dtype=bool, count=len(self._chunks))
        scores = self._vectors[: self._rows] @ self.encoder.encode([query])[0]
        scores = np.where(allowed, scores, -np.inf)
        order = np.argsort(-scores, kind="stable")[:k]
        return [ScoredChunk(self._chunks[i], float(scores[i])) for i in order if np.isfinite(scores[i])]


def _split(text: str, limit: int) -> list[str]:
    text = text.strip()
    if not text:
        return []
    pieces, current = [], ""
    for word in text.split():
        if current and len(current) + 1 + len(word) > limit:
            pieces.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    pieces.append(current)
    return pieces
