"""Containers filled on first use, so that opening a large store does not read what recall never needs.

`LazyMap` holds episodes and problems whose values are read from the store (or a state run)
when first asked for; `LazySet` holds edge and mark ids whose members come from state runs
when first asked for (digests as bytes); `EpisodeList` gives a partition's episodes by row
through such a map; `StoredEpisodes` gives the episode records after a point a slice at a time;
`RunTexts` reads problem texts from the runs, which keep them compressed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, MutableSequence, MutableSet, Sequence
from typing import Any, cast

import numpy as np

from memory.episodes import Episode
from memory.graph import GraphConfig
from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.persistence import runs as snapshot
from memory.persistence.digests import DIGEST, sorted_distinct
from memory.persistence.record_fields import converted
from memory.retrieval.index import EpisodeIndex
from memory.state import EpisodeProblem, MemoryState, Verdict
from memory.timeline import RecordKind, Store
from memory.timeline.record_body import decoded


class _Later:
    """Marks values not read yet, with where to read them from."""

    __slots__ = ("source",)

    def __init__(self, source: Any) -> None:
        self.source = source


class LazyMap(MutableMapping):
    """A dict whose deferred values are read on first use by ``read(key, source)``, in insertion order.

    Used for episodes (each value is `Episode.from_record` of the stored record, as an exact
    load makes it) and problems; keys, order and length are there from the start.
    """

    def __init__(self, read: Callable[[Any, Any], Any]) -> None:
        self._read = read
        self._known: dict[Any, Any] = {}

    def defer(self, keys: Iterable[Any], source: Any = None) -> None:
        """Add keys whose values are read on first use."""
        self._known.update(dict.fromkeys(keys, _Later(source)))

    def __getitem__(self, key: Any) -> Any:
        value = self._known[key]
        if type(value) is _Later:
            value = self._read(key, value.source)
            if value is None:
                raise KeyError(key)
            self._known[key] = value
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return key in self._known

    def unread(self, key: Any) -> bool:
        """Whether the value of `key` is still to be read."""
        return type(self._known.get(key)) is _Later

    def source(self, key: Any) -> Any:
        """Where the value of `key` is to be read from (the `defer` source); None once read, or unknown."""
        value = self._known.get(key)
        return value.source if type(value) is _Later else None

    def has_all(self, keys: set[Any]) -> bool:
        """Whether every one of `keys` is a key."""
        return self._known.keys() >= keys

    def __setitem__(self, key: Any, value: Any) -> None:
        self._known[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._known[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._known)

    def __len__(self) -> int:
        return len(self._known)


class LazySet(MutableSet):
    """A set of ids with members still to be added by loaders, run on first use.

    A loader gives strings, or SHA-256 digests as bytes (numpy ``S32``: `runs.Run.id_list` reads a
    run's edge and mark ids so, without a string per id). Those are held as one sorted array, 32
    bytes an id instead of a string in a set (about 175 MB at a million episodes); an id among them
    is its lower-case hex string. It behaves as a set of the ids as given.
    """

    def __init__(self) -> None:
        self._members: set[Any] = set()  # ids not among `_digests`
        self._pending: list[Callable[[], Iterable[Any]]] = []
        self._digests = np.zeros(0, dtype=DIGEST)  # sorted, distinct

    def defer(self, load: Callable[[], Iterable[Any]]) -> None:
        self._pending.append(load)

    def _ready(self) -> None:
        if not self._pending:
            return
        packed = [self._digests]
        while self._pending:
            found = self._pending.pop(0)()
            if isinstance(found, np.ndarray):
                packed.append(found)
            else:
                self._members.update(found)
        if len(packed) > 1:
            self._digests = sorted_distinct(np.concatenate(packed))
        self._members = {i for i in self._members if not self._packed(i)}

    def _packed(self, item: object) -> bool:
        """Whether `item` is the hex string of one of the digests."""
        if type(item) is not str or len(item) != 64 or not len(self._digests) or not _HEX.fullmatch(item):
            return False
        key = bytes.fromhex(item)
        at = int(np.searchsorted(self._digests, key))
        return at < len(self._digests) and self._digests[at] == key.rstrip(b"\0")  # numpy strips them too

    def __contains__(self, item: object) -> bool:
        self._ready()
        return item in self._members or self._packed(item)

    def __iter__(self) -> Iterator[Any]:
        self._ready()
        yield from self._members
        for digest in self._digests.tolist():
            yield digest.ljust(32, b"\0").hex()

    def __len__(self) -> int:
        self._ready()
        return len(self._members) + len(self._digests)

    def add(self, item: Any) -> None:
        if self._pending or not self._packed(item):  # one among pending digests is dropped when they load
            self._members.add(item)

    def discard(self, item: Any) -> None:
        self._ready()
        if self._packed(item):
            self._digests = np.delete(self._digests, int(np.searchsorted(self._digests, bytes.fromhex(item))))
        self._members.discard(item)

    def update(self, items: Iterable[Any]) -> None:
        for item in items:
            self.add(item)

    @classmethod
    def _from_iterable(cls, items: Iterable[Any]) -> set[Any]:
        return set(items)  # what set operations with another set give


_HEX = re.compile(r"[0-9a-f]{64}")  # a SHA-256 digest in lower-case hex


class EpisodeList(MutableSequence):
    """A partition's episodes by row: ids, each episode looked up (and so read lazily) on use."""

    def __init__(self, ids: Iterable[str], lookup: Mapping[str, Episode]) -> None:
        self._ids = list(ids)
        self._lookup = lookup

    def __getitem__(self, row: Any) -> Any:
        if isinstance(row, slice):
            return [self._lookup[i] for i in self._ids[row]]
        return self._lookup[self._ids[row]]

    def __len__(self) -> int:
        return len(self._ids)

    def id_at(self, row: int) -> str:
        """The id of the episode at a row, without reading the episode."""
        return self._ids[row]

    def __setitem__(self, row: Any, episode: Any) -> None:
        raise TypeError("partition rows are append-only")

    def __delitem__(self, row: Any) -> None:
        raise TypeError("partition rows are append-only")

    def insert(self, row: int, episode: Episode) -> None:
        if row != len(self._ids):
            raise TypeError("partition rows are append-only")
        self._ids.append(episode.id)

    def append(self, episode: Episode) -> None:
        self._ids.append(episode.id)


class StoredEpisodes(Sequence):
    """The episode records stored after record `after`, in storing order, read a slice at a time
    (an exact open then holds the episodes of one chunk, not all of them, while it indexes).

    Only their records seqs and ids are kept; a slice reads its records again. `window` is
    how many records one read spans.
    """

    def __init__(self, store: Store, after: int, window: int = 20_000) -> None:
        self._store = store
        self.seqs: list[int] = []
        self.ids: list[str] = []
        last = store.last_record()
        while after < last:
            for seq, kind, record_id, _ in store.record_rows(after, after + window, bodies=()):
                if kind == RecordKind.EPISODE:
                    self.seqs.append(seq)
                    self.ids.append(record_id)
            after += window

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, slice):
            return self[index : index + 1 if index != -1 else None][0]
        start, stop, step = index.indices(len(self))
        if step != 1:
            raise ValueError("stored episodes are read in storing order (step 1)")
        if start >= stop:
            return []
        rows = self._store.record_rows(self.seqs[start] - 1, self.seqs[stop - 1], bodies=(RecordKind.EPISODE.value,))
        path = self._store.path
        return [
            converted(Episode.from_record, decoded(path, kind, i, cast(str, body), seq), path, kind, i, seq)
            for seq, kind, i, body in rows
            if kind == RecordKind.EPISODE  # read with its body
        ]


