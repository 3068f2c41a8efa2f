"""Opening a memory: the derived state rebuilt from the stored records, and state runs kept current.

`open_state` fills a fresh `memory.state.MemoryState` from a store: from the state runs
(`memory.persistence.runs`) for the ranges they cover, then record by record for the rest,
in storing order either way, so both give the same state. Episodes and problems of runs
are read on first use. It returns what the caller still has to do: episodes whose learning
was interrupted after they were stored (their reinforcement marks are missing), and where
to resume feeding the segmenter.

`RunWriter` stores a state run for every `Persistence.run_episodes` episodes indexed, and
on open for the records after the last run once they hold `Persistence.open_run_min` episodes.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple, cast

import numpy as np

import memory.pipeline as pipeline
from memory.episodes import Episode
from memory.facts import resolve_records, stored_records
from memory.graph import Edge, add_edge_rows, add_edges
from memory.persistence import runs as snapshot
from memory.persistence import stored_bounds
from memory.persistence.heap import release_free_pages
from memory.persistence.lazy import EpisodeList, LazySet, StoredEpisodes
from memory.persistence.record_fields import checked, converted, unreadable
from memory.persistence.run_encoding import encode_run, run_id
from memory.persistence.run_loading import RunLoader
from memory.persistence.sparse_rows import row_checksums, row_digests, row_offsets
from memory.persistence.vectors import StoredRows, VectorFile
from memory.retrieval.config import RetrieverConfig
from memory.state import EpisodeProblem, MemoryState, count_terms
from memory.timeline import EntryParts, RecordKind, Store
from memory.timeline.connection import damage

RUN_BODIES = (RecordKind.EDGE.value, RecordKind.FACT.value, RecordKind.MARK.value)  # what writing a run reads
PROBLEMS = "episode_problems/1"  # legacy snapshot kind (read only): problem vectors, texts and citations
# Opening a store whose episodes no state run covers reads them all from their records: for
# this many or more, progress is logged (INFO, logger "memory.persistence.loader") every
# PROGRESS_EVERY episodes, so a long first open says how far it is; each record carries
# ``indexed`` and ``total`` (`memory.persistence.progress` draws them as a bar).
PROGRESS_FROM, PROGRESS_EVERY = 20_000, 10_000
log = logging.getLogger(__name__)
RecordRow = tuple[int, str, str, str | None]  # (seq, kind, id, body JSON text) of a stored record
IndexStored = Callable[[Episode, Sequence[EntryParts]], None]  # indexes an episode read from its record


@dataclass(frozen=True)
class Persistence:
    """When state runs are written (file stores only)."""

    run_episodes: int = 4096  # most episodes per state run; a run is written once this many are indexed
    open_run_min: int = 256  # opening writes runs for the records after the last run once they hold this many
    legacy_problem_run: int = 4096  # episodes per legacy problem snapshot (`PROBLEMS`), a file-format constant
    use_runs: bool = True  # read state runs on open (False loads every record the exact way)


DEFAULT_PERSISTENCE = Persistence()


class OpenedState(NamedTuple):
    """What opening leaves to the caller."""

    unlearned: list[str]  # stored episodes whose learning did not finish, in storing order
    resume_from: int  # first timeline seq to feed the segmenter again (-1: nothing to resume)


class StoredState:
    """Keeps a memory's derived state and its store in step: opening, and writing state runs.

    Args:
        store: the store (file or ":memory:"; runs are written for files only).
        state: the state to fill (see `lazy_state`).
        dim: encoder dimension (of problem vectors).
        retriever: recall configuration (its `prune_from` decides when bounds exist).
        persistence: when runs are written.
    """

    def __init__(
        self,
        store: Store,
        state: MemoryState,
        *,
        dim: int,
        retriever: RetrieverConfig,
        persistence: Persistence = DEFAULT_PERSISTENCE,
    ) -> None:
        self.store = store
        self.state = state
        self.dim = dim
        self.retriever = retriever
        self.persistence = persistence
        self.covered = 0  # records (by seq) that stored state runs stand for
        self.uncovered = 0  # episodes indexed since the last run
        self.loading = True  # no runs are written while the store is being opened
        self.projected: list[tuple[str, np.ndarray, np.ndarray]] = []  # rows of runs projected on a later basis
        self.config = snapshot.config_digest(state.graph_config)
        path = getattr(store, "vectors_path", None)  # file stores keep run vectors in a sidecar
        self.sidecar = VectorFile(path, dim) if path else None

    # -- opening ---------------------------------------------------------------------------

    def open(self, index_stored: IndexStored) -> OpenedState:
        """Fill the state from the store; `index_stored(episode, entries)` indexes a record-read episode.

        Returns the episodes whose learning must be redone and where the segmenter resumes.

        Raises:
            DamagedStore: the store file is damaged, or a record in it is malformed (named).
        """
        try:
            return self._open(index_stored)
        except sqlite3.DatabaseError as exc:  # a damaged page met in the middle of a scan
            found = damage(self.store.path, exc)
            if found is None:
                raise
            raise found from exc

    def _open(self, index_stored: IndexStored) -> OpenedState:
        runs, late_edges = RunLoader(
            self.store,
            self.state,
            config=self.config,
            dim=self.dim,
            prune_from=self.retriever.prune_from,
            use_runs=self.persistence.use_runs,
            sidecar=self.sidecar,
            recompute=self._recompute,
            projected=self.projected,
        ).load()
        self.covered = start = runs[-1].upto if runs else 0
        if self.sidecar is not None:  # a slice at a time: what runs cover as the open goes is released
            tail: Any = StoredEpisodes(self.store, start)
        else:  # all at once, room reserved for the vectors this memory keeps
            tail = [
                converted(Episode.from_record, body, self.store.path, RecordKind.EPISODE.value, i)
                for i, body in self.store.records_after(RecordKind.EPISODE, start)
            ]
            counts: dict[str, int] = {}
            for episode in tail:
                counts[episode.principal] = counts.get(episode.principal, 0) + 1
            self.state.index.reserve(counts)
        self._index_records(tail, sum(len(run.ids) for run in runs), index_stored)
        learned = self._load_links(runs, late_edges, start)
        resolved = learned.union(*(run.outside for run in runs))
        unlearned = [i for run in runs for i in run.unmarked if i not in resolved]
        unlearned += [
            i for i in (tail.ids if isinstance(tail, StoredEpisodes) else [e.id for e in tail]) if i not in learned
        ]
        for run in runs:
            run.release()
        return OpenedState(unlearned, self._resume_from())

    def opened(self) -> None:
        """Opening is over: write the runs it found missing, and the projections it had to compute; give the
        memory its buffers took back to the system (`heap.release_free_pages`)."""
        self.loading = False
        stored_bounds.store_projections(self.store, self.projected)
        self.projected = []
        self.write_runs(self.persistence.open_run_min)
        if self.store.path != ":memory:":
            release_free_pages()

    def _resume_from(self) -> int:
        state = self.state
        if not state.episodes and len(self.store) == 0:
            return -1
        start = min(state.closed_seq.values(), default=-1) + 1
        if any(who not in state.closed_seq for who in self.store.principals()):
            start = 0
        return start

    def _load_links(self, runs: list[snapshot.Run], late_edges: list[Any], after: int) -> set[str]:
        """Edges, fact versions and marks of the runs and the records after them (`after` the last run read);
        the episodes marked after."""
        state = self.state
        edge_ids, marks = cast(LazySet, state.edge_ids), cast(LazySet, state.marks)  # `lazy_state` made them lazy
        tail_edges = list(self.store.records_after(RecordKind.EDGE, after))
        for run in runs:
            edge_ids.defer(partial(run.id_list, "edge_ids"))
        edge_ids.update(i for i, _ in tail_edges)
        add_edge_rows(state.graph, late_edges)
        add_edges(
            state.graph,
            [converted(Edge.from_record, body, self.store.path, RecordKind.EDGE.value, i) for i, body in tail_edges],
        )
        facts = [body for run in runs for body in run.facts]
        facts += [
            checked(body, self.store.path, RecordKind.FACT.value, i)
            for i, body in self.store.records_after(RecordKind.FACT, after)
        ]
        state.add_versions(self._versions(facts), stored=True)
        for run in runs:
            marks.defer(partial(run.id_list, "marks"))
        learned = set()
        for mark, body in self.store.records_after(RecordKind.MARK, after):
            checked(body, self.store.path, RecordKind.MARK.value, mark)
            marks.add(mark)
            learned.add(body["episode"])
        return learned

    def _versions(self, bodies: list[dict[str, Any]]) -> list[Any]:
        """The fact versions of stored bodies (`resolve_records`), naming the one that cannot be read."""
        done: list[Any] = []
        try:
            for version in resolve_records(bodies):
                done.append(version)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            body = bodies[len(done)]
            raise unreadable(
                exc, self.store.path, RecordKind.FACT.value, f"{body.get('fact_id', '?')}@{body.get('version', '?')}"
            ) from exc
        return done

    def _recompute(self, principal: str, row: int) -> np.ndarray:
        """The problem vector of a partition row computed from its episode's entries (the exact way)."""
        episode = self.state.index.partition(principal).episodes[row]
        parts = self.store.entry_parts(list(episode.entry_ids))
        return pipeline.problem_of(self.state, episode, [parts[i] for i in episode.entry_ids if i in parts]).vector

    def _index_records(self, stored: list[Episode], before: int, index_stored: IndexStored) -> None:
        """Index episodes read from their records (`before` episodes precede them), problems from entries.

        Problems come from legacy problem snapshots (`PROBLEMS`) where one covers exactly a
        run of `legacy_problem_run` of them, else from the entries.
        """
        size = self.persistence.legacy_problem_run
        legacy: dict[int, tuple[dict[str, Any], bytes]] = {}
        if self.store.path != ":memory:" and stored:
            for _, meta, body in self.store.snapshots(PROBLEMS):
                legacy.setdefault(int(meta["start"]), (meta, body))
        first = before - before % size
        progressive = len(stored) >= self.persistence.open_run_min
        for start in range(first, before + len(stored), size):
            run = stored[max(start - before, 0) : start - before + size]
            meta, body = legacy.get(start, ({}, b""))
            if (
                start >= before
                and meta.get("episodes") == [ep.id for ep in run]
                and len(body) == len(run) * self.dim * 4
            ):  # a snapshot of exactly these episodes
                vectors = np.frombuffer(body, dtype="<f4").reshape(len(run), -1)
                cites = meta["cites"]
                for episode, vector, text in zip(run, vectors, meta["texts"]):
                    self.state.index_episode(episode, EpisodeProblem(text, vector), cites.get(episode.id, []))
                    self.indexed()
                continue
            for part in range(0, len(run), 2000):
                chunk = run[part : part + 2000]
                parts = self.store.entry_parts([i for ep in chunk for i in ep.entry_ids])
                for episode in chunk:
                    index_stored(episode, [parts[i] for i in episode.entry_ids if i in parts])
                if progressive:
                    self._write_progress()
                done = max(start - before, 0) + part + len(chunk)
                if len(stored) >= PROGRESS_FROM and (done % PROGRESS_EVERY < len(chunk) or done == len(stored)):
                    log.info(
                        "%s: indexed %s of %s episodes from their records (no state runs cover them yet)",
                        self.store.path,
                        f"{done:,}",
                        f"{len(stored):,}",
                        extra={"indexed": done, "total": len(stored)},
                    )

    def persist(self, changes: pipeline.Changes) -> None:
        """Store what closing an episode changed (`memory.pipeline.Changes`), before the state applies it."""
        if changes.edges:
            self.store.add_records(RecordKind.EDGE, [(e.id, e.to_record()) for e in changes.edges])
        if changes.facts:
            self.store.add_records(RecordKind.FACT, stored_records(changes.facts, self.state.current))
        if changes.marks:
            self.store.add_records(RecordKind.MARK, [(m, {"episode": changes.episode_id}) for m in changes.marks])

    # -- state runs ----------------------------------------------------------------------------

    def indexed(self) -> None:
        """One more episode is indexed: store a run once enough are not covered by one."""
        self.uncovered += 1
        if not self.loading and self.uncovered >= self.persistence.run_episodes:
            self.write_runs(self.persistence.run_episodes)

    def write_runs(self, least: int) -> None:
        """Store state runs for the records after the last run once they hold `least` episodes (file stores only)."""
        if self.store.path == ":memory:" or self.uncovered < least:
            return
        self.uncovered = 0
        rows = self.store.record_rows(self.covered, self.store.last_record(), bodies=RUN_BODIES)
        chunk: list[RecordRow] = []
        count = 0
        for row in rows:
            if row[1] == RecordKind.EPISODE:
                if count == self.persistence.run_episodes:
                    if not self._write_run(chunk):
                        return
                    chunk, count = [], 0
                count += 1
            chunk.append(row)
        if chunk and count:
            self._write_run(chunk)

    def _write_progress(self) -> None:
        """While a store is opened the exact way, store the runs the episodes indexed so far fill (stores
        with a vectors sidecar), so their vectors, problems and episodes are released as the open goes."""
        size = self.persistence.run_episodes
        while self.sidecar is not None and self.uncovered >= size:
            rows = self._run_rows(size)
            if rows is None or not self._write_run(rows):
                return
            self.uncovered -= size

    def _run_rows(self, episodes: int) -> list[RecordRow] | None:
        """The records after the last run up to its `episodes`-th episode's (None: the store ends before)."""
        rows: list[RecordRow] = []
        after, window, last, count = self.covered, 4 * episodes, self.store.last_record(), 0
        while after < last:
            for row in self.store.record_rows(after, after + window, bodies=RUN_BODIES):
                if row[1] == RecordKind.EPISODE:
                    if count == episodes:
                        return rows
                    count += 1
                rows.append(row)
            after += window
        return None

    def _write_run(self, rows: list[RecordRow]) -> bool:
        """Store one run for these records (which must follow `covered`); False when this memory cannot."""
        state = self.state
        found = [state.episodes.get(i) for _, kind, i, _ in rows if kind == RecordKind.EPISODE]
        episodes = [ep for ep in found if ep is not None and ep.id in state.problems]
        if len(episodes) < len(found):
            return False  # stored by another process and not indexed here
        edges = [(i, _parsed(body)) for _, kind, i, body in rows if kind == RecordKind.EDGE]
        facts = [_parsed(body) for _, kind, _, body in rows if kind == RecordKind.FACT]
        marks = [(i, _parsed(body)["episode"]) for _, kind, i, body in rows if kind == RecordKind.MARK]
        projections = {}
        for who in dict.fromkeys(ep.principal for ep in episodes):
            part = state.index.partition(who)
            bounds = part.bounded(self.retriever.prune_from)
            if bounds is not None:
                digest = stored_bounds.basis_digest(bounds.basis)
                stored_bounds.store_basis(self.store, who, digest, bounds.basis)
                # projected again from the vectors: the bounds keep second halves rounded (`Bounds`)
                vectors = np.stack([state.problems[ep.id].vector for ep in episodes if ep.principal == who])
                proj, resid = bounds.split(vectors)
                projections[who] = (digest, proj, resid.astype(np.float32))
        problems = [state.problems[ep.id] for ep in episodes]
        sidecar = self._to_sidecar(episodes, problems)
        meta, body = encode_run(
            after=self.covered,
            upto=rows[-1][0],
            first=rows[0][1:3],
            last=rows[-1][1:3],
            config=self.config,
            dim=self.dim,
            episodes=episodes,
            problems=[(p.text, p.vector) for p in problems],
            cites={ep.id: state.cites[ep.id] for ep in episodes if ep.id in state.cites},
            edges=edges,
            facts=facts,
            marks=marks,
            projections=projections,
            sidecar=sidecar,
            term_counts={
                who: counts.to_plain()
                for who, counts in count_terms(
                    ((ep, p.text) for ep, p in zip(episodes, problems)),
                    lambda i: state.cites.get(i, ()),
                    state.lexicon,
                ).items()
            },
        )
        name = run_id(meta)
        name = snapshot.free_id({i for _, i, _ in self.store.snapshot_index(snapshot.RUN) if i.startswith(name)}, name)
        self.store.add_snapshot(snapshot.RUN, name, meta, body)
        self.covered = rows[-1][0]
        if sidecar is not None and self.sidecar is not None:  # the vectors are in the sidecar: read from there
            for who, (first, counts, palettes, _, checksums) in sidecar.items():
                ids = [ep.id for ep in episodes if ep.principal == who]
                self._release(self.sidecar, who, ids, first, counts, palettes, checksums)
        return True

    def _to_sidecar(self, episodes: list[Episode], problems: list[EpisodeProblem]) -> dict[str, tuple] | None:
        """Append the episodes' vectors to the sidecar, durably: principal → `VectorFile.append` + (digests, checksums);
        None without one, or when it cannot be written (the run keeps its vectors, as format 1 does)."""
        sidecar = self.sidecar
        if sidecar is None:
            return None
        written: dict[str, tuple] = {}
        try:
            for who in dict.fromkeys(ep.principal for ep in episodes):
                vectors = np.stack([p.vector for p, ep in zip(problems, episodes) if ep.principal == who])
                written[who] = (*sidecar.append(vectors), row_digests(vectors), row_checksums(vectors))
        except OSError as exc:
            log.warning("%s: cannot write the vectors sidecar (%s); this run keeps its vectors", sidecar.path, exc)
            return None
        return written

    def _release(
        self,
        sidecar: VectorFile,
        principal: str,
        ids: list[str],
        first: int,
        counts: np.ndarray,
        palettes: np.ndarray,
        checksums: np.ndarray,
    ) -> None:
        """The rows just written to `sidecar` are read from there from now on, and no longer held here."""
        part = self.state.index.partition(principal)
        source = part.spare if isinstance(part.spare, StoredRows) else None
        if source is None:
            if part.stored:
                return
            source = StoredRows(self.dim, partial(self._recompute, principal))
        if [part.position.get(i) for i in ids] != list(range(len(source), len(source) + len(ids))):
            return  # not the partition's next rows (episodes another process stored): they stay held here
        source.add_file(
            sidecar, row_offsets(first, self.dim, counts, palettes), counts, checksums, palettes, checked=True
        )
        part.adopt(source)
        problems, episodes = self.state.problems, self.state.episodes
        if hasattr(problems, "defer") and hasattr(episodes, "defer"):
            for episode_id in ids:  # their vectors are read back from the sidecar when asked for
                problems.defer([episode_id], problems[episode_id].text)
            episodes.defer(ids)  # and the episodes from their records
            if not isinstance(part.episodes, EpisodeList):
                part.episodes = EpisodeList([ep.id for ep in part.episodes], episodes)


def _parsed(body: str | None) -> Any:
    """A record body read with the record (its kind is among `RUN_BODIES`), parsed."""
    return json.loads(cast(str, body))
