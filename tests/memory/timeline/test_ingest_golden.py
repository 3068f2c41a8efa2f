"""The write path replays a stored corpus into the same ids, chain and stored rows as when it was recorded.

`ingest_golden.json` holds digests of what the write path made of `ingest_corpus` before the lean
batch path existed; every change to redaction, encoding, canonical forms or row packing must keep them.
"""

import json

import pytest

from memory.timeline import HashingEncoder
from memory.timeline.entries import embedding_digest
from tests.memory.timeline import ingest_corpus as corpus

GOLDEN = json.loads(corpus.GOLDEN.read_text())


def _first_difference(found: list[str], expected: list[str]) -> str:
    for index, (a, b) in enumerate(zip(found, expected)):
        if a != b:
            return f"first difference at {index}: {a} != {b} (of {len(expected)})"
    return f"{len(found)} values, expected {len(expected)}"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return corpus.record(tmp_path_factory.mktemp("golden"))


@pytest.mark.parametrize("scenario", sorted(GOLDEN["scenarios"]))
def test_a_replay_stores_the_recorded_rows(recorded, scenario):
    found, expected = recorded["scenarios"][scenario], GOLDEN["scenarios"][scenario]
    assert found["entries"] == expected["entries"], _first_difference(found["entries"], expected["entries"])
    assert found["rows"] == expected["rows"]
    assert found["head"] == expected["head"]


@pytest.mark.parametrize("encoder", [HashingEncoder(), HashingEncoder(64, 0.3)], ids=lambda e: e.name)
def test_the_hashing_encoder_makes_the_recorded_vectors_in_a_batch_and_one_by_one(encoder):
    texts = [item["text"] for item in corpus.items(corpus.ENTRIES)]
    expected = GOLDEN["encodings"][encoder.name]
    batch = [embedding_digest(row)[:10] for row in encoder.encode(texts)]
    assert batch == expected, _first_difference(batch, expected)
    single = [embedding_digest(encoder.encode([text])[0])[:10] for text in texts]
    assert single == expected, _first_difference(single, expected)


@pytest.mark.parametrize("name", ["default", "salted-ip"])
def test_redaction_makes_the_recorded_texts(name):
    found = corpus.redactions()[name]
    assert found == GOLDEN["redactions"][name], _first_difference(found, GOLDEN["redactions"][name])
