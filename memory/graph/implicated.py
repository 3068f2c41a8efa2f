"""The recent changes the current observations implicate, before any CAUSED_BY edge exists.

`recent_changes` ranks the changes still in place (the last attempt of each earlier incident
within the cause window) as causes of what is observed now, with the same hypotheses and
weights as the CAUSED_BY rule (`memory.graph.causes`), before any edge exists. Each result
carries the change record, the choice its incident was resolved with, what incidents earlier
linked to changes resolving that choice were resolved as (what such changes led to), and one
readable line for the context ("this started after the capacity change on orders-db-proxy …").
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from datetime import datetime
from typing import NamedTuple

import networkx as nx

from memory.episodes import Episode
from memory.graph.attempts import DEFAULT_GRAPH_CONFIG, GraphConfig, change_candidates
from memory.graph.cause_rule import learned_share
from memory.graph.causes import DEFAULT_CAUSE_WEIGHTS, Candidate, CauseWeights, Hypothesis, explain, rank_causes
from memory.graph.changes import ChangeRecord, TermWeights, change_record
from memory.graph.edges import EdgeType
from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.text import trim

STOPGAP_CHARS = 120  # a chain line quotes at most this much of what a change left in place for now


class ChangeLink(NamedTuple):
    """A recent change the current observations implicate."""

    episode_id: str  # the episode that made the change
    probability: float  # that this change caused what is observed now
    change: ChangeRecord  # what changed, where and when
    resolved: str | None  # the choice the change's incident was resolved with
    led_to: tuple[str, ...]  # how incidents earlier linked to changes resolving that choice were resolved
    chain: str  # one line for a context: "this started after the … change on … (episode …)"
    why: str  # the hypothesis' main contributions


def _age(at: datetime, then: datetime) -> str:
    seconds = max(0.0, (at - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def led_to(G: nx.MultiDiGraph, history: Sequence[Episode], choice: str | None) -> tuple[str, ...]:
    """How the incidents that the graph links (CAUSED_BY) to changes resolving `choice` were resolved."""
    if choice is None:
        return ()
    by_id = {ep.id: ep for ep in history}
    found: list[str] = []
    for ep in history:
        if not ep.choices or ep.choices[-1] != choice or ep.id not in G:
            continue
        for source, keyed in G.pred[ep.id].items():
            incident = by_id.get(source)
            if EdgeType.CAUSED_BY.value in keyed and incident is not None:
                final = _resolved(incident, history)
                if final is not None:
                    found.append(final)
    return tuple(dict.fromkeys(found))


def _resolved(incident: Episode, history: Sequence[Episode]) -> str | None:
    """The last choice of the incident's attempts that worked (same subject, before the next incident)."""
    answer = incident.choices[-1] if incident.choices and incident.outcome.value == "SUCCESS" else None
    for ep in history:
        if ep.first_seq <= incident.last_seq or ep.subject != incident.subject:
            continue
        if ep.observations:
            break
        if ep.choices and ep.outcome.value == "SUCCESS":
            answer = ep.choices[-1]
    return answer


class ChangeBasis(NamedTuple):
    """What ranking the recent changes reads that does not depend on the observations (`change_basis`).

    The same for every question asked at one time before the memory learns anything: a caller
    asking several (one per decision) builds it once. Its term weights and learned shares are
    counted on first use and kept, as they are for one question.
    """

    at: datetime  # now
    history: Sequence[Episode]  # the principal's episodes before now, in time order
    graph: nx.MultiDiGraph | None  # the episode graph, for what changes of a kind led to
    candidates: list[Candidate]  # the changes still in place at `at`
    terms: TermWeights  # term weights over `history`
    learned: Callable[[Episode], float]  # share of changes like one already linked as causes


