"""Seeded synthetic incident logs and the stores the benchmark measures.

The text comes from the scenario generator's root-cause families (`simulator.families`,
filled by `simulator.generate.values`): surface symptoms, distinguishing tells, noise,
fixes, corrections, interludes. An *incident* on one principal's stream is a few
observations, a decision with structured choice metadata and an outcome; a wrong call is
followed by a correction and a retry. Some observations carry an on-call e-mail address
or phone number, so redaction has real work to do.

`build_store` writes a store with a given number of real episodes much faster than
recording them one by one through `EpisodicMemory` (durable appends, a recall index and
stored lesson versions per close): see `BUILD_METHOD`. Principals share no state in the write
path, so a large build closes the largest principals' episodes in a worker process while the
parent appends, segments and closes the rest; the records are the same either way.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import time
import traceback
import zlib
from collections import deque
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
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
from memory.timeline import Entry, EntryParts, HashingEncoder, Kind, RecordKind, SQLiteStore, Timeline
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
    "rules over each principal's last {window} episodes, reinforcement edges and marks; problems kept as their "
    "text, memory.pipeline.problem_text, since nothing stored reads their vectors), and rule facts extracted "
    "once per principal at the end (memory.facts.extract_facts, which the facade does not run by default); "
    "the lesson versions each close makes are learned from but not stored (the facade stores them, so its "
    "fact history would hold more versions); then opened with EpisodicMemory, which rebuilds "
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
PARALLEL_FROM = 5000  # episodes from which `build_store` closes the largest principals' in a worker process
WORKER_SHARE = 2 / 3  # share of the stream whose episodes the worker closes (see `remote_principals`)


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


class _Closed(NamedTuple):
    """What closing one episode adds to the store: rows of its record, its edges and its marks."""

    episode: tuple[str, dict[str, Any]]  # (episode id, record)
    edges: list[tuple[str, dict[str, Any]]]  # (edge id, record) of each new edge
    marks: list[tuple[str, dict[str, Any]]]  # (mark id, record) of each reinforcement mark


NO_VECTOR = np.zeros(0, dtype=np.float32)  # the builder keeps no problem vectors (see `_ProblemTexts`)
NO_VECTOR.flags.writeable = False


class _Learner:
    """The memory's write path (`memory.pipeline`) over the closed episodes of some principals.

    It holds their recent episodes only: older ones are read back with `read(episode_id, source)` when asked
    for (seldom: the graph rules read each principal's last `window`), so its memory does not grow with them.
    A problem is its text alone (`pipeline.problem_text`): nothing the builder stores reads a problem's vector.
    """

    def __init__(self, read: Callable[[str, Any], Episode | None]) -> None:
        self.episodes = LazyMap(read)  # the state's episodes
        self.state = MemoryState(_NoIndex(), DEFAULT_GRAPH_CONFIG, episodes=self.episodes, problems=_ProblemTexts())
        self.held: deque[str] = deque()  # ids of the closed episodes held in memory, oldest first
        self.learning = Learning(extract=False)  # facts once per principal at the end (see BUILD_METHOD)

    def close(self, episode: Episode, entries: Sequence[Entry | EntryParts]) -> _Closed:
        """Close one episode: what the pipeline decides, as rows to store."""
        record = (episode.id, episode.to_record())
        self.held.append(episode.id)
        problem = EpisodeProblem(pipeline.problem_text(self.state, episode, entries), NO_VECTOR)
        self.state.index_episode(episode, problem, pipeline.cited_facts(entries))
        changes = pipeline.close_episode(self.state, episode, entries, learning=self.learning)
        pipeline.apply(self.state, changes)
        return _Closed(
            record,
            [(e.id, e.to_record()) for e in changes.edges],
            [(m, {"episode": episode.id}) for m in changes.marks],
        )

    def settle(self) -> None:
        """After a batch is stored: forget the lesson versions made while closing (the builder stores facts once
        at the end, see BUILD_METHOD, and every version holds its whole support) and release the oldest
        episodes beyond those held (stored now: read back if asked for)."""
        self.state.versions.clear()
        keep = HELD_EPISODES_PER_PRINCIPAL * max(1, len(self.state.order))
        if len(self.held) > keep:
            self.episodes.defer([self.held.popleft() for _ in range(len(self.held) - keep)])

    def facts(self) -> dict[str, list[tuple[str, dict[str, Any]]]]:
        """Rows of the facts extracted from each principal's evidence (principals without evidence left out)."""
        found = {}
        for principal, evidence in self.state.evidence.all().items():
            if len(evidence):
                at = max(ev.at for ev in evidence)
                facts = extract_facts(evidence, [], principal=principal, at=at)
                found[principal] = [(f.id, f.to_record()) for f in facts]
        return found


class _Archive:
    """Closed episodes' records, compressed, for a `_Learner` that has no store to read them back from."""

    def __init__(self) -> None:
        self.records: dict[str, bytes] = {}

    def keep(self, episode_id: str, record: dict[str, Any]) -> None:
        self.records[episode_id] = zlib.compress(json.dumps(record).encode(), 1)

    def read(self, episode_id: str, source: Any = None) -> Episode | None:
        found = self.records.get(episode_id)
        return None if found is None else Episode.from_record(json.loads(zlib.decompress(found)))


def _settle_heap() -> None:
    """Collect what the last batch left for the cycle collector, then keep every survivor out of later collections.

    A build holds millions of objects that live until it ends; collections that scan them all again grew
    with the store (a fifth of the time per episode at 40,000). `build_store` thaws them when it is done,
    and leaves the collector alone in a process that froze objects of its own.
    """
    gc.collect()
    gc.freeze()


@contextmanager
def _build_heap() -> Iterator[bool]:
    """Whether a build settles its heap after each batch (`_settle_heap`): only where the collector is its to
    tune (enabled, nothing frozen by the process itself); then what the process held before is frozen
    during the build and everything is thawed after."""
    settle = gc.isenabled() and not gc.get_freeze_count()
    if settle:
        gc.freeze()
    try:
        yield settle
    finally:
        if settle:
            gc.unfreeze()


def _serve(pipe: Connection) -> None:
    """A worker process: a `_Learner` for the principals whose closed episodes it is sent, answering each batch
    with their rows and, at the end, with their facts."""
    gc.freeze()  # what the parent held is never finalized here (an inherited database connection stays untouched)
    archive = _Archive()
    learner = _Learner(archive.read)
    while True:
        kind, payload = pipe.recv()
        if kind == "stop":
            break
        try:
            if kind == "close":
                answer: Any = [learner.close(episode, entries) for episode, entries in payload]
                for closed in answer:
                    archive.keep(*closed.episode)
                learner.settle()
                _settle_heap()
            else:
                answer = learner.facts()
        except BaseException:  # the parent raises it with this traceback
            pipe.send(("error", traceback.format_exc()))
            break
        pipe.send(("ok", answer))
    pipe.close()


class _Worker:
    """A child process closing the episodes of some principals (`_serve`) while the parent closes the others."""

    def __init__(self) -> None:
        methods = multiprocessing.get_all_start_methods()
        context: Any = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self.pipe, far = context.Pipe()
        self.process = context.Process(target=_serve, args=(far,), name="bench-store-builder", daemon=True)
        self.process.start()
        far.close()

    def send(self, episodes: list[tuple[Episode, list[EntryParts]]]) -> None:
        """Start closing `episodes` (in order; the answer comes with `closed`)."""
        self.pipe.send(("close", episodes))

    def closed(self) -> list[_Closed]:
        """The rows of the episodes last sent, in order."""
        return self._answer()

    def facts(self) -> dict[str, list[tuple[str, dict[str, Any]]]]:
        """`_Learner.facts` of the worker's principals."""
        self.pipe.send(("facts", None))
        return self._answer()

    def _answer(self) -> Any:
        try:
            kind, payload = self.pipe.recv()
        except EOFError:
            raise RuntimeError(
                f"the store builder's worker process ended (exit code {self.process.exitcode})"
            ) from None
        if kind == "error":
            raise RuntimeError(f"the store builder's worker process failed:\n{payload}")
        return payload

    def stop(self) -> None:
        """End the worker (it answers nothing more)."""
        try:
            self.pipe.send(("stop", None))
        except (BrokenPipeError, OSError):  # it ended already
            pass
        self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join()
        self.pipe.close()


def _light(entries: Sequence[Entry]) -> list[EntryParts]:
    """What closing reads of entries, without their vectors (for the worker)."""
    return [EntryParts(e.id, e.kind, e.text, e.metadata, NO_VECTOR) for e in entries]


class _Batch(NamedTuple):
    """Episodes closed from one batch of entries, while their rows are being made."""

    remote: list[bool]  # per episode, in closing order: whether the worker closes it
    near: list[_Closed]  # the rows of the others, in order


class _Projector:
    """Streaming projection of appended entries into stored records, by the memory's own pipeline.

    The segmenter runs here; each closed episode goes to the `_Learner` of its principal, here or in the
    `_Worker` (`remote` principals), and the rows are stored in the order the episodes closed, as one
    learner would store them. With a worker, a batch's rows are stored once the next batch is appended
    (the worker closes its share meanwhile); without one, before.
    """

    def __init__(
        self,
        store: SQLiteStore,
        *,
        worker: _Worker | None = None,
        remote: frozenset[str] = frozenset(),
        settle_heap: bool = False,
    ):
        self.store = store
        self.settle_heap = settle_heap  # `_settle_heap` after each batch
        self.segmenter = Segmenter()
        self.local = _Learner(self._stored_episode)
        self.worker = worker
        self.remote = remote if worker is not None else frozenset()
        self.open: dict[str, Entry] = {}  # entries of the episodes still open, by id
        self.closed: dict[str, int] = {}  # closed episodes per principal, in the order of their first close
        self.waiting: _Batch | None = None  # the batch whose rows are not stored yet
        self.counts = {RecordKind.EPISODE: 0, RecordKind.EDGE: 0, RecordKind.MARK: 0, RecordKind.FACT: 0}

    @property
    def principals(self) -> dict[str, int]:
        """Closed episodes per principal."""
        return dict(self.closed)

    def _stored_episode(self, episode_id: str, source: Any) -> Episode | None:
        record = self.store.record(RecordKind.EPISODE, episode_id)
        return None if record is None else Episode.from_record(record)

    def feed(self, entries: Sequence[Entry]) -> None:
        closed: list[Episode] = []
        for entry in entries:
            self.open[entry.id] = entry
            closed += self.segmenter.feed(entry)
        self._project(closed)

    def finish(self) -> None:
        closed = self.segmenter.flush()
        self._project(closed, flush=bool(closed))
        self.write()
        facts = self.local.facts()
        if self.worker is not None:
            facts.update(self.worker.facts())
        for principal in self.closed:
            if principal in facts:
                self.counts[RecordKind.FACT] += self.store.add_records(RecordKind.FACT, facts[principal])

    def _project(self, episodes: Sequence[Episode], *, flush: bool = False) -> None:
        """Store the rows of the batch before (its worker's share done meanwhile), then start closing `episodes`
        (in closing order): the remote principals' in the worker, the others here. A `flush` record (the
        episodes a flush closed) is stored before their rows."""
        routed = []
        for episode in episodes:
            self.closed[episode.principal] = self.closed.get(episode.principal, 0) + 1
            routed.append((episode, [self.open.pop(i) for i in episode.entry_ids], episode.principal in self.remote))
        self.write()  # its rows are asked for before more is sent: the pipe holds one message each way
        far = [(episode, _light(entries)) for episode, entries, remote in routed if remote]
        if far and self.worker is not None:
            self.worker.send(far)
        near = [self.local.close(episode, entries) for episode, entries, remote in routed if not remote]
        self.waiting = _Batch([remote for _, _, remote in routed], near)
        if flush:
            last = max(ep.last_seq for ep in episodes)
            self.store.add_records(RecordKind.FLUSH, [(str(last), {"seq": last})])
        if self.worker is None or flush:
            self.write()

    def write(self) -> None:
        """Store the rows of the waiting batch, in closing order (nothing when none waits)."""
        if self.waiting is None:
            return
        batch, self.waiting = self.waiting, None
        near = iter(batch.near)
        answered = iter(self.worker.closed() if self.worker is not None and any(batch.remote) else [])
        rows: dict[RecordKind, list[tuple[str, dict[str, Any]]]] = {
            RecordKind.EPISODE: [],
            RecordKind.EDGE: [],
            RecordKind.MARK: [],
        }
        for remote in batch.remote:
            closed = next(answered) if remote else next(near)
            rows[RecordKind.EPISODE].append(closed.episode)
            rows[RecordKind.EDGE].extend(closed.edges)
            rows[RecordKind.MARK].extend(closed.marks)
        for kind, kept in rows.items():
            self.counts[kind] += self.store.add_records(kind, kept)
        self.local.settle()
        if self.settle_heap:
            _settle_heap()


def remote_principals(principals: Sequence[tuple[str, float]], share: float = WORKER_SHARE) -> frozenset[str]:
    """The principals whose episodes the worker closes: the largest ones, until they make `share` of the stream
    (the parent also generates, appends and segments the stream, and stores every row)."""
    total = sum(weight for _, weight in principals) or 1.0
    taken, chosen = 0.0, []
    for name, weight in sorted(principals, key=lambda p: (-p[1], p[0])):
        if taken >= share * total:
            break
        chosen.append(name)
        taken += weight
    return frozenset(chosen) if len(chosen) < len(principals) else frozenset(chosen[:-1])


def _batches(
    stream: Iterator[tuple[int, list[dict[str, Any]]]], episodes: int, batch: int
) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """The stream's items in batches of at least `batch` (the last one shorter) until they make `episodes`
    episodes, each with the episodes made so far."""
    made, buffer = 0, []
    while made < episodes:
        count, block = next(stream)
        if made + count > episodes:  # a retried incident would overshoot: the next block is drawn
            continue
        made += count
        buffer.extend(block)
        if len(buffer) >= batch or made >= episodes:
            yield made, buffer
            buffer = []


def build_store(
    path: str | Path,
    episodes: int,
    *,
    seed: int = 0,
    batch: int = 5000,
    principals: Sequence[tuple[str, float]] = PRINCIPALS,
    progress: Callable[[str], None] = lambda message: None,
    parallel: bool | None = None,
) -> BuiltStore:
    """Write a store holding `episodes` closed episodes of seeded incidents (see `BUILD_METHOD`).

    Args:
        path: new SQLite file.
        episodes: how many episodes the stream is designed to make; the count stored is
            what the segmenter actually found (reported, and checked by the tests).
        seed: stream seed.
        batch: entries per `Timeline.append_many` call.
        principals: tenant names and their shares of the episodes.
        progress: called with a line every twentieth of the episodes (a large build takes a while).
        parallel: close the largest principals' episodes in a worker process (`remote_principals`); the
            same store either way. None: when the stream makes at least `PARALLEL_FROM` episodes.
    """
    started = time.perf_counter()
    remote = remote_principals(principals) if (episodes >= PARALLEL_FROM if parallel is None else parallel) else None
    worker: _Worker | None = None
    store: SQLiteStore | None = None
    with _build_heap() as settle:
        try:
            worker = _Worker() if remote else None  # before the store is opened: the child inherits no connection
            store = SQLiteStore(path)
            timeline = Timeline(store, HashingEncoder())
            projector = _Projector(store, worker=worker, remote=remote or frozenset(), settle_heap=settle)
            entries, every = 0, max(episodes // 20, 1)
            report = every
            for made, items in _batches(incident_stream(seed, principals=principals), episodes, batch):
                projector.feed(timeline.append_many(items))
                entries += len(items)
                if made >= report:
                    elapsed = time.perf_counter() - started
                    progress(f"{made:,} of {episodes:,} episodes written and projected ({elapsed:,.0f} s)")
                    report += every
            projector.finish()
        finally:
            if worker is not None:
                worker.stop()
            if store is not None:
                store.close()
    counts = projector.counts
    return BuiltStore(
        Path(path),
        counts[RecordKind.EPISODE],
        entries,
        dict(sorted(projector.principals.items())),
        counts[RecordKind.EDGE],
        counts[RecordKind.FACT],
        time.perf_counter() - started,
        BUILD_METHOD.format(batch=batch, window=DEFAULT_GRAPH_CONFIG.window)
        + (f"; the episodes of {', '.join(sorted(remote))} closed in a worker process" if remote else ""),
    )
