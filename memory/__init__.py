"""Experiential memory for LLM agents: learn from experience without retraining.

Data flow::

    observations, decisions, outcomes, corrections
        │
    [1] timeline    append-only, content-addressed, hash-chained entries (SQLite)
        │
    [2] segmenter   entries → episodes with outcomes (SUCCESS / FAILURE / PARTIAL / UNKNOWN)
        │
    [3] graph       episodes → typed causal edges (CAUSED_BY, LED_TO, RETRY_OF, ...)
        │
    [4] facts       episodes → versioned heuristics with confidence
        │
    retriever       query → Context (episodes with outcomes, facts, causal chains)
        │
    reinforcer      outcome → links, LEARNED_FROM, fact confidence; the loop closes

The timeline is the only source of truth; every other layer is a projection of it.
"""

from memory.agent_memory import EpisodicMemory
from memory.errors import MemoryError_, StoreError
from memory.episodes import Edge, EdgeType, Episode, Outcome, Segmenter, SegmenterConfig, segment
from memory.facts import FactVersion
from memory.graph import GraphConfig, causal_chain
from memory.retrieval import Context, RetrieverConfig
from memory.episodes import Segmenter, SegmenterConfig, segment
from memory.timeline import (
    Encoder,
    Entry,
    HashingEncoder,
    Kind,
    NoRedaction,
    PatternRedactor,
    Redactor,
    Role,
    SentenceTransformerEncoder,
    SQLiteStore,
    Store,
    Timeline,
)

__all__ = [
    "Context",
    "Edge",
    "EdgeType",
    "Encoder",
    "Entry",
    "Episode",
    "EpisodicMemory",
    "FactVersion",
    "GraphConfig",
    "HashingEncoder",
    "Kind",
    "MemoryError_",
    "NoRedaction",
    "Outcome",
    "PatternRedactor",
    "Redactor",
    "RetrieverConfig",
    "Role",
    "SQLiteStore",
    "Segmenter",
    "SegmenterConfig",
    "SentenceTransformerEncoder",
    "Store",
    "StoreError",
    "Timeline",
    "causal_chain",
    "segment",
]
