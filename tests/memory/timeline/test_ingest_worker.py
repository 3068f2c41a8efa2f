"""Batch appends through a worker process: the same entries as in one process, and a worker killed mid-batch
loses nothing acknowledged (the batch is all absent, the store verifies and takes the next batch)."""

import os
import re
import signal
from datetime import datetime

import numpy as np
import pytest

from memory.errors import InvalidEntry
from memory.timeline import HashingEncoder, PatternRedactor, SQLiteStore, Timeline
from memory.timeline.ingest_worker import Encoded, WorkerLost, _packed, _reply, _unpacked, encode_chunk
from tests.memory.timeline import ingest_corpus as corpus


def test_a_worker_writes_what_one_process_writes_and_its_death_loses_nothing_acknowledged(tmp_path):
    items = corpus.items(520)  # three chunks: redaction, encoding and digests come back from the worker
    alone = Timeline(SQLiteStore(tmp_path / "alone.sqlite"), HashingEncoder(), PatternRedactor())
    helped = Timeline(SQLiteStore(tmp_path / "helped.sqlite"), HashingEncoder(), corpus.DyingRedactor(), workers=1)
    store = helped.store
    try:
        acknowledged = helped.append_many(items)
        assert [entry.id for entry in acknowledged] == [entry.id for entry in alone.append_many(items)]
        assert list(corpus.stored(store)) == list(corpus.stored(alone.store))
        assert [e.embedding.tobytes() for e in acknowledged] == [e.embedding.tobytes() for e in store.entries()]

        doomed = corpus.items(530, seed=7)
        doomed[520]["text"] = corpus.DyingRedactor.DIE  # in the third chunk: two were inserted already
        with pytest.raises(WorkerLost, match=r"ingest worker 0 \(pid \d+\) ended with exit code -9 .*nothing of this"):
            helped.append_many(doomed)
        assert [entry.id for entry in store.entries()] == [entry.id for entry in acknowledged]
        assert store.verify() is None

        later = helped.append_many(corpus.items(260, seed=8))  # a new worker takes the next batch
        assert len(store) == 780 and later[0].prev_id == acknowledged[-1].id and store.verify() is None
    finally:
        helped.close()


def test_chunks_and_replies_larger_than_a_pipe_holds_do_not_wait_for_each_other(tmp_path):
    # Each chunk of 256 texts and each reply (the redacted texts come back) is larger than a pipe holds: a worker
    # that waited to send its reply before reading the next chunk would wait for a caller waiting to send it.
    items = corpus.items(600, seed=3)
    for index, item in enumerate(items):
        item["text"] = f"paged ops{index}@example.com" + " " * 1200
    helped = Timeline(SQLiteStore(tmp_path / "helped.sqlite"), HashingEncoder(), workers=1)
    alone = Timeline(SQLiteStore(tmp_path / "alone.sqlite"), HashingEncoder())

    def stuck(signum, frame):
        for pid in helped._workers().pids:
            os.kill(pid, signal.SIGKILL)
        raise AssertionError("the caller and its worker each waited for the other to read")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(60)
    try:
        entries = helped.append_many(items)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        helped.close()
    assert [entry.id for entry in entries] == [entry.id for entry in alone.append_many(items)]
    assert list(corpus.stored(helped.store)) == list(corpus.stored(alone.store))


def test_a_refused_field_raises_what_one_process_raises_and_stores_nothing(tmp_path):
    items = corpus.items(600, seed=4)
    items[400]["timestamp"] = datetime(2026, 1, 1)  # no timezone, in the second chunk
    helped = Timeline(SQLiteStore(tmp_path / "helped.sqlite"), HashingEncoder(), workers=1)
    alone = Timeline(SQLiteStore(tmp_path / "alone.sqlite"), HashingEncoder())
    try:
        with pytest.raises(InvalidEntry) as expected:
            alone.append_many(items)
        with pytest.raises(InvalidEntry, match=re.escape(str(expected.value))):
            helped.append_many(items)
        assert len(helped.store) == 0
        workers = helped._workers()
        del items[400]
        assert [e.id for e in helped.append_many(items)] == [e.id for e in alone.append_many(items)]
        assert helped._workers() is workers  # every chunk came back: the same workers took the next batch
    finally:
        helped.close()


@pytest.mark.parametrize("dim", [64, 1024])
def test_a_reply_unpacks_to_every_bit_of_what_the_worker_made(dim):
    texts = ["pool exhausted on db-1", "", "mail ops@example.com now", *(f"shard-{i} lag {i}" for i in range(40))]
    encoder = HashingEncoder(dim=dim)
    made = encode_chunk(PatternRedactor(), encoder, texts)
    for reply in (_reply(PatternRedactor(), HashingEncoder(dim=dim), texts), _packed(made, texts)):
        back = _unpacked(reply, texts)
        assert back.clean == made.clean and back.digests == made.digests
        assert back.vectors.dtype == np.float32 and back.vectors.tobytes() == made.vectors.tobytes()
    signed = Encoded(texts[:2], np.array([[0.0, -0.0, 1.5], [0.0, 0.0, 0.0]], dtype=np.float32), ["a", "b"])
    assert _unpacked(_packed(signed, texts[:2]), texts[:2]).vectors.tobytes() == signed.vectors.tobytes()
