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
  and no attempt chain) and an earlier episode within ``cause_window_s`` made a change
  (decisions or actions). Evidence, strongest first: an observation sentence with a causal
  cue (`memory.text.CAUSAL_CUE`: a causal connective before a change word, a reference to an
  earlier fix or change, or a change dated in the past) naming the earlier episode's subject (0.9); such a cue and the
  same subject (0.7); such a cue whose words resemble the change's summary, actions or
  corrections (``cause_similarity``, 0.5); no cue, the same subject, a successful episode
  that recorded actions (an explicit change) within ``uncued_cause_window_s`` (0.4).
  Among several candidates the most recent wins unless another matches the cue's words
  clearly better. A LED_TO edge mirrors each CAUSED_BY.
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
``weight`` and ``evidence``) that `memory.graph.queries` reads.
"""

from __future__ import annotations

from collections import deque

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from memory.episodes import Edge, EdgeType, Episode, Outcome
from memory.text import causal_sentences, mentions, similarity


@dataclass(frozen=True)
class GraphConfig:
    """Windows and thresholds of the edge rules (see the module docstring)."""

    window: int = 200  # most recent episodes of the principal the rules look at
    retry_window_s: float = 6 * 3600.0  # max time between consecutive attempts at one problem
    retry_similarity: float = 0.5  # observation similarity for a re-observing episode to be a retry
    cause_window_s: float = 14 * 86400.0  # how far back an incident can be traced to a change
    uncued_cause_window_s: float = 12 * 3600.0  # same-subject successful change, no textual cue
    cause_similarity: float = 0.2  # cue sentence vs an unnamed change's text, to link it
    continuation_window_s: float = 24 * 3600.0  # max interruption before a resumed activity
    contradiction_similarity: float = 0.3  # observation similarity of two contradicting incidents


DEFAULT_GRAPH_CONFIG = GraphConfig()


def _same_problem(a: Episode, b: Episode) -> bool:
    if a.situation != b.situation:
        return False
    return a.subject is None or b.subject is None or a.subject == b.subject


def _failed(ep: Episode) -> bool:
    return bool(ep.decisions) and (ep.outcome in (Outcome.FAILURE, Outcome.PARTIAL) or bool(ep.corrections))


def _gap(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds()


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _quote(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return f'"{text if len(text) <= limit else text[: limit - 1] + "…"}"'


def attempt_chain(new: Episode, history: Sequence[Episode], config: GraphConfig = DEFAULT_GRAPH_CONFIG) -> list[Episode]:
    """Earlier attempts at the problem `new` continues, most recent first (see RETRY_OF)."""
    chain: list[Episode] = []
    cursor = new.start
    for ep in reversed(history):
        if not _same_problem(ep, new):
            continue
        if _gap(cursor, ep.end) > config.retry_window_s or ep.outcome == Outcome.SUCCESS:
            break
        chain.append(ep)
        cursor = ep.start
        if ep.observations:
            break
    if chain and new.observations:
        opening = [ep for ep in chain if ep.observations]
        if not opening or similarity(new.observations, opening[-1].observations) < config.retry_similarity:
            return []
    return chain


def _incident_observations(history: Sequence[Episode], config: GraphConfig) -> dict[str, tuple[str, ...]]:
    """Episode id → observations of the incident it belongs to (its own, or its chain's)."""
    out: dict[str, tuple[str, ...]] = {}
    for position, ep in enumerate(history):
        if ep.observations:
            out[ep.id] = ep.observations
        else:
            chain = attempt_chain(ep, history[:position], config)
            out[ep.id] = out.get(chain[-1].id, ()) if chain else ()
    return out


def _retry_and_lesson(new: Episode, chain: list[Episode]) -> list[Edge]:
    edges: list[Edge] = []
    if not new.decisions or not chain:
        return edges
    failed = next((ep for ep in chain if ep.decisions), None)
    if failed is not None and _failed(failed):
        changed = bool(new.choices and failed.choices and new.choices[-1] not in failed.choices)
        gap = _gap(new.start, failed.end)
        before = f" '{failed.choices[-1]}'" if failed.choices else ""
        edges.append(Edge(new.id, failed.id, EdgeType.RETRY_OF, 0.9 if changed else 0.7,
                          f"new decision on {new.subject or new.situation} {_duration(gap)} after the "
                          f"{failed.outcome.value} attempt{before}"))
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
            edges.append(Edge(new.id, corrected.id, EdgeType.LEARNED_FROM, weight,
                              f"{change} after the correction {_quote(corrected.corrections[-1])}; "
                              f"outcome {new.outcome.value}"))
    return edges


def _final_attempt(ep: Episode, history: Sequence[Episode], config: GraphConfig) -> Episode:
    """The last attempt at `ep`'s problem: the change that stayed in place."""
    current = ep
    for later in history:
        if later.first_seq <= current.last_seq or not _same_problem(later, current):
            continue
        if (current.outcome == Outcome.SUCCESS or later.observations or not (later.decisions or later.actions)
                or _gap(later.start, current.end) > config.retry_window_s):
            break
        current = later
    return current


def _recent_unless_closer(candidates: Sequence[Episode], closeness: dict[str, float], margin: float = 0.15) -> Episode:
    """The most recent candidate, unless another's words match the cue clearly better."""
    best = candidates[-1]
    for ep in candidates:
        if closeness[ep.id] >= closeness[best.id] + margin:
            best = ep
    return best


def _cause(new: Episode, history: Sequence[Episode], config: GraphConfig) -> list[Edge]:
    changes = [ep for ep in history if (ep.decisions or ep.actions)
               and 0 <= _gap(new.start, ep.end) <= config.cause_window_s]
    if not new.observations or not changes:
        return []
    cues = causal_sentences(new.observations)
    found: tuple[Episode, float, str] | None = None
    for sentence in cues:
        closeness = {ep.id: similarity([sentence], [ep.summary, *ep.actions, *ep.corrections]) for ep in changes}
        named = [ep for ep in changes if mentions(sentence, ep.subject)]
        same = [ep for ep in changes if new.subject and ep.subject == new.subject]
        alike = [ep for ep in changes if closeness[ep.id] >= config.cause_similarity]
        if named:
            best = _recent_unless_closer(named, closeness)
            found = (best, 0.9, f"observation names {best.subject} with a causal cue: {_quote(sentence)}")
            break
        if same and (found is None or found[1] < 0.7):
            best = _recent_unless_closer(same, closeness)
            found = (best, 0.7, f"causal cue on the same subject {new.subject}: {_quote(sentence)}")
        elif alike and found is None:
            best = max(alike, key=lambda ep: (closeness[ep.id], ep.end))
            found = (best, 0.5, f"causal cue resembling that change (similarity {closeness[best.id]:.2f}): "
                                f"{_quote(sentence)}")
    if found is None and new.subject:
        recent = [ep for ep in changes if ep.subject == new.subject and ep.actions and ep.outcome == Outcome.SUCCESS
                  and _gap(new.start, ep.end) <= config.uncued_cause_window_s]
        if recent:
            ep = recent[-1]
            found = (ep, 0.4, f"incident on {new.subject} {_duration(_gap(new.start, ep.end))} after a change there")
    if found is None:
        return []
    target, weight, evidence = found
    target = _final_attempt(target, history, config)
    return [Edge(new.id, target.id, EdgeType.CAUSED_BY, weight, evidence),
            Edge(target.id, new.id, EdgeType.LED_TO, weight, f"inverse of CAUSED_BY: {evidence}")]


def _continuation(new: Episode, history: Sequence[Episode], config: GraphConfig) -> Edge | None:
    if not history or history[-1].situation == new.situation:
        return None
    resumed = next((ep for ep in reversed(history) if ep.situation == new.situation), None)
    if (resumed is None or not _same_problem(resumed, new) or resumed.outcome != Outcome.UNKNOWN
            or resumed.corrections or _gap(new.start, resumed.end) > config.continuation_window_s):
        return None
    between = sorted({ep.situation for ep in history if ep.first_seq > resumed.last_seq})
    return Edge(new.id, resumed.id, EdgeType.CONTINUATION, 0.8,
                f"{new.situation} resumed after {', '.join(between)}, "
                f"{_duration(_gap(new.start, resumed.end))} later, with no outcome in between")


def _contradiction(new: Episode, history: Sequence[Episode], chain: list[Episode], config: GraphConfig) -> Edge | None:
    opposite = {Outcome.SUCCESS: Outcome.FAILURE, Outcome.FAILURE: Outcome.SUCCESS}.get(new.outcome)
    if opposite is None or not new.choices:
        return None
    incident = _incident_observations(history, config)
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
    return Edge(new.id, ep.id, EdgeType.CONTRADICTED, round(score, 3),
                f"same choice '{new.choices[-1]}': {new.outcome.value} here, {ep.outcome.value} before "
                f"(observation similarity {score:.2f})")


def infer_edges(new: Episode, history: Sequence[Episode], *, config: GraphConfig = DEFAULT_GRAPH_CONFIG) -> list[Edge]:
    """Edges created by the rules for a newly closed episode (pure).

    Args:
        new: the episode just closed.
        history: earlier episodes (any principals, time order); only the last
            ``config.window`` of `new`'s principal are considered.
        config: windows and thresholds.
    """
    recent = [ep for ep in history if ep.principal == new.principal and ep.last_seq < new.first_seq]
    recent = sorted(recent, key=lambda ep: ep.first_seq)[-config.window:] if config.window > 0 else []
    chain = attempt_chain(new, recent, config)
    edges = _retry_and_lesson(new, chain)
    if not chain:
        edges.extend(_cause(new, recent, config))
    continuation = _continuation(new, recent, config)
    if continuation is not None:
        edges.append(continuation)
    elif chain and chain[0].outcome == Outcome.UNKNOWN and not chain[0].corrections:
        edges.append(Edge(chain[0].id, new.id, EdgeType.LED_TO, 0.6,
                          f"next step on {new.subject or new.situation} after an undecided step"))
    contradiction = _contradiction(new, recent, chain, config)
    if contradiction is not None:
        edges.append(contradiction)
    return edges


def link_episodes(episodes: Sequence[Episode], *, config: GraphConfig = DEFAULT_GRAPH_CONFIG) -> list[Edge]:
    """Batch linking: each episode's edges against its principal's earlier episodes (by first seq)."""
    histories: dict[str, deque[Episode]] = {}
    edges: list[Edge] = []
    for ep in sorted(episodes, key=lambda e: e.first_seq):
        history = histories.setdefault(ep.principal, deque(maxlen=max(config.window, 1)))
        edges.extend(infer_edges(ep, history, config=config))
        history.append(ep)
    return edges
