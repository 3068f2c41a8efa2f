"""Edge rules of the episode graph: which typed, weighted, evidenced edges a closed episode creates.

`infer_edges(new, history)` applies these rules to a newly closed episode and the recent
episodes of the same principal (never across principals; O(window)):

- RETRY_OF (new → failed): the new episode has a decision and continues the *attempt
  chain* of the same problem, and the most recent chain member with a decision failed
  (FAILURE, PARTIAL, or corrected). The attempt chain: going back in time, episodes of the
  same situation and subject, each within ``retry_window_s`` of the next, stopping at a
  SUCCESS or at the episode that opened the incident (the first one with observations).
  A new episode with observations of its own belongs to the chain only when they resemble
  the chain's (``retry_similarity``); otherwise it is a new incident.
- LEARNED_FROM (new → corrected): the new episode's decision follows a correction in the
  attempt chain, changes the corrected choice (the lesson applied), and did not fail.
- CAUSED_BY (incident → change): the new episode opens an incident (it has observations
  and no attempt chain); every earlier incident within ``cause_window_s`` whose last attempt
  left a change in place is a hypothesis, ranked against "no earlier change" with the
  calibrated log-odds of `memory.graph.causes` (the change's service named in a sentence that
  refers to a past change, the words describing it, terms the symptoms share with what the
  change did — the failing service's own name kept apart —, timing, what past changes led
  to). The best is linked when a change is likely the cause and it leads the others; the edge
  weight is its probability. Later attempts at the same incident re-rank with their
  corrections and fixes and give the edge a new record (confirmed or weakened; edges are
  versioned, the old records stay in the store). A LED_TO edge mirrors each CAUSED_BY.
- LED_TO (earlier → later): the inverse view of every CAUSED_BY, and the next step of the
  same problem after an undecided step (the previous chain member has no outcome).
- CONTINUATION (new → resumed): the previous episode had another situation, and the latest
  episode of the new one's situation and subject is unfinished (no outcome, no
  correction) and within ``continuation_window_s``.
- CONTRADICTED (new → earlier): the new episode's final choice equals an earlier
  episode's, the outcomes are opposite (SUCCESS vs FAILURE), the incidents' observations
  are similar (``contradiction_similarity``), and they are different problems.

The rules read no graph: they return `Edge` values, which `memory.graph.build` adds to the
`networkx.MultiDiGraph` (nodes: episode ids with attributes; edges keyed by type with
``weight`` and ``evidence``) that `memory.graph.queries` reads. The attempt chain and the
windows (`GraphConfig`) are in `memory.graph.attempts`, the CAUSED_BY rule in
`memory.graph.cause_rule`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Sequence

from memory.episodes import Episode, Outcome
from memory.graph.attempts import (
    DEFAULT_GRAPH_CONFIG,
    GraphConfig,
    attempt_chain,
    same_problem,
    seconds_between,
)
from memory.graph.cause_rule import caused_by, later_evidence, resolved_choice
from memory.graph.causes import DEFAULT_CAUSE_WEIGHTS, CauseWeights
from memory.graph.edges import Edge, EdgeType
from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.text import similarity


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _failed(ep: Episode) -> bool:
    return bool(ep.decisions) and (ep.outcome in (Outcome.FAILURE, Outcome.PARTIAL) or bool(ep.corrections))


def _quote(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return f'"{text if len(text) <= limit else text[: limit - 1] + "…"}"'


class _IncidentObservations:
    """Episode id → observations of the incident it belongs to (its own, or its attempt chain's opener's, found
    among the episodes before it in `history`), read only for the episodes asked about."""

    def __init__(self, history: Sequence[Episode], config: GraphConfig) -> None:
        self.history, self.config = history, config
        self.found: dict[str, tuple[str, ...]] = {}
        self.places: dict[str, int] | None = None  # episode id → its (last) position in `history`

    def get(self, episode_id: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        if episode_id in self.found:
            return self.found[episode_id]
        if self.places is None:
            self.places = {ep.id: position for position, ep in enumerate(self.history)}
        position = self.places.get(episode_id)
        return default if position is None else self._at(position)

    def _at(self, position: int) -> tuple[str, ...]:
        ep = self.history[position]
        found = self.found.get(ep.id)
        if found is None:
            if ep.observations:
                found = ep.observations
            else:
                chain = attempt_chain(ep, self.history[:position], self.config)
                found = self.get(chain[-1].id) if chain else ()
            self.found[ep.id] = found
        return found


def _retry_and_lesson(new: Episode, chain: list[Episode]) -> list[Edge]:
    edges: list[Edge] = []
    if not new.decisions or not chain:
        return edges
    failed = next((ep for ep in chain if ep.decisions), None)
    if failed is not None and _failed(failed):
        changed = bool(new.choices and failed.choices and new.choices[-1] not in failed.choices)
        gap = seconds_between(new.start, failed.end)
        before = f" '{failed.choices[-1]}'" if failed.choices else ""
        edges.append(
            Edge(
                new.id,
                failed.id,
                EdgeType.RETRY_OF,
                0.9 if changed else 0.7,
                f"new decision on {new.subject or new.situation} {_duration(gap)} after the "
                f"{failed.outcome.value} attempt{before}",
            )
        )
    corrected = next((ep for ep in chain if ep.corrections and ep.decisions), None)
    if corrected is not None and new.outcome != Outcome.FAILURE:
        if new.choices and corrected.choices:
            applied = new.choices[-1] not in corrected.choices
            change = f"choice '{new.choices[-1]}' instead of '{corrected.choices[-1]}'"
        else:
            applied = new.decisions[-1] != corrected.decisions[-1]
            change = "a different decision"
        if applied:
            weight = {Outcome.SUCCESS: 0.9, Outcome.PARTIAL: 0.7}.get(new.outcome, 0.5)
            edges.append(
                Edge(
                    new.id,
                    corrected.id,
                    EdgeType.LEARNED_FROM,
                    weight,
                    f"{change} after the correction {_quote(corrected.corrections[-1])}; outcome {new.outcome.value}",
                )
            )
    return edges


def _continuation(new: Episode, history: Sequence[Episode], config: GraphConfig) -> Edge | None:
    if not history or history[-1].situation == new.situation:
        return None
    resumed = next((ep for ep in reversed(history) if ep.situation == new.situation), None)
    if (
        resumed is None
        or not same_problem(resumed, new)
        or resumed.outcome != Outcome.UNKNOWN
        or resumed.corrections
        or seconds_between(new.start, resumed.end) > config.continuation_window_s
    ):
        return None
    between = sorted({ep.situation for ep in history if ep.first_seq > resumed.last_seq})
    return Edge(
        new.id,
        resumed.id,
        EdgeType.CONTINUATION,
        0.8,
        f"{new.situation} resumed after {', '.join(between)}, "
        f"{_duration(seconds_between(new.start, resumed.end))} later, with no outcome in between",
    )


def _contradiction(new: Episode, history: Sequence[Episode], chain: list[Episode], config: GraphConfig) -> Edge | None:
    opposite = {Outcome.SUCCESS: Outcome.FAILURE, Outcome.FAILURE: Outcome.SUCCESS}.get(new.outcome)
    if opposite is None or not new.choices:
        return None
    incident = _IncidentObservations(history, config)
    mine = new.observations or (incident.get(chain[-1].id, ()) if chain else ())
    in_chain = {ep.id for ep in chain}
    best: tuple[float, Episode] | None = None
    for ep in history:
        if ep.outcome != opposite or not ep.choices or ep.choices[-1] != new.choices[-1] or ep.id in in_chain:
            continue
        score = similarity(mine, incident.get(ep.id, ()))
        if score >= config.contradiction_similarity and (best is None or score > best[0]):
            best = (score, ep)
    if best is None:
        return None
    score, ep = best
    return Edge(
        new.id,
        ep.id,
        EdgeType.CONTRADICTED,
        round(score, 3),
        f"same choice '{new.choices[-1]}': {new.outcome.value} here, {ep.outcome.value} before "
        f"(observation similarity {score:.2f})",
    )


def infer_edges(
    new: Episode,
    history: Sequence[Episode],
    *,
    config: GraphConfig = DEFAULT_GRAPH_CONFIG,
    caused: Container[str] = (),
    weights: CauseWeights = DEFAULT_CAUSE_WEIGHTS,
    lexicon: Lexicon = DEFAULT_LEXICON,
) -> list[Edge]:
    """Edges created by the rules for a newly closed episode (pure).

    Args:
        new: the episode just closed.
        history: earlier episodes (any principals, time order); only the last
            ``config.window`` of `new`'s principal are considered.
        config: windows and thresholds.
        caused: ids of earlier episodes already linked as causes (CAUSED_BY targets), for the
            learned share of `memory.graph.causes`; a mapping from them to what their incidents
            were resolved as (`memory.graph.queries.cause_links`) adds the led-to share.
        weights: the cause hypotheses' log-odds contributions.
        lexicon: the words the cause hypotheses are read with (`memory.graph.causes`).
    """
    recent = [ep for ep in history if ep.principal == new.principal and ep.last_seq < new.first_seq]
    recent = sorted(recent, key=lambda ep: ep.first_seq)[-config.window :] if config.window > 0 else []
    chain = attempt_chain(new, recent, config)
    edges = _retry_and_lesson(new, chain)
    if not chain:
        edges.extend(caused_by(new, recent, config, caused, weights, lexicon))
    else:
        edges.extend(later_evidence(new, chain, recent, config, caused, weights, lexicon))
    continuation = _continuation(new, recent, config)
    if continuation is not None:
        edges.append(continuation)
    elif chain and chain[0].outcome == Outcome.UNKNOWN and not chain[0].corrections:
        edges.append(
            Edge(
                chain[0].id,
                new.id,
                EdgeType.LED_TO,
                0.6,
                f"next step on {new.subject or new.situation} after an undecided step",
            )
        )
    contradiction = _contradiction(new, recent, chain, config)
    if contradiction is not None:
        edges.append(contradiction)
    return edges


def link_episodes(
    episodes: Sequence[Episode], *, config: GraphConfig = DEFAULT_GRAPH_CONFIG, lexicon: Lexicon = DEFAULT_LEXICON
) -> list[Edge]:
    """Batch linking: each episode's edges against its principal's earlier episodes (by first seq)."""
    histories: dict[str, deque[Episode]] = {}
    edges: list[Edge] = []
    caused: dict[str, tuple[str, ...]] = {}  # change → what the incidents linked to it were resolved as
    for ep in sorted(episodes, key=lambda e: e.first_seq):
        history = histories.setdefault(ep.principal, deque(maxlen=max(config.window, 1)))
        found = infer_edges(ep, history, config=config, caused=caused, lexicon=lexicon)
        edges.extend(found)
        answer = resolved_choice(ep)
        for e in found:
            if e.type == EdgeType.CAUSED_BY and e.weight >= 0.5:
                caused[e.target] = caused.get(e.target, ()) + ((answer,) if answer else ())
        history.append(ep)
    return edges
