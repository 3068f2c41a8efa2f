"""Batch appends through a worker process: the same entries as in one process, and a worker killed mid-batch
loses nothing acknowledged (the batch is all absent, the store verifies and takes the next batch)."""

import pytest

from memory.timeline import HashingEncoder, PatternRedactor, SQLiteStore, Timeline
from memory.timeline.ingest_worker import WorkerLost
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
