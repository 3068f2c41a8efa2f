"""The retriever: query → Context of past episodes with outcomes, applicable facts and causal chains.

Every episode of the principal gets the weighted score of `memory.retrieval.config`; on a
large partition only the rows whose relevance bounds (`memory.retrieval.bounds`) can reach
the best are scored exactly (`memory.retrieval.relevance`), which changes the speed of recall,
never its result.

Then maximal marginal relevance picks ``k`` episodes from the best ``pool``:
``argmax λ·total − (1 − λ)·max cos(candidate, selected)``; candidates at least
``duplicate_threshold`` similar to a selected episode are skipped outright.

Tenant isolation: vectors live in one partition per principal; a recall reads only the
partition, graph nodes and facts of its principal, so nothing of another principal is
ever scored, let alone returned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import networkx as nx
import numpy as np

from memory.episodes import Episode, Outcome
from memory.facts import ACTIVE, LESSON, FactVersion, affirmed_lines, lesson_applies, terms
from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.retrieval.bounds import RowBounds
from memory.retrieval.config import DEFAULT, RetrieverConfig
from memory.retrieval.context import Context, RecalledEpisode, RecalledFact, ScoreParts
from memory.retrieval.filters import RecallFilter
from memory.retrieval.index import EpisodeIndex, Partition, episode_vector
from memory.retrieval.neighbour_store import NeighbourIndexes
from memory.retrieval.proximity import graph_proximity
from memory.retrieval.relevance import NeighbourScores, RelevanceScores, top
from memory.retrieval.row_values import Ascending, Column, OtherParts, RowValues

UNDERFLOW_HALVINGS = 1080.0  # 0.5 ** h is 0.0 for every h ≥ 1075 (and float64 pow is slow on the subnormals before)
ChainFinder = Callable[[nx.MultiDiGraph, str, int, int], "str | None"]  # (graph, episode id, hops, max episodes)
Columns = tuple[Any, ...]  # score parts (arrays, or read like them): relevance, recency, situation, outcome, graph


class Retriever:
    """Recall over an `EpisodeIndex`, a graph and current facts.

    Args:
        index: episode vectors per principal.
        encode: maps texts to unit vectors (the memory's encoder).
        graph: the episode graph (read at recall time; may grow between recalls).
        facts: returns the current fact versions of a principal.
        chain: returns the causal narrative through an episode, or None.
        config: weights and switches.
        neighbours: approximate indexes of the large partitions (`memory.retrieval.neighbour_store`);
            None keeps recall exact at every size.
    """

    def __init__(
        self,
        index: EpisodeIndex,
        encode: Callable[[Sequence[str]], np.ndarray],
        *,
        graph: nx.MultiDiGraph | None = None,
        facts: Callable[[str], Sequence[FactVersion]] | None = None,
        chain: ChainFinder | None = None,
        config: RetrieverConfig = DEFAULT,
        lexicon: Lexicon = DEFAULT_LEXICON,
        neighbours: NeighbourIndexes | None = None,
    ) -> None:
        self.index = index
        self.encode = encode
        self.graph = graph if graph is not None else nx.MultiDiGraph()
        self.facts = facts or (lambda principal: ())
        self.chain = chain
        self.config = config
        self.lexicon = lexicon  # how the query's lines are read (negated and normal-state clauses apply no fact)
        self.neighbours = neighbours

    def close(self) -> None:
        """Write what recall keeps beside the store (the approximate indexes that grew)."""
        if self.neighbours is not None:
            self.neighbours.save()

    def query_vector(self, query: str | Sequence[str]) -> tuple[str, np.ndarray]:
        """Query text and unit vector (mean of the observation embeddings)."""
        texts = [query] if isinstance(query, str) else [q for q in query if q.strip()]
        text = "\n".join(texts)
        if not texts:
            return text, np.zeros(self.index.dim, dtype=np.float32)
        return text, episode_vector(self.encode(texts))

    def recall(
        self,
        query: str | Sequence[str],
        *,
        principal: str = "default",
        situation: str | None = None,
        k: int = 5,
        now: datetime | None = None,
        where: Mapping[str, Any] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Context:
        """A Context for a query (text, or a list of observation texts).

        Args:
            query: what the agent is looking at.
            principal: tenant; only its episodes and facts are read.
            situation: situation label to favour.
            k: most episodes to return.
            now: reference time for recency; by default the end of the principal's latest
                episode, which keeps recall reproducible.
            where: episode attributes to match before scoring (``service``, ``situation``,
                ``outcome``; a value or a list of values), see `memory.retrieval.filters`.
            since: earliest episode end (timezone-aware), applied before scoring.
            until: latest episode end (timezone-aware), applied before scoring.

        Raises:
            ValueError: a malformed filter.
        """
        cfg = self.config
        chosen = RecallFilter.build(where, since, until)
        text, qvec = self.query_vector(query)
        part = self.index.partition(principal)
        recalled: list[RecalledEpisode] = []
        eligible = chosen.mask(part, self.graph) if chosen is not None and len(part) else None
        if len(part) and k > 0 and (eligible is None or eligible.any()):
            recalled = self._episodes(part, qvec, situation, k, now, eligible, principal)
        facts: list[RecalledFact] = []
        if cfg.facts:
            facts = applicable_facts(
                terms(text),
                self.facts(principal),
                principal,
                min_match=cfg.fact_min_match,
                limit=cfg.max_facts,
                lines=affirmed_lines(text.split("\n"), self.lexicon),
            )
        chains = tuple(dict.fromkeys(r.chain for r in recalled if r.chain))
        return Context(
            query=text,
            principal=principal,
            situation=situation,
            episodes=tuple(recalled),
            facts=tuple(facts),
            chains=chains,
            show_outcomes=cfg.show_outcomes,
        )

    def _parts(self, part: Partition, situation: str | None, now: datetime | None) -> tuple[np.ndarray, ...]:
        """Recency, situation and outcome parts of every row, and their weighted total (float32)."""
        return self._query_free(part, situation, now)[:4]

    def _query_free(self, part: Partition, situation: str | None, now: datetime | None) -> tuple[Any, ...]:
        """`_parts` and the ascending order of their total (`Ascending`: sorted once asked for often enough), all
        query-independent, so cached."""
        cfg = self.config
        ref = now.timestamp() if now is not None else part.latest_end()
        code = part.situation_codes.get(situation, -1) if situation is not None else -1
        key = (len(part), ref, code, cfg.half_life_days, cfg.show_outcomes, cfg.recency, cfg.situation, cfg.outcome)
        cached = part.cache.get(key)
        if cached is None:
            # in place, in the order of `(ref - ends).clip(0) / 86400 / half_life` and `a·x + b·y + c·z`: the
            # same values as those expressions, without a temporary column per step (a million rows each)
            halvings = np.subtract(ref, part.ends)
            np.maximum(halvings, 0.0, out=halvings)
            halvings /= 86400.0
            halvings /= cfg.half_life_days
            recency = np.zeros(len(halvings))  # 0.5 ** h is 0.0 from h = 1075 on: computed only below that
            np.power(0.5, halvings, out=recency, where=halvings < UNDERFLOW_HALVINGS)
            sit = (part.situations == code).astype(np.float64)
            outcome = part.outcomes.copy() if cfg.show_outcomes else np.zeros(len(part))
            total = np.multiply(cfg.recency, recency)  # the halvings' column is scratch from here on
            total += np.multiply(cfg.situation, sit, out=halvings)
            total += np.multiply(cfg.outcome, outcome, out=halvings)
            rest = total.astype(np.float32)
            if len(part.cache) > 8:
                part.cache.clear()
            cached = part.cache[key] = (recency, sit, outcome, rest, Ascending(rest))
        return cached

    def _episodes(
        self,
        part: Partition,
        qvec: np.ndarray,
        situation: str | None,
        k: int,
        now: datetime | None,
        eligible: np.ndarray | None = None,
        principal: str = "default",
    ) -> list[RecalledEpisode]:
        """The `k` episodes recalled from a non-empty partition (`principal`'s): scored, pooled, diversified.

        With `eligible` (a filter's row mask) every row is scored exactly and only eligible
        rows can seed the graph part, receive proximity or enter the pool.
        """
        cfg = self.config
        recency, sit, outcome, rest, ascending = self._query_free(part, situation, now)
        scores = self._relevance(principal, part, qvec, eligible)
        linked, near = np.zeros(0, dtype=np.intp), np.zeros(0)  # rows the graph part reached, and its values
        if cfg.graph > 0 and len(self.graph):  # len is O(1); number_of_edges is not
            seeds = scores.seeds(cfg.seeds, cfg.score_first)
            linked, near = self._graph_part(
                part, scores.relevance, seeds if eligible is None else seeds[eligible[seeds]], eligible
            )
        size = max(cfg.pool, k)
        total: np.ndarray | RowValues
        if scores.complete:
            graph = np.zeros(len(part))
            graph[linked] = near
            columns: Columns = (scores.relevance, recency, sit, outcome, graph)
            total = _weighted(cfg, columns)
            if eligible is not None:
                total[~eligible] = -np.inf
            pool = top(total, size)
            pool = pool if eligible is None else pool[eligible[pool]]
        else:  # exact scores for the rows whose bounds can reach the pool; the others cannot be chosen
            columns = (scores.relevance, recency, sit, outcome, RowValues(linked, near))
            other = OtherParts(rest, (linked, (cfg.graph * near).astype(np.float32)), ascending)
            rows = scores.candidates(np.float32(cfg.relevance), other, size, cfg.score_first)
            weighted = _weighted(cfg, columns, rows)
            total = RowValues(rows, weighted)  # `rows` are ascending: the values stay in their order
            pool = rows[top(weighted, size)]
        if cfg.mmr:
            picked = [
                int(pool[i])
                for i in mmr(
                    total[pool],
                    scores.rows.vectors(pool),
                    k,
                    lam=cfg.mmr_lambda,
                    duplicate_threshold=cfg.duplicate_threshold,
                )
            ]
        else:
            picked = [int(i) for i in pool[:k]]
        rows = np.array(picked, dtype=np.intp)
        parts = [a[rows].tolist() for a in (*columns, total)]  # each column read once for every row picked
        return [self._recalled(part.episodes[i], [p[n] for p in parts]) for n, i in enumerate(picked)]

    def _relevance(
        self, principal: str, part: Partition, qvec: np.ndarray, eligible: np.ndarray | None
    ) -> RelevanceScores | NeighbourScores:
        """The query's relevance to a partition's rows: exact, bounded, or from the rows the approximate index finds
        nearest (a partition large enough to have one); exact for the rows a filter keeps (`eligible`)."""
        cfg = self.config
        bounds = part.bounded(cfg.prune_from) if eligible is None else None
        if bounds is None:
            return RelevanceScores(part, qvec, None, eligible)
        index = None
        if self.neighbours is not None and 0 < cfg.neighbours_from <= len(part):
            index = self.neighbours.of(principal, part, bounds)
        if index is None:
            return RelevanceScores(part, qvec, bounds.probe(qvec, threads=cfg.blas_threads), eligible)
        rows = RowBounds(bounds, qvec)
        return NeighbourScores(part, qvec, rows, index.nearest(rows.projection, cfg.neighbour_candidates))

    def _graph_part(
        self, part: Partition, relevance: np.ndarray | Column, seed_rows: np.ndarray, eligible: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The rows the seeds' neighbourhood reached (each once) and their graph proximity (0 at every other row)."""
        cfg = self.config
        seeds = {part.episode_id(int(i)): float(relevance[i]) for i in seed_rows}
        position = part.position
        member = (
            (lambda n: n in position) if eligible is None else (lambda n: n in position and bool(eligible[position[n]]))
        )
        near = graph_proximity(self.graph, seeds, member, hops=cfg.graph_hops, max_nodes=cfg.graph_max_nodes)
        linked = np.array([part.position[node] for node in near], dtype=np.intp)
        return linked, np.array(list(near.values()), dtype=np.float64)

    def _recalled(self, episode: Episode, values: Sequence[float]) -> RecalledEpisode:
        """The recalled episode of a row with the `values` of its score parts (and total): with its reasons and
        causal chain."""
        cfg = self.config
        parts = ScoreParts(*(round(value, 6) for value in values))
        chain = (
            self.chain(self.graph, episode.id, cfg.chain_hops, cfg.chain_max_episodes)
            if cfg.chains and self.chain
            else None
        )
        return RecalledEpisode(episode, parts, _why(parts, episode, cfg), chain)


def _weighted(cfg: RetrieverConfig, columns: Columns, rows: np.ndarray | None = None) -> np.ndarray:
    """The weighted total of the score parts, of every row or of `rows`."""
    relevance, recency, sit, outcome, graph = columns if rows is None else (a[rows] for a in columns)
    return (
        cfg.relevance * relevance
        + cfg.recency * recency
        + cfg.situation * sit
        + cfg.outcome * outcome
        + cfg.graph * graph
    )


def mmr(scores: np.ndarray, vectors: np.ndarray, k: int, *, lam: float, duplicate_threshold: float) -> list[int]:
    """Maximal marginal relevance: indices of up to `k` diverse, high-scoring rows."""
    chosen: list[int] = []
    redundancy = np.zeros(len(scores))
    available = np.ones(len(scores), dtype=bool)
    while len(chosen) < k:
        value = np.where(
            available & (redundancy < duplicate_threshold), lam * scores - (1.0 - lam) * redundancy, -np.inf
        )
        if not len(value) or not np.isfinite(value.max()):
            break
        best = int(np.argmax(value))  # first of equals: ties keep the score order
        chosen.append(best)
        available[best] = False
        redundancy = np.maximum(redundancy, vectors @ vectors[best])
    return chosen


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


def applicable_facts(
    query_terms: frozenset[str],
    facts: Iterable[FactVersion],
    principal: str,
    *,
    min_match: float,
    limit: int,
    lines: Sequence[frozenset[str]] | None = None,
) -> list[RecalledFact]:
    """Active facts of the principal that apply to the query, best first.

    A rule applies when the query contains enough of its condition terms (``min_match``); a
    lesson only on a full match within one affirmed observation line without its exception
    terms (`memory.facts.lessons.lesson_applies`; `lines` default to the whole query as one line).
    """
    found = []
    lines = [query_terms] if lines is None else lines
    for f in facts:
        if f.principal != principal or f.status != ACTIVE or not f.condition:
            continue
        if f.kind == LESSON:
            if not lesson_applies(f, lines):
                continue
            why = (
                f"an observation affirms {', '.join(f.condition_words)} (a lesson); confidence {f.confidence:.2f} "
                f"from {len(f.support)} confirming, {len(f.contradict)} contradicting incidents"
            )
            found.append(RecalledFact(f, 1.0, round(f.confidence, 6), why))
            continue
        hit = [t for t in f.condition if t in query_terms]
        share = len(hit) / len(f.condition)
        if share < min_match or not hit:
            continue
        why = (
            f"query mentions {', '.join(hit)} ({len(hit)}/{len(f.condition)} condition terms); "
            f"confidence {f.confidence:.2f} from {len(f.support)} supporting, "
            f"{len(f.contradict)} contradicting episodes"
        )
        found.append(RecalledFact(f, round(share, 6), round(share * f.confidence, 6), why))
    # ties go by when the fact was made and what it says, not by its id: an id hashes the principal's
    # name, and a run under another name (a replay) must see the facts in the same order
    found.sort(key=lambda r: (-r.score, r.fact.created_at, r.fact.condition, r.fact.conclusion, r.fact.fact_id))
    return found[:limit]
