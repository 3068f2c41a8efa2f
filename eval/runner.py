"""Play one agent through one scenario with one seed, and record what happened."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.agents import Agent
from scenarios import Scenario
from simulator import DebugEnv, GroundTruth


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


def trace_items(
    evidence: Any,
    agent: Agent,
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
        rounds = Counter(event_round.get(i) for i in agent.provenance(item.id))
        rounds.pop(None, None)
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


def play(scenario: Scenario, seed: int, agent: Agent, playthrough: Playthrough | None = None) -> Playthrough:
    """Run `agent` through `scenario`; completed rounds are kept even if a later one fails.

    Exceptions propagate after `playthrough` (when given) holds every finished round, so a
    caller can log what completed before the failure.
    """
    result = playthrough if playthrough is not None else Playthrough()
    env = DebugEnv(scenario)
    prompt, _ = env.reset(seed=seed)
    current: dict[str, Any] | None = None
    order = {r.id: i for i, r in enumerate(scenario.rounds)}
    truths = {r.id: r.truth for r in scenario.rounds}
    event_round: dict[int, str | None] = {}  # environment event index → its round (None: interlude)
    while prompt is not None:
        event_round.update((e.index, None if e.kind == "note" else prompt.round_id) for e in prompt.events)
        if prompt.attempt == 1:
            current = {
                "decisions": [],
                "latency": 0.0,
                "in": 0,
                "out": 0,
                "cost": 0.0,
                "cached": 0,
                "written": 0,
                "invalid": [],
                "notes": [],
            }
        started = time.perf_counter()
        turn = agent.decide(prompt)
        decision = turn.decision
        current["latency"] += (time.perf_counter() - started) * 1000.0
        _add_usage(current, decision, prompt.attempt)
        if prompt.attempt == 1:
            evidence = turn.evidence
            current.update(
                confidence=decision.confidence,
                retrieved=len(evidence),
                labelled=sum(1 for item in evidence if item.outcome is not None or item.source == "fact"),
                relied=bool(decision.relied_on),
                relied_ids=tuple(decision.relied_on),
                rationale=decision.rationale,
                prompt=decision.prompt,
                scores={c: dict(v) for c, v in decision.parts.items()} or dict(decision.scores),
                items=trace_items(evidence, agent, event_round, order, truths, prompt.round_id),
            )
        current["decisions"].append(decision.choice)
        step = env.step(decision.choice)
        event_round.update((e.index, prompt.round_id) for e in step.events)
        agent.observe(step.events)
        if step.round_done:
            info = step.info
            decisions = tuple(current["decisions"])
            result.rounds.append(
                RoundRecord(
                    scenario=scenario.name,
                    seed=seed,
                    round=info["round_id"],
                    kind=info["kind"],
                    truth=info["truth"],
                    first_decision=decisions[0],
                    first_correct=decisions[0] == info["truth"],
                    solved=bool(info["solved"]),
                    attempts=len(decisions),
                    decisions=decisions,
                    first_confidence=float(current["confidence"]),
                    retrieved=current["retrieved"],
                    labelled=current["labelled"],
                    relied_on_memory=current["relied"],
                    relied_on=current["relied_ids"],
                    latency_ms=round(current["latency"], 3),
                    input_tokens=current["in"],
                    output_tokens=current["out"],
                    cost_usd=round(current["cost"], 6),
                    rationale=current["rationale"],
                    candidate_scores=current["scores"],
                    retrieved_items=current["items"],
                    cache_read_tokens=current["cached"],
                    invalid=tuple(current["invalid"]),
                    notes=tuple(current["notes"]),
                    cache_write_tokens=current["written"],
                    prompt=current["prompt"],
                    evidence_eligible=any(
                        truths[r.id] == info["truth"] for r in scenario.rounds[: order[info["round_id"]]]
                    ),
                )
            )
        prompt = step.prompt
    result.truth = env.ground_truth()
    result.layers = measure_layers(agent, result.truth)
    agent.close()
    return result


def _add_usage(current: dict[str, Any], decision: Any, attempt: int) -> None:
    """Add one attempt's tokens, cost, model notes and invalid answer to the round's tally."""
    current["in"] += int(decision.usage.get("input_tokens", 0))
    current["out"] += int(decision.usage.get("output_tokens", 0))
    current["cost"] += float(decision.usage.get("cost_usd", 0.0))
    current["cached"] += int(decision.usage.get("cache_read_input_tokens", 0))
    current["written"] += int(decision.usage.get("cache_creation_input_tokens", 0))
    current["notes"] += list(decision.notes)
    if decision.invalid:
        current["invalid"].append(f"attempt {attempt}: {decision.invalid}")


def measure_layers(agent: Agent, truth: GroundTruth) -> dict[str, Any] | None:
    """Score an episodic agent's episodes and edges against the simulator's ground truth."""
    recorded = agent.recorded()
    if recorded is None:
        return None
    from eval.layers import layer_quality

    quality = layer_quality(truth, recorded.entry_events, recorded.episodes, recorded.edges)
    return quality.to_json()
