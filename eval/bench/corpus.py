"""Seeded synthetic incident logs and the stores the benchmark measures.

The text comes from the scenario generator's root-cause families (`simulator.families`,
filled by `simulator.generate.values`): surface symptoms, distinguishing tells, noise,
fixes, corrections, interludes. An *incident* on one principal's stream is a few
observations, a decision with structured choice metadata and an outcome; a wrong call is
followed by a correction and a retry. Some observations carry an on-call e-mail address
or phone number, so redaction has real work to do.

`build_store` writes a store with a given number of real episodes much faster than
recording them one by one through `EpisodicMemory` (whose per-episode fact extraction
re-reads all of a principal's evidence): see `BUILD_METHOD`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from memory import pipeline
from memory.episodes import Episode, Segmenter
from memory.facts import extract_facts
from memory.graph import DEFAULT_GRAPH_CONFIG
from memory.persistence.lazy import LazyMap
from memory.pipeline import Learning
from memory.state import EpisodeProblem, MemoryState
from memory.timeline import Entry, HashingEncoder, Kind, RecordKind, SQLiteStore, Timeline
from simulator import families as fam
from simulator import outcomes
from simulator.generate import values

SITUATION = "incident_response"  # situation label of incidents (interludes use their own)
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
# Tenants and their share of the episodes: one large team and three small ones, so the
# tenant filter removes work and the measured recall still scans most of the store.
PRINCIPALS: tuple[tuple[str, float], ...] = (
    ("team-core", 0.7),
    ("team-data", 0.1),
    ("team-edge", 0.1),
    ("team-mobile", 0.1),
)
BUILD_METHOD = (
    "timeline written with Timeline.append_many in batches of {batch} entries (redaction, embeddings and "
    "hash chain as in production); derived records computed in one streaming pass by the memory's own "
    "write path: memory.episodes.Segmenter.feed → memory.pipeline.close_episode per closed episode (graph "
    "rules over each principal's last {window} episodes, reinforcement edges and marks), with fact extraction "
    "deferred to once per principal at the end (memory.facts.extract_facts; the facade extracts on every "
    "close, and stores the lesson versions each close makes, which the builder does not, so its fact history "
    "would hold more versions); then opened with EpisodicMemory, which rebuilds "
    "its index, graph and facts from those records"
)

_EMAILS = ("oncall.sre@example.com", "jane.doe@example.org", "platform-team@example.net")
_PHONES = ("+1 415 555 0134", "+44 20 7946 0958")
_RATIONALES = (
    "the observations match its signals best",
    "a similar incident last month had this cause",
    "the timing points to it",
    "it explains the symptoms on {svc} and {dep}",
)


class Incident(NamedTuple):
    """One incident's text: what is seen, what is true, what a fix or review says."""

    truth: str  # root-cause family id
    service: str  # affected service
    observations: tuple[str, ...]  # observation texts, in the order they arrive
    fix: str  # what worked
    correction: str  # the post-incident review after a wrong call


def incident(rng: np.random.Generator, *, previous: Incident | None = None) -> Incident:
    """A fresh incident: one surface symptom, one or two tells, sometimes noise or a causal hint."""
    ids = list(fam.FAMILIES)
    truth = ids[int(rng.integers(len(ids)))]
    family = fam.FAMILIES[truth]
    v = values(rng)
    pick = lambda seq: seq[int(rng.integers(len(seq)))]  # noqa: E731
    lines = [pick(family["surface"]).format(**v)]
    lines += [t.format(**v) for t in rng.choice(family["tells"], size=int(rng.integers(1, 3)), replace=False)]
    if rng.random() < 0.3:
        lines.append(pick(fam.NOISE).format(**v))
    if previous is not None and rng.random() < 0.1:
        lines.append(pick(fam.CAUSED_HINTS).format(prev_svc=previous.service, prev_fix=previous.fix, **v))
    order = rng.permutation(len(lines))
    observed = [lines[int(i)] for i in order]
    if rng.random() < 0.05:
        observed[-1] += f"; paged {pick(_EMAILS)}"
    elif rng.random() < 0.03:
        observed[-1] += f"; escalated by phone to {pick(_PHONES)}"
    return Incident(truth, str(v["svc"]), tuple(observed), family["fix"].format(**v), family["correction"].format(**v))


