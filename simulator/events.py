"""Values the environment hands to an agent: stream events, prompts, step results."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scenarios import RootCause

ROLES = ("environment", "user", "system")
KINDS = ("observation", "outcome", "correction", "note")


@dataclass(frozen=True)
class Event:
    """One entry of the environment's stream, ready to be appended to a timeline.

    Neither ``text`` nor ``metadata`` ever names the round's truth, kind or id.
    """

    timestamp: datetime  # UTC, tz-aware; non-decreasing along the stream
    situation: str  # situation label (the round's, or an interlude's)
    role: str  # "environment" | "user" | "system"
    kind: str  # "observation" | "outcome" | "correction" | "note"
    text: str  # what happened, in words
    metadata: dict[str, Any] = field(default_factory=dict)  # JSON-serializable extras
    index: int = 0  # 0-based position in the full stream since reset


@dataclass(frozen=True)
class Prompt:
    """What the agent sees before one decision (one attempt of one round)."""

    round_id: str  # round being played (for reporting; not a hint)
    kind: str  # the round's kind label (for reporting only)
    service: str  # affected service
    situation: str  # situation label of the round
    candidates: tuple[str, ...]  # root-cause ids the agent may choose from
    root_causes: dict[str, RootCause]  # descriptions and signals of the candidates
    attempt: int  # 1-based attempt number within the round
    events: tuple[Event, ...]  # stream events new since the previous prompt
    decision_time: datetime  # timestamp to give the decision; after all `events`
    catalogue: tuple[RootCause, ...] = ()  # every root cause of the scenario, by id (stable across rounds)
    runbook: tuple[str, ...] = ()  # the site's standard method's ranking of the candidates, best first (may be empty)


@dataclass(frozen=True)
class StepResult:
    """What ``DebugEnv.step`` returns for one attempt."""

    prompt: Prompt | None  # next prompt (retry or next round); None when finished
    events: tuple[Event, ...]  # this attempt's outcome signal, then any correction
    correct: bool  # whether the chosen root cause was the truth
    reward: float  # 1.0 when correct, else 0.0
    round_done: bool  # the round ended (solved, or attempts used up)
    terminated: bool  # the last round ended; the scenario is over
    truncated: bool  # always False: there is no time limit
    info: dict[str, Any]  # round_id, kind, attempt, truth, choice, valid_choice, solved (evaluation only)
