"""The facade agent engineers use: record what happens, recall what was learned.

    with EpisodicMemory("memory.db", principal="team-a") as memory:
        memory.observe("orders p99 at 4.8 s; pool exhausted in the logs")
        context = memory.recall()                      # past episodes, facts, chains
        memory.decide("Decision: raise the pool", choice="pool", retrieved=context.item_ids())
        memory.outcome("p99 back to 300 ms", status="success")

Each recorded entry goes to the timeline (the source of truth) and then to the segmenter.
When an episode closes it is persisted, linked (graph rules), reinforced (what its
decisions relied on) and facts are updated or extracted. The projection is rebuilt on
open from stored records, and the entries after the last closed episode are fed to the
segmenter again, so a new process recalls what the old one did. `rebuild` replays the
whole timeline into a fresh memory; the result equals the live state.
"""

from __future__ import annotations

import gc
import json
import sys
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, MutableMapping, NamedTuple, Sequence

import networkx as nx
import numpy as np

from memory import graph as graph_rules
from memory.encoder import Encoder, HashingEncoder
from memory.episodes import Edge, Episode, Outcome
from memory.graph import DEFAULT_GRAPH_CONFIG, GraphConfig
from memory.facts import (
    DEFAULT_FACTS,
    EvidenceLog,
    FactConfig,
    FactVersion,
    ProposalHook,
    current_facts,
    evidence_from,
    extract_facts,
    history,
    propose_fact,
)
from memory.redaction import Redactor
from memory.reinforcer import DecisionNote, Reinforcement, reinforce
from memory import snapshot
from memory.retrieval import (DEFAULT, Bounds, ChainCache, Context, EpisodeIndex, Retriever, RetrieverConfig,
                              episode_vector)
from memory.segmenter import Segmenter, SegmenterConfig
from memory.snapshot import LazyMap, LazySet
from memory.store import EntryParts, SQLiteStore
from memory.timeline import Entry, EntryDraft, Kind, Role, Timeline

EPISODE, EDGE, FACT, MARK, FLUSH = "episode", "edge", "fact_version", "reinforcement", "flush"
PROBLEMS = "episode_problems/1"  # legacy snapshot kind (read only): problem vectors, texts and citations
SNAPSHOT_EPISODES = 4096  # episodes (in storing order) per legacy problem snapshot
RUN_EPISODES = 4096  # most episodes per state run (`memory.snapshot`); a run is written once this many are stored
OPEN_RUN_MIN = 256  # opening writes runs for the records after the last run once they hold this many episodes
_RECENT = 256  # entries kept per principal for the short-term window


class Projection(NamedTuple):
    """Everything derived from the timeline, as plain values (for comparisons)."""

    episodes: tuple[Episode, ...]  # closed episodes, in closing order
    edges: tuple[Edge, ...]  # edges, in insertion order
    facts: tuple[FactVersion, ...]  # every fact version, in insertion order


@dataclass(frozen=True)
class _Problem:
    """What an episode worked on: observation texts and their embeddings."""

    text: str  # observation texts, one per line
    vector: np.ndarray  # unit vector indexed for recall


