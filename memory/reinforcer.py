"""Reinforcer: after an episode closes, learn from what its decisions relied on.

A pure function of the closed episode, the metadata of its decision entries and the
current memory state (episodes, graph, facts, evidence). The caller persists the result.
Edges point as `memory.graph.EdgeType` documents (source → target):

- LED_TO (retrieved → new): a retrieved episode pointed to the choice — it succeeded
  with it, or it failed and its problem was later resolved with it (`memory.graph.resolution`: a
  successful attempt reaching it through RETRY_OF / LEARNED_FROM, i.e. the lesson of a
  correction) — and the new episode succeeded with the same choice.
- CONTRADICTED (new → retrieved): a retrieved episode pointed to the choice the same way,
  but here it FAILED.
- LEARNED_FROM (new → retried): the new episode retries (RETRY_OF) a corrected failure
  and succeeds (when the graph rules have not already linked them). LEARNED_FROM stays
  reserved for the same problem, so that the relation keeps one meaning and can be
  scored against ground truth; a lesson carried to another problem is the LED_TO above.

Weights: 1.0 when the decision named the episode in ``relied_on``, 0.5 when it was only
retrieved.

Credit assignment: `Reinforcement.credits` lists, per recalled episode the decisions relied on,
whether it helped (the decision worked) or misled (it failed); `episode_credit` reads the same
from the graph (the LED_TO and CONTRADICTED edges above) as a per-episode weight for ranking:
``(1 + helped) / (1 + helped + misled)``, each relied-on use counting 1 and a retrieved-only use
0.5, so a precedent that misled twice and never helped weighs a third and stops leading. Facts
the decisions cited, and facts whose condition matches the episode, are re-assessed with
`memory.facts.update_fact` (support and contradiction are sets of episode ids). Idempotence:
each (episode, decision entry) pair gets a reinforcement mark; when every mark of the episode
is already stored the result is empty, and edge and fact records are content-addressed, so
applying an outcome twice changes nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import networkx as nx

from memory.episodes import Episode, Outcome
from memory.facts import (
    DEFAULT_FACTS,
    EpisodeEvidence,
    EvidenceLog,
    FactConfig,
    FactVersion,
    fact_id_of,
    matches,
    update_fact,
)
from memory.graph import Edge, EdgeType, resolution

RELIED_WEIGHT = 1.0  # edge weight when the decision said it relied on the episode
RETRIEVED_WEIGHT = 0.5  # edge weight when the episode was only in the Context
RECALLED = "recalled episode"  # how the evidence of a recalled episode's LED_TO / CONTRADICTED edge begins


@dataclass(frozen=True)
class DecisionNote:
    """What a decision entry's metadata says about the memory it used."""

    entry_id: str  # the decision entry
    choice: str | None  # structured choice ("choice" in metadata)
    retrieved: tuple[str, ...] = ()  # ids of episodes and fact versions in its Context
    relied_on: tuple[str, ...] = ()  # the subset the decision says it relied on

    @classmethod
    def from_metadata(cls, entry_id: str, metadata: Mapping[str, Any]) -> DecisionNote:
        """Read ``choice``, ``retrieved`` and ``relied_on`` from entry metadata (missing → empty)."""

        def ids(key: str) -> tuple[str, ...]:
            value = metadata.get(key) or ()
            return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else ()

        choice = metadata.get("choice")
        return cls(entry_id, str(choice) if choice is not None else None, ids("retrieved"), ids("relied_on"))


class Credit(NamedTuple):
    """What one item a decision relied on did for it, once the outcome is known."""

    item: str  # episode id or fact version id
    decision: str  # the decision entry
    effect: int  # +1 helped (the decision worked), -1 misled (it failed), 0 not judged


class Reinforcement(NamedTuple):
    """What applying one closed episode changed."""

    episode_id: str  # the episode reinforced
    marks: tuple[str, ...]  # new reinforcement mark ids (empty when already applied)
    edges: tuple[Edge, ...]  # new edges
    facts: tuple[FactVersion, ...]  # new fact versions (reinforced, revised or retired)
    supported_facts: tuple[str, ...]  # fact ids the episode's decisions cited and were right to
    contradicted_facts: tuple[str, ...]  # fact ids the decisions cited that pointed the wrong way
    credits: tuple[Credit, ...] = ()  # what each relied-on item did for the decision

    @property
    def changed(self) -> bool:
        """Whether anything new came out."""
        return bool(self.marks or self.edges or self.facts)


