"""The flat vector-RAG baseline: raw text chunks, top-k by cosine, nothing else.

It stores exactly the text the episodic memory stores (every observation, decision,
outcome and correction), chunked and embedded with the same encoder, and retrieves the
top-k chunks by cosine similarity within the caller's principal. No time, no situation,
no outcome, no links: the honest version of what most agent memories do today.

`FlatRAGAgent` puts `WindowedRAGMemory` behind the agents' shared loop (`agent.agents`),
as `baseline.classifier` does its classifier: the baselines build on the agent loop, never
the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from agent.agents import DEFAULT_BUDGET, Budget, NoMemoryAgent, fit_budget
from agent.reasoner import Evidence, Problem, Reasoner
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


@dataclass(frozen=True)
class Window:
    """A window of consecutive timeline events, stored and retrieved as one chunk."""

    id: str  # "window-<first>-<end>" (positions in the agent's timeline)
    text: str  # the events' texts, one per line, in order
    sources: tuple[int, ...]  # environment event indices of its events (agent-written entries have none)


class WindowedRAGMemory:
    """Flat RAG over windows of consecutive events: what a competent engineer would build.

    The agent appends every event (observations, its own decisions, outcome signals,
    corrections, notes) in stream order. Windows of `window` consecutive entries start every
    `stride` entries, so any ``window − stride + 1`` consecutive events share at least one
    window: with the defaults (4, 2) a decision, its outcome and the correction that
    followed are always retrievable together. Only *committed* entries are searchable:
    the caller commits everything before the live round begins, so no agent retrieves the
    round it is deciding. ``window=1`` gives one chunk per event (the per-event baseline).

    Args:
        encoder: the same encoder the episodic memory uses.
        window: entries per window.
        stride: entries between window starts (≤ window).
        redactor: the same write-time redaction as the episodic memory.
    """

    def __init__(self, encoder: Encoder, *, window: int = 4, stride: int = 2, redactor: Redactor | None = None) -> None:
        if not 1 <= stride <= window:
            raise ValueError(f"need 1 <= stride <= window, got stride {stride}, window {window}")
        self.encoder = encoder
        self.window = window
        self.stride = stride
        self.redactor = redactor or PatternRedactor()
        self._texts: list[str] = []
        self._sources: list[int | None] = []
        self._committed = 0
        self._windows: dict[int, Window] = {}  # by first position
        self._vectors: dict[int, np.ndarray] = {}
        self._matrix: np.ndarray | None = None
        self._order: list[int] = []

    def __len__(self) -> int:
        return len(self._windows)

    def append(self, text: str, *, source: int | None = None) -> None:
        """Append one entry (not searchable until `commit`)."""
        self._texts.append(self.redactor.redact(text).strip())
        self._sources.append(source)

    def commit(self) -> None:
        """Make every appended entry searchable (windows ending past the old end are rebuilt)."""
        n = len(self._texts)
        if n == self._committed:
            return
        first = max(0, (self._committed - self.window) // self.stride * self.stride)
        starts = list(range(first, n, self.stride))
        built = [self._build(start, min(start + self.window, n)) for start in starts]
        built = [w for w in built if w.text]
        if built:
            vectors = self.encoder.encode([w.text for w in built])
            for w, vector in zip(built, vectors):
                start = int(w.id.split("-")[1])
                self._windows[start] = w
                self._vectors[start] = vector
        self._committed = n
        self._order = sorted(self._windows)
        self._matrix = np.stack([self._vectors[s] for s in self._order]) if self._order else None

    def _build(self, start: int, end: int) -> Window:
        texts = [t for t in self._texts[start:end] if t]
        sources = tuple(s for s in self._sources[start:end] if s is not None)
        return Window(f"window-{start}-{end}", "\n".join(texts), sources)

    def search(self, query: str, *, k: int = 6) -> list[tuple[Window, float]]:
        """The `k` committed windows most similar to `query`, best first (ties: earlier first)."""
        if self._matrix is None or k <= 0:
            return []
        scores = self._matrix @ self.encoder.encode([query])[0]
        order = np.argsort(-scores, kind="stable")[:k]
        return [(self._windows[self._order[i]], float(scores[i])) for i in order]


class FlatRAGAgent(NoMemoryAgent):
    """Flat vector RAG over the same raw timeline: windows of consecutive events, top-k by cosine.

    The shared loop of `agent.agents` (through `NoMemoryAgent`, as `ClassifierAgent`), with this
    memory's recording and recall.

    Args:
        reasoner: the shared reasoner.
        encoder: the shared encoder.
        budget: the shared budget.
        window: events per chunk (1: one chunk per event, the weaker baseline).
        stride: events between chunk starts.
        name: agent name in reports.
    """

    name = "flat_rag"

    def __init__(
        self,
        reasoner: Reasoner,
        encoder: Encoder,
        budget: Budget = DEFAULT_BUDGET,
        *,
        window: int = 4,
        stride: int = 2,
        name: str = "flat_rag",
    ) -> None:
        super().__init__(reasoner, budget)
        self.memory = WindowedRAGMemory(encoder, window=window, stride=stride)
        self.name = name
        self._sources: dict[str, tuple[int, ...]] = {}

    def _record(self, text, *, kind, role, timestamp, situation, metadata, source=None, live=False):
        self.memory.append(text, source=source)
        return None

    def _new_round(self) -> None:
        self.memory.commit()

    def provenance(self, item_id: str) -> tuple[int, ...]:
        return self._sources.get(item_id, ())

    def _recall(self, problem: Problem) -> tuple[list[Evidence], str]:
        query = " ".join(problem.observations)
        hits = self.memory.search(query, k=self.budget.items)
        evidence = []
        for window, score in hits:
            self._sources[window.id] = window.sources
            evidence.append(
                Evidence(
                    id=window.id,
                    source="chunk",
                    text=window.text,
                    relevance=max(0.0, score),
                    observations=(window.text,),
                    why=f"cosine {score:.3f} to the observations",
                )
            )
        lines, used = [], 0
        for item in fit_budget(evidence, self.budget):
            line = f"- [{item.id}] ({item.relevance:.2f}) {item.text}"
            if used + len(line) > self.budget.chars:
                break
            lines.append(line)
            used += len(line) + 1
        return evidence, "Related notes from memory:\n" + "\n".join(lines) if lines else ""
