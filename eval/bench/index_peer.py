"""The approximate index's peers in the bench: the bare index over the same vectors, and exact search.

For the largest principal of an opened bench store, `index_peer` measures in one go:

- the bare index: the library the memory uses (`memory.retrieval.neighbours`), built with the same
  parameters over the same rows (the partition's projections on its bounding basis), timed on
  top-10 searches of the bench's queries (the query projected, then searched);
- the memory's recall (`memory.retrieval.Retriever`, its episodes only) against exact recall (the
  same retriever with the approximate index turned off): recall@10, the share of the exact
  recall's ten episodes that the approximate one returns too;
- the bare index's own recall@10 against the exact top 10 by cosine over the full vectors.

The memory's recall p50 that the bare index is compared with is the bench's ``recall_ms`` of the
same store, measured just before (`eval.bench.cli`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from eval.bench.corpus import SITUATION
from eval.bench.results import Stat, metric, summarize
from memory.retrieval import Retriever
from memory.retrieval.neighbour_store import NeighbourIndexes
from memory.retrieval.neighbours import NeighbourIndex, library_version

if TYPE_CHECKING:
    from memory import EpisodicMemory

TOP = 10  # recall@TOP


class IndexPeer(NamedTuple):
    """The bare index and recall against exact search, on one store."""

    library: str | None  # the index library and version (None: the ``ann`` extra is not installed)
    rows: int  # rows of the partition (episodes of the principal)
    approximate: bool  # whether the memory's recall went through its approximate index at this size
    build_s: float | None  # building the bare index, seconds (one thread, as the memory builds)
    bare_ms: list[float]  # per top-10 search of the bare index (query projection included)
    bare_recall: float | None  # the bare index's recall@10 against the exact top 10 by cosine
    memory_recall: float  # the memory's recall@10 against its exact recall (1.0 where it is exact anyway)
    retriever_ms: list[float]  # per recall of the retriever alone (episodes only: no incidents, no chains)


def index_peer(memory: EpisodicMemory, principal: str, queries: Sequence[Sequence[str]]) -> IndexPeer:
    """Measure the bare index and recall@10 against exact search on `principal`'s partition of `memory`."""
    part = memory.index.partition(principal)
    config = memory.retriever_config
    approximate = _retriever(memory, replace(config, name="approximate"))
    exact = _retriever(memory, replace(config, name="exact", neighbours_from=0))
    bounds = part.bounded(config.prune_from)
    used = bounds is not None and approximate.neighbours is not None and approximate.neighbours.available
    used = used and 0 < config.neighbours_from <= len(part)
    # every timed recall first, then the exact ones: an exact scan between two timed recalls would evict the
    # caches a memory answering recalls one after another keeps warm (9.5 against 4.9-6.2 ms at 100k)
    retriever_ms, answers = [], []
    for query in queries:
        start = time.perf_counter()
        answers.append(_episode_ids(approximate, principal, query))
        retriever_ms.append((time.perf_counter() - start) * 1000)
    shared, overlap = 0, 0.0
    for query, found in zip(queries, answers):
        truth = _episode_ids(exact, principal, query)
        if truth:
            overlap += len(set(found) & set(truth)) / len(truth)
            shared += 1
    memory_recall = overlap / shared if shared else 1.0
    version = library_version()
    if version is None or bounds is None:
        return IndexPeer(None, len(part), False, None, [], None, memory_recall, retriever_ms)
    build_s, bare_ms, bare_recall = _bare(part, bounds, [exact.query_vector(list(q))[1] for q in queries])
    return IndexPeer(f"usearch {version}", len(part), used, build_s, bare_ms, bare_recall, memory_recall, retriever_ms)


def _retriever(memory: EpisodicMemory, config: Any) -> Retriever:
    """A retriever over the memory's index, graph and facts with `config` (no chain narratives: episodes only), and
    the approximate indexes the memory keeps (read from beside its store, as the memory reads them)."""
    state = memory.state
    return Retriever(
        state.index,
        memory.encoder.encode,
        graph=state.graph,
        facts=state.facts_of,
        config=config,
        lexicon=memory.lexicon,
        neighbours=NeighbourIndexes.beside(memory.store, encoder=memory.encoder.name, dim=memory.encoder.dim),
    )


def _episode_ids(retriever: Retriever, principal: str, query: Sequence[str]) -> list[str]:
    context = retriever.recall(list(query), principal=principal, situation=SITUATION, k=TOP)
    return [recalled.episode.id for recalled in context.episodes]


def _bare(part: Any, bounds: Any, queries: list[np.ndarray]) -> tuple[float, list[float], float]:
    """Build the bare index over the partition's projections; (build seconds, search milliseconds, recall@10)."""
    rows = len(part)
    start = time.perf_counter()
    index = NeighbourIndex(bounds.basis.shape[1])
    for first in range(0, rows, 16384):
        index.extend(bounds.projections(first, min(first + 16384, rows)))
    build_s = time.perf_counter() - start
    times, found = [], []
    for query in queries:
        start = time.perf_counter()
        found.append(index.nearest(bounds.split(query)[0][0], TOP))
        times.append((time.perf_counter() - start) * 1000)
    tenth = _tenth_best(part, np.stack(queries))
    hits = [
        min(TOP, int((part.vectors(rows_found) @ query >= cut - 1e-6).sum())) / min(TOP, rows)
        for query, rows_found, cut in zip(queries, found, tenth)
    ]
    return build_s, times, float(np.mean(hits)) if hits else 0.0


def _tenth_best(part: Any, queries: np.ndarray) -> np.ndarray:
    """Each query's tenth best cosine over every row (the partition read once, a chunk of rows at a time)."""
    best = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    for first in range(0, len(part), 16384):
        scores = queries @ part.vectors(np.arange(first, min(first + 16384, len(part)))).T
        best = np.concatenate([best, scores], axis=1)
        if best.shape[1] > TOP:
            best = np.partition(best, best.shape[1] - TOP, axis=1)[:, -TOP:]
    return best.min(axis=1)


def to_json(peer: IndexPeer, recall_p50_ms: float | None) -> dict[str, Any]:
    """The index peer's results at one store size, as metrics (`eval.bench.results` judges and renders them)."""
    bare = summarize(peer.bare_ms)
    ratio = recall_p50_ms / bare.median if recall_p50_ms is not None and bare.median else None
    return {
        "bare_ms": metric(
            bare,
            4,
            library=peer.library,
            rows=peer.rows,
            build_s=None if peer.build_s is None else round(peer.build_s, 2),
            recall_at_10=None if peer.bare_recall is None else round(peer.bare_recall, 4),
            what="a top-10 search of the memory's index library alone, with its parameters, over the same rows "
            "(the partition's projections, the query projected); recall_at_10: its own, against the exact top 10 "
            "by cosine",
        ),
        "ratio": metric(
            Stat(ratio, None, 0 if ratio is None else 1),
            2,
            what="recall_ms p50 (EpisodicMemory.recall: episodes, incidents, facts, chains) over bare_ms p50",
        ),
        "recall_at_10": metric(
            Stat(peer.memory_recall, None, len(peer.retriever_ms)),
            4,
            approximate=peer.approximate,
            what="share of the exact recall's 10 episodes that the memory's recall returns too (the same "
            "retriever with and without its approximate index; 1 where the store is below its threshold)",
        ),
        "retriever_ms": metric(
            summarize(peer.retriever_ms),
            what="the memory's retriever alone, k=10 (episodes: no incidents, no chain narratives)",
        ),
    }