def mark_id(episode_id: str, decision_entry_id: str) -> str:
    """Content address of a reinforcement mark."""
    return hashlib.sha256(f"{episode_id}\n{decision_entry_id}".encode("ascii")).hexdigest()


def reinforce(
    episode: Episode,
    decisions: Sequence[DecisionNote],
    *,
    lookup: Callable[[str], Episode | None],
    graph: nx.MultiDiGraph,
    pending: Sequence[Edge] = (),
    facts: Sequence[FactVersion],
    evidence: Sequence[EpisodeEvidence],
    applied: Callable[[str], bool],
    config: FactConfig = DEFAULT_FACTS,
) -> Reinforcement:
    """Edges and fact versions that one closed episode implies.

    Args:
        episode: the closed episode.
        decisions: its decision entries' notes, in order.
        lookup: episode by id (episodes of other principals are ignored).
        graph: the episode graph, holding the episode's node.
        pending: the episode's own inferred edges when they are not in `graph` yet.
        facts: current fact versions of the episode's principal.
        evidence: evidence of every closed episode of the principal, this one included.
        applied: whether a reinforcement mark is already stored.
        config: fact thresholds.
    """
    marks = tuple(mark_id(episode.id, d.entry_id) for d in decisions) or (mark_id(episode.id, ""),)
    if all(applied(m) for m in marks):
        return Reinforcement(episode.id, (), (), (), (), (), ())
    edges: dict[tuple[str, str, EdgeType], Edge] = {}
    current = {f.fact_id: f for f in facts if f.principal == episode.principal}
    supported, contradicted = _recalled(
        episode, decisions, lookup=lookup, graph=graph, pending=pending, current=current, edges=edges
    )
    if episode.outcome is Outcome.SUCCESS and episode.id in graph:
        _lessons_applied(episode, lookup=lookup, graph=graph, pending=pending, edges=edges)
    versions = _revised_facts(episode, decisions, current, evidence, supported | contradicted, config)
    effect = 1 if episode.outcome is Outcome.SUCCESS else -1 if episode.outcome is Outcome.FAILURE else 0
    credits = tuple(Credit(item, d.entry_id, effect) for d in decisions for item in d.relied_on)
    return Reinforcement(
        episode_id=episode.id,
        marks=tuple(m for m in marks if not applied(m)),
        edges=tuple(edges[key] for key in sorted(edges, key=lambda k: (k[0], k[1], k[2].value))),
        facts=tuple(versions),
        supported_facts=tuple(sorted(supported)),
        contradicted_facts=tuple(sorted(contradicted)),
        credits=credits,
    )


def _keep_strongest(edges: dict[tuple[str, str, EdgeType], Edge], edge: Edge) -> None:
    """Record `edge` unless an edge of the same source, target and type is at least as strong."""
    key = (edge.source, edge.target, edge.type)
    if key not in edges or edges[key].weight < edge.weight:
        edges[key] = edge


def _recalled(
    episode: Episode,
    decisions: Sequence[DecisionNote],
    *,
    lookup: Callable[[str], Episode | None],
    graph: nx.MultiDiGraph,
    pending: Sequence[Edge],
    current: Mapping[str, FactVersion],
    edges: dict[tuple[str, str, EdgeType], Edge],
) -> tuple[set[str], set[str]]:
    """Judge what each decision recalled by the episode's outcome.

    Adds LED_TO / CONTRADICTED edges to `edges` for recalled episodes that pointed to the
    decision's choice; returns the ids of cited facts the outcome supported and contradicted.
    """
    final = episode.choices[-1] if episode.choices else None
    success, failure = episode.outcome is Outcome.SUCCESS, episode.outcome is Outcome.FAILURE
    supported: set[str] = set()
    contradicted: set[str] = set()
    for note in decisions:
        choice = note.choice or final
        if choice is None:
            continue
        for item in dict.fromkeys(note.retrieved + note.relied_on):
            weight = RELIED_WEIGHT if item in note.relied_on else RETRIEVED_WEIGHT
            fact = current.get(fact_id_of(item))
            if fact is not None:
                if fact.conclusion == choice and (success or failure):
                    (supported if success else contradicted).add(fact.fact_id)
                continue
            past = lookup(item)
            if past is None or past.id == episode.id or past.principal != episode.principal:
                continue
            answer = resolution(graph, past.id, lookup, pending=pending)
            if answer != choice or not (success or failure):
                continue
            pointed = (
                f"{RECALLED} had confirmed"
                if past.outcome is Outcome.SUCCESS
                else f"{RECALLED} failed with {past.choices[-1] if past.choices else 'another choice'}, "
                f"was corrected, resolved as"
            )
            if success:
                _keep_strongest(
                    edges, Edge(past.id, episode.id, EdgeType.LED_TO, weight, f"{pointed} {choice}; it worked here")
                )
            else:
                _keep_strongest(
                    edges,
                    Edge(episode.id, past.id, EdgeType.CONTRADICTED, weight, f"{pointed} {choice}; here it failed"),
                )
    return supported, contradicted


