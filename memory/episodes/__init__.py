"""Layer 2, episodes: the segmenter cuts each principal's timeline into episodes and reads how
each one ended. `model` holds the values (Episode, Outcome), `segmenter` the boundary signals
and episode building, `outcomes` the outcome detection from structured status, corrections and
generic English cues (`memory.text`).

Layer 3's records, `Edge` and `EdgeType`, live in `memory.graph` (`memory.graph.edges`).
`memory.episodes.Edge` and `.EdgeType` still answer for importers not moved yet: read from there
on first use, the package's one import upwards, until those importers take them from `memory`
or `memory.graph` (they are not in `__all__`).
"""

from typing import Any

from memory.episodes.model import Episode, Outcome, episode_id
from memory.episodes.outcomes import OutcomeVerdict, classify_text, detect_outcome
from memory.episodes.reading import Reader
from memory.episodes.segmenter import Segmenter, SegmenterConfig, build_episode, segment

__all__ = [
    "Episode",
    "Outcome",
    "OutcomeVerdict",
    "Reader",
    "Segmenter",
    "SegmenterConfig",
    "build_episode",
    "classify_text",
    "detect_outcome",
    "episode_id",
    "segment",
]


_MOVED = frozenset({"Edge", "EdgeType"})  # to `memory.graph.edges`


def __getattr__(name: str) -> Any:
    """`Edge` and `EdgeType` for importers of their old place (they moved to the graph layer)."""
    if name in _MOVED:
        from memory.graph import edges  # the one import upwards: goes once nothing asks for these here

        return getattr(edges, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
