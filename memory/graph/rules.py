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
``weight`` and ``evidence``) that `memory.graph.queries` reads.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from memory.episodes import Episode, Outcome
from memory.graph.causes import (
    DEFAULT_CAUSE_WEIGHTS,
    Candidate,
    CauseWeights,
    Hypothesis,
    best_cause,
    explain,
    rank_causes,
)
from memory.graph.changes import TermWeights, fix_text, made_change
from memory.graph.edges import Edge, EdgeType
from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.text import similarity


@dataclass(frozen=True)
class GraphConfig:
    """Windows and thresholds of the edge rules (see the module docstring)."""

    window: int = 200  # most recent episodes of the principal the rules look at
    retry_window_s: float = 6 * 3600.0  # max time between consecutive attempts at one problem
    retry_similarity: float = 0.5  # observation similarity for a re-observing episode to be a retry
    cause_window_s: float = 14 * 86400.0  # how far back an incident can be traced to a change
    cause_candidates: int = 40  # at most this many recent changes are weighed as causes
    attempt_reach: int = 40  # episodes around a change searched for the other attempts at its incident
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


def attempt_chain(
    new: Episode, history: Sequence[Episode], config: GraphConfig = DEFAULT_GRAPH_CONFIG
) -> list[Episode]:
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


def _final_attempt(ep: Episode, history: Sequence[Episode], config: GraphConfig) -> Episode:
    """The last attempt at `ep`'s problem: the change that stayed in place."""
    current = ep
    for later in history:
        if later.first_seq <= current.last_seq or not _same_problem(later, current):
            continue
        if (
            current.outcome == Outcome.SUCCESS
            or later.observations
            or not (later.decisions or later.actions)
            or _gap(later.start, current.end) > config.retry_window_s
        ):
            break
        current = later
    return current


def change_candidates(
    at: datetime, history: Sequence[Episode], config: GraphConfig = DEFAULT_GRAPH_CONFIG
) -> list[Candidate]:
    """The changes in place at `at`, most recent first: the last attempt of each earlier incident
    within ``cause_window_s``, at most ``cause_candidates`` of them.

    Attempts are looked for among the ``attempt_reach`` episodes around each one, so the cost
    does not grow with the history.
    """
    out: dict[str, Candidate] = {}
    reach = config.attempt_reach
    for position in range(len(history) - 1, -1, -1):
        ep = history[position]
        if len(out) >= config.cause_candidates:
            break
        if not (ep.decisions or ep.actions) or not 0 <= _gap(at, ep.end) <= config.cause_window_s:
            continue
        later = history[position + 1 : position + 1 + reach]
        final = _final_attempt(ep, later, config)
        if final.id in out or _gap(at, final.end) < 0:
            continue
        at_final = position if final is ep else position + 1 + next(i for i, e in enumerate(later) if e is final)
        chain = attempt_chain(final, history[max(0, at_final - reach) : at_final], config)
        out[final.id] = Candidate(final, len(chain) + 1, tuple(chain))
    return list(out.values())


def learned_share(history: Sequence[Episode], caused: Container[str]) -> Callable[[Episode], float]:
    """Share of the changes resolving a choice that are already linked as causes (what past changes led to)."""
    made: dict[str, int] = {}
    linked: dict[str, int] = {}
    for ep in history:
        if ep.choices and made_change(ep):
            made[ep.choices[-1]] = made.get(ep.choices[-1], 0) + 1
            linked[ep.choices[-1]] = linked.get(ep.choices[-1], 0) + (ep.id in caused)
    return lambda ep: linked.get(ep.choices[-1], 0) / (made.get(ep.choices[-1], 0) + 2) if ep.choices else 0.0


def led_to_share(
    history: Sequence[Episode], caused: Container[str], resolved_as: str | None
) -> Callable[[Episode], float]:
    """Share of the resolved incidents linked to changes resolving a choice that were resolved as
    `resolved_as` (0 for every change while the incident is not resolved).

    `caused` maps each change already linked as a cause to what its incidents were resolved as
    (`memory.graph.queries.cause_links`); a plain set of ids carries no resolutions and gives 0.
    """
    if resolved_as is None or not isinstance(caused, Mapping):
        return lambda ep: 0.0
    linked: dict[str, int] = {}
    alike: dict[str, int] = {}
    for ep in history:
        answers = caused.get(ep.id, ()) if ep.choices else ()
        if answers:
            linked[ep.choices[-1]] = linked.get(ep.choices[-1], 0) + len(answers)
            alike[ep.choices[-1]] = alike.get(ep.choices[-1], 0) + sum(a == resolved_as for a in answers)
    return lambda ep: alike.get(ep.choices[-1], 0) / (linked.get(ep.choices[-1], 0) + 2) if ep.choices else 0.0


def resolved_choice(ep: Episode) -> str | None:
    """What an attempt resolved its incident as: its last choice when it succeeded, else None."""
    return ep.choices[-1] if ep.outcome is Outcome.SUCCESS and ep.choices else None


