"""Layer 2, episodes: the segmenter cuts each principal's timeline into episodes and reads how
each one ended. `model` holds the values (Episode, Outcome), `segmenter` the boundary signals
and episode building, `outcomes` the outcome detection from structured status, corrections and
generic English cues (`memory.text`).

Layer 3's records, `Edge` and `EdgeType`, live with the graph (`memory.graph.edges`).
"""

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
