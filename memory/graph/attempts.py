"""The attempts at one problem, and the changes they leave in place: what the edge rules walk.

`GraphConfig` holds the windows and thresholds of the rules (`memory.graph.rules`);
`attempt_chain` finds the earlier attempts a new episode continues (the RETRY_OF chain);
`change_candidates` lists the changes still in place at a time, the last attempt of each earlier
incident, which the CAUSED_BY rule (`memory.graph.cause_rule`) and the decision evidence
(`memory.graph.implicated`) rank as causes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memory.episodes import Episode, Outcome
from memory.graph.causes import Candidate
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


def same_problem(a: Episode, b: Episode) -> bool:
    """Whether two episodes work on one problem: same situation, and same subject when both name one."""
    if a.situation != b.situation:
        return False
    return a.subject is None or b.subject is None or a.subject == b.subject


def seconds_between(later: datetime, earlier: datetime) -> float:
    """Seconds from `earlier` to `later`."""
    return (later - earlier).total_seconds()


def attempt_chain(
    new: Episode, history: Sequence[Episode], config: GraphConfig = DEFAULT_GRAPH_CONFIG
) -> list[Episode]:
    """Earlier attempts at the problem `new` continues, most recent first (see RETRY_OF)."""
    chain: list[Episode] = []
    cursor = new.start
    situation, subject = new.situation, new.subject
    for ep in reversed(history):
        if ep.situation != situation or (subject is not None and ep.subject is not None and ep.subject != subject):
            continue  # not `same_problem` (written out: most of the history is other problems)
        if seconds_between(cursor, ep.end) > config.retry_window_s or ep.outcome == Outcome.SUCCESS:
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


def _final_attempt(ep: Episode, history: Sequence[Episode], config: GraphConfig) -> Episode:
    """The last attempt at `ep`'s problem: the change that stayed in place."""
    current = ep
    if ep.outcome == Outcome.SUCCESS:  # a problem solved stays solved: no later attempt continues it
        return ep
    for later in history:
        if later.first_seq <= current.last_seq or not same_problem(later, current):
            continue
        if (
            current.outcome == Outcome.SUCCESS
            or later.observations
            or not (later.decisions or later.actions)
            or seconds_between(later.start, current.end) > config.retry_window_s
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
        if not (ep.decisions or ep.actions) or not 0 <= seconds_between(at, ep.end) <= config.cause_window_s:
            continue
        later = history[position + 1 : position + 1 + reach]
        final = _final_attempt(ep, later, config)
        if final.id in out or seconds_between(at, final.end) < 0:
            continue
        at_final = position if final is ep else position + 1 + next(i for i, e in enumerate(later) if e is final)
        chain = attempt_chain(final, history[max(0, at_final - reach) : at_final], config)
        out[final.id] = Candidate(final, len(chain) + 1, tuple(chain))
    return list(out.values())
