"""Layer 2, episodes: the segmenter cuts each principal's timeline into episodes and reads how
each one ended. `model` holds the values (Episode, Outcome, and for now layer 3's Edge and
EdgeType), `segmenter` the boundary signals and episode building, `outcomes` the outcome
detection from structured status, corrections and generic English cues (`memory.text`).
"""

from memory.episodes.model import Edge, EdgeType, Episode, Outcome, episode_id
from memory.episodes.outcomes import OutcomeVerdict, classify_text, detect_outcome
from memory.episodes.segmenter import Segmenter, SegmenterConfig, build_episode, segment

__all__ = [
    "Edge",
    "EdgeType",
    "Episode",
    "Outcome",
    "OutcomeVerdict",
    "Segmenter",
    "SegmenterConfig",
    "build_episode",
    "classify_text",
    "detect_outcome",
    "episode_id",
    "segment",
]
