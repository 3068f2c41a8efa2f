"""Episode vectors per principal: the matrix recall scores, grown one episode at a time or
bulk-loaded from a snapshot."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

import numpy as np

from memory.episodes import Episode, Outcome
from memory.retrieval.bounds import BASIS_SAMPLE, GROWTH, Bounds
from memory.retrieval.config import CORRECTION_BONUS, OUTCOME_VALUE


class Partition:
    """One principal's episodes and a growing matrix of their unit vectors.

    The leading rows may be kept elsewhere (`adopt`): a source with ``len`` and
    ``read(rows) -> float32 vectors`` (`memory.persistence.vectors.StoredRows`) then serves
    them, and only the rows after it are held here. `vectors` reads rows from either. Only a
    partition with relevance bounds reads from its source (recall then reads the few rows it
    scores exactly); one without them is scored in full on every recall, so it holds its rows
    and keeps the source (`spare`) until bounds are fitted.
    """

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.episodes: list[Episode] = []
        self.position: dict[str, int] = {}
        self._matrix = np.zeros((16, dim), dtype=np.float32)  # rows from `_stored` on (rows of `_source` are not here)
        self._source: Any = None
        self._stored = 0  # leading rows served by `_source`
        self._spare: Any = None  # a source of leading rows this partition also holds (it has no bounds yet)
        self._ends = np.zeros(16, dtype=np.float64)
        self._outcomes = np.zeros(16, dtype=np.float64)
        self._situations = np.zeros(16, dtype=np.int32)
        self.situation_codes: dict[str, int] = {}
        self.bounds: Bounds | None = None  # fitted on first use once the partition is large enough (`bounded`)
        self.cache: dict[tuple, tuple[Any, ...]] = {}  # query-independent score parts, by their inputs
        self._latest: tuple[int, float] = (-1, 0.0)  # (rows, the latest end among them) once asked for

    def __len__(self) -> int:
        return len(self.episodes)

    def reserve(self, capacity: int) -> None:
        """Make room for `capacity` rows at once (a bulk load then copies the matrix once, not log n times)."""
        extra = capacity - len(self._ends)
        if extra > 0:
            self._ends, self._outcomes, self._situations = (
                _grown(a, extra) for a in (self._ends, self._outcomes, self._situations)
            )
        held = capacity - self._stored - len(self._matrix)
        if held > 0:
            self._matrix = _grown(self._matrix, held)

    def add(self, episode: Episode, vector: np.ndarray) -> None:
        """Append an episode's row (its bounds too, once they are fitted)."""
        n = len(self.episodes)
        local = n - self._stored
        if n == len(self._ends):  # growing by a fraction keeps appends O(1) amortized
            self._ends, self._outcomes, self._situations = (
                _grown(a, max(n // GROWTH, 16)) for a in (self._ends, self._outcomes, self._situations)
            )
        if local == len(self._matrix):  # the matrix holds only the rows after the source's
            self._matrix = _grown(self._matrix, max(local, 16))
        self._matrix[local] = vector
        self._ends[n] = episode.end.timestamp()
        self._outcomes[n] = min(
            1.0, OUTCOME_VALUE[episode.outcome] + (CORRECTION_BONUS if episode.corrections else 0.0)
        )
        code = self.situation_codes.setdefault(episode.situation, len(self.situation_codes))
        self._situations[n] = code
        self.position[episode.id] = n
        self.episodes.append(episode)
        if self.bounds is not None:
            self.bounds.extend(self._matrix[local : local + 1])
        if self.cache:
            self.cache.clear()

    def load(
        self,
        episodes: list[Episode] | Any,
        ids: Sequence[str],
        matrix: np.ndarray | Any,
        ends: np.ndarray,
        outcomes: Sequence[Outcome],
        corrected: np.ndarray,
        situations: Sequence[str],
    ) -> None:
        """Bulk-load rows into an empty partition; the same state as `add` of each row in order.

        `episodes` is the row list the partition keeps (it may read episodes lazily; it must
        support `append` for later rows). `matrix` holds the rows' vectors, or is a source
        that reads them on demand (see the class docstring).
        """
        if len(self):
            raise ValueError("bulk loading needs an empty partition")
        n = len(ids)
        if not n:
            return
        if isinstance(matrix, np.ndarray):
            self._matrix = np.ascontiguousarray(matrix, dtype=np.float32).reshape(n, -1)  # adopted when it is float32
            self._source, self._stored, self._spare = None, 0, None
        else:
            if len(matrix) != n:
                raise ValueError(f"the vector source holds {len(matrix)} rows, not {n}")
            self._matrix = np.zeros((16, self.dim), dtype=np.float32)
            self._source, self._stored, self._spare = matrix, n, None
        self._ends = np.array(ends, dtype=np.float64)
        value = {o: OUTCOME_VALUE[o] for o in Outcome}
        self._outcomes = np.array(
            [
                min(1.0, value[o] + (CORRECTION_BONUS if c else 0.0))
                for o, c in zip(outcomes, np.asarray(corrected).tolist())
            ],
            dtype=np.float64,
        )
        codes = self.situation_codes
        self._situations = np.array([codes.setdefault(s, len(codes)) for s in situations], dtype=np.int32)
        self.position = dict(zip(ids, range(n)))
        self.episodes = episodes
        self.bounds = None
        self.cache.clear()

    def adopt(self, source: Any) -> None:
        """Let `source` serve the leading ``len(source)`` rows (which it must hold as they are) and drop them
        here; without bounds, keep them and `source` as the `spare` (see the class docstring)."""
        count = len(source)
        if not self._stored <= count <= len(self):
            raise ValueError(f"a source of {count} rows cannot replace the {self._stored} stored of {len(self)}")
        if self.bounds is None:
            if self._source is not None:  # back into memory: scored in full from now on
                self._matrix = np.concatenate(
                    [self._source.read(np.arange(self._stored)), self._matrix[: len(self) - self._stored]]
                )
                self._source, self._stored = None, 0
            self._spare = source
            return
        self._matrix = self._matrix[count - self._stored :].copy()
        self._source, self._stored, self._spare = source, count, None

    @property
    def spare(self) -> Any:
        """The source of the leading rows, whether it serves them (`source`) or they are held here."""
        return self._source if self._source is not None else self._spare

    @property
    def source(self) -> Any:
        """What serves the leading `stored` rows (None when all are held here)."""
        return self._source

    def ids(self, rows: int | None = None) -> Iterator[str]:
        """The episode ids of the first `rows` rows (of every row when None), in row order."""
        return islice(self.position, rows)  # `position` gains each row's id as the row is added

    def episode_id(self, row: int) -> str:
        """The id of the episode at a row (a lazily read row list gives it without reading the episode)."""
        id_at = getattr(self.episodes, "id_at", None)
        return id_at(row) if id_at is not None else self.episodes[row].id

    @property
    def held_bytes(self) -> int:
        """Bytes of vectors held in memory, room for later rows included (a source's rows on disk are not)."""
        return self._matrix.nbytes + int(getattr(self._source, "resident_bytes", lambda: 0)())

    @property
    def stored(self) -> int:
        """Leading rows read from the source on demand (0 when all are held here)."""
        return self._stored

    def vectors(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Vectors (float32) of `rows`, or of every row, in the order given."""
        n = len(self.episodes)
        if self._source is None:
            return self._matrix[:n] if rows is None else self._matrix[:n][rows]
        rows = np.arange(n) if rows is None else np.asarray(rows, dtype=np.intp).reshape(-1)
        old = rows < self._stored
        if old.all():
            return self._source.read(rows)
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        out[old] = self._source.read(rows[old])
        out[~old] = self._matrix[rows[~old] - self._stored]
        return out

    def bounded(self, prune_from: int) -> Bounds | None:
        """The relevance bounds of this partition, fitted on first use once it has `prune_from` rows."""
        if self.bounds is None and len(self) >= max(prune_from, 1):
            bounds = Bounds(self.vectors(np.arange(min(BASIS_SAMPLE, len(self)))))
            for start in range(0, len(self), 16384):  # rows read from a source come in chunks
                bounds.extend(self.vectors(np.arange(start, min(start + 16384, len(self)))))
            self.bounds = bounds
            if self._spare is not None:  # pruned from now on: the source serves its rows
                self.adopt(self._spare)
        return self.bounds

    @property
    def matrix(self) -> np.ndarray:
        """Every row's vector (read from the source, when there is one: a copy)."""
        return self.vectors()

    def latest_end(self) -> float:
        """The latest end (a timestamp) of the episodes of a non-empty partition, kept until a row is added
        (rows are only ever added: their ends never change)."""
        rows, latest = self._latest
        if rows != len(self.episodes):
            latest = float(self.ends.max())
            self._latest = (len(self.episodes), latest)
        return latest

    @property
    def ends(self) -> np.ndarray:
        return self._ends[: len(self.episodes)]

    @property
    def outcomes(self) -> np.ndarray:
        return self._outcomes[: len(self.episodes)]

    @property
    def situations(self) -> np.ndarray:
        return self._situations[: len(self.episodes)]


def _grown(array: np.ndarray, more: int) -> np.ndarray:
    """`array` with `more` zero rows appended."""
    return np.concatenate([array, np.zeros((more, *array.shape[1:]), dtype=array.dtype)])


class EpisodeIndex:
    """Episode vectors partitioned by principal, appended incrementally."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._parts: dict[str, Partition] = {}
        self._owner: dict[str, str] = {}

    def add(self, episode: Episode, vector: np.ndarray) -> None:
        """Index a closed episode with its unit vector (re-adding an id is a no-op)."""
        if episode.id in self._owner:
            return
        part = self._parts.get(episode.principal)
        if part is None:
            part = self._parts[episode.principal] = Partition(self.dim)
        part.add(episode, vector)
        self._owner[episode.id] = episode.principal

    def reserve(self, counts: dict[str, int]) -> None:
        """Make room for this many more episodes per principal."""
        for principal, count in counts.items():
            part = self._parts.setdefault(principal, Partition(self.dim))
            part.reserve(len(part) + count)

    def load(
        self,
        principal: str,
        episodes: list[Episode] | Any,
        ids: Sequence[str],
        matrix: np.ndarray,
        ends: np.ndarray,
        outcomes: Sequence[Outcome],
        corrected: np.ndarray,
        situations: Sequence[str],
    ) -> Partition:
        """Bulk-load a principal's episodes into its (empty) partition; see `Partition.load`."""
        part = self._parts.get(principal)
        if part is None:
            part = self._parts[principal] = Partition(self.dim)
        part.load(episodes, ids, matrix, ends, outcomes, corrected, situations)
        self._owner.update(dict.fromkeys(ids, principal))
        return part

    def vector(self, episode_id: str) -> np.ndarray:
        """The vector of an indexed episode (KeyError when it is not indexed)."""
        part = self._parts[self._owner[episode_id]]
        return part.vectors(np.array([part.position[episode_id]]))[0]

    def place(self, episode_id: str) -> int | None:
        """An indexed episode's row in its principal's partition: its place in the principal's closing order."""
        owner = self._owner.get(episode_id)
        return None if owner is None else self._parts[owner].position[episode_id]

    def partition(self, principal: str) -> Partition:
        """The principal's partition (empty when unknown)."""
        return self._parts.get(principal) or Partition(self.dim)

    def get(self, episode_id: str) -> Episode | None:
        """An indexed episode by id, whatever its principal."""
        owner = self._owner.get(episode_id)
        if owner is None:
            return None
        part = self._parts[owner]
        return part.episodes[part.position[episode_id]]

    def __len__(self) -> int:
        return len(self._owner)


def episode_vector(
    observations: np.ndarray, others: np.ndarray | None = None, *, other_weight: float = 0.5
) -> np.ndarray:
    """Unit vector of an episode: mean of its observation embeddings plus weighted other embeddings.

    Args:
        observations: embeddings (rows) of the observations of the problem it worked on.
        others: embeddings of instructive entries (corrections), weighted by `other_weight`.
    """
    parts = []
    if len(observations):
        parts.append(np.asarray(observations, dtype=np.float64).mean(axis=0))
    if others is not None and len(others):
        parts.append(other_weight * np.asarray(others, dtype=np.float64).mean(axis=0))
    if not parts:
        raise ValueError("an episode vector needs at least one embedding")
    vec = np.sum(parts, axis=0)
    norm = np.linalg.norm(vec)
    return (vec / norm if norm else vec).astype(np.float32)
