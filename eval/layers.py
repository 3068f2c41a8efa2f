"""Quality of layers 2 and 3 against the simulator's ground truth.

    python -m eval.layers                          # every shipped scenario, seeds 0 1 2
    python -m eval.layers pool-vs-deploy --seed 0 --policy truth-on-retry

`layer_quality` scores predicted episodes and edges; agents that record a simulator run
reuse it. `measure_scenario` plays a scenario with a scripted policy through the agent
loop (`agent.agents.EpisodicAgent` with a `ScriptedReasoner`) into an in-memory
`EpisodicMemory`, so the stream is recorded, segmented, linked and reinforced exactly as
in a comparison, then scores the episodes and edges the memory derived.

Scoring:

- boundaries: a predicted boundary is the first environment event of a predicted
  episode (entries the agent wrote itself have no event index and are ignored); a true
  boundary is the first event of a true episode. Precision, recall and F1 over the sets.
- outcome accuracy: each decided true attempt episode against the predicted episode that
  contains its outcome event.
- edges: each edge in its current version (`memory.graph.standing_edges`: the last record
  of each edge; a CAUSED_BY weakened below `STANDING` is withdrawn); each predicted episode
  maps to the true episode holding most of its events (ties: the earliest); a predicted edge
  is correct when the mapped pair carries a true relation of the same type. Precision is None
  when nothing was predicted, recall None when nothing was true.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rich.console import Console
from rich.table import Table

import scenarios
from agent.agents import PRINCIPAL, EpisodicAgent, Recorded
from agent.reasoner import Decision, Problem
from memory import EpisodicMemory
from memory.episodes import Episode, SegmenterConfig
from memory.episodes.segmenter import DEFAULT_CONFIG
from memory.graph import DEFAULT_CAUSE_WEIGHTS, DEFAULT_GRAPH_CONFIG, Edge, EdgeType, GraphConfig, standing_edges
from simulator import DebugEnv, Prompt

SCORED_EDGES = (EdgeType.RETRY_OF, EdgeType.LEARNED_FROM, EdgeType.CAUSED_BY)  # the ones with ground truth
POLICIES = ("first-candidate", "truth-on-retry")
# An edge is scored in its current version; a CAUSED_BY weakened below the weakest link the
# rules make (best share × link probability) no longer stands.
STANDING = {EdgeType.CAUSED_BY: DEFAULT_CAUSE_WEIGHTS.link_at * DEFAULT_CAUSE_WEIGHTS.lead_at}


@dataclass(frozen=True)
class EdgeScore:
    """Precision and recall of one edge type."""

    precision: float | None  # correct / predicted; None when none predicted
    recall: float | None  # found / true; None when none true
    predicted: int  # predicted edges of this type
    true: int  # true relations of this type
    correct: int  # predicted edges matching a true relation


@dataclass(frozen=True)
class LayerQuality:
    """Segmentation and linking quality of one run."""

    boundary_precision: float  # predicted boundaries that are true
    boundary_recall: float  # true boundaries that were predicted
    boundary_f1: float  # harmonic mean of the two
    outcome_accuracy: float | None  # decided true attempts whose predicted outcome matches; None if none
    edges: dict[str, EdgeScore]  # per scored edge type
    episodes: int = 0  # predicted episodes
    true_episodes: int = 0  # true episodes
    edge_counts: dict[str, int] = field(default_factory=dict)  # predicted edges per type (all types)

    def to_json(self) -> dict[str, Any]:
        """Run-log form: boundary_f1, outcome_accuracy, edges {TYPE: {precision, recall}} and extras."""
        return {
            "boundary_f1": self.boundary_f1,
            "boundary_precision": self.boundary_precision,
            "boundary_recall": self.boundary_recall,
            "outcome_accuracy": self.outcome_accuracy,
            "edges": {
                name: {
                    "precision": s.precision,
                    "recall": s.recall,
                    "predicted": s.predicted,
                    "true": s.true,
                    "correct": s.correct,
                }
                for name, s in self.edges.items()
            },
            "episodes": self.episodes,
            "true_episodes": self.true_episodes,
            "edge_counts": dict(self.edge_counts),
        }


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def layer_quality(
    truth: Any,
    event_index: Mapping[str, int],
    episodes: Sequence[Episode],
    edges: Sequence[Edge],
    *,
    events: Sequence[Any] | None = None,
) -> LayerQuality:
    """Score predicted episodes and edges against a simulator's ground truth.

    Args:
        truth: ``env.ground_truth()``.
        event_index: timeline entry id → stream index of the environment event it records.
        episodes: predicted episodes.
        edges: predicted edges.
        events: ``env.events`` (anything with ``index`` and ``kind``); locates each attempt's
            outcome event. Without it, the event holding most of the attempt is used.
    """
    pred_events = {ep.id: sorted(event_index[e] for e in ep.entry_ids if e in event_index) for ep in episodes}
    precision, recall, f1 = _boundary_scores(pred_events, set(truth.boundaries))
    mapped = _mapped_episodes(pred_events, truth)
    counts = Counter(e.type.value for e in edges)
    return LayerQuality(
        precision,
        recall,
        f1,
        _outcome_accuracy(truth, episodes, pred_events, mapped, events),
        _edge_scores(truth, edges, mapped),
        len(episodes),
        len(truth.episodes),
        {t.value: counts.get(t.value, 0) for t in EdgeType},
    )


def _boundary_scores(pred_events: Mapping[str, list[int]], true_b: set[int]) -> tuple[float, float, float]:
    """Precision, recall and F1 of the predicted episodes' first events as the true boundaries."""
    predicted = {idx[0] for idx in pred_events.values() if idx}
    hit = len(predicted & true_b)
    precision = hit / len(predicted) if predicted else 0.0
    recall = hit / len(true_b) if true_b else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def _mapped_episodes(pred_events: Mapping[str, list[int]], truth: Any) -> dict[str, int]:
    """Predicted episode id → position of the true episode holding most of its events (ties: the earliest)."""
    position_of = {i: pos for pos, ep in enumerate(truth.episodes) for i in ep.event_indices}
    mapped: dict[str, int] = {}
    for ep_id, idx in pred_events.items():
        votes = Counter(position_of[i] for i in idx if i in position_of)
        if votes:
            top = max(votes.values())
            mapped[ep_id] = min(pos for pos, n in votes.items() if n == top)
    return mapped


