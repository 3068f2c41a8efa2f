"""The derived state of a memory: what the learning pipeline reads and the facade answers from.

Everything here is a projection of the stored timeline and records, held in memory:
closed episodes in closing order per principal, what each worked on (its *problem*), the
episode graph, the recall index, fact versions, reinforcement marks and the evidence the
fact rules read (recall reads it counted by term, `TermCounts`, until learning builds it).
`MemoryState` changes in two ways only: `index_episode` when an episode closes (bookkeeping,
no rules) and `apply` with the `memory.pipeline.Changes` the pipeline decided. `snapshot`
gives all of it as plain comparable values, so two states (a live one, a reopened one, a
rebuilt one) can be checked for equality.

The mappings may be filled lazily by `memory.persistence` when a large store is opened
(episodes and problems read on first use); the state does not know where values come from.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, MutableMapping, MutableSet, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol, cast

import networkx as nx
import numpy as np

from memory.episodes import Episode, Outcome
from memory.facts import EpisodeEvidence, EvidenceLog, FactVersion, current_facts, evidence_from
from memory.graph import ChainCache, Edge, EdgeType, EpisodeGraph, GraphConfig, add_edges, add_episode
from memory.lexicon import DEFAULT_LEXICON, Lexicon


@dataclass(frozen=True)
class EpisodeProblem:
    """What an episode worked on: observation texts and their embedding."""

    text: str  # observation texts, one per line ("" when none is known)
    vector: np.ndarray  # unit vector indexed for recall


class StateSnapshot(NamedTuple):
    """A memory's derived state as plain values (for equality checks)."""

    episodes: tuple[Episode, ...]  # every closed episode, in closing order per principal
    order: dict[str, tuple[str, ...]]  # principal → episode ids in closing order
    closed_seq: dict[str, int]  # principal → last timeline seq of its closed episodes
    problems: dict[str, tuple[str, bytes]]  # episode id → (problem text, vector bytes)
    cites: dict[str, tuple[str, ...]]  # episode id → fact ids its decisions cited
    nodes: tuple[tuple[str, dict[str, Any]], ...]  # graph nodes with their attributes
    edges: tuple[tuple[str, str, str, dict[str, Any]], ...]  # graph edges (source, target, key, attributes)
    edge_ids: frozenset[str]  # ids of the stored edge records
    versions: tuple[FactVersion, ...]  # every fact version, in insertion order
    current: dict[str, FactVersion]  # fact id → its latest version
    marks: frozenset[str]  # reinforcement marks
    evidence: dict[str, tuple[Any, ...]]  # principal → the evidence the fact rules read


class Projection(NamedTuple):
    """Everything derived from the timeline, as plain values (`EpisodicMemory.projection`, for comparisons)."""

    episodes: tuple[Episode, ...]  # closed episodes, in closing order
    edges: tuple[Edge, ...]  # edges, in insertion order
    facts: tuple[FactVersion, ...]  # every fact version, in insertion order


class Verdict(NamedTuple):
    """The fields of an episode `evidence_from` and `memory.graph.queries.resolution` read, when the episode
    itself is not read yet."""

    id: str  # episode id
    principal: str  # its tenant
    choices: tuple[str, ...]  # the last structured choice only
    outcome: Outcome  # detected outcome
    end: datetime  # when it ended
    first_seq: int  # seq of its first entry (what orders attempts at one problem)
    last_seq: int  # seq of its last entry


class EvidenceLogs(dict):
    """Principal → `EvidenceLog`, each built on first use by `build` (opening a large store skips the work).

    `in` tells whether a principal's log is built yet; reads build it.
    """

    def __init__(self, build: Callable[[str], EvidenceLog | None], principals: Callable[[], Iterable[str]]) -> None:
        super().__init__()
        self.build = build
        self.principals = principals

    def _ensure(self, principal: str) -> None:
        if not dict.__contains__(self, principal):
            built = self.build(principal)
            if built is not None:
                dict.__setitem__(self, principal, built)

    def get(self, principal: str, default: Any = None) -> Any:
        self._ensure(principal)
        return dict.get(self, principal, default)

    def __getitem__(self, principal: str) -> EvidenceLog:
        self._ensure(principal)
        return dict.__getitem__(self, principal)

    def all(self) -> dict[str, EvidenceLog]:
        """Every principal's log, built."""
        for principal in list(self.principals()):
            self._ensure(principal)
        return dict(dict.items(self))


