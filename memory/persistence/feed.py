"""The write path: timeline entries fed to the segmenter, closed episodes stored, indexed and learned from.

`Feed` keeps a memory's derived state and its stored records in step with the timeline.
Entries go to the segmenter in timeline order; each episode it closes is stored, indexed in
the state (`memory.state`), and what the learning pipeline decides about it
(`memory.pipeline`) is stored, then applied. Before an entry of its own, a process feeds the
entries others appended (`catch_up`), closing open episodes at the flush points they stored
(`memory.persistence.flushes`), so its state equals a replay of the timeline. On open it
redoes learning interrupted after an episode was stored, and feeds the entries after the
last closed episode again (`open`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

import memory.pipeline as pipeline
from memory.episodes import Episode, Segmenter
from memory.persistence.flushes import FlushPoints
from memory.persistence.loader import StoredState
from memory.pipeline import Learning
from memory.state import MemoryState
from memory.timeline import Entry, EntryParts, RecordKind, Store
from memory.timeline.erasure import is_erased
from memory.window import RecentEntries


class Feed:
    """Feeds one memory's timeline to its segmenter and keeps its state and records in step (see the module).

    Args:
        store: the memory's store.
        state: its derived state.
        stored: the records side of the state (`StoredState`: opening, storing changes, state runs).
        segmenter: the segmenter entries are fed to.
        learning: the learning pipeline's configuration.
    """

    def __init__(
        self, store: Store, state: MemoryState, stored: StoredState, segmenter: Segmenter, learning: Learning
    ) -> None:
        self.store = store
        self.state = state
        self.stored = stored
        self.segmenter = segmenter
        self.learning = learning
        self.reinforcements: list[pipeline.Reinforcement] = []  # what each episode closed in this process changed
        self.recent = RecentEntries(store)
        self.seen = -1  # the last timeline seq fed to the segmenter; later ones were written by others
        self.flushes = FlushPoints(store)

    def store_flush_point(self) -> bool:
        """Store a flush point at the timeline's head (`FlushPoints.store_point`); whether anything is open."""
        return self.flushes.store_point(self.catch_up, self.segmenter.has_open)

    def catch_up(self, stop: int | None = None) -> int:
        """Feed the entries others appended since the last one fed (up to `stop`) in timeline order, closing open
        episodes at the flush points they stored, so projections equal `rebuild()`; the last seq fed."""
        # read first: a SQLite read cursor left open would keep the writes below from starting
        new = list(self.store.entries(start=self.seen + 1, stop=stop)) if stop is None or stop > self.seen + 1 else []
        self.flushes.poll()  # after the read: a flush point before any entry read was stored before it
        for entry in new:
            self._flush_before(entry.seq)
            self.ingest(entry)
        self._flush_before(self.seen + 1 if stop is None else stop)
        return self.seen

    def _flush_before(self, seq: int) -> None:
        for _ in range(self.flushes.take_before(seq)):  # each flush point another process stored before `seq`
            self.close_open()

    def close_open(self) -> list[Episode]:
        """Close every open episode now, storing, indexing and learning from each; the episodes."""
        closed = self.segmenter.flush()
        for episode in closed:
            self._close(episode)
        return closed

    def ingest(self, entry: Entry) -> None:
        """Feed one entry (unless erased, or already covered by a closed episode of its principal)."""
        self.seen = max(self.seen, entry.seq)
        if is_erased(entry) or entry.seq <= self.state.closed_seq.get(entry.principal, -1):
            return
        self.recent.add(entry)
        for episode in self.segmenter.feed(entry):
            self._close(episode)

    def _close(self, episode: Episode) -> None:
        """Store, index and learn from one closed episode."""
        self.store.add_records(RecordKind.EPISODE, [(episode.id, episode.to_record())])
        entries = self.store.get_many(list(episode.entry_ids))
        self.index(episode, entries)
        self._learn(episode, entries)

    def index(self, episode: Episode, entries: Sequence[Entry | EntryParts]) -> None:
        """Index a closed episode in the state: its problem and the facts its decisions cited."""
        problem = pipeline.problem_of(self.state, episode, entries)
        self.state.index_episode(episode, problem, pipeline.cited_facts(entries))
        self.stored.indexed()

    def _learn(self, episode: Episode, entries: Sequence[Entry]) -> None:
        changes = pipeline.close_episode(self.state, episode, entries, learning=self.learning)
        self.stored.persist(changes)
        if changes.marks:
            self.reinforcements.append(changes.reinforcement)
        pipeline.apply(self.state, changes)

    def open(self) -> None:
        """Rebuild the state from the store, finish interrupted learning, resume open episodes."""
        opened = self.stored.open(self.index)
        for episode_id in opened.unlearned:  # a pipeline interrupted after storing the episode resumes here
            episode = self.state.episodes[episode_id]
            self._learn(episode, self.store.get_many(list(episode.entry_ids)))
        self.stored.opened()
        if opened.resume_from >= 0:  # entries of episodes closed and stored before are not fed again
            self.seen = opened.resume_from - 1
            self.flushes.resume(self.seen)
            self.catch_up()

    def replay(
        self,
        entries: Iterable[Entry],
        points: Collection[int],
        erase: Collection[int],
        copy: Callable[[Entry], None],
        flush: Callable[[], object],
    ) -> None:
        """Feed another store's timeline into this fresh memory: each entry copied into this store (`copy`,
        with its seq and id), then fed unless its seq is in `erase` or it is erased; `flush` is called where
        that store's flush `points` are (after the entry a point names, or, when that entry is erased, before
        the next one), so this memory closes the same episodes."""
        pending = sorted(points, reverse=True)
        for entry in entries:
            while pending and pending[-1] < entry.seq:
                pending.pop()
                flush()
            copy(entry)
            if entry.seq in erase or is_erased(entry):
                self.seen = entry.seq
            else:
                self.ingest(entry)
        for _ in pending:
            flush()
