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
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

import memory.pipeline as pipeline
from memory.episodes import Episode, Outcome
from memory.facts import resolve_records, stored_records
from memory.graph import Edge, add_edge_rows, add_edges, add_episode_rows
from memory.persistence import runs as snapshot
from memory.persistence import stored_bounds
from memory.persistence.lazy import EpisodeList, StoredEpisodes
from memory.persistence.record_fields import checked, converted, unreadable
from memory.persistence.run_encoding import encode_run, run_id
from memory.persistence.run_reader import RunReader
from memory.persistence.sparse_rows import row_checksums, row_digests, row_offsets
from memory.persistence.vectors import StoredRows, VectorFile
from memory.retrieval.bounds import Bounds
from memory.retrieval.config import RetrieverConfig
from memory.state import MemoryState, Problem
from memory.timeline import RecordKind
from memory.timeline.connection import damage

RUN_BODIES = (RecordKind.EDGE.value, RecordKind.FACT.value, RecordKind.MARK.value)  # what writing a run reads
PROBLEMS = "episode_problems/1"  # legacy snapshot kind (read only): problem vectors, texts and citations
# Opening a store whose episodes no state run covers reads them all from their records: for
# this many or more, progress is logged (INFO, logger "memory.persistence.loader") every
# PROGRESS_EVERY episodes, so a long first open says how far it is; each record carries
# ``indexed`` and ``total`` (`memory.persistence.progress` draws them as a bar).
PROGRESS_FROM, PROGRESS_EVERY = 20_000, 10_000
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Persistence:
    """When state runs are written (file stores only)."""

    run_episodes: int = 4096  # most episodes per state run; a run is written once this many are indexed
    open_run_min: int = 256  # opening writes runs for the records after the last run once they hold this many
    legacy_problem_run: int = 4096  # episodes per legacy problem snapshot (`PROBLEMS`), a file-format constant
    use_runs: bool = True  # read state runs on open (False loads every record the exact way)


DEFAULT_PERSISTENCE = Persistence()


