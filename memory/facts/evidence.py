"""What closed episodes contribute to fact learning: one `EpisodeEvidence` each, kept in an indexed `EvidenceLog`."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import overload

import numpy as np

from memory.episodes import Episode, Outcome
from memory.facts.versions import fact_id_of
from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.text import observed_terms

TERM_COUNT_MEMO = 64  # position sets whose term counts an `EvidenceLog` remembers


@dataclass(frozen=True, slots=True)
class EpisodeEvidence:
    """What one closed episode says about a choice, as plain data (slots: a log holds one per closed episode)."""

    episode_id: str  # the episode
    principal: str  # its tenant
    terms: frozenset[str]  # normalized terms of the observations of the problem it worked on
    choice: str  # the choice tested (last structured choice of the episode)
    outcome: Outcome  # SUCCESS confirms `choice`; FAILURE refutes it
    at: datetime  # when the episode ended
    cited: frozenset[str] = frozenset()  # fact ids its decisions retrieved or relied on
    affirmed: frozenset[str] = frozenset()  # terms its observations state as present (`memory.text.affirmed_clauses`)


NO_CITATIONS: frozenset[str] = frozenset()  # one empty set for every episode that cited no fact


def evidence_from(
    episode: Episode,
    observation_text: str,
    *,
    cited: Iterable[str] = (),
    shared: dict[frozenset[str], frozenset[str]] | None = None,
    lexicon: Lexicon = DEFAULT_LEXICON,
) -> EpisodeEvidence | None:
    """Evidence of a closed episode, or None when it tested no choice or has no verdict (its observations'
    affirmed terms read with `lexicon`).

    With `shared` (an `EvidenceLog`'s `term_sets`), a term set equal to one seen before is
    that set: a stream that repeats its alerts holds each picture once.
    """
    if not episode.choices or episode.outcome not in (Outcome.SUCCESS, Outcome.FAILURE):
        return None
    seen, affirmed = observed_terms(observation_text, lexicon)
    if shared is not None:
        seen, affirmed = shared.setdefault(seen, seen), shared.setdefault(affirmed, affirmed)
    return EpisodeEvidence(
        episode_id=episode.id,
        principal=episode.principal,
        terms=seen,
        affirmed=seen if affirmed == seen else affirmed,  # one set held when they are equal
        choice=episode.choices[-1],
        outcome=episode.outcome,
        at=episode.end,
        cited=frozenset(fact_id_of(c) for c in cited) or NO_CITATIONS,
    )


class EvidenceLog(Sequence[EpisodeEvidence]):
    """Evidence in arrival order, with the indexes the fact rules query, kept current on `append`.

    The fact rules (`memory.facts.rules`) need, for a condition and a conclusion, the episodes whose terms contain
    the condition and how each is labelled. Scanning every episode each time makes a close
    cost grow with history; the log answers from postings (term → positions) and label
    sets (choice → positions) instead, so a query costs the size of its answer. Every rule
    accepts a plain sequence too (a log is built from it on the fly) and gives the same result.

    A posting is an ascending array of 4-byte positions, not a set: every term of every
    episode has one entry, which a set holds in about 55 bytes. Postings are intersected by
    binary search of the smaller side in the larger (`numpy.searchsorted`).
    """

    def __init__(self, items: Iterable[EpisodeEvidence] = ()) -> None:
        self._items: list[EpisodeEvidence] = []
        self._where: dict[str, int] = {}  # episode id → its first position
        self._postings: dict[str, array[int]] = {}  # term → positions whose terms contain it, ascending
        self._affirming: dict[str, array[int]] = {}  # term → positions whose affirmed terms contain it, ascending
        self._citing: dict[str, set[int]] = {}  # fact id → positions whose decisions cited it
        self._confirming: dict[str, set[int]] = {}  # choice → positions of SUCCESS episodes with it
        self._refuting: dict[str, set[int]] = {}  # choice → positions of other episodes with it (FAILURE)
        self._successes: set[int] = set()  # positions of every SUCCESS episode
        self._resolutions: dict[str, Counter[str]] = {}  # term → choice → SUCCESS positions holding both
        self._principals: set[str] = set()
        self._term_counts: dict[frozenset[int], Counter[str]] = {}  # see `term_counts`
        self.term_sets: dict[frozenset[str], frozenset[str]] = {}  # `evidence_from`'s `shared`, for this log's items
        self._codes: dict[str, int] = {}  # choice → its code in `_choice_at`
        self._choice_at = array(POSITION_CODE)  # per position: the code of its choice
        self._succeeded = bytearray()  # per position: 1 for a SUCCESS
        self._ended_us = array("q")  # per position: when its episode ended, microseconds since the epoch
        self.extend(items)

    @classmethod
    def of(cls, evidence: Sequence[EpisodeEvidence], principal: str | None = None) -> EvidenceLog:
        """`evidence` as a log, keeping only `principal`'s (the log itself when nothing is dropped)."""
        if isinstance(evidence, EvidenceLog) and (principal is None or evidence._principals <= {principal}):
            return evidence
        return cls(ev for ev in evidence if principal is None or ev.principal == principal)

    def append(self, ev: EpisodeEvidence) -> None:
        """Add one episode's evidence at the end."""
        self.extend((ev,))

    def extend(self, items: Iterable[EpisodeEvidence]) -> None:
        """Add evidence at the end, in order: the same state as `append` of each item.

        Items that share a term set (the same object: `evidence_from` with the log's `term_sets`
        gives one) have their postings and resolution counts added once for the set, in the order
        of each set's first position, so postings, counts and their orders are those of appends.
        """
        sets: dict[int, tuple[frozenset[str], list[int]]] = {}  # id of a term set → (it, its new positions)
        affirmed: dict[int, tuple[frozenset[str], list[int]]] = {}  # the same for the affirmed term sets
        wins: dict[tuple[int, str], list] = {}  # (id of a term set, choice) → [term set, choice, SUCCESS count]
        for ev in items:
            position = len(self._items)
            self._items.append(ev)
            self._choice_at.append(self._codes.setdefault(ev.choice, len(self._codes)))
            self._succeeded.append(ev.outcome is Outcome.SUCCESS)
            self._ended_us.append((ev.at - EPOCH) // MICROSECOND)
            self._where.setdefault(ev.episode_id, position)
            self._principals.add(ev.principal)
            for grouped, terms in ((sets, ev.terms), (affirmed, ev.affirmed)):
                held = grouped.get(id(terms))
                if held is None:
                    grouped[id(terms)] = (terms, [position])
                else:
                    held[1].append(position)
            for fact_id in ev.cited:
                self._citing.setdefault(fact_id, set()).add(position)
            if ev.outcome is Outcome.SUCCESS:
                self._confirming.setdefault(ev.choice, set()).add(position)
                self._successes.add(position)
                won = wins.get((id(ev.terms), ev.choice))
                if won is None:
                    wins[id(ev.terms), ev.choice] = [ev.terms, ev.choice, 1]
                else:
                    won[2] += 1
            else:  # as the rules label it: any other verdict on a choice counts against it
                self._refuting.setdefault(ev.choice, set()).add(position)
        _add_postings(self._postings, list(sets.values()))
        _add_postings(self._affirming, list(affirmed.values()))
        self._index(list(wins.values()))

    def _index(self, wins: list[list]) -> None:
        """Add SUCCESS counts to the resolutions, once per term set and choice (`extend`)."""
        resolutions = self._resolutions
        for terms, choice, count in wins:
            for term in terms:
                counts = resolutions.get(term)
                if counts is None:  # not setdefault: that would build a Counter per term per set
                    counts = resolutions[term] = Counter()
                counts[choice] += count

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> EpisodeEvidence: ...

    @overload
    def __getitem__(self, index: slice) -> list[EpisodeEvidence]: ...

    def __getitem__(self, index: int | slice) -> EpisodeEvidence | list[EpisodeEvidence]:
        return self._items[index]

    def __iter__(self) -> Iterator[EpisodeEvidence]:
        return iter(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EvidenceLog):
            return self._items == other._items
        if isinstance(other, (list, tuple)):
            return self._items == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"EvidenceLog({self._items!r})"

    def find(self, episode_id: str) -> EpisodeEvidence | None:
        """The (first) evidence of an episode, or None."""
        position = self._where.get(episode_id)
        return None if position is None else self._items[position]

    def matching(self, condition: Iterable[str]) -> set[int]:
        """Positions whose terms contain every condition term (all positions for an empty condition)."""
        return set(self.matching_positions(condition).tolist())

    def matching_positions(self, condition: Iterable[str]) -> np.ndarray:
        """`matching` as an ascending array."""
        return _intersection(self._postings, set(condition), len(self._items))

    def resolved_counts(self, condition: Iterable[str], choice: str, *, excluding: str) -> tuple[int, int] | None:
        """Among the SUCCESS episodes other than `excluding` whose terms and affirmed terms both contain every
        condition term: how many were resolved as `choice`, and how many otherwise (counted in columns: a
        condition can match a share of a million episodes). None when the log holds an episode twice (the
        counts are of distinct episodes)."""
        if len(self._where) != len(self._items):
            return None
        wanted = set(condition)
        positions = _within(self.matching_positions(wanted), _intersection(self._affirming, wanted, len(self._items)))
        own = self._where.get(excluding)
        if own is not None:
            positions = positions[positions != own]
        succeeded = np.frombuffer(self._succeeded, dtype=np.uint8)[positions].astype(bool)
        chose = np.frombuffer(self._choice_at, dtype=np.int32)[positions] == self._codes.get(choice, -1)
        return int(np.count_nonzero(succeeded & chose)), int(np.count_nonzero(succeeded & ~chose))

    def resolutions_with(self, term: str) -> dict[str, int]:
        """Choice → how many SUCCESS positions holding `term` confirmed it."""
        return dict(self._resolutions.get(term, ()))

    def count_with_terms(self, positions: Iterable[int], terms: Iterable[str]) -> dict[str, int]:
        """Per term, how many of `positions` hold it."""
        wanted = np.sort(np.fromiter(positions, dtype=np.int64))
        counts = {}
        for term in terms:
            posting = self._postings.get(term)
            if not posting or not len(wanted):
                counts[term] = 0
                continue
            held = _positions(posting)
            small, large = (held, wanted) if len(held) < len(wanted) else (wanted, held)
            counts[term] = len(_within(small, large))
        return counts

    def frequency(self, term: str) -> int:
        """How many positions hold `term` (its document frequency)."""
        return len(self._postings.get(term, ()))

    def positions_of(self, episode_ids: set[str]) -> set[int]:
        """Every position holding evidence of one of `episode_ids`."""
        if len(self._where) == len(self._items):  # each episode once: its position is known
            return {self._where[i] for i in episode_ids if i in self._where}
        return {p for p, ev in enumerate(self._items) if ev.episode_id in episode_ids}

    def citing(self, fact_id: str) -> set[int]:
        """Positions whose decisions cited `fact_id`."""
        return self._citing.get(fact_id, set())

    def confirming(self, conclusion: str) -> set[int]:
        """Positions labelled True for `conclusion` (SUCCESS with that choice)."""
        return self._confirming.get(conclusion, set())

    def against(self, conclusion: str) -> set[int]:
        """Positions labelled False for `conclusion` (SUCCESS with another choice, or not SUCCESS with it)."""
        return (self._successes - self.confirming(conclusion)) | self._refuting.get(conclusion, set())

    def confirmed(self) -> set[str]:
        """Choices some SUCCESS episode confirmed."""
        return {choice for choice, found in self._confirming.items() if found}

    def labelled_among(self, positions: set[int], conclusion: str) -> tuple[set[int], set[int]]:
        """The `positions` labelled True for `conclusion` (a SUCCESS with it) and those labelled False (a SUCCESS
        with another choice, or another verdict on it); the rest say nothing about it."""
        true = positions & self.confirming(conclusion)
        return true, ((positions & self._successes) - true) | (positions & self._refuting.get(conclusion, set()))

    def labels_among(
        self, positions: np.ndarray, conclusion: str, *, since: datetime | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """`labelled_among` for an array of positions, keeping only episodes that ended at or after `since`:
        one pass over per-position columns instead of set operations (a condition can match most of a
        million episodes)."""
        positions = np.asarray(positions, dtype=np.int64)
        if since is not None:
            ended = np.frombuffer(self._ended_us, dtype=np.int64)[positions]
            positions = positions[ended >= (since - EPOCH) // MICROSECOND]
        chose = np.frombuffer(self._choice_at, dtype=np.int32)[positions] == self._codes.get(conclusion, -1)
        succeeded = np.frombuffer(self._succeeded, dtype=np.uint8)[positions].astype(bool)
        return positions[chose & succeeded], positions[chose != succeeded]  # another's SUCCESS, or its other verdict

    def episode_ids_at(self, positions: np.ndarray) -> list[str]:
        """The episode ids of an array of positions, in its order."""
        items = self._items
        return [items[p].episode_id for p in positions.tolist()]

    def labelled_count(self, conclusion: str) -> int:
        """How many positions are labelled (True or False) for `conclusion`."""
        return len(self._successes) + len(self._refuting.get(conclusion, ()))

    def term_counts(self, positions: set[int]) -> Counter[str]:
        """How many of `positions` hold each term (do not modify the result).

        Remembered for the last few position sets asked for: entries never change once
        appended, so the counts of a set stay right however the log grows. Fact extraction
        asks for the same sets on every close until new confirmations arrive.
        """
        key = frozenset(positions)
        counts = self._term_counts.get(key)
        if counts is None:
            items = self._items
            counts = Counter(t for p in positions for t in items[p].terms)
            if len(self._term_counts) >= TERM_COUNT_MEMO:
                del self._term_counts[next(iter(self._term_counts))]
            self._term_counts[key] = counts
        return counts

    def with_terms(self, positions: Iterable[int], term: str) -> set[int]:
        """The subset of `positions` whose terms contain `term`."""
        posting = self._postings.get(term)
        if not posting:
            return set()
        return set(_within(np.fromiter(positions, dtype=np.int64), _positions(posting)).tolist())


POSITION_CODE = "i"  # C int: 4 bytes on every platform numpy supports
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def _add_postings(postings: dict[str, array[int]], sets: list[tuple[frozenset[str], list[int]]]) -> None:
    """Add new positions to `postings`, once per term set (in the order of the sets' first positions)."""
    parts: dict[str, list[list[int]]] = {}  # term → the new positions of each set holding it
    for terms, positions in sets:
        for term in terms:
            found = parts.get(term)
            if found is None:
                parts[term] = [positions]
            else:
                found.append(positions)
    for term, lists in parts.items():
        posting = postings.get(term)
        if posting is None:
            posting = postings[term] = array(POSITION_CODE)
        if len(lists) == 1:
            posting.extend(lists[0])
            continue
        merged = []
        for positions in lists:
            merged += positions
        merged.sort()  # ascending runs: the sort merges them
        posting.extend(merged)


def _intersection(postings: dict[str, array[int]], terms: set[str], size: int) -> np.ndarray:
    """Ascending positions whose postings hold every term (all `size` positions for no term)."""
    found: np.ndarray | None = None
    for term in sorted(terms, key=lambda t: len(postings.get(t, ()))):  # the rarest first
        posting = postings.get(term)
        if not posting:
            return np.zeros(0, dtype=np.int64)
        found = _positions(posting) if found is None else _within(found, _positions(posting))
        if not len(found):
            return found
    return np.arange(size, dtype=np.int64) if found is None else found


def _positions(posting: array[int]) -> np.ndarray:
    """A posting as a numpy copy (a view would keep the array from growing while it lives)."""
    return np.array(posting, dtype=np.int64)


def _within(values: np.ndarray, ascending: np.ndarray) -> np.ndarray:
    """The `values` found in the ascending array `ascending`, in their order."""
    if not len(values) or not len(ascending):
        return values[:0]
    at = np.searchsorted(ascending, values)
    np.minimum(at, len(ascending) - 1, out=at)
    return values[ascending[at] == values]
