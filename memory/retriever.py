"""Retriever: query → Context of past episodes with outcomes, applicable facts and causal chains.

Scoring of an episode (each part in [0, 1], weights in `RetrieverConfig`)::

    total = w_rel·relevance + w_rec·recency + w_sit·situation + w_out·outcome + w_graph·graph

- relevance: cosine between the query vector and the episode vector (clipped at 0).
- recency: ``0.5 ** (age / half_life)``, age measured from ``now`` to the episode's end.
- situation: 1 when the episode's situation label equals the query's, else 0.
- outcome: labelled outcomes beat UNKNOWN (`OUTCOME_VALUE`): SUCCESS 1.0, FAILURE and
  PARTIAL 0.6, plus `CORRECTION_BONUS` when the episode holds a correction.
- graph: personalized PageRank (networkx) on the neighbourhood of the most relevant
  episodes, personalized by their relevance, scaled so that the best node scores 1. The
  neighbourhood holds at most ``graph_max_nodes`` episodes (the most strongly linked ones
  at each hop), so an episode that many later ones link to does not make every recall
  pay for its whole history.

Then maximal marginal relevance picks ``k`` episodes from the best ``pool``:
``argmax λ·total − (1 − λ)·max cos(candidate, selected)``; candidates at least
``duplicate_threshold`` similar to a selected episode are skipped outright.

Tenant isolation: vectors live in one partition per principal; a recall reads only the
partition, graph nodes and facts of its principal, so nothing of another principal is
ever scored, let alone returned.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Callable, Iterable, Sequence

import networkx as nx
import numpy as np
from threadpoolctl import ThreadpoolController

from memory.episodes import Episode, Outcome
from memory.facts import ACTIVE, FactVersion, terms

# A confirmed answer is worth most; a corrected failure (0.6 + 0.2) comes next, above a bare
# failure. Ranking corrected failures above successes was measured to hurt: the failure and
# its successful retry are near-duplicates, and MMR then kept the failure.
OUTCOME_VALUE = {Outcome.SUCCESS: 1.0, Outcome.FAILURE: 0.6, Outcome.PARTIAL: 0.6, Outcome.UNKNOWN: 0.0}
CORRECTION_BONUS = 0.2  # added to the outcome part (capped at 1) when an episode holds a correction


@dataclass(frozen=True)
class RetrieverConfig:
    """Weights and switches of recall; the named presets below are what eval compares."""

    name: str = "default"  # preset name, reported by eval
    relevance: float = 0.55  # weight of cosine relevance
    recency: float = 0.10  # weight of recency
    situation: float = 0.10  # weight of situation match
    outcome: float = 0.15  # weight of the outcome part
    graph: float = 0.10  # weight of graph proximity
    half_life_days: float = 30.0  # recency halves every this many days
    mmr: bool = True  # diversify with maximal marginal relevance
    mmr_lambda: float = 0.7  # 1.0 ranks by score only, lower values favour diversity
    duplicate_threshold: float = 0.95  # cosine at which a candidate duplicates a selected episode
    pool: int = 50  # best-scored candidates MMR chooses from
    seeds: int = 5  # most relevant episodes that personalize PageRank
    graph_hops: int = 2  # neighbourhood radius around the seeds
    graph_max_nodes: int = 32  # most episodes in that neighbourhood (strongest links kept); 0 = no limit
    chains: bool = True  # attach causal chain narratives from the graph
    chain_hops: int = 3  # longest chain followed
    chain_max_episodes: int = 12  # most episodes in one chain (nearest first); 0 = no limit
    facts: bool = True  # include applicable facts
    max_facts: int = 3  # most facts in a Context
    fact_min_match: float = 0.5  # least share of a fact's condition terms found in the query
    show_outcomes: bool = True  # outcome labels are used in scoring and shown in the prompt


DEFAULT = RetrieverConfig()
NO_GRAPH = replace(DEFAULT, name="no_graph", graph=0.0, chains=False)
NO_FACTS = replace(DEFAULT, name="no_facts", facts=False)
NO_OUTCOME_LABELS = replace(DEFAULT, name="no_outcome_labels", outcome=0.0, show_outcomes=False)
NO_MMR = replace(DEFAULT, name="no_mmr", mmr=False, duplicate_threshold=1.01)
PRESETS = {c.name: c for c in (DEFAULT, NO_GRAPH, NO_FACTS, NO_OUTCOME_LABELS, NO_MMR)}


@dataclass(frozen=True)
class ScoreParts:
    """Why an episode scored what it did: each part in [0, 1] and the weighted total."""

    relevance: float  # cosine similarity to the query
    recency: float  # exponential decay with age
    situation: float  # 1 when the situation matches
    outcome: float  # value of its outcome label and corrections
    graph: float  # personalized-PageRank proximity to the most relevant episodes
    total: float  # weighted sum used for ranking


@dataclass(frozen=True)
class RecalledEpisode:
    """An episode in a Context, with its score parts and reasons."""

    episode: Episode  # the episode itself (outcome, decisions, corrections)
    score: ScoreParts  # score parts
    why: str  # the parts that made it rank, in words
    chain: str | None = None  # causal chain narrative through this episode, if any


@dataclass(frozen=True)
class RecalledFact:
    """A fact version that applies to the query."""

    fact: FactVersion  # the current version
    match: float  # share of its condition terms found in the query
    score: float  # match × confidence
    why: str  # matched terms and confidence, in words


@dataclass(frozen=True)
class Context:
    """What memory hands the reasoner for one decision."""

    query: str  # the query text
    principal: str  # tenant recalled for
    situation: str | None  # situation recalled for
    episodes: tuple[RecalledEpisode, ...]  # best first
    facts: tuple[RecalledFact, ...]  # best first
    chains: tuple[str, ...]  # distinct causal narratives of the episodes
    show_outcomes: bool = True  # whether render shows outcome labels

    def item_ids(self) -> list[str]:
        """Ids of the recalled episodes and fact versions (for decision metadata)."""
        return [r.episode.id for r in self.episodes] + [r.fact.id for r in self.facts]

    def render(self, max_chars: int = 4000) -> str:
        """A prompt block of at most `max_chars` characters: facts, episodes, chains."""
        blocks: list[str] = []
        if self.facts:
            lines = ["Heuristics learned from past outcomes:"]
            for r in self.facts:
                f = r.fact
                lines.append(f"- [{f.id}] {f.text} (confidence {f.confidence:.2f}, version {f.version}, "
                             f"support {len(f.support)}, contradict {len(f.contradict)})")
            blocks.append("\n".join(lines))
        for n, r in enumerate(self.episodes, start=1):
            ep = r.episode
            head = f"Past episode {n} [{ep.id[:12]}] {ep.start:%Y-%m-%d} {ep.situation}"
            head += f", {ep.subject}" if ep.subject else ""
            head += f": outcome {ep.outcome.value}" if self.show_outcomes else ""
            lines = [head, f"  Summary: {ep.summary}"]
            if ep.choices:
                lines.append(f"  Choice: {' then '.join(ep.choices)}")
            else:
                lines += [f"  Decision: {_unprefixed(d, 'decision')}" for d in ep.decisions]
            lines += [f"  Correction: {_unprefixed(c, 'correction')}" for c in ep.corrections]
            lines.append(f"  Why recalled: {r.why}")
            blocks.append("\n".join(lines))
        if self.chains:
            blocks.append("\n".join(["Causal chains:"] + [f"- {c}" for c in self.chains]))
        out = ""
        for block in blocks:
            piece = block if not out else "\n\n" + block
            if len(out) + len(piece) <= max_chars:
                out += piece
                continue
            room = max_chars - len(out)
            if room > 1:
                out += piece[: room - 1] + "…"
            break
        return out


def _unprefixed(text: str, label: str) -> str:
    """Text without a leading "<label>:" the author may already have written."""
    head, sep, rest = text.partition(":")
    return rest.strip() if sep and head.strip().lower() == label else text


PRUNE_FROM = 4096  # partitions at least this large score relevance through bounds first (see `Bounds`)
BASIS_SAMPLE = 4096  # leading vectors of a partition its bounding basis is fitted on
BASIS_DIM = 128  # dimensions of the bounding basis
BOUND_SLACK = 1e-3  # added to every relevance bound: covers float32 rounding of both dot products
SCORE_FIRST = 64  # when many rows pass the bounds, this many of the likeliest are scored first to tighten the cut


class Bounds:
    """Exact lower and upper bounds on the cosine of every row of a partition with a query.

    With an orthonormal basis ``B`` (``dim × r``), a vector splits into its projection and a
    residual orthogonal to it, so ``q·m = (Bᵀq)·(Bᵀm) + q⊥·m⊥`` and, by Cauchy–Schwarz,
    ``|q⊥·m⊥| ≤ ‖q⊥‖‖m⊥‖``. Bounds for all rows cost one ``n × r`` product instead of
    ``n × dim``; only rows whose upper bound reaches what the lower bounds guarantee are
    scored exactly. Any orthonormal basis gives true bounds: the principal directions of the
    partition's first vectors (fitted once, then fixed) merely make them tight, so the basis
    changes speed, never results.

    The same split works on the leading ``r/2`` basis vectors alone (the rest of the
    projection joins the residual), so a `Probe` first bounds every row from the first half
    of the projection, then refines only the rows a recall still needs with the second half.
    """

    def __init__(self, sample: np.ndarray, rank: int = BASIS_DIM) -> None:
        x = np.asarray(sample, dtype=np.float64)
        _, vectors = np.linalg.eigh(x.T @ x)
        self.basis = np.ascontiguousarray(vectors[:, ::-1][:, : min(rank, x.shape[1])])  # float64, orthonormal
        self.head = (self.basis.shape[1] + 1) // 2  # leading basis vectors of the first pass
        # first halves one per column (BLAS's matrix-vector product is fastest in this layout),
        # second halves one per row (a few rows are gathered at a time)
        self._head = np.zeros((self.head, 16), dtype=np.float32)
        self._tail = np.zeros((16, self.basis.shape[1] - self.head), dtype=np.float32)
        self._resid = np.zeros(16, dtype=np.float32)  # norm of the residual outside the basis
        self._outside = np.zeros(16, dtype=np.float32)  # norm of everything outside the first half
        self.size = 0

    def split(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Projections (float32) and residual norms (float64) of rows."""
        x = np.asarray(vectors, dtype=np.float64).reshape(-1, self.basis.shape[0])
        proj = x @ self.basis
        resid = np.sqrt(np.maximum(np.einsum("ij,ij->i", x, x) - np.einsum("ij,ij->i", proj, proj), 0.0))
        return proj.astype(np.float32), resid

    def extend(self, vectors: np.ndarray) -> None:
        """Append rows (in chunks, to keep float64 temporaries small)."""
        for start in range(0, len(vectors), 8192):
            proj, resid = self.split(vectors[start : start + 8192])
            end = self.size + len(proj)
            if end > len(self._resid):
                cap = max(end, 2 * len(self._resid))
                head = np.zeros((self.head, cap), dtype=np.float32)
                head[:, : self.size] = self._head[:, : self.size]
                self._head = head
                grow = lambda a: np.concatenate([a, np.zeros((cap - len(a), *a.shape[1:]), dtype=a.dtype)])  # noqa: E731
                self._tail, self._resid, self._outside = grow(self._tail), grow(self._resid), grow(self._outside)
            tail = proj[:, self.head :].astype(np.float64)
            self._head[:, self.size : end] = proj[:, : self.head].T
            self._tail[self.size : end] = proj[:, self.head :]
            self._resid[self.size : end] = resid
            self._outside[self.size : end] = np.sqrt(resid**2 + np.einsum("ij,ij->i", tail, tail))
            self.size = end

    def probe(self, query: np.ndarray) -> Probe:
        """First-pass bounds of every row for `query` (see `Probe`)."""
        return Probe(self, query)

    @classmethod
    def from_parts(cls, basis: np.ndarray, proj: np.ndarray, resid: np.ndarray) -> "Bounds":
        """Bounds over stored rows (bulk loading): a basis and the rows' `split` parts (see `rows`)."""
        bounds = cls.__new__(cls)
        bounds.basis = np.ascontiguousarray(basis, dtype=np.float64)
        rank = bounds.basis.shape[1]
        bounds.head = (rank + 1) // 2
        proj = np.asarray(proj, dtype=np.float32).reshape(-1, rank)
        bounds._head = np.ascontiguousarray(proj[:, : bounds.head].T)
        bounds._tail = np.ascontiguousarray(proj[:, bounds.head :])
        bounds._resid = np.ascontiguousarray(resid, dtype=np.float32).reshape(-1)
        tail = bounds._tail.astype(np.float64)
        resid64 = bounds._resid.astype(np.float64)
        bounds._outside = np.sqrt(resid64**2 + np.einsum("ij,ij->i", tail, tail)).astype(np.float32)
        bounds.size = len(bounds._resid)
        return bounds

    def rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The projections (float32) and residual norms of some rows (to persist them)."""
        proj = np.concatenate([self._head[:, : self.size][:, rows].T, self._tail[: self.size][rows]], axis=1)
        return proj, self._resid[: self.size][rows]

    def relevance(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of ``clip(row·query, 0, 1)`` for every row, from the whole basis."""
        probe = self.probe(query)
        probe.refine(np.arange(self.size))
        return probe.low, probe.high