def log_lines(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """`n` varied timeline items (keyword arguments of `Timeline.append`) of one principal's incidents."""
    items: list[dict[str, Any]] = []
    stream = incident_stream(seed, principals=(("team-core", 1.0),))
    while len(items) < n:
        _, batch = next(stream)
        items.extend(batch)
    return items[:n]


def query_texts(n: int, seed: int = 1) -> list[list[str]]:
    """`n` queries: the observation texts of fresh incidents (what an agent recalls with)."""
    rng = np.random.default_rng(seed)
    return [list(incident(rng).observations) for _ in range(n)]


def _item(
    text: str, kind: Kind, role: str, when: datetime, principal: str, situation: str = SITUATION, **metadata: Any
) -> dict[str, Any]:
    return {
        "text": text,
        "kind": kind,
        "role": role,
        "timestamp": when,
        "situation": situation,
        "principal": principal,
        "metadata": metadata,
    }


def incident_stream(
    seed: int, *, principals: Sequence[tuple[str, float]] = PRINCIPALS
) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """Endless seeded stream of (episodes it makes, timeline items) blocks on one global clock.

    A block is an incident (one episode, two when the first call is wrong and retried) or
    an interlude (one episode of notes in another situation). Episode boundaries are
    unambiguous by construction: a new incident opens after an outcome, an interlude
    changes the situation.
    """
    rng = np.random.default_rng(seed)
    names = [name for name, _ in principals]
    weights = np.array([w for _, w in principals], dtype=float)
    weights /= weights.sum()
    ids = list(fam.FAMILIES)
    clock = _Clock(rng, START)
    last: dict[str, Incident] = {}
    noted: set[str] = set()  # principals whose latest block was an interlude (two in a row could merge)
    while True:
        who = names[int(rng.choice(len(names), p=weights))]
        clock.tick(20 * 60, 6 * 3600)
        if rng.random() < 0.1 and who not in noted:
            noted.add(who)
            yield 1, _interlude(rng, clock, who)
            continue
        noted.discard(who)
        inc = incident(rng, previous=last.get(who))
        last[who] = inc
        yield _incident_block(rng, clock, who, inc, ids)


class _Clock:
    """The stream's one global clock, moved on by seeded random steps (drawn from the stream's generator)."""

    def __init__(self, rng: np.random.Generator, start: datetime) -> None:
        self.rng = rng
        self.now = start

    def tick(self, low: int, high: int) -> datetime:
        """Move on between `low` and `high` seconds; the new time."""
        self.now += timedelta(seconds=int(self.rng.integers(low, high)))
        return self.now


def _interlude(rng: np.random.Generator, clock: _Clock, who: str) -> list[dict[str, Any]]:
    """One or two notes of `who` in another situation (an interlude: one episode)."""
    interludes = list(fam.INTERLUDES)
    situation = interludes[int(rng.integers(len(interludes)))]
    texts = fam.INTERLUDES[situation]
    v = values(rng)
    return [
        _item(texts[int(rng.integers(len(texts)))].format(**v), Kind.NOTE, "user", clock.tick(60, 900), who, situation)
        for _ in range(int(rng.integers(1, 3)))
    ]


def _incident_block(
    rng: np.random.Generator, clock: _Clock, who: str, inc: Incident, ids: list[str]
) -> tuple[int, list[dict[str, Any]]]:
    """An incident's observations and its attempts (a wrong call, then the right one, 40% of the time):
    the episodes it makes and its items."""
    block = [
        _item(text, Kind.OBSERVATION, "environment", clock.tick(15, 240), who, service=inc.service)
        for text in inc.observations
    ]
    right = rng.random() < 0.6
    choice = inc.truth if right else ids[(ids.index(inc.truth) + int(rng.integers(1, len(ids)))) % len(ids)]
    attempts = [choice] if right else [choice, inc.truth]
    for chosen in attempts:
        block.extend(_attempt(rng, clock, who, inc, chosen))
    return len(attempts), block


def _attempt(rng: np.random.Generator, clock: _Clock, who: str, inc: Incident, chosen: str) -> list[dict[str, Any]]:
    """One attempt at an incident: the decision, its outcome and, after most failures, a correction."""
    rationale = _RATIONALES[int(rng.integers(len(_RATIONALES)))].format(**values(rng))
    items = [
        _item(
            f"Decision: {chosen} — {rationale}",
            Kind.DECISION,
            "agent",
            clock.tick(30, 300),
            who,
            choice=chosen,
            confidence=round(float(rng.uniform(0.4, 0.95)), 2),
            service=inc.service,
            retrieved=[],
            relied_on=[],
        )
    ]
    success = chosen == inc.truth
    text = inc.fix if success and rng.random() < 0.7 else outcomes.generic(success, int(rng.integers(5)))
    items.append(
        _item(
            text,
            Kind.OUTCOME,
            "environment",
            clock.tick(120, 900),
            who,
            service=inc.service,
            check=outcomes.check(success),
        )
    )
    if not success and rng.random() < 0.7:
        items.append(_item(inc.correction, Kind.CORRECTION, "user", clock.tick(60, 600), who, service=inc.service))
    return items


@dataclass(frozen=True)
class BuiltStore:
    """A store file written by `build_store`, and how."""

    path: Path  # the SQLite file
    episodes: int  # closed episodes stored
    entries: int  # timeline entries
    principals: dict[str, int]  # episodes per principal
    edges: int  # edge records
    facts: int  # fact versions
    seconds: float  # wall time of the build
    method: str  # how it was built, in words

    @property
    def largest(self) -> str:
        """The principal holding the most episodes (recall is measured on it)."""
        return max(self.principals, key=lambda p: (self.principals[p], p))

    def describe(self) -> dict[str, Any]:
        """JSON form (without the path)."""
        return {
            "episodes": self.episodes,
            "entries": self.entries,
            "principals": self.principals,
            "edges": self.edges,
            "facts": self.facts,
            "build_s": round(self.seconds, 1),
            "method": self.method,
        }


class _NoIndex:
    """The builder recalls nothing, so closed episodes need no recall index."""

    def add(self, episode: Episode, vector: np.ndarray) -> None:
        pass

    def place(self, episode_id: str) -> int | None:
        """Unknown: the builder only asks about the episode it is closing, before or just after
        it joins its principal's closing order (`MemoryState.prior` knows the latter)."""
        return None


HELD_EPISODES_PER_PRINCIPAL = 10 * DEFAULT_GRAPH_CONFIG.window  # closed episodes the builder keeps in memory


class _ProblemTexts(MutableMapping):
    """The builder's problems: their texts, without their vectors (a 4 KB array per episode).

    Nothing the builder stores reads a problem's vector (the index is `_NoIndex`, and opening
    the store recomputes every vector from the entries), so a problem reads back with a zero
    vector of the same length.
    """

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._zero = np.zeros(0, dtype=np.float32)

    def __getitem__(self, episode_id: str) -> EpisodeProblem:
        return EpisodeProblem(self._texts[episode_id], self._zero)

    def __setitem__(self, episode_id: str, problem: EpisodeProblem) -> None:
        if len(self._zero) != len(problem.vector):
            self._zero = np.zeros(len(problem.vector), dtype=np.float32)
            self._zero.flags.writeable = False
        self._texts[episode_id] = problem.text

    def __delitem__(self, episode_id: str) -> None:
        del self._texts[episode_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)


class _Projector:
    """Streaming projection of appended entries into stored records, by the memory's own pipeline."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self.segmenter = Segmenter()
        # Episodes closed long ago are read back from their records when asked for (seldom: the graph
        # rules read each principal's last `window`), so the builder's memory does not grow with them.
        self.episodes = LazyMap(self._stored_episode)  # the state's episodes
        self.state = MemoryState(_NoIndex(), DEFAULT_GRAPH_CONFIG, episodes=self.episodes, problems=_ProblemTexts())
        self.held: deque[str] = deque()  # ids of the closed episodes held in memory, oldest first
        self.learning = Learning(extract=False)  # facts once per principal at the end (see BUILD_METHOD)
        self.open: dict[str, Entry] = {}  # entries of the episodes still open, by id
        self.pending: dict[RecordKind, list[tuple[str, dict[str, Any]]]] = {
            RecordKind.EPISODE: [],
            RecordKind.EDGE: [],
            RecordKind.MARK: [],
        }
        self.counts = {RecordKind.EPISODE: 0, RecordKind.EDGE: 0, RecordKind.MARK: 0, RecordKind.FACT: 0}

    @property
    def principals(self) -> dict[str, int]:
        """Closed episodes per principal."""
        return {principal: len(ids) for principal, ids in self.state.order.items()}

    def _stored_episode(self, episode_id: str, source: Any) -> Episode | None:
        record = self.store.record(RecordKind.EPISODE, episode_id)
        return None if record is None else Episode.from_record(record)

    def feed(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            self.open[entry.id] = entry
            for episode in self.segmenter.feed(entry):
                self._close(episode)
        self.write()

    def finish(self) -> None:
        closed = self.segmenter.flush()
        for episode in closed:
            self._close(episode)
        if closed:
            last = max(ep.last_seq for ep in closed)
            self.store.add_records(RecordKind.FLUSH, [(str(last), {"seq": last})])
        self.write()
        for principal, evidence in self.state.evidence.all().items():
            if len(evidence):
                at = max(ev.at for ev in evidence)
                facts = extract_facts(evidence, [], principal=principal, at=at)
                self.counts[RecordKind.FACT] += self.store.add_records(
                    RecordKind.FACT, [(f.id, f.to_record()) for f in facts]
                )

    def _close(self, episode: Episode) -> None:
        entries = [self.open.pop(i) for i in episode.entry_ids]
        self.pending[RecordKind.EPISODE].append((episode.id, episode.to_record()))
        self.held.append(episode.id)
        problem = pipeline.problem_of(self.state, episode, entries)
        self.state.index_episode(episode, problem, pipeline.cited_facts(entries))
        changes = pipeline.close_episode(self.state, episode, entries, learning=self.learning)
        self.pending[RecordKind.EDGE].extend((e.id, e.to_record()) for e in changes.edges)
        self.pending[RecordKind.MARK].extend((m, {"episode": episode.id}) for m in changes.marks)
        pipeline.apply(self.state, changes)

    def write(self) -> None:
        for kind, rows in self.pending.items():
            self.counts[kind] += self.store.add_records(kind, rows)
            self.pending[kind] = []
        # Lesson versions the pipeline makes while closing stay current only: the builder stores
        # facts once at the end (see BUILD_METHOD), and every version holds its whole support.
        self.state.versions.clear()
        keep = HELD_EPISODES_PER_PRINCIPAL * max(1, len(self.state.order))
        if len(self.held) > keep:  # stored now: the oldest are read back from their records if asked for
            self.episodes.defer([self.held.popleft() for _ in range(len(self.held) - keep)])


def build_store(
    path: str | Path,
    episodes: int,
    *,
    seed: int = 0,
    batch: int = 5000,
    principals: Sequence[tuple[str, float]] = PRINCIPALS,
    progress: Callable[[str], None] = lambda message: None,
) -> BuiltStore:
    """Write a store holding `episodes` closed episodes of seeded incidents (see `BUILD_METHOD`).

    Args:
        path: new SQLite file.
        episodes: how many episodes the stream is designed to make; the count stored is
            what the segmenter actually found (reported, and checked by the tests).
        seed: stream seed.
        batch: entries per `Timeline.append_many` call.
        principals: tenant names and their shares of the episodes.
        progress: called with a line every twentieth of the episodes (a large build takes hours).
    """
    started = time.perf_counter()
    store = SQLiteStore(path)
    try:
        timeline = Timeline(store, HashingEncoder())
        projector = _Projector(store)
        stream = incident_stream(seed, principals=principals)
        made, buffer, entries = 0, [], 0
        every = max(episodes // 20, 1)
        report = every
        while made < episodes:
            count, block = next(stream)
            if made + count > episodes:  # a retried incident would overshoot: the next block is drawn
                continue
            made += count
            buffer.extend(block)
            if len(buffer) >= batch or made >= episodes:
                projector.feed(timeline.append_many(buffer))
                entries += len(buffer)
                buffer = []
                if made >= report:
                    progress(
                        f"{made:,} of {episodes:,} episodes written and projected "
                        f"({time.perf_counter() - started:,.0f} s)"
                    )
                    report += every
        projector.finish()
        per_principal = projector.principals
    finally:
        store.close()
    counts = projector.counts
    return BuiltStore(
        Path(path),
        counts[RecordKind.EPISODE],
        entries,
        dict(sorted(per_principal.items())),
        counts[RecordKind.EDGE],
        counts[RecordKind.FACT],
        time.perf_counter() - started,
        BUILD_METHOD.format(batch=batch, window=DEFAULT_GRAPH_CONFIG.window),
    )
