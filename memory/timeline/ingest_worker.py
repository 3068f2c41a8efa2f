"""Redaction, encoding and embedding digests of a batch in worker processes, while the caller chains and inserts.

``Timeline(store, encoder, workers=N)`` hands the texts of an `append_many` batch, a chunk at a time, to
N processes started once with the timeline's redactor and encoder (`EncodingWorkers`); each chunk comes
back redacted, embedded and digested (`encode_chunk`, which the in-process path runs too), and the
caller makes the chunk's drafts and chains and inserts them in the store's one transaction while the
workers go on with the next chunks (`SQLiteStore.append_batches`).

Nothing is acknowledged before the store commits. A worker that dies mid-batch raises `WorkerLost` in
the caller; the transaction rolls back, so no entry of that batch is stored, every entry of an earlier
batch stays, and the store verifies. The timeline starts new workers for its next batch. Workers are
spawned (forkserver where the platform has it), never forked from the caller's state: the redactor and
encoder travel to them pickled.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, NamedTuple

import numpy as np

from memory.errors import EpisodicMemoryError
from memory.timeline.batch import embedding_digests
from memory.timeline.encoder import Encoder, HashingEncoder
from memory.timeline.redaction import Redactor

CHUNK = 256  # texts a worker takes at a time
AHEAD = 2  # chunks in flight per worker


class WorkerLost(EpisodicMemoryError):
    """A worker process ended before it returned a chunk of the batch; nothing of the batch was stored."""


class Encoded(NamedTuple):
    """What redaction, encoding and digests made of a chunk of texts."""

    clean: list[str]  # the redacted texts
    vectors: np.ndarray  # their float32 embeddings, one row each
    digests: list[str]  # `embedding_digest` of each row


def encode_chunk(redactor: Redactor, encoder: Encoder, texts: Sequence[str]) -> Encoded:
    """Redact, embed and digest `texts` (in a worker or in the caller: the same work either way)."""
    return _encoded(redactor, encoder, texts)[0]


def _encoded(
    redactor: Redactor, encoder: Encoder, texts: Sequence[str], *, positions: bool = False
) -> tuple[Encoded, np.ndarray | None]:
    """`encode_chunk` of `texts`, with the positions the hashing encoder wrote when `positions` asks for them
    (None for another encoder, or when not asked)."""
    clean = [redactor.redact(text) for text in texts]
    written = None
    if positions and type(encoder) is HashingEncoder:
        vectors, written = encoder.encode_sparse(clean)
    else:
        vectors = np.asarray(encoder.encode(clean), dtype=np.float32)
    return Encoded(clean, vectors, embedding_digests(list(vectors))), written


def _reply(redactor: Redactor, encoder: Encoder, texts: Sequence[str]) -> tuple[Any, ...]:
    """`encode_chunk` of `texts`, `_packed`; the hashing encoder names the positions it wrote, which spares a scan
    of every element for the non-zero ones."""
    encoded, written = _encoded(redactor, encoder, texts, positions=True)
    return _packed(encoded, texts, written)


def _packed(encoded: Encoded, texts: Sequence[str], positions: np.ndarray | None = None) -> tuple[Any, ...]:
    """`encoded` as sent back: only the texts redaction changed, and sparse vectors as their elements at
    `positions` (every other element is 0.0; by default the elements whose bits are not all zero: -0.0 is sent)."""
    changed = [(index, clean) for index, (clean, text) in enumerate(zip(encoded.clean, texts)) if clean != text]
    flat = encoded.vectors.reshape(-1)
    hits = np.flatnonzero(flat.view(np.uint32)) if positions is None else positions
    if 2 * len(hits) < len(flat):
        index = hits.astype(np.int32) if len(flat) <= np.iinfo(np.int32).max else hits  # half the bytes to send
        return changed, encoded.vectors.shape, index, flat[hits], encoded.digests
    return changed, encoded.vectors.shape, None, encoded.vectors, encoded.digests


def _unpacked(reply: tuple[Any, ...], texts: Sequence[str]) -> Encoded:
    changed, shape, hits, values, digests = reply
    clean = list(texts)
    for index, text in changed:
        clean[index] = text
    if hits is None:
        return Encoded(clean, values, digests)
    vectors = np.zeros(shape, dtype=np.float32)
    vectors.reshape(-1)[hits] = values
    return Encoded(clean, vectors, digests)


def _serve(tasks: Connection, replies: Connection, redactor: Redactor, encoder: Encoder) -> None:
    """A worker's loop: a chunk of texts in, `_packed` results (or the error it raised) out, until told to stop.

    The replies are sent by a thread of their own, so this loop always comes back to read the next chunk: a
    caller that sends a chunk larger than the pipe holds waits for that read, and a worker that waited to send
    a reply larger than the pipe holds before reading would wait for the caller in turn.
    """
    outbox: queue.SimpleQueue[tuple[str, Any] | None] = queue.SimpleQueue()
    sender = threading.Thread(target=_send_replies, args=(replies, outbox), daemon=True)
    sender.start()
    while True:
        try:
            texts = tasks.recv()
        except (EOFError, OSError):
            break
        if texts is None:
            break
        try:
            reply: tuple[str, Any] = ("done", _reply(redactor, encoder, texts))
        except Exception as exc:  # the caller raises it, as the in-process path would
            reply = ("error", exc)
        outbox.put(reply)
    outbox.put(None)
    sender.join()


def _send_replies(replies: Connection, outbox: queue.SimpleQueue[tuple[str, Any] | None]) -> None:
    while (reply := outbox.get()) is not None:
        try:
            replies.send(reply)
        except (OSError, ValueError):
            return


def _context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


class EncodingWorkers:
    """Worker processes that redact, embed and digest chunks of texts, in order.

    Args:
        count: how many processes.
        redactor: the redactor they apply (pickled to each).
        encoder: the encoder they embed with (pickled to each; the hashing encoder rebuilds its caches).
    """

    def __init__(self, count: int, redactor: Redactor, encoder: Encoder) -> None:
        self.redactor = redactor
        self.encoder = encoder
        self._processes: list[BaseProcess] = []
        self._tasks: list[Connection] = []  # where each worker reads its chunks
        self._replies: list[Connection] = []  # where it sends what it made of them
        context = _context()
        for _ in range(max(1, count)):
            their_tasks, tasks = context.Pipe(duplex=False)
            replies, their_replies = context.Pipe(duplex=False)
            process = context.Process(target=_serve, args=(their_tasks, their_replies, redactor, encoder), daemon=True)
            process.start()
            their_tasks.close()
            their_replies.close()
            self._processes.append(process)
            self._tasks.append(tasks)
            self._replies.append(replies)
        self.broken = False  # a worker died: this pool takes no more work

    @property
    def pids(self) -> list[int | None]:
        """The process ids of the workers."""
        return [process.pid for process in self._processes]

    def map(self, chunks: Iterable[Sequence[str]]) -> Results:
        """`encode_chunk` of each chunk, in order, the workers taking chunks in turn and a few ahead. The first
        chunks are sent before this returns: the workers start on them while the caller does other work.

        Raises:
            WorkerLost: a worker ended before it returned its chunk (raised by the results).
        """
        return Results(self, iter(chunks))

    def _send(self, worker: int, texts: Sequence[str]) -> None:
        try:
            self._tasks[worker].send(list(texts))
        except (OSError, ValueError) as exc:
            raise self._lost(worker) from exc

    def _receive(self, worker: int, texts: Sequence[str]) -> Encoded:
        try:
            status, reply = self._replies[worker].recv()
        except (EOFError, OSError) as exc:
            raise self._lost(worker) from exc
        if status == "error":
            raise reply
        return _unpacked(reply, texts)

    def _lost(self, worker: int) -> WorkerLost:
        self.broken = True
        process = self._processes[worker]
        process.join(timeout=1.0)
        return WorkerLost(
            f"ingest worker {worker} (pid {process.pid}) ended with exit code {process.exitcode} before it "
            "returned its chunk; nothing of this batch was stored (the next batch starts new workers)"
        )

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        for connection in self._tasks:
            try:
                connection.send(None)
            except (OSError, ValueError):
                pass
            connection.close()
        for connection in self._replies:
            connection.close()
        for process in self._processes:
            process.join(timeout=2.0)
            if process.is_alive():
                process.kill()
                process.join()
        self._tasks, self._replies, self._processes = [], [], []
        self.broken = True


class Results(Iterator[Encoded]):
    """What `EncodingWorkers.map` returns: the chunks' results in order. `close` before the last result stops the
    workers (chunks still in flight would answer the next batch)."""

    def __init__(self, workers: EncodingWorkers, chunks: Iterator[Sequence[str]]) -> None:
        self._workers = workers
        self._pending = chunks
        self._sent: deque[tuple[int, Sequence[str]]] = deque()  # (worker, texts) in order
        self._turn = 0
        self._closed = False
        try:
            for texts in chunks:
                self._send(texts)
                if len(self._sent) >= AHEAD * len(workers.pids):
                    break
        except BaseException:
            self.close()
            raise

    def _send(self, texts: Sequence[str]) -> None:
        worker = self._turn % len(self._workers.pids)
        self._workers._send(worker, texts)
        self._sent.append((worker, texts))
        self._turn += 1

    def __next__(self) -> Encoded:
        if self._closed or not self._sent:
            raise StopIteration
        try:
            worker, texts = self._sent.popleft()
            encoded = self._workers._receive(worker, texts)
            following = next(self._pending, None)
            if following is not None:
                self._send(following)
        except BaseException:
            self.close()
            raise
        return encoded

    def close(self) -> None:
        """Stop the workers if chunks are still in flight (idempotent)."""
        if not self._closed:
            self._closed = True
            if self._sent:
                self._workers.close()