class EpisodicMemory:
    """Experiential memory for one agent (or several tenants) in a few calls.

    Args:
        path: SQLite file for persistence; None keeps everything in memory.
        principal: default tenant for records and recall.
        encoder: text encoder (default `HashingEncoder`, offline).
        redactor: applied before anything is stored (default `PatternRedactor`).
        retriever: retriever preset (`memory.retrieval.config.DEFAULT`, `NO_GRAPH`, ...).
        segmenter: segmentation thresholds.
        links: edge-rule windows and thresholds (`memory.graph.GraphConfig`).
        facts: fact thresholds (confidence prior, revision, usefulness).
        proposer: optional hook proposing (condition, conclusion) pairs, e.g. from an LLM;
            proposals pass the same usefulness check as extracted facts.
    """

    def __init__(self, path: str | Path | None = None, *, principal: str = "default",
                 encoder: Encoder | None = None, redactor: Redactor | None = None,
                 retriever: RetrieverConfig = DEFAULT, segmenter: SegmenterConfig | None = None,
                 links: GraphConfig = DEFAULT_GRAPH_CONFIG, facts: FactConfig = DEFAULT_FACTS,
                 proposer: ProposalHook | None = None) -> None:
        self.principal = principal
        self.encoder = encoder or HashingEncoder()
        self.store = SQLiteStore(path if path is not None else ":memory:")
        self.timeline = Timeline(self.store, self.encoder, redactor)
        self.retriever_config = retriever
        self.segmenter_config = segmenter or SegmenterConfig()
        self.fact_config = facts
        self.graph_config = links
        self.proposer = proposer
        self.graph: nx.MultiDiGraph = graph_rules.EpisodeGraph()
        self.index = EpisodeIndex(self.encoder.dim)
        self.reinforcements: list[Reinforcement] = []  # what each episode closed in this process changed
        self._segmenter = Segmenter(self.segmenter_config)
        self._episodes: MutableMapping[str, Episode] = LazyMap(self._read_episode)  # closing order
        self._order: dict[str, list[str]] = {}
        self._position: dict[str, int] = {}  # episode id → its place in its principal's closing order
        self._problems: MutableMapping[str, _Problem] = LazyMap(self._read_problem)
        self._cites: dict[str, list[str]] = {}  # episode id → fact ids its decisions cited (when any)
        self._evidence = _Evidence(self._evidence_of, lambda: self._order)
        self._edge_ids: set[str] = LazySet()
        self._versions: list[FactVersion] = []
        self._current: dict[str, FactVersion] = {}
        self._marks: set[str] = LazySet()
        self._closed_seq: dict[str, int] = {}
        self._recent: dict[str, deque[Entry]] = {}
        self._covered = 0  # records (by seq) that stored state runs stand for
        self._uncovered = 0  # episodes indexed since the last run
        self._loading = True  # no runs are written while the store is being opened
        self._config = snapshot.config_digest(links)
        self._chains = ChainCache(self.graph)
        self._retriever = Retriever(self.index, self.encoder.encode, graph=self.graph, facts=self._facts_of,
                                    chain=lambda graph, episode_id, hops, most: self._chains.narrative(
                                        episode_id, hops, most),
                                    config=retriever)
        self._load()

    # -- recording ---------------------------------------------------------------------

    def record(self, text: str, *, kind: Kind | str, role: Role | str = Role.ENVIRONMENT,
               timestamp: datetime | None = None, situation: str = "default",
               metadata: Mapping[str, Any] | None = None, principal: str | None = None) -> Entry:
        """Append one entry to the timeline and feed it to the segmenter.

        Args:
            text: what happened.
            kind: observation, decision, action, outcome, correction or note.
            role: who produced it (environment, agent, user, system).
            timestamp: when (timezone-aware); now (UTC) by default.
            situation: situation label, e.g. "incident_response".
            metadata: JSON-serializable extras (e.g. "service", "choice", "status").
            principal: tenant; the memory's default principal when None.
        """
        entry = self.timeline.append(
            text, kind=kind, role=role, timestamp=timestamp or datetime.now(timezone.utc), situation=situation,
            principal=principal or self.principal, metadata=metadata)
        self._ingest(entry)
        return entry

    def observe(self, text: str, **fields: Any) -> Entry:
        """Record an observation from the environment."""
        return self.record(text, kind=Kind.OBSERVATION, **{"role": Role.ENVIRONMENT, **fields})

    def decide(self, text: str, *, choice: str | None = None, confidence: float | None = None,
               retrieved: Iterable[str] = (), relied_on: Iterable[str] = (),
               metadata: Mapping[str, Any] | None = None, **fields: Any) -> Entry:
        """Record the agent's decision; `retrieved`/`relied_on` name Context items (see `Context.item_ids`)."""
        meta = dict(metadata or {})
        if choice is not None:
            meta["choice"] = choice
        if confidence is not None:
            meta["confidence"] = float(confidence)
        meta["retrieved"] = list(retrieved)
        meta["relied_on"] = list(relied_on)
        return self.record(text, kind=Kind.DECISION, metadata=meta, **{"role": Role.AGENT, **fields})

    def act(self, text: str, **fields: Any) -> Entry:
        """Record an action the agent took (a change made)."""
        return self.record(text, kind=Kind.ACTION, **{"role": Role.AGENT, **fields})

    def outcome(self, text: str, *, status: str | None = None, metadata: Mapping[str, Any] | None = None,
                **fields: Any) -> Entry:
        """Record an outcome signal; `status` ("success"/"failure") is stored as a structured check."""
        meta = dict(metadata or {})
        if status is not None:
            meta["status"] = status
        return self.record(text, kind=Kind.OUTCOME, metadata=meta, **{"role": Role.ENVIRONMENT, **fields})

    def correct(self, text: str, **fields: Any) -> Entry:
        """Record a user's correction of a wrong decision."""
        return self.record(text, kind=Kind.CORRECTION, **{"role": Role.USER, **fields})

    def flush(self) -> list[Episode]:
        """Close every open episode now (e.g. at the end of a session); returns them."""
        closed = self._segmenter.flush()
        if not closed:
            return []
        last = max(ep.last_seq for ep in closed)
        self.store.add_records(FLUSH, [(str(last), {"seq": last})])
        for episode in closed:
            self._close(episode)
        return closed

    # -- reading -----------------------------------------------------------------------

    def recent(self, n: int = 10, *, principal: str | None = None) -> list[Entry]:
        """The last `n` entries of a principal, oldest first (the short-term window)."""
        window = self._window(principal or self.principal)
        return list(window)[-n:] if n > 0 else []

    def messages(self, n: int = 10, *, principal: str | None = None) -> list[dict[str, str]]:
        """The short-term window as chat messages: agent entries are "assistant", others "user".

        Consecutive entries of the same role are merged, so roles alternate.
        """
        out: list[dict[str, str]] = []
        for entry in self.recent(n, principal=principal):
            role = "assistant" if entry.role is Role.AGENT else "user"
            line = f"[{entry.kind.value}] {entry.text}"
            if out and out[-1]["role"] == role:
                out[-1]["content"] += "\n" + line
            else:
                out.append({"role": role, "content": line})
        return out

    def recall(self, query: str | Sequence[str] | None = None, *, situation: str | None = None,
               principal: str | None = None, k: int = 5, now: datetime | None = None) -> Context:
        """Past episodes with outcomes, applicable facts and causal chains for a query.

        Args:
            query: text or observation texts; None uses the observations recorded since
                the principal's last closed episode.
            situation: situation label to favour; None uses the latest entry's.
            principal: tenant; nothing of another tenant is read.
            k: most episodes.
            now: reference time for recency (default: end of the latest closed episode).
        """
        who = principal or self.principal
        window = self._window(who)
        if query is None:
            since = self._closed_seq.get(who, -1)
            query = [e.text for e in window if e.seq > since and e.kind is Kind.OBSERVATION]
        if situation is None and window:
            situation = window[-1].situation
        return self._retriever.recall(query, principal=who, situation=situation, k=k, now=now)

    def episodes(self, principal: str | None = None) -> list[Episode]:
        """Closed episodes of a principal, in closing order."""
        return [self._episodes[i] for i in self._order.get(principal or self.principal, [])]

    def edges(self, principal: str | None = None) -> list[Edge]:
        """Edges among a principal's episodes (graph rules and reinforcement), in insertion order."""
        who = principal or self.principal
        return [Edge(u, v, d["type"], d["weight"], d["evidence"]) for u, v, d in self.graph.edges(data=True)
                if self.graph.nodes[u].get("principal") == who]

    def episode(self, episode_id: str) -> Episode | None:
        """A closed episode by id."""
        return self._episodes.get(episode_id)

    def facts(self, principal: str | None = None, *, include_retired: bool = False) -> list[FactVersion]:
        """Current version of each fact of a principal."""
        who = principal or self.principal
        return [f for f in self._current.values()
                if f.principal == who and (include_retired or f.status == "active")]

    def fact_history(self, fact_id: str) -> list[FactVersion]:
        """Every version of a fact, oldest first: how the belief changed and on what evidence."""
        return history(self._versions, fact_id.split("@", 1)[0])

    def projection(self) -> Projection:
        """The derived state as plain values."""
        edges = tuple(Edge.from_record(body) for _, body in self.store.records(EDGE))
        return Projection(tuple(self._episodes.values()), edges, tuple(self._versions))

    def rebuild(self) -> Projection:
        """Replay the whole timeline into a fresh in-memory memory; its projection.

        Equals `projection()` when the derived records are a faithful projection of the timeline.
        """
        fresh = EpisodicMemory(None, principal=self.principal, encoder=self.encoder,
                               retriever=self.retriever_config, segmenter=self.segmenter_config,
                               links=self.graph_config, facts=self.fact_config, proposer=self.proposer)
        flushes = {int(body["seq"]) for _, body in self.store.records(FLUSH)}
        try:
            for entry in self.store.entries():
                fresh.store.append(EntryDraft(
                    timestamp=entry.timestamp, principal=entry.principal, situation=entry.situation,
                    role=entry.role, kind=entry.kind, text=entry.text, metadata=entry.metadata,
                    embedding=entry.embedding, encoder=entry.encoder))
                fresh._ingest(entry)
                if entry.seq in flushes:
                    fresh.flush()
            return fresh.projection()
        finally:
            fresh.close()

    def close(self) -> None:
        """Close the store. Open episodes stay open and resume on the next open (see `flush`)."""
        self.store.close()

    def __enter__(self) -> "EpisodicMemory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the pipeline ------------------------------------------------------------------

    def _window(self, principal: str) -> deque[Entry]:
        window = self._recent.get(principal)
        if window is None:
            window = deque(self.store.tail(principal, _RECENT), maxlen=_RECENT)
            self._recent[principal] = window
        return window

    def _ingest(self, entry: Entry) -> None:
        if entry.principal in self._recent:
            self._recent[entry.principal].append(entry)
        for episode in self._segmenter.feed(entry):
            self._close(episode)

    def _close(self, episode: Episode) -> None:
        """Persist, index, link, reinforce and learn from one closed episode."""
        self.store.add_records(EPISODE, [(episode.id, episode.to_record())])
        entries = self.store.get_many(list(episode.entry_ids))
        self._index(episode, entries)
        self._learn(episode, entries)

    def _index(self, episode: Episode, entries: Sequence[Entry | EntryParts],
               known: tuple[_Problem, list[str]] | None = None) -> None:
        """Index a closed episode from its entries, or from its `known` (snapshot) problem and citations."""
        self._episodes[episode.id] = episode
        order = self._order.setdefault(episode.principal, [])
        self._position.setdefault(episode.id, len(order))
        order.append(episode.id)
        self._closed_seq[episode.principal] = max(self._closed_seq.get(episode.principal, -1), episode.last_seq)
        graph_rules.add_episode(self.graph, episode)
        self._chains.episode_added(episode.id)
        problem, cited = known if known is not None else (self._problem(episode, entries), _cited(entries))
        self._problems[episode.id] = problem
        self.index.add(episode, problem.vector)
        self._uncovered += 1
        if not self._loading and self._uncovered >= RUN_EPISODES:
            self._write_runs(RUN_EPISODES)
        if cited:
            self._cites[episode.id] = cited
        if episode.principal in self._evidence:  # else built on first use, from the closing order
            ev = evidence_from(episode, problem.text, cited=cited)
            if ev is not None:
                self._evidence[episode.principal].append(ev)

    def _evidence_of(self, principal: str) -> EvidenceLog | None:
        """Evidence of a principal's closed episodes in closing order (None for an unknown principal)."""
        if principal not in self._order:
            return None
        found = EvidenceLog()
        for i in self._order[principal]:
            run = self._problems.source(i)
            if run is not None and self._episodes.unread(i):  # not read yet: the run's columns suffice
                row = run.row(i)
                outcome, choice, end = run.verdict(row)
                seen = _Verdict(i, principal, (choice,) if choice is not None else (), outcome, end)
                ev = evidence_from(seen, run.texts[row], cited=self._cites.get(i, ()))  # type: ignore[arg-type]
            else:
                ev = evidence_from(self._episodes[i], self._problems[i].text, cited=self._cites.get(i, ()))
            if ev is not None:
                found.append(ev)
        return found

    def _problem(self, episode: Episode, entries: Sequence[Entry | EntryParts]) -> _Problem:
        """Observations of the problem an episode worked on: its own, else those of the attempt it retries."""
        observed = [e for e in entries if e.kind is Kind.OBSERVATION]
        corrections = [e for e in entries if e.kind is Kind.CORRECTION]
        others = np.stack([e.embedding for e in corrections]) if corrections else None
        if observed:
            return _Problem("\n".join(e.text for e in observed),
                            episode_vector(np.stack([e.embedding for e in observed]), others))
        earlier = self._retried(episode) if episode.choices else None
        if earlier is not None:
            base = self._problems[earlier.id]
            vector = episode_vector(base.vector[None, :], others)
            return _Problem(base.text, vector)
        return _Problem("", episode_vector(np.stack([e.embedding for e in entries])))

    def _retried(self, episode: Episode) -> Episode | None:
        """The attempt that opened the incident an episode without observations continues."""
        prior = self._prior(episode)
        chain = graph_rules.attempt_chain(episode, prior, self.graph_config)
        opener = chain[-1] if chain else None
        return opener if opener is not None and opener.id in self._problems and self._problems[opener.id].text else None

    def _prior(self, episode: Episode) -> list[Episode]:
        """The principal's episodes closed before this one (the graph rules' window)."""
        ids = self._order.get(episode.principal, [])
        end = self._position.get(episode.id, len(ids))
        return [self._episodes[i] for i in ids[max(0, end - self.graph_config.window) : end]]

    def _learn(self, episode: Episode, entries: Sequence[Entry]) -> None:
        who = episode.principal
        self._add_edges(graph_rules.infer_edges(episode, self._prior(episode), config=self.graph_config))
        notes = [DecisionNote.from_metadata(e.id, e.metadata) for e in entries if e.kind is Kind.DECISION]
        evidence = self._evidence.get(who, EvidenceLog())
        result = reinforce(episode, notes, lookup=self._episodes.get, graph=self.graph,
                           facts=self._facts_of(who, retired=False), evidence=evidence,
                           applied=lambda m: m in self._marks, config=self.fact_config)
        self._add_edges(result.edges)
        self._add_versions(result.facts)
        if result.marks and evidence.find(episode.id) is not None:
            current = [f for f in self._current.values() if f.principal == who]
            made = extract_facts(evidence, current, principal=who, at=episode.end, config=self.fact_config)
            if self.proposer is not None:
                taken = {f.fact_id for f in current + made}
                for condition, conclusion in self.proposer(evidence):
                    fact = propose_fact(condition, conclusion, evidence, principal=who, at=episode.end,
                                        config=self.fact_config, reason="proposed by the proposer hook")
                    if fact is not None and fact.fact_id not in taken:
                        made.append(fact)
                        taken.add(fact.fact_id)
            self._add_versions(made)
        if result.marks:
            self.store.add_records(MARK, [(m, {"episode": episode.id}) for m in result.marks])
            self._marks.update(result.marks)
            self.reinforcements.append(result)

    def _add_edges(self, edges: Iterable[Edge]) -> None:
        fresh = [e for e in edges if e.id not in self._edge_ids]
        if not fresh:
            return
        self.store.add_records(EDGE, [(e.id, e.to_record()) for e in fresh])
        self._edge_ids.update(e.id for e in fresh)
        graph_rules.add_edges(self.graph, fresh)
        self._chains.edges_added(fresh)

    def _add_versions(self, versions: Iterable[FactVersion]) -> None:
        versions = list(versions)
        if not versions:
            return
        self.store.add_records(FACT, [(v.id, v.to_record()) for v in versions])
        for v in versions:
            self._versions.append(v)
            self._current[v.fact_id] = v

    def _facts_of(self, principal: str, retired: bool = False) -> list[FactVersion]:
        return [f for f in current_facts(self._current.values())
                if f.principal == principal and (retired or f.status == "active")]

    def _load(self) -> None:
        """Rebuild the projection from stored records, then resume open episodes.

        State runs (`memory.snapshot`) stand for the records they cover; the records after
        the last usable run are read one by one. Both give the same state, in storing order.
        """
        collect, interval = gc.isenabled(), sys.getswitchinterval()
        gc.disable()  # bulk loading makes a few hundred thousand containers, none of them garbage
        sys.setswitchinterval(0.0005)  # the run reader thread gets the GIL back soon after each read and digest
        try:
            runs, late_edges = self._load_runs()
        finally:
            sys.setswitchinterval(interval)
            if collect:
                gc.enable()
        self._covered = runs[-1].upto if runs else 0
        tail = [Episode.from_record(body) for _, body in self.store.records_after(EPISODE, self._covered)]
        counts: dict[str, int] = {}
        for episode in tail:
            counts[episode.principal] = counts.get(episode.principal, 0) + 1
        self.index.reserve(counts)
        self._index_stored(tail, sum(len(run.ids) for run in runs))
        tail_edges = list(self.store.records_after(EDGE, self._covered))
        for run in runs:
            self._edge_ids.defer(lambda run=run: run.edge_ids)
        self._edge_ids.update(i for i, _ in tail_edges)
        graph_rules.add_edge_rows(self.graph, late_edges)
        graph_rules.add_edges(self.graph, [Edge.from_record(body) for _, body in tail_edges])
        facts = [body for run in runs for body in run.facts]
        facts += [body for _, body in self.store.records_after(FACT, self._covered)]
        self._add_loaded_versions(FactVersion.from_record(body) for body in facts)
        for run in runs:
            self._marks.defer(lambda run=run: run.marks)
        learned = set()
        for mark, body in self.store.records_after(MARK, self._covered):
            self._marks.add(mark)
            learned.add(body["episode"])
        resolved = learned.union(*(run.outside for run in runs))
        unlearned = [i for run in runs for i in run.unmarked if i not in resolved]
        unlearned += [episode.id for episode in tail if episode.id not in learned]
        for run in runs:
            run.release()
        for episode_id in unlearned:  # a pipeline interrupted after storing the episode resumes here
            episode = self._episodes[episode_id]
            self._learn(episode, self.store.get_many(list(episode.entry_ids)))
        self._loading = False
        self._write_runs(OPEN_RUN_MIN)
        if not self._episodes and len(self.store) == 0:
            return
        start = min(self._closed_seq.values(), default=-1) + 1
        if any(who not in self._closed_seq for who in self.store.principals()):
            start = 0
        for entry in self.store.entries(start=start):
            if entry.seq > self._closed_seq.get(entry.principal, -1):
                for episode in self._segmenter.feed(entry):
                    self._close(episode)

    def _load_runs(self) -> tuple[list[snapshot.Run], list[tuple[str, str, Any, float, str]]]:
        """Load the state runs: episodes (read on first use), nodes, edges, partitions and bounds.

        Returns the runs and the edges of theirs that wait for episodes stored after them
        (none when a single process wrote the store): the exact load adds every node first.
        """
        reader = snapshot.RunReader(self.store, config=self._config, dim=self.encoder.dim)
        runs: list[snapshot.Run] = []
        late: list[tuple[str, str, Any, float, str]] = []
        order: dict[str, list[str]] = {}
        situations: dict[str, list[str]] = {}
        outcomes: dict[str, list[Outcome]] = {}
        columns: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        graph = self.graph
        for run in reader:
            runs.append(run)
            ids = run.ids
            strings = run.strings
            codes = run.column("principal")
            principals = [strings[c] for c in codes.tolist()]
            sits = run.decoded("situation")
            outs = [snapshot.OUTCOMES[c] for c in run.column("outcome").tolist()]
            self._episodes.defer(ids)
            self._problems.defer(ids, run)
            self._cites.update(run.cites)
            graph_rules.add_episode_rows(graph, ids, principals, sits, run.decoded("subject"),
                                         run.column("seqs")[:, 0].tolist(), outs, self._episodes)
            last, ends, corrected = run.column("seqs")[:, 1], run.column("ends"), run.column("corrected")
            for code in np.unique(codes).tolist():
                who = strings[code]
                picked = np.flatnonzero(codes == code)
                rows = picked.tolist()
                order.setdefault(who, []).extend([ids[i] for i in rows])
                situations.setdefault(who, []).extend([sits[i] for i in rows])
                outcomes.setdefault(who, []).extend([outs[i] for i in rows])
                columns.setdefault(who, []).append((ends[picked], corrected[picked]))
                self._closed_seq[who] = max(self._closed_seq.get(who, -1), int(last[picked].max()))
            edges = run.edges
            if not late and self._episodes.has_all({s for s, *_ in edges} | {t for _, t, *_ in edges}):
                graph_rules.add_edge_rows(graph, edges)
            else:
                late.extend(edges)
        for who, ids in order.items():
            self._order[who] = ids
            self._position.update(zip(ids, range(len(ids))))
            self.index.load(who, snapshot.EpisodeList(ids, self._episodes), ids, reader.vectors[who][: len(ids)],
                            np.concatenate([e for e, _ in columns[who]]), outcomes[who],
                            np.concatenate([c for _, c in columns[who]]), situations[who])
            self._load_bounds(who, reader, [run for run in runs if who in run.rows])
        return runs, late

    def _load_bounds(self, principal: str, reader: snapshot.RunReader, runs: list[snapshot.Run]) -> None:
        """Install a partition's relevance bounds from the runs' stored projections.

        The basis is the one the latest runs used; rows of runs stored before it (or with
        another) are projected here. Without any stored basis the bounds are fitted on first use.
        """
        part = self.index.partition(principal)
        digest = next((run.bases[principal] for run in reversed(runs) if run.bases[principal] is not None), None)
        basis = snapshot.read_basis(self.store, principal, digest) if digest is not None else None
        proj, resid = reader.proj.get(principal), reader.resid.get(principal)
        if basis is None or proj is None or basis.shape != (self.encoder.dim, proj.shape[1]) \
                or len(part) < max(self.retriever_config.prune_from, 1):
            return
        empty = Bounds.from_parts(basis, np.zeros((0, basis.shape[1])), np.zeros(0))
        for run in runs:
            if run.bases[principal] != digest:
                rows = slice(run.offsets[principal], run.offsets[principal] + run.rows[principal])
                proj[rows], resid[rows] = empty.split(part.matrix[rows])
        part.bounds = Bounds.from_parts(basis, proj[: len(part)], resid[: len(part)])

    def _index_stored(self, stored: list[Episode], before: int) -> None:
        """Index episodes read from their records (`before` episodes precede them), problems from entries.

        Problems come from legacy problem snapshots (`PROBLEMS`) where one covers exactly a
        run of `SNAPSHOT_EPISODES` of them, else from the entries.
        """
        runs: dict[int, tuple[dict[str, Any], bytes]] = {}
        if self.store.path != ":memory:" and stored:
            for _, meta, body in self.store.snapshots(PROBLEMS):
                runs.setdefault(int(meta["start"]), (meta, body))
        first = before - before % SNAPSHOT_EPISODES
        for start in range(first, before + len(stored), SNAPSHOT_EPISODES):
            run = stored[max(start - before, 0) : start - before + SNAPSHOT_EPISODES]
            meta, body = runs.get(start, ({}, b""))
            if start >= before and meta.get("episodes") == [ep.id for ep in run] \
                    and len(body) == len(run) * self.encoder.dim * 4:  # a snapshot of exactly these episodes
                vectors = np.frombuffer(body, dtype="<f4").reshape(len(run), -1)
                cites = meta["cites"]
                for episode, vector, text in zip(run, vectors, meta["texts"]):
                    self._index(episode, (), known=(_Problem(text, vector), cites.get(episode.id, [])))
                continue
            for part in range(0, len(run), 2000):
                chunk = run[part : part + 2000]
                parts = self.store.entry_parts([i for ep in chunk for i in ep.entry_ids])
                for episode in chunk:
                    self._index(episode, [parts[i] for i in episode.entry_ids if i in parts])

    def _read_episode(self, episode_id: str, _: Any) -> Episode | None:
        body = self.store.record(EPISODE, episode_id)
        return Episode.from_record(body) if body is not None else None

    def _read_problem(self, episode_id: str, run: snapshot.Run) -> _Problem:
        row = run.row(episode_id)
        part = self.index.partition(run.principal_at(row))
        return _Problem(run.texts[row], part.matrix[part.position[episode_id]].copy())

    def _write_runs(self, least: int) -> None:
        """Store state runs for the records after the last run once they hold `least` episodes (file stores only)."""
        if self.store.path == ":memory:" or self._uncovered < least:
            return
        self._uncovered = 0
        rows = self.store.record_rows(self._covered, self.store.last_record())
        chunk: list[tuple[int, str, str, str]] = []
        count = 0
        for row in rows:
            if row[1] == EPISODE:
                if count == RUN_EPISODES:
                    if not self._write_run(chunk):
                        return
                    chunk, count = [], 0
                count += 1
            chunk.append(row)
        if chunk and count:
            self._write_run(chunk)

    def _write_run(self, rows: list[tuple[int, str, str, str]]) -> bool:
        """Store one run for these records (which must follow `_covered`); False when this memory cannot."""
        episodes = [self._episodes.get(i) for _, kind, i, _ in rows if kind == EPISODE]
        if any(ep is None or ep.id not in self._problems for ep in episodes):
            return False  # stored by another process and not indexed here
        edges = [(i, json.loads(body)) for _, kind, i, body in rows if kind == EDGE]
        facts = [json.loads(body) for _, kind, _, body in rows if kind == FACT]
        marks = [(i, json.loads(body)["episode"]) for _, kind, i, body in rows if kind == MARK]
        projections = {}
        for who in dict.fromkeys(ep.principal for ep in episodes):
            part = self.index.partition(who)
            bounds = part.bounded(self.retriever_config.prune_from)
            if bounds is not None:
                digest = snapshot.basis_digest(bounds.basis)
                self._store_basis(who, digest, bounds.basis)
                picked = np.array([part.position[ep.id] for ep in episodes if ep.principal == who], dtype=np.intp)
                projections[who] = (digest, *bounds.rows(picked))
        problems = [self._problems[ep.id] for ep in episodes]
        meta, body = snapshot.encode_run(
            after=self._covered, upto=rows[-1][0], first=rows[0][1:3], last=rows[-1][1:3], config=self._config,
            dim=self.encoder.dim, episodes=episodes, problems=[(p.text, p.vector) for p in problems],
            cites={ep.id: self._cites[ep.id] for ep in episodes if ep.id in self._cites}, edges=edges, facts=facts,
            marks=marks, projections=projections)
        name = snapshot.run_id(meta)
        known = {i for _, i, _ in self.store.snapshot_index(snapshot.RUN) if i.startswith(name)}
        while name in known:  # a damaged copy holds the name: store this one beside it
            name += "+"
        self.store.add_snapshot(snapshot.RUN, name, meta, body)
        self._covered = rows[-1][0]
        return True

    def _store_basis(self, principal: str, digest: str, basis: np.ndarray) -> None:
        if snapshot.read_basis(self.store, principal, digest) is not None:
            return
        data = np.ascontiguousarray(basis, dtype="<f8")
        name = f"{principal}:{digest}"
        known = {i for _, i, _ in self.store.snapshot_index(snapshot.BASIS)}
        while name in known:  # a damaged copy holds the name
            name += "+"
        self.store.add_snapshot(snapshot.BASIS, name, {"principal": principal, "digest": digest,
                                                      "shape": list(data.shape)}, data.tobytes())

    def _add_loaded_versions(self, versions: Iterable[FactVersion]) -> None:
        for v in versions:
            self._versions.append(v)
            if v.fact_id not in self._current or v.version > self._current[v.fact_id].version:
                self._current[v.fact_id] = v