class Opened(NamedTuple):
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
        store: Any,
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

    def open(self, index_stored: Any) -> Opened:
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

    def _open(self, index_stored: Any) -> Opened:
        runs, late_edges = self._load_runs()
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
        return Opened(unlearned, self._resume_from())

    def opened(self) -> None:
        """Opening is over: write the runs it found missing, and the projections it had to compute."""
        self.loading = False
        stored_bounds.store_projections(self.store, self.projected)
        self.projected = []
        self.write_runs(self.persistence.open_run_min)

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
        tail_edges = list(self.store.records_after(RecordKind.EDGE, after))
        for run in runs:
            state.edge_ids.defer(lambda run=run: run.id_list("edge_ids"))  # type: ignore[attr-defined]
        state.edge_ids.update(i for i, _ in tail_edges)
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
            state.marks.defer(lambda run=run: run.id_list("marks"))  # type: ignore[attr-defined]
        learned = set()
        for mark, body in self.store.records_after(RecordKind.MARK, after):
            checked(body, self.store.path, RecordKind.MARK.value, mark)
            state.marks.add(mark)
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

    def _load_runs(self) -> tuple[list[snapshot.Run], list[tuple[str, str, Any, float, str]]]:
        """Load the state runs: episodes (read on first use), nodes, edges, partitions and bounds.

        Returns the runs and the edges of theirs that wait for episodes stored after them
        (none when a single process wrote the store): the exact load adds every node first.
        """
        kind = snapshot.RUN if self.persistence.use_runs else None
        reader = RunReader(
            self.store, config=self.config, dim=self.dim, kind=kind, sidecar=self.sidecar, recompute=self._recompute
        )
        runs: list[snapshot.Run] = []
        late: list[tuple[str, str, Any, float, str]] = []
        columns = _Columns()
        for run in reader:
            runs.append(run)
            self._add_run_nodes(run, columns)
            edges = run.edges
            if not late and self.state.episodes.has_all({s for s, *_ in edges} | {t for _, t, *_ in edges}):  # type: ignore[attr-defined]
                add_edge_rows(self.state.graph, edges)
            else:
                late.extend(edges)
        for who, ids in columns.order.items():
            self.state.order[who] = ids
            self.state.index.load(
                who,
                EpisodeList(ids, self.state.episodes),
                ids,
                reader.source(who),
                np.concatenate([e for e, _ in columns.flags[who]]),
                columns.outcomes[who],
                np.concatenate([c for _, c in columns.flags[who]]),
                columns.situations[who],
            )
            self._load_bounds(who, reader, [run for run in runs if who in run.rows])
        return runs, late

    def _add_run_nodes(self, run: snapshot.Run, columns: _Columns) -> None:
        """A run's episodes: deferred in the mappings, nodes in the graph, columns gathered per principal."""
        state = self.state
        ids, strings = run.ids, run.strings
        codes = run.column("principal")
        principals = [strings[c] for c in codes.tolist()]
        sits = run.decoded("situation")
        codes_out = run.column("outcome").tolist()
        outs = [snapshot.OUTCOMES[c] for c in codes_out]
        state.episodes.defer(ids)  # type: ignore[attr-defined]
        state.problems.defer(ids, run)  # type: ignore[attr-defined]
        state.cites.update(run.cites)
        add_episode_rows(
            state.graph,
            ids,
            principals,
            sits,
            run.decoded("subject"),
            run.column("seqs")[:, 0].tolist(),
            [snapshot.OUTCOME_NAMES[c] for c in codes_out],
        )
        last, ends, corrected = run.column("seqs")[:, 1], run.column("ends"), run.column("corrected")
        for code in np.unique(codes).tolist():
            who = strings[code]
            picked = np.flatnonzero(codes == code)
            rows = picked.tolist()
            columns.order.setdefault(who, []).extend([ids[i] for i in rows])
            columns.situations.setdefault(who, []).extend([sits[i] for i in rows])
            columns.outcomes.setdefault(who, []).extend([outs[i] for i in rows])
            columns.flags.setdefault(who, []).append((ends[picked], corrected[picked]))
            state.closed_seq[who] = max(state.closed_seq.get(who, -1), int(last[picked].max()))

    def _recompute(self, principal: str, row: int) -> np.ndarray:
        """The problem vector of a partition row computed from its episode's entries (the exact way)."""
        episode = self.state.index.partition(principal).episodes[row]
        parts = self.store.entry_parts(list(episode.entry_ids))
        return pipeline.problem_of(self.state, episode, [parts[i] for i in episode.entry_ids if i in parts]).vector

    def _load_bounds(self, principal: str, reader: RunReader, runs: list[snapshot.Run]) -> None:
        """Install a partition's relevance bounds from the runs' stored projections.

        The basis is the one the latest runs used; rows of runs stored before it (or with
        another) are projected here. Without any stored basis the bounds are fitted on first use,
        and until then the partition holds its vectors (it is scored in full on every recall).
        """
        part = self.state.index.partition(principal)
        digest = next((run.bases[principal] for run in reversed(runs) if run.bases[principal] is not None), None)
        basis = stored_bounds.read_basis(self.store, principal, digest) if digest is not None else None
        proj, resid = reader.proj.get(principal), reader.resid.get(principal)
        if (
            basis is None
            or proj is None
            or basis.shape != (self.dim, proj.shape[1])
            or len(part) < max(self.retriever.prune_from, 1)
        ):
            if part.source is not None:
                part.adopt(part.source)  # no bounds: its rows come back into memory, the source kept as spare
            return
        empty = Bounds.from_parts(basis, np.zeros((0, basis.shape[1])), np.zeros(0))
        stored = stored_bounds.StoredProjections(self.store)
        for run in runs:
            if run.bases[principal] != digest:
                rows = slice(run.offsets[principal], run.offsets[principal] + run.rows[principal])
                name = stored_bounds.projections_id(principal, digest, run)
                found = stored.read(name, rows.stop - rows.start, basis.shape[1])
                if found is None:  # projected here, and stored once opening is over
                    found = empty.split(part.vectors(np.arange(rows.start, rows.stop)))
                    self.projected.append((name, found[0], found[1].astype(np.float32)))
                proj[rows], resid[rows] = found
        part.bounds = Bounds.from_parts(basis, proj[: len(part)], resid[: len(part)])

    def _index_records(self, stored: list[Episode], before: int, index_stored: Any) -> None:
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
                    self.state.index_episode(episode, Problem(text, vector), cites.get(episode.id, []))
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

    def persist(self, changes: Any) -> None:
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
        chunk: list[tuple[int, str, str, str]] = []
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

    def _run_rows(self, episodes: int) -> list[tuple[int, str, str, str]] | None:
        """The records after the last run up to its `episodes`-th episode's (None: the store ends before)."""
        rows: list[tuple[int, str, str, str]] = []
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

    def _write_run(self, rows: list[tuple[int, str, str, str]]) -> bool:
        """Store one run for these records (which must follow `covered`); False when this memory cannot."""
        state = self.state
        episodes = [state.episodes.get(i) for _, kind, i, _ in rows if kind == RecordKind.EPISODE]
        if any(ep is None or ep.id not in state.problems for ep in episodes):
            return False  # stored by another process and not indexed here
        edges = [(i, json.loads(body)) for _, kind, i, body in rows if kind == RecordKind.EDGE]
        facts = [json.loads(body) for _, kind, _, body in rows if kind == RecordKind.FACT]
        marks = [(i, json.loads(body)["episode"]) for _, kind, i, body in rows if kind == RecordKind.MARK]
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
        )
        name = run_id(meta)
        name = snapshot.free_id({i for _, i, _ in self.store.snapshot_index(snapshot.RUN) if i.startswith(name)}, name)
        self.store.add_snapshot(snapshot.RUN, name, meta, body)
        self.covered = rows[-1][0]
        for who, (first, counts, palettes, _, checksums) in (sidecar or {}).items():
            self._release(who, [ep.id for ep in episodes if ep.principal == who], first, counts, palettes, checksums)
        return True

    def _to_sidecar(self, episodes: list[Episode], problems: list[Problem]) -> dict[str, tuple] | None:
        """Append the episodes' vectors to the sidecar, durably: principal → `VectorFile.append` + (digests, checksums);
        None without one, or when it cannot be written (the run keeps its vectors, as format 1 does)."""
        written: dict[str, tuple] = {}
        try:
            for who in dict.fromkeys(ep.principal for ep in episodes) if self.sidecar is not None else ():
                vectors = np.stack([p.vector for p, ep in zip(problems, episodes) if ep.principal == who])
                written[who] = (*self.sidecar.append(vectors), row_digests(vectors), row_checksums(vectors))
        except OSError as exc:
            log.warning("%s: cannot write the vectors sidecar (%s); this run keeps its vectors", self.sidecar.path, exc)
            return None
        return written if self.sidecar is not None else None

    def _release(
        self,
        principal: str,
        ids: list[str],
        first: int,
        counts: np.ndarray,
        palettes: np.ndarray,
        checksums: np.ndarray,
    ) -> None:
        """The rows just written to the sidecar are read from there from now on, and no longer held here."""
        part = self.state.index.partition(principal)
        source = part.spare if isinstance(part.spare, StoredRows) else None
        if source is None:
            if part.stored:
                return
            source = StoredRows(self.dim, lambda row, who=principal: self._recompute(who, row))
        if [part.position.get(i) for i in ids] != list(range(len(source), len(source) + len(ids))):
            return  # not the partition's next rows (episodes another process stored): they stay held here
        source.add_file(
            self.sidecar, row_offsets(first, self.dim, counts, palettes), counts, checksums, palettes, checked=True
        )
        part.adopt(source)
        problems, episodes = self.state.problems, self.state.episodes
        if hasattr(problems, "defer") and hasattr(episodes, "defer"):
            for episode_id in ids:  # their vectors are read back from the sidecar when asked for
                problems.defer([episode_id], problems[episode_id].text)
            episodes.defer(ids)  # and the episodes from their records
            if not isinstance(part.episodes, EpisodeList):
                part.episodes = EpisodeList([ep.id for ep in part.episodes], episodes)


class _Columns:
    """Per-principal columns gathered from the runs while opening."""

    def __init__(self) -> None:
        self.order: dict[str, list[str]] = {}
        self.situations: dict[str, list[str]] = {}
        self.outcomes: dict[str, list[Outcome]] = {}
        self.flags: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}  # (ends, corrected) chunks