def change_basis(
    at: datetime,
    history: Sequence[Episode],
    *,
    graph: nx.MultiDiGraph | None = None,
    caused: Container[str] = (),
    config: GraphConfig = DEFAULT_GRAPH_CONFIG,
) -> ChangeBasis:
    """The observation-independent part of `recent_changes` at time `at` (its arguments of the same names)."""
    return ChangeBasis(
        at,
        history,
        graph,
        change_candidates(at, history, config),
        TermWeights(history, compared=1),
        learned_share(history, caused),
    )


def recent_changes(
    observations: Sequence[str],
    subject: str | None,
    at: datetime,
    history: Sequence[Episode],
    *,
    graph: nx.MultiDiGraph | None = None,
    caused: Container[str] = (),
    limit: int = 3,
    min_probability: float = 0.2,
    config: GraphConfig = DEFAULT_GRAPH_CONFIG,
    weights: CauseWeights = DEFAULT_CAUSE_WEIGHTS,
    lexicon: Lexicon = DEFAULT_LEXICON,
) -> list[ChangeLink]:
    """The recent changes the observations implicate, most probable first (pure).

    Args:
        observations: what is observed now.
        subject: the failing service (its own name is never evidence).
        at: now (the changes in place at this time are ranked).
        history: the principal's episodes before now, in time order.
        graph: the episode graph, for what changes of a kind led to (optional).
        caused: ids of episodes already linked as causes (the learned share).
        limit: at most this many changes.
        min_probability: leave out changes less probable than this.
        config, weights: the graph rules' windows and the hypotheses' weights.
        lexicon: the words the hypotheses and the change records are read with.
    """
    basis = change_basis(at, history, graph=graph, caused=caused, config=config)
    return implicated_changes(
        observations, subject, basis, limit=limit, min_probability=min_probability, weights=weights, lexicon=lexicon
    )


def implicated_changes(
    observations: Sequence[str],
    subject: str | None,
    basis: ChangeBasis,
    *,
    limit: int = 3,
    min_probability: float = 0.2,
    weights: CauseWeights = DEFAULT_CAUSE_WEIGHTS,
    lexicon: Lexicon = DEFAULT_LEXICON,
) -> list[ChangeLink]:
    """`recent_changes` over a prepared `basis` (`change_basis`): the same answer, its arguments of the same names."""
    if not basis.candidates or not observations:
        return []
    ranked = rank_causes(
        list(observations),
        subject,
        basis.at,
        basis.candidates,
        terms=basis.terms,
        learned=basis.learned,
        weights=weights,
        lexicon=lexicon,
        most=limit if limit >= 0 else None,
    )
    by_id = {c.episode.id: c.episode for c in basis.candidates}
    out = []
    for h in ranked[:limit]:
        ep = by_id[h.episode_id]
        record = change_record(ep, lexicon=lexicon)
        if h.probability >= min_probability and record is not None:
            out.append(_change_link(h, ep, record, basis.at, basis.graph, basis.history))
    return out


def _change_link(
    h: Hypothesis,
    ep: Episode,
    record: ChangeRecord,
    at: datetime,
    graph: nx.MultiDiGraph | None,
    history: Sequence[Episode],
) -> ChangeLink:
    """A ranked change as a `ChangeLink`, with what changes resolving the same choice led to."""
    resolved = ep.choices[-1] if ep.choices else None
    return ChangeLink(
        ep.id,
        round(h.probability, 3),
        record,
        resolved,
        led_to(graph, history, resolved) if graph is not None else (),
        _chain_line(ep, record, resolved, at),
        explain(h),
    )


def _chain_line(ep: Episode, record: ChangeRecord, resolved: str | None, at: datetime) -> str:
    """The context's line for a change: "this started 2 h after the … change on … (episode …)"."""
    what = f" ({record.what})" if record.what else ""
    stopgap = f', a stopgap left in place: "{trim(record.stopgap, STOPGAP_CHARS)}"' if record.stopgap else ""
    return (
        f"this started {_age(at, record.at)} after the {record.kind} change on {record.where or 'another service'}"
        f"{what}{stopgap} (episode {ep.id[:10]}{f', resolved as {resolved}' if resolved else ''})"
    )