class Probe:
    """Bounds of ``clip(row·query, 0, 1)`` for one query: every row from the first half of
    the basis, refined on demand (`refine`) with the whole basis. `low` and `high` are
    updated in place and are valid bounds at every moment."""

    def __init__(self, bounds: Bounds, query: np.ndarray) -> None:
        self._bounds = bounds
        with one_blas_thread():
            proj, resid = bounds.split(query)
            self._dot = proj[0, : bounds.head] @ bounds._head[:, : bounds.size]  # float32: rounding ≪ BOUND_SLACK
        self._tail = proj[0, bounds.head :]
        self._resid = np.float32(resid[0])
        outside = np.float32(np.sqrt(resid[0] ** 2 + float(np.dot(self._tail.astype(np.float64), self._tail))))
        radius = bounds._outside[: bounds.size] * outside
        radius += np.float32(BOUND_SLACK)
        low = self._dot - radius
        radius += self._dot
        self.low = np.clip(low, 0.0, 1.0, out=low)  # lower bounds, float32
        self.high = np.clip(radius, 0.0, 1.0, out=radius)  # upper bounds, float32
        self._fine = np.zeros(bounds.size, dtype=bool)  # rows refined with the whole basis

    def refine(self, rows: np.ndarray) -> None:
        """Tighten the bounds of `rows` with the second half of the basis."""
        todo = rows[~self._fine[rows]]
        if not len(todo):
            return
        b = self._bounds
        dot = self._dot[todo] + np.einsum("ij,j->i", b._tail[todo], self._tail)
        radius = b._resid[todo] * self._resid + np.float32(BOUND_SLACK)
        self.low[todo] = np.clip(dot - radius, 0.0, 1.0)
        self.high[todo] = np.clip(dot + radius, 0.0, 1.0)
        self._fine[todo] = True


