"""Experiential memory for LLM agents: learn from experience without retraining.

Data flow (one package or module per stage)::

    observe · decide · act · outcome · correct        EpisodicMemory (agent_memory): the facade, no rules
        │
    [1] timeline/     redact, embed, append: content-addressed, hash-chained entries (SQLite)
        │
    [2] episodes/     segmenter: entries → closed episodes with outcomes (SUCCESS / FAILURE / ...)
        │
        state         the derived state the pipeline reads: episodes, problems, graph, index, facts
        │
        pipeline      close_episode(state, episode, entries) → Changes (pure; the facade stores them)
    [3]   graph/        rules: typed causal edges (CAUSED_BY, RETRY_OF, LEARNED_FROM, LED_TO, ...)
          reinforcer    what the decisions relied on: LED_TO / CONTRADICTED, reinforcement marks
    [4]   facts/        versioned heuristics with confidence: reinforced, revised, extracted
        │
        persistence/  opening: the state rebuilt from stored records and state runs
        │
        retrieval/    query → Context (episodes with outcomes, facts, causal chains, and the incidents
                      they belong to, weighed by closeness and credit; implicated changes)

    lexicon/          the words every layer reads (data: YAML groups, each with its provenance), passed in
                      like the encoder
    text              how the words are read: tokens, negation, looks, causal cues, for every layer

The timeline is the only source of truth; every other layer is a projection of it.
"""

from memory.agent_memory import EpisodicMemory
from memory.calibration import TrackRecord
from memory.episodes import Episode, Outcome, Reader, Segmenter, SegmenterConfig, segment
from memory.errors import EpisodicMemoryError, StoreError
from memory.facts import FactVersion
from memory.graph import Edge, EdgeType, GraphConfig, causal_chain
from memory.lexicon import DEFAULT_LEXICON, Lexicon, load_lexicon
from memory.retrieval import Context, IncidentNote, RecalledChange, RecalledIncident, RetrieverConfig
from memory.timeline import (
    Encoder,
    Entry,
    HashingEncoder,
    Kind,
    NoRedaction,
    PatternRedactor,
    Redactor,
    Role,
    SemanticEncoder,
    SentenceTransformerEncoder,
    SQLiteStore,
    Store,
    Timeline,
)

__all__ = [
    "Context",
    "DEFAULT_LEXICON",
    "Edge",
    "EdgeType",
    "Encoder",
    "Entry",
    "Episode",
    "EpisodicMemory",
    "TrackRecord",
    "FactVersion",
    "GraphConfig",
    "HashingEncoder",
    "IncidentNote",
    "Kind",
    "Lexicon",
    "EpisodicMemoryError",
    "NoRedaction",
    "Outcome",
    "PatternRedactor",
    "Reader",
    "Redactor",
    "RecalledChange",
    "RecalledIncident",
    "RetrieverConfig",
    "Role",
    "SQLiteStore",
    "Segmenter",
    "SegmenterConfig",
    "SemanticEncoder",
    "SentenceTransformerEncoder",
    "Store",
    "StoreError",
    "Timeline",
    "causal_chain",
    "load_lexicon",
    "segment",
]
