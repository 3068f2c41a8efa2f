"""The simulator: plays a scenario as a seeded stream of events (Gymnasium-style).

``DebugEnv(scenario).reset(seed=...)`` gives the first ``Prompt``; ``step(root_cause)``
returns a ``StepResult``. ``ground_truth()`` exposes true episodes and relations for
evaluation only. ``python -m simulator.generate`` writes long synthetic scenarios, and with
``--lessons`` lesson scenarios (`simulator.lessons`).
"""

from simulator.env import DebugEnv
from simulator.events import Event, Prompt, StepResult
from simulator.truth import GroundTruth, TrueEpisode, TrueRelation

__all__ = [
    "DebugEnv",
    "Event",
    "GroundTruth",
    "Prompt",
    "StepResult",
    "TrueEpisode",
    "TrueRelation",
]