_BLAS: ThreadpoolController | None = None


def one_blas_thread() -> Any:
    """Context in which BLAS calls run on the calling thread only.

    A matrix-vector product of this size is bound by memory, so more threads barely help;
    on a busy machine their synchronisation made it several times slower.
    """
    global _BLAS
    if _BLAS is None:
        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


class Partition:
    """One principal's episodes and a growing matrix of their unit vectors."""

    def __init__(self, dim: int) -> None:
        self.episodes: list[Episode] = []
        self.position: dict[str, int] = {}
        self._matrix = np.zeros((16, dim), dtype=np.float32)
        self._ends = np.zeros(16, dtype=np.float64)
        self._outcomes = np.zeros(16, dtype=np.float64)
        self._situations = np.zeros(16, dtype=np.int32)
        self.situation_codes: dict[str, int] = {}
        self.bounds: Bounds | None = None  # fitted on first use once the partition has `PRUNE_FROM` rows
        self.cache: dict[tuple, tuple[np.ndarray, ...]] = {}  # query-independent score parts, by their inputs

    def __len__(self) -> int:
        return len(self.episodes)

    def reserve(self, capacity: int) -> None:
        """Make room for `capacity` rows at once (a bulk load then copies the matrix once, not log n times)."""
        extra = capacity - len(self._ends)
        if extra > 0:
            grow = lambda a: np.concatenate([a, np.zeros((extra, *a.shape[1:]), dtype=a.dtype)])  # noqa: E731
            self._matrix, self._ends = grow(self._matrix), grow(self._ends)
            self._outcomes, self._situations = grow(self._outcomes), grow(self._situations)

    def add(self, episode: Episode, vector: np.ndarray) -> None:
        n = len(self.episodes)
        if n == len(self._ends):  # amortized doubling keeps appends O(1)
            self.reserve(2 * n)
        self._matrix[n] = vector
        self._ends[n] = episode.end.timestamp()
        self._outcomes[n] = min(1.0, OUTCOME_VALUE[episode.outcome] + (CORRECTION_BONUS if episode.corrections else 0.0))
        code = self.situation_codes.setdefault(episode.situation, len(self.situation_codes))
        self._situations[n] = code
        self.position[episode.id] = n
        self.episodes.append(episode)
        if self.bounds is not None:
            self.bounds.extend(self._matrix[n : n + 1])
        if self.cache:
            self.cache.clear()

    def load(self, episodes: list[Episode] | Any, ids: Sequence[str], matrix: np.ndarray, ends: np.ndarray,
             outcomes: Sequence[Outcome], corrected: np.ndarray, situations: Sequence[str]) -> None:
        """Bulk-load rows into an empty partition; the same state as `add` of each row in order.

        `episodes` is the row list the partition keeps (it may read episodes lazily; it must
        support `append` for later rows).
        """
        if len(self):
            raise ValueError("bulk loading needs an empty partition")
        n = len(ids)
        if not n:
            return
        self._matrix = np.ascontiguousarray(matrix, dtype=np.float32).reshape(n, -1)  # adopted when it is float32
        self._ends = np.array(ends, dtype=np.float64)
        value = {o: OUTCOME_VALUE[o] for o in Outcome}
        self._outcomes = np.array([min(1.0, value[o] + (CORRECTION_BONUS if c else 0.0))
                                   for o, c in zip(outcomes, np.asarray(corrected).tolist())], dtype=np.float64)
        codes = self.situation_codes
        self._situations = np.array([codes.setdefault(s, len(codes)) for s in situations], dtype=np.int32)
        self.position = dict(zip(ids, range(n)))
        self.episodes = episodes
        self.bounds = None
        self.cache.clear()

    def bounded(self, prune_from: int = PRUNE_FROM) -> Bounds | None:
        """The relevance bounds of this partition, fitted on first use when it is large enough."""
        if self.bounds is None and len(self) >= max(prune_from, 1):
            bounds = Bounds(self.matrix[:BASIS_SAMPLE])
            bounds.extend(self.matrix)
            self.bounds = bounds
        return self.bounds

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix[: len(self.episodes)]

    @property
    def ends(self) -> np.ndarray:
        return self._ends[: len(self.episodes)]

    @property
    def outcomes(self) -> np.ndarray:
        return self._outcomes[: len(self.episodes)]

    @property
    def situations(self) -> np.ndarray:
        return self._situations[: len(self.episodes)]


