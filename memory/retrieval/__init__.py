"""Retrieval: query → `Context` of past episodes with outcomes, applicable facts and causal chains.

`RetrieverConfig` and its named presets (`config`) set the weights of the episode score;
`EpisodeIndex` (`index`) holds each principal's episode vectors, bounded for fast scoring
(`bounds`); a large partition also has an approximate index (`neighbours`, kept beside the
store by `neighbour_store`) that finds its candidates. `Retriever` (`ranking`) scores, prunes
and diversifies, with the query's relevance to the rows from `relevance` (exact, bounded and
scored where needed, or scored where the approximate index points) and graph proximity
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
from memory.retrieval.neighbour_store import NeighbourIndexes, index_folder
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
    "NeighbourIndexes",
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
    "index_folder",
]
