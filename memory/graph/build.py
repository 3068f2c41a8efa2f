"""Building the episode graph: episode nodes and typed, weighted edges in a `networkx.MultiDiGraph`.

Nodes are episode ids with the attributes `add_episode` sets; edges are keyed by their type's
value and carry ``type``, ``weight`` and ``evidence``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

import networkx as nx

from memory.episodes import Episode
from memory.graph.changes import change_record
from memory.graph.edges import Edge, EdgeType
from memory.lexicon import DEFAULT_LEXICON, Lexicon


class EpisodeGraph(nx.MultiDiGraph):
    """The episode graph: nodes are episode ids with plain attributes (principal, situation,
    subject, first_seq, and outcome as its string value); the episodes themselves are looked up
    where a query needs them.

    Edges are keyed by their type's name and carry ``type`` (that name, equal to the `EdgeType`
    member), ``weight`` and ``evidence``. Node and edge attributes hold only strings, numbers and
    None, so Python's cycle collector does not track the attribute dicts.
    """


def add_episode_rows(
    G: nx.MultiDiGraph,
    ids: Sequence[str],
    principals: Sequence[str],
    situations: Sequence[str],
    subjects: Sequence[str | None],
    first_seqs: Sequence[int],
    outcomes: Sequence[str],
) -> None:
    """Add episode nodes in bulk from columns, with the attributes `add_episode` sets (outcomes as their values).

    The nodes go in by id and their attributes are filled after: `add_nodes_from` given
    ``(id, attributes)`` pairs takes an exception per node to tell a pair from a node, and each
    pair is one more container for the cycle collector to count.
    """
    G.add_nodes_from(ids)
    data = G.nodes
    for i, who, sit, sub, seq, out in zip(ids, principals, situations, subjects, first_seqs, outcomes):
        data[i].update(principal=who, situation=sit, subject=sub, first_seq=seq, outcome=out)


def add_episode(G: nx.MultiDiGraph, ep: Episode) -> None:
    """Add (or refresh) an episode node with its attributes."""
    G.add_node(
        ep.id,
        principal=ep.principal,
        situation=ep.situation,
        subject=ep.subject,
        first_seq=ep.first_seq,
        outcome=ep.outcome.value,
    )


def change_attributes(ep: Episode, lexicon: Lexicon = DEFAULT_LEXICON) -> dict[str, str]:
    """The node attributes of an episode's change record (`memory.graph.changes`, read with `lexicon`); empty when
    it made none.

    A pure function of the episode: the exports and `memory.graph.recent_changes` add them to the
    nodes they read (the stored graph keeps the columns a store can reload without the episodes).

    ``change_kind`` (version, capacity, parameter, configuration, schedule or component),
    ``change_what`` (its most specific terms), ``change_where`` (the service), ``change_at``
    (ISO time the change was in place) and, for a stopgap, ``change_stopgap`` (what its fix said
    was left in place only for now).
    """
    record = change_record(ep, lexicon=lexicon)
    if record is None:
        return {}
    attributes = {
        "change_kind": record.kind,
        "change_what": record.what,
        "change_where": record.where or "",
        "change_at": record.at.isoformat(),
    }
    if record.stopgap:
        attributes["change_stopgap"] = record.stopgap
    return attributes


def add_edges(G: nx.MultiDiGraph, edges: Iterable[Edge]) -> None:
    """Add edges keyed by type; a later record of the same key replaces the weight."""
    # evidence texts repeat (a third are distinct in the bench's store): the graph holds each once
    # (rows from state runs come interned as they are decoded)
    add_edge_rows(G, ((edge.source, edge.target, edge.type, edge.weight, sys.intern(edge.evidence)) for edge in edges))


def add_edge_rows(G: nx.MultiDiGraph, rows: Iterable[tuple[str, str, EdgeType, float, str]]) -> None:
    """`add_edges` from (source, target, type, weight, evidence) rows."""
    add = G.add_edge  # one call per edge: cheaper than add_edges_from, which builds a view per edge
    for source, target, kind, weight, evidence in rows:
        name = _NAMES[kind]
        add(source, target, name, type=name, weight=weight, evidence=evidence)


_NAMES = {kind: kind.value for kind in EdgeType}  # edge type → the plain string the graph holds


def build_graph(episodes: Iterable[Episode], edges: Iterable[Edge]) -> nx.MultiDiGraph:
    """A MultiDiGraph of episodes and typed edges."""
    G = EpisodeGraph()
    for ep in episodes:
        add_episode(G, ep)
    add_edges(G, edges)
    return G