class EpisodeIndex:
    """Episode vectors partitioned by principal, appended incrementally."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._parts: dict[str, Partition] = {}
        self._owner: dict[str, str] = {}

    def add(self, episode: Episode, vector: np.ndarray) -> None:
        """Index a closed episode with its unit vector (re-adding an id is a no-op)."""
        if episode.id in self._owner:
            return
        part = self._parts.get(episode.principal)
        if part is None:
            part = self._parts[episode.principal] = Partition(self.dim)
        part.add(episode, vector)
        self._owner[episode.id] = episode.principal

    def reserve(self, counts: dict[str, int]) -> None:
        """Make room for this many more episodes per principal."""
        for principal, count in counts.items():
            part = self._parts.setdefault(principal, Partition(self.dim))
            part.reserve(len(part) + count)

    def load(self, principal: str, episodes: list[Episode] | Any, ids: Sequence[str], matrix: np.ndarray,
             ends: np.ndarray, outcomes: Sequence[Outcome], corrected: np.ndarray, situations: Sequence[str]) -> Partition:
        """Bulk-load a principal's episodes into its (empty) partition; see `Partition.load`."""
        part = self._parts.get(principal)
        if part is None:
            part = self._parts[principal] = Partition(self.dim)
        part.load(episodes, ids, matrix, ends, outcomes, corrected, situations)
        self._owner.update(dict.fromkeys(ids, principal))
        return part

    def partition(self, principal: str) -> Partition:
        """The principal's partition (empty when unknown)."""
        return self._parts.get(principal) or Partition(self.dim)

    def get(self, episode_id: str) -> Episode | None:
        """An indexed episode by id, whatever its principal."""
        owner = self._owner.get(episode_id)
        if owner is None:
            return None
        part = self._parts[owner]
        return part.episodes[part.position[episode_id]]

    def __len__(self) -> int:
        return len(self._owner)