def _lessons_applied(
    episode: Episode,
    *,
    lookup: Callable[[str], Episode | None],
    graph: nx.MultiDiGraph,
    pending: Sequence[Edge],
    edges: dict[tuple[str, str, EdgeType], Edge],
) -> None:
    """LEARNED_FROM from a successful episode to the corrected failures it retried (unless already linked)."""
    out = [(t, d.get("type")) for _, t, d in graph.out_edges(episode.id, data=True)]
    out += [(e.target, e.type) for e in pending if e.source == episode.id]
    for target, kind in dict.fromkeys(out):
        if kind != EdgeType.RETRY_OF:
            continue
        tried = lookup(target)
        if tried is None or tried.outcome is not Outcome.FAILURE or not tried.corrections:
            continue
        if (target, EdgeType.LEARNED_FROM) not in out:
            _keep_strongest(
                edges,
                Edge(episode.id, target, EdgeType.LEARNED_FROM, RELIED_WEIGHT, "retry after a correction succeeded"),
            )


def _revised_facts(
    episode: Episode,
    decisions: Sequence[DecisionNote],
    current: Mapping[str, FactVersion],
    evidence: Sequence[EpisodeEvidence],
    judged: set[str],
    config: FactConfig,
) -> list[FactVersion]:
    """New versions of the facts the episode touched: judged, cited, or matching its observations.

    The episode's own evidence counts the facts its decisions cited as matched.
    """
    evidence = EvidenceLog.of(evidence)
    own = evidence.find(episode.id)
    cited = {fact_id_of(i) for n in decisions for i in n.retrieved + n.relied_on}
    if own is not None and (cited - own.cited) & current.keys():  # citing a fact counts as matching it
        own = replace(own, cited=own.cited | cited)
        evidence = EvidenceLog(own if ev.episode_id == episode.id else ev for ev in evidence)
    touched = set(judged)
    touched.update(f.fact_id for f in current.values() if own is not None and matches(f.condition, own))
    touched.update(fact_id_of(i) for n in decisions for i in n.retrieved + n.relied_on if fact_id_of(i) in current)
    versions = []
    for fact_id in sorted(touched):
        new = update_fact(current[fact_id], evidence, at=episode.end, config=config)
        if new is not None:
            versions.append(new)
    return versions


def episode_credit(G: nx.MultiDiGraph, episode_id: str) -> float:
    """An episode's weight as a precedent, from how decisions that recalled it turned out (see the module docstring).

    1.0 for an episode never judged; helped and misled uses are the weights of its LED_TO edges
    to later episodes and of CONTRADICTED edges from them whose evidence says it was recalled.
    """
    if episode_id not in G:
        return 1.0
    # edges are keyed by their type, so each neighbour holds at most one of each: read by key, in the order
    # the edge views give (every recall weighs each of its units, mostly episodes with an edge or two)
    helped = sum(
        d.get("weight", 0.0)
        for keyed in G.succ[episode_id].values()
        if (d := keyed.get(EdgeType.LED_TO.value)) is not None and str(d.get("evidence", "")).startswith(RECALLED)
    )
    misled = sum(
        d.get("weight", 0.0)
        for keyed in G.pred[episode_id].values()
        if (d := keyed.get(EdgeType.CONTRADICTED.value)) is not None and str(d.get("evidence", "")).startswith(RECALLED)
    )
    return (1.0 + helped) / (1.0 + helped + misled)
