"""The reasoner contract shared by every agent: problem + evidence → decision.

Every agent in a comparison uses the same `Reasoner`; only the memory that produces the
`Evidence` differs. Evidence items carry outcome labels and corrections when the memory
has them (episodic memory) and only text and a relevance score when it does not (flat RAG).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class CauseInfo:
    """The scenario's description of one candidate root cause: the only world knowledge."""

    id: str  # root-cause id
    description: str  # what it is
    signals: tuple[str, ...]  # symptoms that usually point to it


# An evidence kind's record at a site: (hits, misses), or (hits, misses, the hits chance would have scored on the
# decisions whose candidate count is known, how many those were), as `memory.TrackRecord` keeps it
RecordEntry = tuple[int, int] | tuple[int, int, float, int]


@dataclass(frozen=True)
class Problem:
    """What the agent faces before one decision."""

    observations: tuple[str, ...]  # what the environment showed for this round
    candidates: tuple[CauseInfo, ...]  # the root causes to choose from
    situation: str  # situation label
    service: str  # affected service
    attempt: int  # 1-based attempt number
    tried: tuple[str, ...] = ()  # choices already tried and failed in this round
    feedback: tuple[str, ...] = ()  # outcome and correction texts seen in this round so far
    catalogue: tuple[CauseInfo, ...] = ()  # every root cause of the scenario, by id (the candidates among them)
    record: Mapping[str, RecordEntry] = field(default_factory=dict)  # evidence kind → its record at this site
    runbook: tuple[str, ...] = ()  # the site's standard method's ranking of the candidates, best first (may be empty)
    track: Mapping[str, Mapping[str, int]] = field(
        default_factory=dict
    )  # runbook favourite → {final answer: incidents} here


@dataclass(frozen=True)
class Evidence:
    """One context item a memory offers the reasoner."""

    id: str  # episode id, fact version id or chunk id
    source: str  # "incident", "episode", "fact", "change" or "chunk"
    text: str  # what the item says (summary, fact text or raw chunk)
    relevance: float  # similarity to the current problem, in [0, 1]
    outcome: str | None = None  # SUCCESS / FAILURE / PARTIAL / UNKNOWN, when labelled
    choices: tuple[str, ...] = ()  # decisions taken in the item, in order (a lesson: the choices it rejects)
    corrections: tuple[str, ...] = ()  # corrections received in the item
    resolved_as: str | None = None  # the choice that finally worked for the item's problem, when known
    conclusion: str | None = None  # a fact's conclusion
    confidence: float | None = None  # a fact's confidence
    observations: tuple[str, ...] = ()  # what was observed in the item's problem, when known
    why: str = ""  # why the memory chose it (score parts, in words)
    sequence: int = 0  # its place in the memory's history: later experience has a larger number (0: unknown)
    # for a precedent whose first answers failed before another fixed it: how much of what the round shares with
    # it told it apart from those answers, in [0, 1] (`memory.RecalledIncident.telling`); None when not known
    telling: float | None = None


@dataclass(frozen=True)
class Decision:
    """A reasoner's answer."""

    choice: str  # chosen root-cause id
    confidence: float  # in [0, 1]
    rationale: str  # one or two sentences
    relied_on: tuple[str, ...] = ()  # ids of evidence items that supported the choice
    scores: Mapping[str, float] = field(default_factory=dict)  # per-candidate score, when available
    parts: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # per candidate: the score's parts
    usage: Mapping[str, float] = field(default_factory=dict)  # tokens, cost and latency (LLM reasoners)
    invalid: str = ""  # why no valid answer came (choice is then ""); the attempt counts as wrong
    notes: tuple[str, ...] = ()  # what the reasoner learned about its model while deciding (for the run log)
    favoured: Mapping[str, str] = field(default_factory=dict)  # evidence kind → the candidate it favoured, unweighted
    prompt: str = ""  # the user message the model read (LLM reasoners; the system prompt is the same all run)


class Reasoner(Protocol):
    """Decides a root cause from a problem and the evidence a memory supplies."""

    name: str  # "heuristic" or "claude"

    def decide(self, problem: Problem, evidence: Sequence[Evidence], context_text: str) -> Decision:
        """Choose one of `problem.candidates` (never one in `problem.tried` while others remain)."""
        ...