def episode_vector(observations: np.ndarray, others: np.ndarray | None = None, *, other_weight: float = 0.5) -> np.ndarray:
    """Unit vector of an episode: mean of its observation embeddings plus weighted other embeddings.

    Args:
        observations: embeddings (rows) of the observations of the problem it worked on.
        others: embeddings of instructive entries (corrections), weighted by `other_weight`.
    """
    parts = []
    if len(observations):
        parts.append(np.asarray(observations, dtype=np.float64).mean(axis=0))
    if others is not None and len(others):
        parts.append(other_weight * np.asarray(others, dtype=np.float64).mean(axis=0))
    if not parts:
        raise ValueError("an episode vector needs at least one embedding")
    vec = np.sum(parts, axis=0)
    norm = np.linalg.norm(vec)
    return (vec / norm if norm else vec).astype(np.float32)


def graph_proximity(graph: nx.MultiDiGraph, seeds: dict[str, float], allowed: Callable[[str], bool], *,
                    hops: int = 2, max_nodes: int = 0, weight: str = "weight",
                    alpha: float = 0.85) -> dict[str, float]:
    """Personalized PageRank around `seeds`, on allowed nodes within `hops`; best node = 1.

    Edge direction is ignored (a cause and its effect are equally near) and parallel edges
    add their weights. With `max_nodes` > 0 the neighbourhood stops growing at that many
    nodes: a hop that would overflow it keeps the new nodes with the largest summed link
    weight to the nodes the previous hop reached (ties: the more recent episode, by
    ``first_seq``, then the smaller id). The neighbourhood is small, so the stationary
    vector of networkx's `google_matrix` is found by power iteration in numpy; on a graph
    of a few dozen nodes this is far cheaper than `nx.pagerank`'s sparse solver, with the
    same definition.
    """
    seeds = {s: w for s, w in seeds.items() if w > 0 and s in graph}
    # networkx's own adjacency dicts (`succ`/`pred` wrap them in read-only views, which cost
    # a Python-level call per item: most of the time of this function on hub episodes)
    succ, pred = graph._succ, graph._pred
    nodes = set(seeds)
    frontier = set(seeds)
    for _ in range(hops):
        reached: dict[str, float] = {}  # new node → summed weight of its links to the frontier
        for n in sorted(frontier):
            for adjacency in (succ[n], pred[n]):
                for m, keyed in adjacency.items():
                    if m in nodes:
                        continue
                    strength = reached.get(m)
                    if strength is None:
                        if not allowed(m):
                            continue
                        strength = 0.0
                    reached[m] = strength + sum(float(data.get(weight, 1.0)) for data in keyed.values())
        room = max_nodes - len(nodes)
        if max_nodes > 0 and len(reached) > room:
            attrs = graph.nodes
            ranked = sorted(reached, key=lambda m: (-reached[m], -attrs[m].get("first_seq", 0), m))
            frontier = set(ranked[: max(room, 0)])
        else:
            frontier = set(reached)
        if not frontier:
            break
        nodes |= frontier
    # undirected links, weights of parallel and opposite edges summed in `graph.out_edges` order;
    # each link keeps the orientation it was first met in, so `sub` gets its nodes in that order
    links: dict[tuple[str, str], list] = {}
    for u in sorted(nodes):
        for v, keyed in succ[u].items():  # the order of `graph.out_edges(u)`
            if v not in nodes or v == u:
                continue
            link = links.get((v, u) if v < u else (u, v))
            if link is None:
                link = links[(v, u) if v < u else (u, v)] = [u, v, 0.0]
                first = True
            else:
                first = False
            for data in keyed.values():
                w = float(data.get(weight, 1.0))
                link[2] = w if first else link[2] + w
                first = False
    sub = nx.Graph()  # isolated seeds stay out: proximity needs a link
    sub.add_weighted_edges_from(links.values(), weight=weight)
    seeds = {s: w for s, w in seeds.items() if s in sub}
    if not seeds:
        return {}
    order = list(sub)
    google = nx.google_matrix(sub, alpha=alpha, personalization=seeds, nodelist=order, weight=weight)
    rank = _power_iteration(google, np.full(len(order), 1.0 / len(order)))
    top = float(rank.max())
    return {n: float(r) / top for n, r in zip(order, rank)} if top > 0 else {}


