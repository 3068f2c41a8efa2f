"""Weights and switches of recall, and the named presets eval compares.

Scoring of an episode (each part in [0, 1], weights in `RetrieverConfig`)::

    total = w_rel·relevance + w_rec·recency + w_sit·situation + w_out·outcome + w_graph·graph

- relevance: cosine between the query vector and the episode vector (clipped at 0).
- recency: ``0.5 ** (age / half_life)``, age measured from ``now`` to the episode's end.
- situation: 1 when the episode's situation label equals the query's, else 0.
- outcome: labelled outcomes beat UNKNOWN (`OUTCOME_VALUE`): SUCCESS 1.0, FAILURE and
  PARTIAL 0.6, plus `CORRECTION_BONUS` when the episode holds a correction.
- graph: personalized PageRank on the neighbourhood of the most relevant episodes
  (`memory.retrieval.proximity`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from memory.episodes import Outcome

# A confirmed answer is worth most; a corrected failure (0.6 + 0.2) comes next, above a bare
# failure. Ranking corrected failures above successes was measured to hurt: the failure and
# its successful retry are near-duplicates, and MMR then kept the failure.
OUTCOME_VALUE = {Outcome.SUCCESS: 1.0, Outcome.FAILURE: 0.6, Outcome.PARTIAL: 0.6, Outcome.UNKNOWN: 0.0}
CORRECTION_BONUS = 0.2  # added to the outcome part (capped at 1) when an episode holds a correction
# Where recall's approximate index pays (`RetrieverConfig.neighbours_from`). Measured on the bench stores (CPU per
# recall of the retriever, the same queries alternating in one run): 7,050 episodes, bounds 3.3 ms and the index
# 3.1 ms; 70,013 episodes, bounds 16.9 ms and the index 8.1 ms. Below this size the index would save little and
# cost its build (seconds at the first recall) and 280 bytes a row, and recall stays exact.
NEIGHBOURS_FROM = 32_768


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
    prune_from: int = 4096  # partitions at least this large score relevance through bounds first (`Bounds`)
    score_first: int = 64  # when many rows pass the bounds, this many of the likeliest are scored first
    # BLAS threads of a small first pass over the bounds (`memory.retrieval.bounds.blas_threads`): None leaves
    # numpy alone; 1 was fastest in a single-threaded benchmark. The limit is process-wide while a pass runs,
    # so set it only in a single-threaded host (never in a threaded one such as the MCP server).
    blas_threads: int | None = None
    # (prune_from, score_first and blas_threads change the speed of recall, never its result)
    # Partitions at least this large take their candidates from an approximate index (`memory.retrieval.neighbours`,
    # the ``ann`` extra; without it recall stays exact): the nearest `neighbour_candidates` rows, bounded and scored
    # exactly where needed, and every other row whose other score parts could still lift it into the pool. A
    # result then differs from the exact one only where the index missed one of those nearest rows. Smaller
    # memories, the harness's among them, keep exact recall (NEIGHBOURS_FROM). 0 turns the index off.
    neighbours_from: int = NEIGHBOURS_FROM
    # Rows asked of the approximate index per recall. On the 100k bench store, recall@10 against exact recall was
    # 0.999 with 200 and 0.987 with 100 (300 queries), at about the same time a recall.
    neighbour_candidates: int = 200


DEFAULT = RetrieverConfig()
NO_GRAPH = replace(DEFAULT, name="no_graph", graph=0.0, chains=False)
NO_FACTS = replace(DEFAULT, name="no_facts", facts=False)
NO_OUTCOME_LABELS = replace(DEFAULT, name="no_outcome_labels", outcome=0.0, show_outcomes=False)
NO_MMR = replace(DEFAULT, name="no_mmr", mmr=False, duplicate_threshold=1.01)
PRESETS = {c.name: c for c in (DEFAULT, NO_GRAPH, NO_FACTS, NO_OUTCOME_LABELS, NO_MMR)}