class RunTexts:
    """Problem texts read from state runs (`runs.Run.texts`), the last run's decoded list kept: episodes are
    read mostly in storing order (a principal's evidence, a run's rows one after another), so each run's
    texts are decoded about once per pass, and only one run's are held decoded (all of them took 25 MB at
    100,000 episodes, kept compressed they take 2)."""

    def __init__(self) -> None:
        self._last: tuple[snapshot.Run | None, list[str]] = (None, [])  # one tuple: read and replaced at once

    def at(self, run: snapshot.Run, row: int) -> str:
        """The problem text of the episode at a row of `run`."""
        last = self._last
        if last[0] is not run:
            last = self._last = (run, run.texts())
        return last[1][row]


def _episode_reader(store: Store) -> Callable[[str, Any], Episode | None]:
    """What reads a deferred episode from its record (None when the store holds none)."""

    def read_episode(episode_id: str, _: Any) -> Episode | None:
        body = store.record(RecordKind.EPISODE, episode_id)
        return (
            converted(Episode.from_record, body, store.path, RecordKind.EPISODE.value, episode_id)
            if body is not None
            else None
        )

    return read_episode


def lazy_state(
    index: EpisodeIndex, graph_config: GraphConfig, store: Store, lexicon: Lexicon = DEFAULT_LEXICON
) -> MemoryState:
    """A state whose episodes and problems can be read from `store` on first use (its rules read `lexicon`).

    Its hooks answer from a state run's columns, without reading, for an episode not read yet:
    `problem_text` (no vector is read), `verdict_of` and `verdict_lookup` (no record is read).
    """

    def read_problem(episode_id: str, source: snapshot.Run | str) -> EpisodeProblem:
        return EpisodeProblem(text_in(episode_id, source), state.index.vector(episode_id))

    def problem_text(episode_id: str) -> str:
        source = problems.source(episode_id)
        return state.problems[episode_id].text if source is None else text_in(episode_id, source)

    def text_in(episode_id: str, source: snapshot.Run | str) -> str:  # a run's, or what a released problem kept
        return source if isinstance(source, str) else texts.at(source, source.row(episode_id))

    def unread_in_run(episode_id: str) -> tuple[snapshot.Run, int] | None:
        run = problems.source(episode_id)
        if not isinstance(run, snapshot.Run) or not episodes.unread(episode_id):
            return None
        return run, run.row(episode_id)

    def verdict_in_run(episode_id: str) -> tuple[Verdict, snapshot.Run, int] | None:
        if (found := unread_in_run(episode_id)) is None:
            return None
        run, row = found
        outcome, choice, end, who, first_seq, last_seq = run.verdict(row)
        return (
            Verdict(episode_id, who, (choice,) if choice is not None else (), outcome, end, first_seq, last_seq),
            run,
            row,
        )

    def verdict_of(episode_id: str) -> tuple[Verdict, str] | None:
        known = verdict_in_run(episode_id)
        return None if known is None else (known[0], texts.at(known[1], known[2]))

    def verdict_lookup(episode_id: str) -> Episode | Verdict | None:  # no problem text: the run's stay unread
        known = verdict_in_run(episode_id)
        return known[0] if known is not None else state.episodes_lookup(episode_id)

    episodes, problems, texts = LazyMap(_episode_reader(store)), LazyMap(read_problem), RunTexts()
    state = MemoryState(
        index,
        graph_config,
        episodes=episodes,
        problems=problems,
        edge_ids=LazySet(),
        marks=LazySet(),
        lexicon=lexicon,
    )
    state.verdict_of, state.problem_text, state.verdict_lookup = verdict_of, problem_text, verdict_lookup
    return state
