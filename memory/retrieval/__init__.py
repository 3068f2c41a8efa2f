"""Retrieval: query → `Context` of past episodes with outcomes, applicable facts and causal chains.

`RetrieverConfig` and its named presets (`config`) set the weights of the episode score;
`EpisodeIndex` (`index`) holds each principal's episode vectors, bounded for fast scoring
(`bounds`); `Retriever` (`ranking`) scores, prunes and diversifies, with the query's relevance
to the rows from `relevance` (exact, or bounded and scored where needed) and graph proximity
from `proximity`. Causal chain narratives are remembered between recalls by the graph layer's
`ChainCache` (`memory.graph.chain_cache`), which the derived state holds.
"""

from memory.retrieval.bounds import Bounds
from memory.retrieval.config import DEFAULT, PRESETS, RetrieverConfig
from memory.retrieval.context import (
    Context,
    IncidentNote,
    RecalledChange,
    RecalledEpisode,
    RecalledFact,
    RecalledIncident,
    ScoreParts,
)
from memory.retrieval.index import EpisodeIndex, Partition, episode_vector
from memory.retrieval.proximity import graph_proximity
from memory.retrieval.ranking import Retriever
from memory.retrieval.units import IncidentRecall, Unit

__all__ = [
    "DEFAULT",
    "PRESETS",
    "Bounds",
    "Context",
    "EpisodeIndex",
    "IncidentNote",
    "IncidentRecall",
    "Partition",
    "RecalledEpisode",
    "RecalledChange",
    "RecalledFact",
    "RecalledIncident",
    "Retriever",
    "RetrieverConfig",
    "ScoreParts",
    "Unit",
    "episode_vector",
    "graph_proximity",
]