def _outcome_accuracy(
    truth: Any,
    episodes: Sequence[Episode],
    pred_events: Mapping[str, list[int]],
    mapped: Mapping[str, int],
    events: Sequence[Any] | None,
) -> float | None:
    """Share of decided true attempts whose predicted episode carries the right outcome."""
    episode_at = {i: ep for ep in episodes for i in pred_events[ep.id]}
    kinds = {e.index: e.kind for e in events} if events is not None else {}
    right = decided = 0
    for pos, true_ep in enumerate(truth.episodes):
        if true_ep.kind != "attempt" or true_ep.outcome == "UNKNOWN":
            continue
        decided += 1
        outcome_events = [i for i in true_ep.event_indices if kinds.get(i) == "outcome"]
        if outcome_events:
            holder = episode_at.get(outcome_events[-1])
        else:
            holder = next((ep for ep in episodes if mapped.get(ep.id) == pos), None)
        right += holder is not None and holder.outcome.value == true_ep.outcome
    return _ratio(right, decided)


def _edge_scores(truth: Any, edges: Sequence[Edge], mapped: Mapping[str, int]) -> dict[str, EdgeScore]:
    """Per scored edge type: the standing predicted edges whose mapped pair carries a true relation of that type."""
    standing = standing_edges(edges, min_weight=STANDING)
    true_rel: dict[str, set[tuple[int, int]]] = {t.value: set() for t in SCORED_EDGES}
    for rel in truth.relations:
        true_rel.setdefault(rel.type, set()).add((rel.source, rel.target))
    scores: dict[str, EdgeScore] = {}
    for kind in SCORED_EDGES:
        mine = [e for e in standing if e.type == kind]
        pairs = {(mapped.get(e.source, -1 - i), mapped.get(e.target, -1 - i)) for i, e in enumerate(mine)}
        correct = len(pairs & true_rel[kind.value])
        truth_n = len(true_rel[kind.value])
        scores[kind.value] = EdgeScore(
            _ratio(correct, len(pairs)), _ratio(correct, truth_n), len(pairs), truth_n, correct
        )
    return scores


# -- scripted runs -------------------------------------------------------------------------


class Played(NamedTuple):
    """A simulator run recorded by the agent loop into an episodic memory."""

    recorded: Recorded  # the episodes and edges the memory derived, and entry → event index
    entries: tuple[Any, ...]  # the timeline the agent loop wrote, in order
    truth: Any  # the environment's ground truth
    events: tuple[Any, ...]  # the environment's events


class ScriptedReasoner:
    """A reasoner that answers what it is told (`next_choice`), with the cause's description as rationale."""

    name = "scripted"

    def __init__(self) -> None:
        self.next_choice = ""

    def decide(self, problem: Problem, evidence: Sequence[Any], context_text: str) -> Decision:
        cause = next((c for c in problem.candidates if c.id == self.next_choice), None)
        return Decision(self.next_choice, 0.5, cause.description if cause is not None else "no rationale")


def _choose(prompt: Prompt, policy: str, last_info: Mapping[str, Any] | None) -> str:
    if policy == "truth-on-retry" and prompt.attempt > 1 and last_info is not None:
        return str(last_info["truth"])
    return prompt.candidates[0]