class _Verdict(NamedTuple):
    """The fields of an episode `evidence_from` reads, from a state run (the episode itself is not read)."""

    id: str
    principal: str
    choices: tuple[str, ...]  # the last structured choice only
    outcome: Outcome
    end: datetime


class _Evidence(dict):
    """Principal → evidence list, each list built on first use (opening a large store skips the work).

    Reads through `get`, `[]`, `setdefault`, `values` and `items` see the lists an eagerly
    kept dict would hold; `in` tells whether a principal's list is built yet.
    """

    def __init__(self, build: Callable[[str], EvidenceLog | None], principals: Callable[[], Iterable[str]]) -> None:
        super().__init__()
        self._build = build
        self._principals = principals

    def _ensure(self, principal: str) -> None:
        if not dict.__contains__(self, principal):
            built = self._build(principal)
            if built is not None:
                dict.__setitem__(self, principal, built)

    def get(self, principal: str, default: Any = None) -> Any:  # type: ignore[override]
        self._ensure(principal)
        return dict.get(self, principal, default)

    def __getitem__(self, principal: str) -> EvidenceLog:
        self._ensure(principal)
        return dict.__getitem__(self, principal)

    def setdefault(self, principal: str, default: Any = None) -> Any:  # type: ignore[override]
        self._ensure(principal)
        return dict.setdefault(self, principal, default)

    def values(self) -> Any:  # type: ignore[override]
        for principal in list(self._principals()):
            self._ensure(principal)
        return dict.values(self)

    def items(self) -> Any:  # type: ignore[override]
        self.values()
        return dict.items(self)


def _cited(entries: Sequence[Entry | EntryParts]) -> list[str]:
    ids: list[str] = []
    for e in entries:
        if e.kind is Kind.DECISION:
            note = DecisionNote.from_metadata(e.id, e.metadata)
            ids.extend(i for i in note.retrieved + note.relied_on if i.startswith("fact-"))
    return ids