def _power_iteration(matrix: np.ndarray, start: np.ndarray, *, steps: int = 100, tol: float = 1e-10,
                     chunk: int = 25) -> np.ndarray:
    """``x ← x @ matrix`` until the L1 change is below `tol`, at most `steps` times.

    The same products as a plain loop, but the convergence test runs once per `chunk`
    steps over all of them: fewer small numpy calls, the same vector.
    """
    xs = np.empty((chunk + 1, len(start)))
    xs[0] = start
    done = 0
    while done < steps:
        m = min(chunk, steps - done)
        for j in range(m):
            np.matmul(xs[j], matrix, out=xs[j + 1])
        hit = np.flatnonzero(np.abs(xs[1 : m + 1] - xs[:m]).sum(axis=1) < tol)
        if len(hit):
            return xs[hit[0] + 1].copy()
        xs[0] = xs[m]
        done += m
    return xs[0].copy()


def mmr(scores: np.ndarray, vectors: np.ndarray, k: int, *, lam: float,
        duplicate_threshold: float) -> list[int]:
    """Maximal marginal relevance: indices of up to `k` diverse, high-scoring rows."""
    chosen: list[int] = []
    redundancy = np.zeros(len(scores))
    available = np.ones(len(scores), dtype=bool)
    while len(chosen) < k:
        value = np.where(available & (redundancy < duplicate_threshold), lam * scores - (1.0 - lam) * redundancy,
                         -np.inf)
        if not len(value) or not np.isfinite(value.max()):
            break
        best = int(np.argmax(value))  # first of equals: ties keep the score order
        chosen.append(best)
        available[best] = False
        redundancy = np.maximum(redundancy, vectors @ vectors[best])
    return chosen


def _top(values: np.ndarray, n: int) -> np.ndarray:
    """Indices of the `n` largest values, best first (ties: lower index first, also at the cut)."""
    if n <= 0:
        return np.zeros(0, dtype=np.intp)
    if n < len(values):
        kth = values[np.argpartition(-values, n - 1)[n - 1]]
        above = np.flatnonzero(values > kth)
        part = np.concatenate([above, np.flatnonzero(values == kth)[: n - len(above)]])
    else:
        part = np.arange(len(values))
    return part[np.lexsort((part, -values[part]))]


def _at_most_kth(values: np.ndarray, n: int) -> float:
    """A value no larger than the `n`-th largest (the smallest when there are fewer than `n`).

    For long arrays, the `n`-th largest of the maxima of short blocks: these are values of
    distinct rows, so it cannot exceed the true one, and it equals it unless two of the best
    `n` share a block. One pass instead of a partition of the whole array.
    """
    block = len(values) // (64 * max(n, 1))
    if block < 4:
        return _kth(values, n)
    whole = len(values) - len(values) % block
    maxima = values[:whole].reshape(-1, block).max(axis=1)
    return _kth(np.concatenate([maxima, values[whole:]]), n)


def _kth(values: np.ndarray, n: int) -> float:
    """The `n`-th largest value (the smallest when there are fewer than `n`)."""
    if n <= 0:
        return float("inf")
    if n >= len(values):
        return float(values.min())
    return float(np.partition(values, len(values) - n)[len(values) - n])


def _why(parts: ScoreParts, episode: Episode, config: RetrieverConfig) -> str:
    reasons = [f"similar observations ({parts.relevance:.2f})"]
    if parts.situation:
        reasons.append(f"same situation ({episode.situation})")
    if config.show_outcomes and episode.outcome is not Outcome.UNKNOWN:
        reasons.append(f"known outcome {episode.outcome.value}")
    if episode.corrections:
        reasons.append("holds a correction")
    if parts.graph > 0.05:
        reasons.append(f"linked to relevant episodes in the graph ({parts.graph:.2f})")
    reasons.append(f"recency {parts.recency:.2f}")
    return "; ".join(reasons) + f"; total {parts.total:.3f}"