def play(
    scenario: Any,
    seed: int,
    policy: str,
    *,
    segmenter: SegmenterConfig = DEFAULT_CONFIG,
    graph: GraphConfig = DEFAULT_GRAPH_CONFIG,
) -> Played:
    """Play `scenario` with a scripted policy through the agent loop into a fresh in-memory `EpisodicMemory`.

    Policies: "first-candidate" always picks the first candidate; "truth-on-retry" does so
    on a first attempt and picks the truth on a retry (so rounds are solved after a
    correction, which exercises LEARNED_FROM).
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r} (known: {', '.join(POLICIES)})")
    reasoner = ScriptedReasoner()
    memory = EpisodicMemory(None, principal=PRINCIPAL, segmenter=segmenter, links=graph)
    agent = EpisodicAgent(reasoner, memory, name="scripted")
    env = DebugEnv(scenario)
    prompt: Prompt | None = env.reset(seed=seed)[0]
    info: Mapping[str, Any] | None = None
    try:
        while prompt is not None:
            reasoner.next_choice = _choose(prompt, policy, info)
            agent.decide(prompt)
            result = env.step(reasoner.next_choice)
            agent.observe(result.events)
            info = result.info
            prompt = result.prompt
        return Played(agent.recorded(), tuple(memory.store.entries()), env.ground_truth(), env.events)
    finally:
        agent.close()


def measure_scenario(
    scenario_ref: Any,
    seed: int = 0,
    policy: str = "first-candidate",
    *,
    segmenter: SegmenterConfig = DEFAULT_CONFIG,
    graph: GraphConfig = DEFAULT_GRAPH_CONFIG,
) -> LayerQuality:
    """Play, record, segment, link and score one scenario (a name, path or `Scenario`)."""
    scenario = scenarios.load(scenario_ref) if isinstance(scenario_ref, str) else scenario_ref
    played = play(scenario, seed, policy, segmenter=segmenter, graph=graph)
    recorded = played.recorded
    return layer_quality(played.truth, recorded.entry_events, recorded.episodes, recorded.edges, events=played.events)


# -- report and command line -------------------------------------------------------------


class LayerRow(NamedTuple):
    """One measured run."""

    scenario: str  # scenario name
    seed: int  # simulator seed
    policy: str  # scripted policy
    quality: LayerQuality  # the measurements


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


@dataclass(frozen=True)
class LayerReport:
    """Measured runs, rendered as a rich table."""

    rows: tuple[LayerRow, ...]  # one per scenario × seed × policy

    def __rich__(self) -> Table:
        table = Table(title="Layer quality (segmentation and graph vs ground truth)")
        for name in ("scenario", "seed", "policy", "bnd P", "bnd R", "bnd F1", "outcome acc"):
            table.add_column(name, justify="left" if name in ("scenario", "policy") else "right")
        for kind in SCORED_EDGES:
            table.add_column(f"{kind.value}\nP/R (true)", justify="right")
        for row in self.rows:
            q = row.quality
            table.add_row(
                row.scenario,
                str(row.seed),
                row.policy,
                _fmt(q.boundary_precision),
                _fmt(q.boundary_recall),
                _fmt(q.boundary_f1),
                _fmt(q.outcome_accuracy),
                *(
                    f"{_fmt(q.edges[k.value].precision)}/{_fmt(q.edges[k.value].recall)} ({q.edges[k.value].true})"
                    for k in SCORED_EDGES
                ),
            )
        table.caption = "P/R: precision/recall; — when nothing was predicted (P) or true (R)"
        return table

    def to_json(self) -> list[dict[str, Any]]:
        """Rows as plain data."""
        return [{"scenario": r.scenario, "seed": r.seed, "policy": r.policy, **r.quality.to_json()} for r in self.rows]


def _seeds(args: argparse.Namespace) -> list[int] | None:
    """The seeds `--seeds N` (or the deprecated `--seed S ...`) ask for; None after printing a usage error."""
    if args.seeds is not None and args.seed is not None:
        print("error: give --seeds N or the deprecated --seed S ..., not both", file=sys.stderr)
        return None
    if args.seed is not None:
        print("note: --seed is deprecated; --seeds N plays seeds 0..N-1 as in eval.compare", file=sys.stderr)
        return list(args.seed)
    count = 3 if args.seeds is None else args.seeds
    if count < 1:
        print("error: --seeds must be at least 1", file=sys.stderr)
        return None
    return list(range(count))


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: measure layer quality on scenarios; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m eval.layers",
        description="Measure segmentation and graph quality against the simulator's ground truth.",
        epilog="example: python -m eval.layers pool-vs-deploy --seeds 3 --policy truth-on-retry",
    )
    parser.add_argument("scenarios", nargs="*", help="scenario names or files (default: every shipped scenario)")
    parser.add_argument(
        "--seeds",
        type=int,
        default=None,
        metavar="N",
        help="number of simulator seeds, 0..N-1, as in eval.compare (default 3)",
    )
    parser.add_argument(
        "--seed", type=int, nargs="+", default=None, metavar="S", help="deprecated: explicit seeds (use --seeds N)"
    )
    parser.add_argument("--policy", choices=POLICIES, action="append", help="scripted policy (default: both)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    seeds = _seeds(args)
    if seeds is None:
        return 2
    loaded, problems = scenarios.load_all(args.scenarios or scenarios.shipped())
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    rows: list[LayerRow] = []
    for scenario in loaded:
        for policy in args.policy or POLICIES:
            for seed in seeds:
                rows.append(LayerRow(scenario.name, seed, policy, measure_scenario(scenario, seed, policy)))
    report = LayerReport(tuple(rows))
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        console = Console()
        if not console.is_terminal:
            console = Console(width=140)  # pipes and logs get the whole table
        console.print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
