"""Opening from state runs: the runs' episodes, graph nodes and edges, partitions and bounds put in a state.

`RunLoader.load` reads the usable runs of a store (`memory.persistence.run_reader`) into a
fresh `memory.state.MemoryState` made by `memory.persistence.lazy.lazy_state`: episodes and
problems deferred (read on first use), graph nodes and edges added, each principal's partition
of the recall index loaded with the runs' columns and vectors, and its relevance bounds
installed from the stored projections. `memory.persistence.loader` does the rest of opening.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from memory.episodes import Outcome
from memory.graph import add_edge_rows, add_episode_rows
from memory.persistence import runs as snapshot
from memory.persistence import stored_bounds
from memory.persistence.lazy import EpisodeList, LazyMap
from memory.persistence.run_reader import RunReader
from memory.persistence.vectors import VectorFile
from memory.retrieval.bounds import Bounds
from memory.state import MemoryState
from memory.timeline import Store

LateEdge = tuple[str, str, Any, float, str]  # (source, target, type, weight, evidence) of a run's edge


class RunLoader:
    """Loads a store's state runs into a state (see the module docstring).

    Args:
        store: the store.
        state: the state to fill (`lazy_state`: its episodes and problems are deferred).
        config: `runs.config_digest` of the graph rules (runs made under others are not used).
        dim: encoder dimension.
        prune_from: the recall configuration's `prune_from` (smaller partitions get no bounds).
        use_runs: read the runs (False: none is read, every record loads the exact way).
        sidecar: the store's vectors sidecar (None: runs keeping their vectors there are not used).
        recompute: ``(principal, row) → vector`` from the episode's entries (a row failing its checksum).
        projected: where rows projected here on a later basis go, to be stored once opening is over.
    """

    def __init__(
        self,
        store: Store,
        state: MemoryState,
        *,
        config: str,
        dim: int,
        prune_from: int,
        use_runs: bool,
        sidecar: VectorFile | None,
        recompute: Callable[[str, int], np.ndarray],
        projected: list[tuple[str, np.ndarray, np.ndarray]],
    ) -> None:
        self.store = store
        self.state = state
        self.config = config
        self.dim = dim
        self.prune_from = prune_from
        self.use_runs = use_runs
        self.sidecar = sidecar
        self.recompute = recompute
        self.projected = projected

    def load(self) -> tuple[list[snapshot.Run], list[LateEdge]]:
        """Load the state runs: episodes (read on first use), nodes, edges, partitions and bounds.

        Returns the runs and the edges of theirs that wait for episodes stored after them
        (none when a single process wrote the store): the exact load adds every node first.
        """
        kind = snapshot.RUN if self.use_runs else None
        reader = RunReader(
            self.store, config=self.config, dim=self.dim, kind=kind, sidecar=self.sidecar, recompute=self.recompute
        )
        runs: list[snapshot.Run] = []
        late: list[LateEdge] = []
        columns = _Columns()
        episodes = cast(LazyMap, self.state.episodes)  # `lazy_state` made it
        for run in reader:
            runs.append(run)
            self._add_run_nodes(run, columns)
            edges = run.edges
            if not late and episodes.has_all({s for s, *_ in edges} | {t for _, t, *_ in edges}):
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
        principals = [cast(str, strings[c]) for c in codes.tolist()]  # every episode has a principal
        sits = cast(list[str], run.decoded("situation"))  # and a situation
        codes_out = run.column("outcome").tolist()
        outs = [snapshot.OUTCOMES[c] for c in codes_out]
        cast(LazyMap, state.episodes).defer(ids)  # `lazy_state` made them lazy
        cast(LazyMap, state.problems).defer(ids, run)
        state.cites.update(run.cites)
        state.counted_runs.append(run)
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
            who = cast(str, strings[code])
            picked = np.flatnonzero(codes == code)
            rows = picked.tolist()
            columns.order.setdefault(who, []).extend([ids[i] for i in rows])
            columns.situations.setdefault(who, []).extend([sits[i] for i in rows])
            columns.outcomes.setdefault(who, []).extend([outs[i] for i in rows])
            columns.flags.setdefault(who, []).append((ends[picked], corrected[picked]))
            state.closed_seq[who] = max(state.closed_seq.get(who, -1), int(last[picked].max()))

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
            digest is None
            or basis is None
            or proj is None
            or resid is None
            or basis.shape != (self.dim, proj.shape[1])
            or len(part) < max(self.prune_from, 1)
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


class _Columns:
    """Per-principal columns gathered from the runs while opening."""

    def __init__(self) -> None:
        self.order: dict[str, list[str]] = {}
        self.situations: dict[str, list[str]] = {}
        self.outcomes: dict[str, list[Outcome]] = {}
        self.flags: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}  # (ends, corrected) chunks
