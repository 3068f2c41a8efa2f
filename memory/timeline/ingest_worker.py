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
from collections.abc import Generator, Iterable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, NamedTuple

import numpy as np

from memory.errors import EpisodicMemoryError
from memory.timeline.batch import embedding_digests
from memory.timeline.encoder import Encoder
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
    clean = [redactor.redact(text) for text in texts]
    vectors = np.asarray(encoder.encode(clean), dtype=np.float32)
    return Encoded(clean, vectors, embedding_digests(list(vectors)))


def _packed(encoded: Encoded, texts: Sequence[str]) -> tuple[Any, ...]:
    """`encoded` as sent back: only the texts redaction changed, and sparse vectors as their non-zero bits."""
    changed = [(index, clean) for index, (clean, text) in enumerate(zip(encoded.clean, texts)) if clean != text]
    flat = encoded.vectors.reshape(-1)
    hits = np.flatnonzero(flat.view(np.uint32))  # bit patterns: -0.0 is sent too
    if 2 * len(hits) < len(flat):
        return changed, encoded.vectors.shape, hits, flat[hits], encoded.digests
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


def _serve(connection: Connection, redactor: Redactor, encoder: Encoder) -> None:
    """A worker's loop: a chunk of texts in, `_packed` results (or the error it raised) out, until told to stop."""
    while True:
        try:
            texts = connection.recv()
        except (EOFError, OSError):
            return
        if texts is None:
            return
        try:
            reply: tuple[str, Any] = ("done", _packed(encode_chunk(redactor, encoder, texts), texts))
        except Exception as exc:  # the caller raises it, as the in-process path would
            reply = ("error", exc)
        try:
            connection.send(reply)
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
        self._connections: list[Connection] = []
        context = _context()
        for _ in range(max(1, count)):
            ours, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(theirs, redactor, encoder), daemon=True)
            process.start()
            theirs.close()
            self._processes.append(process)
            self._connections.append(ours)
        self.broken = False  # a worker died: this pool takes no more work

    @property
    def pids(self) -> list[int | None]:
        """The process ids of the workers."""
        return [process.pid for process in self._processes]

    def map(self, chunks: Iterable[Sequence[str]]) -> Generator[Encoded, None, None]:
        """`encode_chunk` of each chunk, in order, the workers taking chunks in turn and a few ahead.

        Raises:
            WorkerLost: a worker ended before it returned its chunk.
        """
        pending = iter(chunks)
        sent: list[tuple[int, Sequence[str]]] = []  # (worker, texts) in order
        count = len(self._connections)
        finished = False
        try:
            for turn, texts in enumerate(pending):
                self._send(turn % count, texts)
                sent.append((turn % count, texts))
                if len(sent) >= AHEAD * count:
                    break
            turn = len(sent)
            while sent:
                worker, texts = sent.pop(0)
                encoded = self._receive(worker, texts)
                following = next(pending, None)
                if following is not None:
                    self._send(turn % count, following)
                    sent.append((turn % count, following))
                    turn += 1
                finished = not sent  # nothing in flight: the workers are ready for the next batch
                yield encoded
        finally:
            if not finished:  # chunks still in flight would answer the next batch: these workers are done
                self.close()

    def _send(self, worker: int, texts: Sequence[str]) -> None:
        try:
            self._connections[worker].send(list(texts))
        except (OSError, ValueError) as exc:
            raise self._lost(worker) from exc

    def _receive(self, worker: int, texts: Sequence[str]) -> Encoded:
        try:
            status, reply = self._connections[worker].recv()
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
        for connection in self._connections:
            try:
                connection.send(None)
            except (OSError, ValueError):
                pass
            connection.close()
        for process in self._processes:
            process.join(timeout=2.0)
            if process.is_alive():
                process.kill()
                process.join()
        self._connections, self._processes = [], []
        self.broken = True
