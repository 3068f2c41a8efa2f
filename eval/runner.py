"""Play one agent through one scenario with one seed, and record what happened."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from agent.agents import Agent, Turn
from agent.reasoner import Decision, Evidence
from scenarios import Scenario
from simulator import DebugEnv, GroundTruth, Prompt


@dataclass(frozen=True)
class RoundRecord:
    """One round as played by one agent (the run log's per-round record)."""

    scenario: str  # scenario name
    seed: int  # simulator seed
    round: str  # round id
    kind: str  # round kind label
    truth: str  # the true root cause
    first_decision: str  # choice at the first attempt
    first_correct: bool  # whether the first attempt was right
    solved: bool  # whether any attempt was right
    attempts: int  # attempts used
    decisions: tuple[str, ...] = ()  # every choice, in order
    first_confidence: float = 0.0  # reasoner confidence at the first attempt
    retrieved: int = 0  # evidence items retrieved at the first attempt
    labelled: int = 0  # of which carried an explicit outcome label (or were facts)
    relied_on_memory: bool = False  # the first decision relied on at least one memory item
    relied_on: tuple[str, ...] = ()  # the evidence ids the first decision cited (resolved to full ids)
    latency_ms: float = 0.0  # total decision time over the round's attempts
    input_tokens: int = 0  # LLM input tokens over the round (Claude mode)
    output_tokens: int = 0  # LLM output tokens over the round
    cost_usd: float = 0.0  # LLM cost over the round
    rationale: str = ""  # the reasoner's rationale at the first attempt
    candidate_scores: dict[str, Any] = field(default_factory=dict)  # per candidate: score parts at the first attempt
    retrieved_items: tuple[dict[str, Any], ...] = ()  # first attempt: {id, source, score, why, round, same_cause}
    evidence_eligible: bool = False  # the round's true cause was the truth of an earlier round
    cache_read_tokens: int = 0  # LLM input tokens read from the provider's prompt cache over the round
    invalid: tuple[str, ...] = ()  # "attempt N: why" for each attempt without a valid answer (counted wrong)
    notes: tuple[str, ...] = ()  # what the reasoner learned about its model during the round
    cache_write_tokens: int = 0  # LLM input tokens written to the provider's prompt cache over the round
    prompt: str = ""  # the user message the LLM read at the first attempt (LLM modes; memory block included)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["decisions"] = list(self.decisions)
        data["invalid"], data["notes"], data["relied_on"] = list(self.invalid), list(self.notes), list(self.relied_on)
        data["retrieved_items"] = [dict(item) for item in self.retrieved_items]
        return data


class TracedAgent(Agent, Protocol):
    """An agent the harness plays and traces: the `Agent` loop, and where each evidence item came from."""

    def provenance(self, item_id: str) -> tuple[int, ...]:
        """Environment event indices an evidence item was made from (evaluation only)."""
        ...


def trace_items(
    evidence: Sequence[Evidence],
    agent: TracedAgent,
    event_round: dict[int, str | None],
    order: dict[str, int],
    truths: dict[str, str],
    current: str,
) -> tuple[dict[str, Any], ...]:
    """Each evidence item with its provenance: the earlier round most of its events came from.

    ``round`` is None for facts and for items made only of interlude notes or agent-written
    entries; ``same_cause`` says whether that round's truth is the current round's. A fact also
    carries its ``conclusion`` and whether that was the round's truth (``right``).
    """
    traced = []
    for item in evidence:
        rounds = Counter(r for i in agent.provenance(item.id) if (r := event_round.get(i)) is not None)
        origin = None
        if rounds:
            top = max(rounds.values())
            origin = min((r for r, n in rounds.items() if n == top), key=lambda r: order.get(r, 0))
        traced.append(
            {
                "id": item.id,
                "source": item.source,
                "score": round(float(item.relevance), 4),
                "why": item.why,
                "round": origin,
                "same_cause": None if origin is None else truths.get(origin) == truths.get(current),
                **(
                    {"conclusion": item.conclusion, "right": item.conclusion == truths.get(current)}
                    if item.source == "fact"
                    else {}
                ),
            }
        )
    return tuple(traced)


@dataclass
class Playthrough:
    """Everything one (agent, scenario, seed) run produced."""

    rounds: list[RoundRecord] = field(default_factory=list)  # completed rounds, in order
    truth: GroundTruth | None = None  # simulator ground truth (evaluation only)
    layers: dict[str, Any] | None = None  # memory-layer quality vs ground truth (episodic agents)
    error: str | None = None  # what stopped the run early, if anything


@dataclass
class _Tally:
    """A round in progress: its attempts' choices and usage, and what the first attempt rested on."""

    decisions: list[str] = field(default_factory=list)
    latency: float = 0.0  # ms
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cached: int = 0  # prompt-cache read tokens
    written: int = 0  # prompt-cache write tokens
    invalid: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    confidence: float = 0.0
    retrieved: int = 0
    labelled: int = 0
    relied: bool = False
    relied_ids: tuple[str, ...] = ()
    rationale: str = ""
    prompt: str = ""
    scores: dict[str, Any] = field(default_factory=dict)
    items: tuple[dict[str, Any], ...] = ()


def play(scenario: Scenario, seed: int, agent: TracedAgent, playthrough: Playthrough | None = None) -> Playthrough:
    """Run `agent` through `scenario`; completed rounds are kept even if a later one fails.

    Exceptions propagate after `playthrough` (when given) holds every finished round, so a
    caller can log what completed before the failure.
    """
    result = playthrough if playthrough is not None else Playthrough()
    env = DebugEnv(scenario)
    prompt: Prompt | None = env.reset(seed=seed)[0]
    current = _Tally()
    order = {r.id: i for i, r in enumerate(scenario.rounds)}
    truths = {r.id: r.truth for r in scenario.rounds}
    event_round: dict[int, str | None] = {}  # environment event index → its round (None: interlude)
    while prompt is not None:
        event_round.update((e.index, None if e.kind == "note" else prompt.round_id) for e in prompt.events)
        if prompt.attempt == 1:
            current = _Tally()
        started = time.perf_counter()
        turn = agent.decide(prompt)
        decision = turn.decision
        current.latency += (time.perf_counter() - started) * 1000.0
        _add_usage(current, decision, prompt.attempt)
        if prompt.attempt == 1:
            items = trace_items(turn.evidence, agent, event_round, order, truths, prompt.round_id)
            _first_attempt(current, turn, items)
        current.decisions.append(decision.choice)
        step = env.step(decision.choice)
        event_round.update((e.index, prompt.round_id) for e in step.events)
        agent.observe(step.events)
        if step.round_done:
            earlier = {truths[r.id] for r in scenario.rounds[: order[step.info["round_id"]]]}
            result.rounds.append(_round_record(scenario.name, seed, step.info, current, earlier))
        prompt = step.prompt
    result.truth = env.ground_truth()
    result.layers = measure_layers(agent, result.truth)
    agent.close()
    return result


def _first_attempt(current: _Tally, turn: Turn, items: tuple[dict[str, Any], ...]) -> None:
    """What a round's first decision rested on: its confidence, evidence, citations, rationale and scores."""
    decision, evidence = turn.decision, turn.evidence
    current.confidence = decision.confidence
    current.retrieved = len(evidence)
    current.labelled = sum(1 for item in evidence if item.outcome is not None or item.source == "fact")
    current.relied = bool(decision.relied_on)
    current.relied_ids = tuple(decision.relied_on)
    current.rationale = decision.rationale
    current.prompt = decision.prompt
    current.scores = {c: dict(v) for c, v in decision.parts.items()} or dict(decision.scores)
    current.items = items


def _round_record(scenario: str, seed: int, info: Mapping[str, Any], current: _Tally, earlier: set[str]) -> RoundRecord:
    """The run log's record of a finished round; `earlier` holds the truths of the rounds before it."""
    decisions = tuple(current.decisions)
    return RoundRecord(
        scenario=scenario,
        seed=seed,
        round=info["round_id"],
        kind=info["kind"],
        truth=info["truth"],
        first_decision=decisions[0],
        first_correct=decisions[0] == info["truth"],
        solved=bool(info["solved"]),
        attempts=len(decisions),
        decisions=decisions,
        first_confidence=float(current.confidence),
        retrieved=current.retrieved,
        labelled=current.labelled,
        relied_on_memory=current.relied,
        relied_on=current.relied_ids,
        latency_ms=round(current.latency, 3),
        input_tokens=current.input_tokens,
        output_tokens=current.output_tokens,
        cost_usd=round(current.cost, 6),
        rationale=current.rationale,
        candidate_scores=current.scores,
        retrieved_items=current.items,
        cache_read_tokens=current.cached,
        invalid=tuple(current.invalid),
        notes=tuple(current.notes),
        cache_write_tokens=current.written,
        prompt=current.prompt,
        evidence_eligible=info["truth"] in earlier,
    )


def _add_usage(current: _Tally, decision: Decision, attempt: int) -> None:
    """Add one attempt's tokens, cost, model notes and invalid answer to the round's tally."""
    current.input_tokens += int(decision.usage.get("input_tokens", 0))
    current.output_tokens += int(decision.usage.get("output_tokens", 0))
    current.cost += float(decision.usage.get("cost_usd", 0.0))
    current.cached += int(decision.usage.get("cache_read_input_tokens", 0))
    current.written += int(decision.usage.get("cache_creation_input_tokens", 0))
    current.notes += list(decision.notes)
    if decision.invalid:
        current.invalid.append(f"attempt {attempt}: {decision.invalid}")


def measure_layers(agent: Agent, truth: GroundTruth) -> dict[str, Any] | None:
    """Score an episodic agent's episodes and edges against the simulator's ground truth."""
    recorded = agent.recorded()
    if recorded is None:
        return None
    from eval.layers import layer_quality

    quality = layer_quality(truth, recorded.entry_events, recorded.episodes, recorded.edges)
    return quality.to_json()