class TermCounts:
    """A principal's evidence counted by term, without keeping it: what recall weighs terms by.

    It answers `len`, `frequency`, `resolutions_with` and `confirmed` as the `EvidenceLog` of the
    same evidence does, from a count per term and, per confirmed choice, a count per term of its
    SUCCESS items. The log keeps every item with its term sets and postings, which only learning
    reads (`MemoryState.term_counts`): on the bench's 100,000-episode store, about 60 MB for the
    largest principal's 65,391 items, against 92 kB for their counts.
    """

    def __init__(self) -> None:
        self._items = 0
        self._frequency: Counter[str] = Counter()  # term → items holding it
        self._confirming: dict[str, Counter[str]] = {}  # choice → term → SUCCESS items with the choice holding it

    def add(self, ev: EpisodeEvidence) -> None:
        """Count one more item."""
        self._items += 1
        self._frequency.update(ev.terms)
        if ev.outcome is Outcome.SUCCESS:
            self._confirming.setdefault(ev.choice, Counter()).update(ev.terms)

    def __len__(self) -> int:
        return self._items

    def frequency(self, term: str) -> int:
        """How many items hold `term`."""
        return self._frequency[term]

    def resolutions_with(self, term: str) -> dict[str, int]:
        """Choice → how many SUCCESS items holding `term` confirmed it (choices with none left out)."""
        return {choice: found for choice, counts in self._confirming.items() if (found := counts[term])}

    def confirmed(self) -> set[str]:
        """Choices some SUCCESS item confirmed."""
        return set(self._confirming)

    def to_plain(self) -> dict[str, Any]:
        """The counts as JSON values (`merge` reads them)."""
        return {
            "items": self._items,
            "frequency": dict(self._frequency),
            "confirming": {choice: dict(counts) for choice, counts in self._confirming.items()},
        }

    def merge(self, plain: dict[str, Any]) -> None:
        """Add counts stored by `to_plain` (those of other items)."""
        self._items += int(plain["items"])
        self._frequency.update(plain["frequency"])
        for choice, counts in plain["confirming"].items():
            self._confirming.setdefault(choice, Counter()).update(counts)


def count_terms(
    episodes: Iterable[tuple[Episode, str]], cites: Callable[[str], Sequence[str]], lexicon: Lexicon
) -> dict[str, TermCounts]:
    """Principal → the `TermCounts` of (episode, problem text) pairs (a principal with none counted is there too)."""
    counted: dict[str, TermCounts] = {}
    for episode, text in episodes:
        counts = counted.setdefault(episode.principal, TermCounts())
        ev = evidence_from(episode, text, cited=cites(episode.id), lexicon=lexicon)
        if ev is not None:
            counts.add(ev)
    return counted


class CountedRun(Protocol):
    """Stored episodes whose term counts were stored with them (a state run, `memory.persistence.runs`)."""

    def counted(self, principal: str) -> tuple[dict[str, Any], list[str]] | None:
        """The principal's counts (`TermCounts.to_plain`) and the ids of its episodes they count; None when
        they were not stored."""