def applicable_facts(query_terms: frozenset[str], facts: Iterable[FactVersion], principal: str, *,
                     min_match: float, limit: int) -> list[RecalledFact]:
    """Active facts of the principal whose condition terms the query contains (partly)."""
    found = []
    for f in facts:
        if f.principal != principal or f.status != ACTIVE or not f.condition:
            continue
        hit = [t for t in f.condition if t in query_terms]
        share = len(hit) / len(f.condition)
        if share < min_match or not hit:
            continue
        why = f"query mentions {', '.join(hit)} ({len(hit)}/{len(f.condition)} condition terms); " \
              f"confidence {f.confidence:.2f} from {len(f.support)} supporting, {len(f.contradict)} contradicting episodes"
        found.append(RecalledFact(f, round(share, 6), round(share * f.confidence, 6), why))
    found.sort(key=lambda r: (-r.score, r.fact.fact_id))
    return found[:limit]


ChainFinder = Callable[[nx.MultiDiGraph, str, int, int], "str | None"]  # (graph, episode id, hops, max episodes)


class Retriever:
    """Recall over an `EpisodeIndex`, a graph and current facts.

    Args:
        index: episode vectors per principal.
        encode: maps texts to unit vectors (the memory's encoder).
        graph: the episode graph (read at recall time; may grow between recalls).
        facts: returns the current fact versions of a principal.
        chain: returns the causal narrative through an episode, or None.
        config: weights and switches.
    """

    def __init__(self, index: EpisodeIndex, encode: Callable[[Sequence[str]], np.ndarray], *,
                 graph: nx.MultiDiGraph | None = None,
                 facts: Callable[[str], Sequence[FactVersion]] | None = None,
                 chain: ChainFinder | None = None, config: RetrieverConfig = DEFAULT) -> None:
        self.index = index
        self.encode = encode
        self.graph = graph if graph is not None else nx.MultiDiGraph()
        self.facts = facts or (lambda principal: ())
        self.chain = chain
        self.config = config

    def query_vector(self, query: str | Sequence[str]) -> tuple[str, np.ndarray]:
        """Query text and unit vector (mean of the observation embeddings)."""
        texts = [query] if isinstance(query, str) else [q for q in query if q.strip()]
        text = "\n".join(texts)
        if not texts:
            return text, np.zeros(self.index.dim, dtype=np.float32)
        return text, episode_vector(self.encode(texts))

    def recall(self, query: str | Sequence[str], *, principal: str = "default", situation: str | None = None,
               k: int = 5, now: datetime | None = None) -> Context:
        """A Context for a query (text, or a list of observation texts).

        Args:
            query: what the agent is looking at.
            principal: tenant; only its episodes and facts are read.
            situation: situation label to favour.
            k: most episodes to return.
            now: reference time for recency; by default the end of the principal's latest
                episode, which keeps recall reproducible.
        """
        cfg = self.config
        text, qvec = self.query_vector(query)
        part = self.index.partition(principal)
        recalled: list[RecalledEpisode] = []
        if len(part) and k > 0:
            recalled = self._episodes(part, qvec, situation, k, now)
        facts: list[RecalledFact] = []
        if cfg.facts:
            facts = applicable_facts(terms(text), self.facts(principal), principal,
                                     min_match=cfg.fact_min_match, limit=cfg.max_facts)
        chains = tuple(dict.fromkeys(r.chain for r in recalled if r.chain))
        return Context(query=text, principal=principal, situation=situation, episodes=tuple(recalled),
                       facts=tuple(facts), chains=chains, show_outcomes=cfg.show_outcomes)

    def _parts(self, part: Partition, situation: str | None, now: datetime | None) -> tuple[np.ndarray, ...]:
        """Recency, situation and outcome parts of every row (query-independent, so cached)."""
        cfg = self.config
        ref = now.timestamp() if now is not None else float(part.ends.max())
        code = part.situation_codes.get(situation, -1) if situation is not None else -1
        key = (len(part), ref, code, cfg.half_life_days, cfg.show_outcomes, cfg.recency, cfg.situation, cfg.outcome)
        cached = part.cache.get(key)
        if cached is None:
            age_days = np.maximum(ref - part.ends, 0.0) / 86400.0
            recency = 0.5 ** (age_days / cfg.half_life_days)
            sit = (part.situations == code).astype(np.float64)
            outcome = part.outcomes.copy() if cfg.show_outcomes else np.zeros(len(part))
            rest = (cfg.recency * recency + cfg.situation * sit + cfg.outcome * outcome).astype(np.float32)
            if len(part.cache) > 8:
                part.cache.clear()
            cached = part.cache[key] = (recency, sit, outcome, rest)
        return cached

    def _relevance(self, part: Partition, qvec: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Exact clipped cosine of the query with all rows, or with `rows` (same values either way)."""
        # einsum runs single-threaded in numpy's own kernel: steadier than a threaded BLAS
        # call on a busy machine; it sums each row alone, so a subset gets the same values
        matrix = part.matrix if rows is None else part.matrix[rows]
        return np.clip(np.einsum("ij,j->i", matrix, qvec), 0.0, 1.0).astype(np.float64)

    def _episodes(self, part: Partition, qvec: np.ndarray, situation: str | None, k: int,
                  now: datetime | None) -> list[RecalledEpisode]:
        cfg = self.config
        recency, sit, outcome, rest = self._parts(part, situation, now)
        graph = np.zeros(len(part))
        bounds = part.bounded(PRUNE_FROM)
        if bounds is None:
            relevance = self._relevance(part, qvec)
            known = None
        else:  # exact scores for the rows whose bounds can reach the top; the others cannot be chosen
            probe = bounds.probe(qvec)
            low, high = probe.low, probe.high  # refined in place where a stage needs tighter bounds
            relevance = np.zeros(len(part))
            known = np.zeros(len(part), dtype=bool)
            scored: list[np.ndarray] = []  # rows scored exactly so far
        use_graph = cfg.graph > 0 and len(self.graph)  # len is O(1); number_of_edges is not

        def score(rows: np.ndarray) -> np.ndarray:
            if known is not None:
                todo = rows[~known[rows]]
                if len(todo):
                    relevance[todo] = self._relevance(part, qvec, todo)
                    known[todo] = True
                    scored.append(todo)
            return rows

        if use_graph:
            if known is None:
                top = _top(relevance, cfg.seeds)
            else:
                rows = np.flatnonzero(high >= _at_most_kth(low, cfg.seeds))
                first = max(SCORE_FIRST // 4, cfg.seeds)
                if len(rows) > 2 * first:
                    # the likeliest rows first: their exact values raise the cut the others must reach
                    best = score(rows[_top(high[rows], first)])
                    rows = rows[high[rows] >= _kth(relevance[best], cfg.seeds)]
                probe.refine(rows)
                # rows hold the best lower bounds (exact where scored), so their k-th is a valid cut
                rows = score(rows[high[rows] >= _kth(np.where(known[rows], relevance[rows], low[rows]), cfg.seeds)])
                top = rows[_top(relevance[rows], cfg.seeds)]
            seeds = {part.episodes[i].id: float(relevance[i]) for i in top}
            near = graph_proximity(self.graph, seeds, lambda n: n in part.position, hops=cfg.graph_hops,
                                   max_nodes=cfg.graph_max_nodes)
            linked = np.array([part.position[node] for node in near], dtype=np.intp)
            graph[linked] = list(near.values())
        size = max(cfg.pool, k)
        if known is None:
            total = (cfg.relevance * relevance + cfg.recency * recency + cfg.situation * sit
                     + cfg.outcome * outcome + cfg.graph * graph)
            pool = _top(total, size)
        else:
            if use_graph and len(linked):
                rest = rest.copy()
                rest[linked] += (cfg.graph * graph[linked]).astype(np.float32)
            weight = np.float32(cfg.relevance)

            def floor(rows: np.ndarray | None) -> float:
                """A total the `size`-th best reaches: lower bounds, exact where scored (rounding slack)."""
                value = weight * (low if rows is None else low[rows]) + (rest if rows is None else rest[rows])
                done = np.concatenate(scored) if scored else np.zeros(0, dtype=np.intp)
                at = done if rows is None else np.flatnonzero(known[rows])
                exact = done if rows is None else rows[at]
                value[at] = weight * relevance[exact].astype(np.float32) + rest[exact]
                return _at_most_kth(value, size) - 1e-5  # 1e-5: float32 rounding and summation order

            rows = np.flatnonzero(weight * high + rest >= floor(None))
            probe.refine(rows)
            rows = rows[weight * high[rows] + rest[rows] >= floor(rows)]  # rows hold the best lower bounds
            if len(rows) > 2 * max(SCORE_FIRST, size):
                upper = weight * high[rows] + rest[rows]
                score(rows[_top(upper, max(SCORE_FIRST, size))])
                rows = rows[upper >= floor(rows)]
            rows = score(rows)
            total = np.zeros(len(part))
            total[rows] = (cfg.relevance * relevance[rows] + cfg.recency * recency[rows] + cfg.situation * sit[rows]
                           + cfg.outcome * outcome[rows] + cfg.graph * graph[rows])
            pool = rows[_top(total[rows], size)]
        if cfg.mmr:
            picked = [int(pool[i]) for i in mmr(total[pool], part.matrix[pool], k, lam=cfg.mmr_lambda,
                                                 duplicate_threshold=cfg.duplicate_threshold)]
        else:
            picked = [int(i) for i in pool[:k]]
        out = []
        for i in picked:
            parts = ScoreParts(*(round(float(a[i]), 6) for a in (relevance, recency, sit, outcome, graph, total)))
            ep = part.episodes[i]
            chain = (self.chain(self.graph, ep.id, cfg.chain_hops, cfg.chain_max_episodes) if cfg.chains and self.chain
                     else None)
            out.append(RecalledEpisode(ep, parts, _why(parts, ep, cfg), chain))
        return out