def rank_incident_causes(
    incident: Episode,
    history: Sequence[Episode],
    *,
    corrections: Sequence[str] = (),
    fixes: Sequence[str] = (),
    resolved_as: str | None = None,
    caused: Container[str] = (),
    config: GraphConfig = DEFAULT_GRAPH_CONFIG,
    weights: CauseWeights = DEFAULT_CAUSE_WEIGHTS,
    lexicon: Lexicon = DEFAULT_LEXICON,
) -> list[Hypothesis]:
    """The earlier changes that may have caused `incident`, most probable first (see `memory.graph.causes`).

    Args:
        incident: the episode that opened the incident (its observations are the symptoms).
        history: the principal's episodes before it, in time order.
        corrections: corrections the incident received, read with the observations.
        fixes: what the incident's fixes did (read for shared terms only).
        resolved_as: what the incident was finally resolved as, once known.
        caused: ids of episodes already linked as causes (for the learned share); a mapping
            from those ids to what their incidents were resolved as (`cause_links`) adds the
            led-to share.
        lexicon: the words the hypotheses are read with.
    """
    candidates = change_candidates(incident.start, history, config)
    if not candidates:
        return []
    return rank_causes(
        list(incident.observations),
        incident.subject,
        incident.start,
        candidates,
        terms=TermWeights([*history, incident], compared=2),
        corrections=corrections,
        fixes=fixes,
        learned=learned_share(history, caused),
        led_to=led_to_share(history, caused, resolved_as),
        weights=weights,
        lexicon=lexicon,
    )


def _caused_edges(incident: Episode, best: Hypothesis, note: str) -> list[Edge]:
    evidence = f"{note}{explain(best)}"
    return [
        Edge(incident.id, best.episode_id, EdgeType.CAUSED_BY, round(best.probability, 3), evidence),
        Edge(
            best.episode_id,
            incident.id,
            EdgeType.LED_TO,
            round(best.probability, 3),
            f"inverse of CAUSED_BY: {evidence}",
        ),
    ]


def _corrections(episodes: Sequence[Episode]) -> list[str]:
    return [t for ep in episodes for t in ep.corrections]


def _fixes(episodes: Sequence[Episode]) -> list[str]:
    return [t for t in map(fix_text, episodes) if t]


def _cause(
    new: Episode,
    history: Sequence[Episode],
    config: GraphConfig,
    caused: Container[str],
    weights: CauseWeights,
    lexicon: Lexicon,
) -> list[Edge]:
    if not new.observations:
        return []
    ranked = rank_incident_causes(
        new,
        history,
        corrections=_corrections([new]),
        fixes=_fixes([new]),
        resolved_as=resolved_choice(new),
        caused=caused,
        config=config,
        weights=weights,
        lexicon=lexicon,
    )
    best = best_cause(ranked, weights)
    return _caused_edges(new, best, "") if best is not None else []


def _later_evidence(
    new: Episode,
    chain: Sequence[Episode],
    history: Sequence[Episode],
    config: GraphConfig,
    caused: Container[str],
    weights: CauseWeights,
    lexicon: Lexicon,
) -> list[Edge]:
    """New versions of an incident's CAUSED_BY edge once a later attempt adds corrections or a fix.

    The incident's causes are ranked again with the later texts (corrections naming or denying
    the change, a fix that undoes it); the linked change's edge gets a new record with its new
    probability, higher (confirmed) or lower (weakened; below ``link_at`` the link is withdrawn,
    its history kept). A correction that names or describes another change links that one.
    """
    opener = chain[-1] if chain and chain[-1].observations else None
    if opener is None or not (new.corrections or fix_text(new)):
        return []
    attempts = [*reversed(chain), new]
    before_history = [ep for ep in history if ep.last_seq < opener.first_seq]
    before = rank_incident_causes(
        opener,
        before_history,
        corrections=_corrections([opener]),
        fixes=_fixes([opener]),
        caused=caused,
        config=config,
        weights=weights,
        lexicon=lexicon,
    )
    after = rank_incident_causes(
        opener,
        before_history,
        corrections=_corrections(attempts),
        fixes=_fixes(attempts),
        resolved_as=resolved_choice(new),
        caused=caused,
        config=config,
        weights=weights,
        lexicon=lexicon,
    )
    if not after:
        return []
    edges: list[Edge] = []
    old, new_best = best_cause(before, weights), best_cause(after, weights)
    if old is not None:
        now = next(h for h in after if h.episode_id == old.episode_id)
        if abs(now.probability - old.probability) >= 0.01:
            verb = "confirmed" if now.probability >= old.probability else "weakened"
            edges += _caused_edges(opener, now, f"{verb} by later evidence: ")
    named = new_best is not None and any(k in ("named", "described") for k, _ in new_best.factors)
    if named and (old is None or new_best.episode_id != old.episode_id):
        edges += _caused_edges(opener, new_best, "linked by later evidence: ")
    return edges


def _continuation(new: Episode, history: Sequence[Episode], config: GraphConfig) -> Edge | None:
    if not history or history[-1].situation == new.situation:
        return None
    resumed = next((ep for ep in reversed(history) if ep.situation == new.situation), None)
    if (
        resumed is None
        or not _same_problem(resumed, new)
        or resumed.outcome != Outcome.UNKNOWN
        or resumed.corrections
        or _gap(new.start, resumed.end) > config.continuation_window_s
    ):
        return None
    between = sorted({ep.situation for ep in history if ep.first_seq > resumed.last_seq})
    return Edge(
        new.id,
        resumed.id,
        EdgeType.CONTINUATION,
        0.8,
        f"{new.situation} resumed after {', '.join(between)}, "
        f"{_duration(_gap(new.start, resumed.end))} later, with no outcome in between",
    )


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
        edges.extend(_cause(new, recent, config, caused, weights, lexicon))
    else:
        edges.extend(_later_evidence(new, chain, recent, config, caused, weights, lexicon))
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
