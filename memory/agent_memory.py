"""The facade agent engineers use: record what happens, recall what was learned.

    with EpisodicMemory("memory.db", principal="team-a") as memory:
        memory.observe("orders p99 at 4.8 s; pool exhausted in the logs")
        context = memory.recall()                      # past episodes, facts, chains
        memory.decide("Decision: raise the pool", choice="pool", retrieved=context.item_ids())
        memory.outcome("p99 back to 300 ms", status="success")

Each recorded entry goes to the timeline (the source of truth) and then to the segmenter.
When an episode closes, the facade stores it, indexes it in the derived state
(`memory.state`), asks the learning pipeline what it teaches (`memory.pipeline`), stores
those changes and applies them. Opening a store rebuilds the state from the stored records
(`memory.persistence`) and feeds the entries after the last closed episode to the segmenter
again, so a new process recalls what the old one did. `rebuild` replays the whole timeline
into a fresh memory; the result equals the live state. The facade owns no rules.

The words the layers read are the memory's lexicon (`memory.lexicon`), handed to the segmenter
and the derived state like the encoder to the timeline; a store opens only with the lexicon its
derived records were read with (`memory.persistence.lexicons`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import networkx as nx

import memory.retention as retention
from memory.episodes import Episode, Segmenter, SegmenterConfig
from memory.errors import StoreChanged
from memory.facts import DEFAULT_FACTS, EvidenceErased, FactConfig, FactVersion, ProposalHook, history
from memory.graph import DEFAULT_GRAPH_CONFIG, Edge, GraphConfig, resolution
from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.persistence.feed import Feed
from memory.persistence.lazy import lazy_state
from memory.persistence.lexicons import open_timeline, record_lexicon
from memory.persistence.loader import DEFAULT_PERSISTENCE, Persistence, StoredState
from memory.pipeline import Learning
from memory.reinforcer import Reinforcement
from memory.retention import Retained, RetentionPolicy
from memory.retrieval import DEFAULT, Context, EpisodeIndex, IncidentRecall, Retriever, RetrieverConfig, Unit
from memory.retrieval.neighbour_store import NeighbourIndexes
from memory.retrieval.text_caches import forget_cached_text
from memory.state import EpisodeProblem, MemoryState, Projection
from memory.timeline import (
    Encoder,
    Entry,
    HashingEncoder,
    Kind,
    RecordKind,
    Redactor,
    Role,
    SQLiteStore,
    Store,
    check_label,
)
from memory.timeline.erasure import Erasure, ErasurePlan, make_plan
from memory.timeline.schema import entry_to_row
from memory.window import as_messages


def _retriever(state: MemoryState, encoder: Encoder, config: RetrieverConfig, store: Store) -> Retriever:
    """The retriever over a derived state: its index, graph, facts, cached chain narratives, and approximate indexes
    of the large partitions (kept beside a store file)."""
    return Retriever(
        state.index,
        encoder.encode,
        graph=state.graph,
        facts=state.facts_of,
        chain=lambda graph, episode_id, hops, most: state.chains.narrative(episode_id, hops, most),
        config=config,
        lexicon=state.lexicon,
        neighbours=NeighbourIndexes.beside(store, encoder=encoder.name, dim=encoder.dim),
    )


ERASE_ATTEMPTS = 5  # an erasure planned while others write is planned again this many times at most


def erase_settled(memory: EpisodicMemory, **target: Any) -> tuple[ErasurePlan, bool]:
    """Plan an erasure and apply it; when another writer appended meanwhile, plan it again on the grown
    store (at most `ERASE_ATTEMPTS` times). The plan applied and whether the file was purged.

    Raises:
        StoreChanged: the store kept growing under every plan.
    """
    for attempt in range(1, ERASE_ATTEMPTS + 1):
        plan = make_plan(
            memory.store,
            owner=memory.principal,
            rederive=lambda erase: replayed_records(memory, erase),
            summarize=lambda rows: retention.evidence_note(memory.state.versions, rows),
            **target,
        )
        try:
            purged = memory.store.erase(plan)
        except StoreChanged:
            if attempt == ERASE_ATTEMPTS:
                raise
            memory._feed.catch_up()
            continue
        record_lexicon(memory.store, memory.lexicon)  # erasing deleted the snapshots (this one too); the replay used it
        if memory._retriever.neighbours is not None:  # its approximate indexes hold projections of what was erased
            memory._retriever.neighbours.discard()
        forget_cached_text()  # the readers' caches hold the erased lines too
        return plan, purged
    raise AssertionError("unreachable")


class EpisodicMemory:
    """Experiential memory for one agent (or several tenants) in a few calls.

    Args:
        path: SQLite file for persistence, or a ``postgresql://`` URL of a shared store;
            None keeps everything in memory.
        principal: default tenant for records and recall.
        encoder: text encoder (default `HashingEncoder`); a stored memory opens only with the one that wrote it.
        lexicon: the words outcomes, causes and lessons are read with (`memory.lexicon`, default the shipped one); a
            stored memory opens only with the one that derived its records (`memory.persistence.lexicons`).
        redactor: applied before anything is stored (default `PatternRedactor`).
        retriever: retriever preset (`memory.retrieval.config.DEFAULT`, `NO_GRAPH`, ...).
        segmenter: segmentation thresholds.
        links: edge-rule windows and thresholds (`memory.graph.GraphConfig`).
        facts: fact thresholds (confidence prior, revision, usefulness).
        proposer: optional hook proposing (condition, conclusion) pairs (e.g. an LLM), checked like extracted facts.
        persistence: when state runs (fast-open snapshots of the derived state) are written.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        principal: str = "default",
        encoder: Encoder | None = None,
        redactor: Redactor | None = None,
        lexicon: Lexicon = DEFAULT_LEXICON,
        retriever: RetrieverConfig = DEFAULT,
        segmenter: SegmenterConfig | None = None,
        links: GraphConfig = DEFAULT_GRAPH_CONFIG,
        facts: FactConfig = DEFAULT_FACTS,
        proposer: ProposalHook | None = None,
        persistence: Persistence = DEFAULT_PERSISTENCE,
    ) -> None:
        self.principal = check_label("principal", principal)
        self.encoder = encoder or HashingEncoder()
        self.lexicon = lexicon
        self.store, self.timeline = open_timeline(path, self.encoder, redactor, lexicon)
        self.retriever_config = retriever
        self.segmenter_config = segmenter or SegmenterConfig()
        self.learning = Learning(facts=facts, proposer=proposer)
        self.persistence = persistence
        self._load(links)

    def _load(self, links: GraphConfig) -> None:
        """Build the derived state from the store (on open, and after an erasure rewrote it)."""
        self.state: MemoryState = lazy_state(EpisodeIndex(self.encoder.dim), links, self.store, self.lexicon)
        self.stored = StoredState(
            self.store, self.state, dim=self.encoder.dim, retriever=self.retriever_config, persistence=self.persistence
        )
        segmenter = Segmenter(self.segmenter_config, self.lexicon)
        self._feed = Feed(self.store, self.state, self.stored, segmenter, self.learning)  # the write path
        self.reinforcements: list[Reinforcement] = self._feed.reinforcements  # what each episode closed here changed
        self._retriever = _retriever(self.state, self.encoder, self.retriever_config, self.store)
        self._units = IncidentRecall(self.state)
        self._feed.open()

    @property
    def graph(self) -> nx.MultiDiGraph:
        """The episode graph of this memory's principal: a read-only view without other tenants' episodes."""
        return self.graph_of(self.principal)

    def graph_of(self, principal: str) -> nx.MultiDiGraph:
        """A read-only view of the episode graph restricted to one principal's episodes."""
        return self.state.graph_of(check_label("principal", principal))

    @property
    def index(self) -> EpisodeIndex:
        """The recall index."""
        return self.state.index

    # -- recording ---------------------------------------------------------------------
    def record(
        self,
        text: str,
        *,
        kind: Kind | str,
        role: Role | str = Role.ENVIRONMENT,
        timestamp: datetime | None = None,
        situation: str = "default",
        metadata: Mapping[str, Any] | None = None,
        principal: str | None = None,
    ) -> Entry:
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
            text,
            kind=kind,
            role=role,
            timestamp=timestamp or datetime.now(UTC),
            situation=situation,
            principal=self._who(principal),
            metadata=metadata,
        )
        self._feed.catch_up(entry.seq)
        self._feed.ingest(entry)
        return entry

    def observe(self, text: str, **fields: Any) -> Entry:
        """Record an observation from the environment."""
        return self.record(text, kind=Kind.OBSERVATION, **{"role": Role.ENVIRONMENT, **fields})

    def decide(
        self,
        text: str,
        *,
        choice: str | None = None,
        confidence: float | None = None,
        retrieved: Iterable[str] = (),
        relied_on: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Entry:
        """Record the agent's decision; `retrieved`/`relied_on` name Context items (see `Context.item_ids`)."""
        meta = {
            **(metadata or {}),
            **({} if choice is None else {"choice": choice}),
            **({} if confidence is None else {"confidence": float(confidence)}),
            "retrieved": list(retrieved),
            "relied_on": list(relied_on),
        }
        return self.record(text, kind=Kind.DECISION, metadata=meta, **{"role": Role.AGENT, **fields})

    def act(self, text: str, **fields: Any) -> Entry:
        """Record an action the agent took (a change made)."""
        return self.record(text, kind=Kind.ACTION, **{"role": Role.AGENT, **fields})

    def outcome(
        self, text: str, *, status: str | None = None, metadata: Mapping[str, Any] | None = None, **fields: Any
    ) -> Entry:
        """Record an outcome signal; `status` ("success"/"failure") is stored as a structured check."""
        meta = {**(metadata or {}), **({} if status is None else {"status": status})}
        return self.record(text, kind=Kind.OUTCOME, metadata=meta, **{"role": Role.ENVIRONMENT, **fields})

    def correct(self, text: str, **fields: Any) -> Entry:
        """Record a user's correction of a wrong decision."""
        return self.record(text, kind=Kind.CORRECTION, **{"role": Role.USER, **fields})

    def flush(self) -> list[Episode]:
        """Close every open episode now (e.g. at the end of a session); returns them. The flush point is stored
        first, so every process sharing the store closes them at the same entry (`memory.persistence.flushes`)."""
        return self._close_open() if self._feed.store_flush_point() else []

    # -- reading -----------------------------------------------------------------------
    def recent(self, n: int = 10, *, principal: str | None = None) -> list[Entry]:
        """The last `n` entries of a principal, oldest first (the short-term window)."""
        return self._feed.recent.last(self._who(principal), n)

    def messages(self, n: int = 10, *, principal: str | None = None) -> list[dict[str, str]]:
        """The short-term window as chat messages (agent: "assistant", others: "user"; roles alternate)."""
        return as_messages(self.recent(n, principal=principal))

    def recall(
        self,
        query: str | Sequence[str] | None = None,
        *,
        situation: str | None = None,
        principal: str | None = None,
        k: int = 5,
        now: datetime | None = None,
        where: Mapping[str, Any] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        unit: Unit = "incident",
        subject: str | None = None,
        exclude: Collection[str] = (),
        incidents: int | None = None,
    ) -> Context:
        """Past incidents with outcomes, applicable facts, causal chains and implicated changes for a query.

        Args:
            query: text or observation texts; None uses the observations recorded since
                the principal's last closed episode.
            situation: situation label to favour; None uses the latest entry's.
            principal: tenant; nothing of another tenant is read.
            k: most episodes recalled; `Context.incidents` are the units they belong to.
            now: reference time for recency (default: end of the latest closed episode).
            where: attributes an episode must match, applied before scoring like the principal
                (keys service, situation, outcome: ``{"outcome": ["SUCCESS", "FAILURE"]}``).
            since, until: only episodes that ended in this (timezone-aware) time range, ends included.
            unit: "incident" (all attempts at a recalled problem) or "episode" (`memory.retrieval.units`).
            subject: the service at hand (its name does not count toward closeness).
            exclude: entry ids whose episodes and incidents are left out (e.g. the live problem's own).
            incidents: most units (default: every one the recalled episodes give).

        Raises:
            ValueError: an unknown filter key or unit, or a naive or reversed time range.
        """
        self._feed.catch_up()
        who = self._who(principal)
        window = self._feed.recent.window(who)
        if query is None:
            query = self._feed.recent.observations_since(who, self.state.closed_seq.get(who, -1))
        situation = window[-1].situation if situation is None and window else situation
        context = self._retriever.recall(
            query, principal=who, situation=situation, k=k, now=now, where=where, since=since, until=until
        )
        return self._units.attach(
            context,
            unit=unit,
            observations=query.splitlines() if isinstance(query, str) else query,
            subject=subject,
            exclude=exclude,
            limit=incidents,
            at=window[-1].timestamp if window else None,
        )

    def episodes(self, principal: str | None = None) -> list[Episode]:
        """Closed episodes of a principal, in closing order."""
        return [self.state.episodes[i] for i in self.state.order.get(self._who(principal), [])]

    def edges(self, principal: str | None = None) -> list[Edge]:
        """Edges among a principal's episodes (graph rules and reinforcement), in insertion order."""
        return self.state.edges_of(self._who(principal))

    def episode(self, episode_id: str, *, principal: str | None = None) -> Episode | None:
        """A closed episode of a principal by id (None for another tenant's episode)."""
        episode = self.state.episodes.get(episode_id)
        return episode if episode is not None and episode.principal == self._who(principal) else None

    def facts(self, principal: str | None = None, *, include_retired: bool = False) -> list[FactVersion]:
        """Current version of each fact of a principal."""
        who = self._who(principal)
        return [
            f for f in self.state.current.values() if f.principal == who and (include_retired or f.status == "active")
        ]

    def fact_history(self, fact_id: str, *, principal: str | None = None) -> list[FactVersion]:
        """Every version of a principal's fact, oldest first: how the belief changed and on what evidence."""
        who = self._who(principal)
        return [v for v in history(self.state.versions, fact_id.split("@", 1)[0]) if v.principal == who]

    def evidence_erased(self, fact_id: str, *, principal: str | None = None) -> list[EvidenceErased]:
        """The erasures that took evidence from a principal's fact, by its id before or after them, oldest first."""
        return retention.evidence_erased(self.store, self._who(principal), fact_id)

    def problem(self, episode_id: str, *, principal: str | None = None) -> EpisodeProblem | None:
        """What a principal's closed episode worked on (its observations, else those of the attempt it retried)."""
        return self.state.problems.get(episode_id) if self.episode(episode_id, principal=principal) else None

    def resolution(self, episode_id: str, *, principal: str | None = None) -> str | None:
        """The choice that finally resolved a principal's closed episode's problem, when one did."""
        if self.episode(episode_id, principal=principal) is None:
            return None
        return resolution(self.graph_of(self._who(principal)), episode_id, self.state.episodes_lookup)

    def projection(self) -> Projection:
        """The derived state as plain values: episodes, stored edge records, fact versions."""
        edges = tuple(Edge.from_record(body) for _, body in self.store.records(RecordKind.EDGE))
        return Projection(tuple(self.state.episodes.values()), edges, tuple(self.state.versions))

    def rebuild(self) -> Projection:
        """Replay the whole timeline into a fresh in-memory memory; its projection (equals `projection()`
        when the derived records are a faithful projection of the timeline)."""
        with replay(self) as fresh:
            return fresh.projection()

    def forget(
        self, *, entry_id: str | None = None, principal: str | None = None, reason: str = "", requested_by: str = ""
    ) -> Erasure:
        """Erase one of this principal's entries (by id) or all of a principal's: content, derived state, freed
        bytes; `verify` still proves the rest (`memory.timeline.erasure`; what it does not reach: README)."""
        target = dict(entry_id=entry_id, principal=principal, reason=reason, requested_by=requested_by)
        plan, purged = erase_settled(self, **target)
        self._load(self.state.graph_config)
        return Erasure(plan.record_id, len(plan.entries), len(plan.records), purged)

    def retain(self, policy: RetentionPolicy, **options: Any) -> Retained:
        """Erase what `policy` expires of a principal's entries like `forget` (`memory.retention.retain`: options)."""
        return retention.retain(self, policy, settle=erase_settled, reload=self._load, **options)

    def close(self) -> None:
        """Close the store. Open episodes stay open and resume on the next open (see `flush`)."""
        for beside in (getattr(getattr(self, "stored", None), "sidecar", None), getattr(self, "_retriever", None)):
            if beside is not None:  # what the store keeps beside it: the vectors sidecar, recall's indexes
                beside.close()
        self.store.close()

    def __enter__(self) -> EpisodicMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _who(self, principal: str | None) -> str:
        """The principal a call is about: the memory's own unless one is passed (never "" or a non-str)."""
        return self.principal if principal is None else check_label("principal", principal)

    def _close_open(self) -> list[Episode]:
        """Close every open episode now (`flush`, once its point is stored)."""
        return self._feed.close_open()


def replay(memory: EpisodicMemory, erase: Collection[int] = ()) -> EpisodicMemory:
    """A fresh in-memory memory fed `memory`'s timeline, the entries at seqs in `erase` as erased; close it.

    Flushes happen where they happened (after the entry a flush record names, or, when that
    entry is erased, before the next one), so the fresh memory closes the same episodes.
    """
    fresh = EpisodicMemory(
        None,
        principal=memory.principal,
        encoder=memory.encoder,
        lexicon=memory.lexicon,
        retriever=memory.retriever_config,
        segmenter=memory.segmenter_config,
        links=memory.state.graph_config,
        facts=memory.learning.facts,
        proposer=memory.learning.proposer,
    )
    copy = cast(SQLiteStore, fresh.store)  # a memory opened on None keeps an in-memory SQLite store
    fresh._feed.replay(
        memory.store.entries(),
        {int(body["seq"]) for _, body in memory.store.records(RecordKind.FLUSH)},
        erase,
        lambda entry: copy.insert_entry_rows([entry_to_row(entry)]),  # the same seqs and ids as in `memory`
        fresh.flush,
    )
    return fresh


def replayed_records(memory: EpisodicMemory, erase: Collection[int]) -> list[tuple[str, str, str]]:
    """(kind, id, body JSON text) of every record a replay of `memory`'s timeline with `erase` erased writes."""
    with replay(memory, erase) as fresh:
        rows = fresh.store.record_rows(0, fresh.store.last_record())  # every record with its body
        return [(kind, record_id, body) for _, kind, record_id, body in rows if body is not None]