class MemoryState:
    """The derived state of one memory (all principals).

    Args:
        index: the recall index (`memory.retrieval.EpisodeIndex`) episodes are added to.
        graph_config: the graph rules' configuration (its window bounds `prior`).
        episodes: id → episode mapping to use (a lazily reading one when opening a store).
        problems: id → `EpisodeProblem` mapping to use.
        edge_ids, marks: sets to use (lazily completed ones when opening a store).
        lexicon: the words the rules read (outcomes are read by the segmenter, with the same lexicon).
    """

    def __init__(
        self,
        index: Any,
        graph_config: GraphConfig,
        *,
        episodes: MutableMapping[str, Episode] | None = None,
        problems: MutableMapping[str, EpisodeProblem] | None = None,
        edge_ids: MutableSet[str] | None = None,
        marks: MutableSet[str] | None = None,
        lexicon: Lexicon = DEFAULT_LEXICON,
    ) -> None:
        self.index = index
        self.graph_config = graph_config
        self.lexicon = lexicon
        self.graph = EpisodeGraph()
        self.chains = ChainCache(self.graph, self.episodes_lookup)
        self.episodes: MutableMapping[str, Episode] = episodes if episodes is not None else {}
        self.problems: MutableMapping[str, EpisodeProblem] = problems if problems is not None else {}
        self.order: dict[str, list[str]] = {}  # principal → episode ids in closing order
        self.closed_seq: dict[str, int] = {}  # principal → last seq of its closed episodes
        self.cites: dict[str, list[str]] = {}  # episode id → fact ids its decisions cited (when any)
        self.edge_ids: MutableSet[str] = edge_ids if edge_ids is not None else set()
        self.versions: list[FactVersion] = []  # every fact version, in insertion order
        self.current: dict[str, FactVersion] = {}  # fact id → latest version
        self.marks: MutableSet[str] = marks if marks is not None else set()
        self.evidence = EvidenceLogs(self._evidence_of, lambda: self.order)
        self._term_counts: dict[str, TermCounts] = {}  # principal → counts, while its log is not built
        self.counted_runs: list[CountedRun] = []  # loaded runs that stored their episodes' term counts
        self.verdict_of: Callable[[str], tuple[Verdict, str] | None] = lambda episode_id: None
        # the observation text of a closed episode's problem (an opened store reads it without the vector)
        self.problem_text: Callable[[str], str] = lambda episode_id: self.problems[episode_id].text
        # what resolving an episode reads (outcome, choices), and the seqs of its first and last entries:
        # an opened store answers from a state run without reading the episode's record
        self.verdict_lookup: Callable[[str], Episode | Verdict | None] = self.episodes_lookup

    def episodes_lookup(self, episode_id: str) -> Episode | None:
        """A closed episode by id, or None."""
        return self.episodes.get(episode_id)

    # -- reading -------------------------------------------------------------------------

    def graph_of(self, principal: str) -> nx.MultiDiGraph:
        """A read-only view of the episode graph restricted to one principal's episodes.

        When every episode of the graph is this principal's (a memory with one tenant, the usual
        case), the view is the whole graph, frozen, without a filter: the same nodes and edges,
        read without a per-neighbour test (which made each walk several times slower).
        """
        if len(self.order) == 1 and len(self.order.get(principal, ())) == len(self.graph):
            return nx.graphviews.generic_graph_view(self.graph)
        nodes = self.graph.nodes
        return nx.subgraph_view(self.graph, filter_node=lambda n: nodes[n].get("principal") == principal)

    def edges_of(self, principal: str) -> list[Edge]:
        """Edges among a principal's episodes (graph rules and reinforcement), in insertion order."""
        graph = self.graph
        return [
            Edge(u, v, EdgeType(d["type"]), d["weight"], d["evidence"])
            for u, v, d in graph.edges(data=True)
            if graph.nodes[u].get("principal") == principal
        ]

    def ended_by(self, principal: str, at: datetime, n: int) -> list[Episode]:
        """The last `n` of a principal's closed episodes (in closing order) that ended by `at`, oldest first.

        Read back from the latest one, so the cost follows `n`, not the memory's size (an episode
        of an opened store is read from its record on first use: none beyond these are).
        """
        found: list[Episode] = []
        for i in reversed(self.order.get(principal, ())):
            if len(found) >= n:
                break
            episode = self.episodes[i]
            if episode.end <= at:
                found.append(episode)
        found.reverse()
        return found

    def prior(self, episode: Episode) -> list[Episode]:
        """The principal's episodes closed before `episode`, at most the graph rules' window of them."""
        ids = self.order.get(episode.principal, [])
        if ids and ids[-1] == episode.id:  # the episode just closed
            end = len(ids) - 1
        else:  # the index keeps the places in the closing order (None: not closed yet)
            place = self.index.place(episode.id)
            end = len(ids) if place is None else place
        return [self.episodes[i] for i in ids[max(0, end - self.graph_config.window) : end]]

    def facts_of(self, principal: str, retired: bool = False) -> list[FactVersion]:
        """Current fact versions of a principal (active ones unless `retired`)."""
        return [
            f
            for f in current_facts(self.current.values())
            if f.principal == principal and (retired or f.status == "active")
        ]

    def term_counts(self, principal: str) -> EvidenceLog | TermCounts | None:
        """What recall weighs a principal's terms by (None for an unknown principal): its evidence log once
        built (closing an episode builds it), else `TermCounts` of the same evidence, counted without
        keeping it (an opened store's recall then builds no log), and kept current as episodes close."""
        if dict.__contains__(self.evidence, principal):
            self._term_counts.pop(principal, None)
            return cast(EvidenceLog, self.evidence[principal])
        if principal not in self.order:
            return None
        counts = self._term_counts.get(principal)
        if counts is None:
            counts = self._term_counts[principal] = self._counted(principal)
        return counts

    def _counted(self, principal: str) -> TermCounts:
        """A known principal's `TermCounts`: the parts stored with the loaded runs, and the evidence of its
        other closed episodes (every one when the runs' do not all belong to its closed episodes)."""
        counts, covered = TermCounts(), set[str]()
        for run in self.counted_runs:
            if (found := run.counted(principal)) is not None:
                counts.merge(found[0])
                covered.update(found[1])
        if covered and sum(1 for i in self.order[principal] if i in covered) != len(covered):
            counts, covered = TermCounts(), set()  # a stored part counts an episode the state does not hold
        for ev in self._evidence_items(principal, shared=None, skip=covered):
            counts.add(ev)
        return counts

    def snapshot(self) -> StateSnapshot:
        """All of the state as plain values."""
        logs = self.evidence.all()
        return StateSnapshot(
            episodes=tuple(self.episodes[i] for ids in self.order.values() for i in ids),
            order={who: tuple(ids) for who, ids in self.order.items()},
            closed_seq=dict(self.closed_seq),
            problems={i: (p.text, p.vector.tobytes()) for i, p in self.problems.items()},
            cites={i: tuple(c) for i, c in self.cites.items()},
            nodes=tuple((n, dict(d)) for n, d in self.graph.nodes(data=True)),
            edges=tuple((u, v, k, dict(d)) for u, v, k, d in self.graph.edges(keys=True, data=True)),
            edge_ids=frozenset(self.edge_ids),
            versions=tuple(self.versions),
            current=dict(self.current),
            marks=frozenset(self.marks),
            evidence={who: tuple(log) for who, log in logs.items()},
        )

    # -- changing ------------------------------------------------------------------------

    def index_episode(self, episode: Episode, problem: EpisodeProblem, cited: Sequence[str]) -> None:
        """Add a closed episode: closing order, graph node, recall index, problem, citations, evidence."""
        self.episodes[episode.id] = episode
        order = self.order.setdefault(episode.principal, [])
        order.append(episode.id)
        self.closed_seq[episode.principal] = max(self.closed_seq.get(episode.principal, -1), episode.last_seq)
        add_episode(self.graph, episode)
        self.chains.episode_added(episode.id)
        self.problems[episode.id] = problem
        self.index.add(episode, problem.vector)
        if cited:
            self.cites[episode.id] = list(cited)
        if dict.__contains__(self.evidence, episode.principal):  # else built on first use
            log = self.evidence[episode.principal]
            ev = evidence_from(episode, problem.text, cited=cited, shared=log.term_sets, lexicon=self.lexicon)
            if ev is not None:
                log.append(ev)
        elif (counts := self._term_counts.get(episode.principal)) is not None:
            ev = evidence_from(episode, problem.text, cited=cited, lexicon=self.lexicon)
            if ev is not None:
                counts.add(ev)

    def new_edges(self, edges: Iterable[Edge]) -> list[Edge]:
        """The edges whose records are not stored yet (first of each id)."""
        fresh: dict[str, Edge] = {}
        for edge in edges:
            if edge.id not in self.edge_ids and edge.id not in fresh:
                fresh[edge.id] = edge
        return list(fresh.values())

    def add_edges(self, edges: Sequence[Edge]) -> None:
        """Add edges (already known to be new) to the graph."""
        if not edges:
            return
        for edge in edges:
            self.edge_ids.add(edge.id)
        add_edges(self.graph, edges)
        self.chains.edges_added(edges)

    def add_versions(self, versions: Iterable[FactVersion], *, stored: bool = False) -> None:
        """Add fact versions. New ones become current; of `stored` ones the first of the highest version does."""
        for v in versions:
            self.versions.append(v)
            if not stored or v.fact_id not in self.current or v.version > self.current[v.fact_id].version:
                self.current[v.fact_id] = v

    def _evidence_of(self, principal: str) -> EvidenceLog | None:
        """Evidence of a principal's closed episodes in closing order (None for an unknown principal)."""
        if principal not in self.order:
            return None
        found = EvidenceLog()
        found.extend(list(self._evidence_items(principal, shared=found.term_sets)))  # postings added per term set
        return found

    def _evidence_items(
        self,
        principal: str,
        *,
        shared: dict[frozenset[str], frozenset[str]] | None,
        skip: set[str] | frozenset[str] = frozenset(),
    ) -> Iterator[EpisodeEvidence]:
        """The evidence of a known principal's closed episodes in closing order (`evidence_from`'s `shared`),
        but those in `skip`."""
        for i in self.order[principal]:
            if i in skip:
                continue
            known = self.verdict_of(i)  # not read yet: what the evidence needs comes from stored columns
            seen, text = known if known is not None else (self.episodes[i], self.problem_text(i))
            ev = evidence_from(
                cast(Episode, seen),  # a `Verdict` holds every field of an episode `evidence_from` reads
                text,
                cited=self.cites.get(i, ()),
                shared=shared,
                lexicon=self.lexicon,
            )
            if ev is not None:
                yield ev
