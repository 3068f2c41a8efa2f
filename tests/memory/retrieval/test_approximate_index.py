"""Recall through an approximate index (`memory.retrieval.neighbours`): exact where the index finds the
nearest rows, kept beside the store, checked against it, rebuilt when it is stale or damaged."""

import logging
import subprocess
import sys
from dataclasses import replace
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.__main__ import main as memory_cli
from memory.agent_memory import EpisodicMemory
from memory.retrieval import DEFAULT, Bounds, EpisodeIndex, NeighbourIndexes, index_folder
from memory.retrieval.bounds import RowBounds
from memory.retrieval.neighbour_store import basis_digest, damage, ids_digest, index_file, read_index_file
from memory.retrieval.neighbours import NeighbourIndex
from memory.retrieval.relevance import NeighbourScores, top
from memory.timeline import HashingEncoder
from tests.builders import episode, play_incidents
from tests.conftest import ROOT
from tests.memory.retrieval.test_retriever import build, synthetic_texts

SMALL = replace(DEFAULT, prune_from=1, neighbours_from=1)  # every partition gets bounds and an approximate index


def test_a_memory_below_the_threshold_recalls_exactly_and_keeps_no_index(tmp_path):
    path = tmp_path / "memory.sqlite"
    with EpisodicMemory(path, retriever=replace(DEFAULT, prune_from=1)) as memory:
        play_incidents(memory)
        assert memory.recall("jobs stuck in the spool queue").episodes
    assert not index_folder(path).exists()


def _partition(n, *, seed=0, ids="ep", basis=None):
    """A partition of `n` episodes with the hashing vectors of synthetic incident texts, and its bounds
    (fitted on its rows, or on `basis`)."""
    vectors = HashingEncoder().encode([t for t, _ in synthetic_texts(n, seed)])
    part = EpisodeIndex(vectors.shape[1]).partition("p")
    for i, vector in enumerate(vectors):
        part.add(episode(f"{ids}{i}", hours=i), vector)
    part.bounded(1)
    if basis is not None:
        part.bounds = Bounds.from_parts(basis, *part.bounds.split(vectors))
    return part


@cache
def _scored(seed):
    """A partition of 240 rows, its exact relevance to a query, and the query."""
    part = _partition(240, seed=seed)
    query = HashingEncoder().encode([synthetic_texts(1, seed + 1)[0][0]])[0]
    return part, np.clip(part.vectors() @ query, 0.0, 1.0), query


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 3),
    nearest=st.integers(1, 60),
    size=st.integers(1, 30),
    weight=st.floats(0.05, 1.0),
    spread=st.floats(0.0, 1.0),
)
def test_with_the_truly_nearest_rows_seeds_and_pool_are_those_of_a_full_scan(seed, nearest, size, weight, spread):
    """The plain definition: the most relevant rows, and the `size` best totals over every row."""
    part, relevance, query = _scored(seed)
    rest = (np.random.default_rng(seed).random(len(part)) * spread).astype(np.float32)
    w = np.float32(weight)
    closest = top(relevance, nearest)  # what an index that misses nothing returns
    scores = NeighbourScores(part, query, RowBounds(part.bounds, query), closest)
    seeds = scores.seeds(min(5, nearest), score_first=4)
    assert np.allclose(relevance[seeds], relevance[top(relevance, len(seeds))])
    rows = scores.candidates(w, rest, size, score_first=4)
    assert scores.known[rows].all() and np.allclose(scores.relevance[rows], relevance[rows])
    total = w * relevance.astype(np.float32) + rest
    assert np.allclose(np.sort(total[rows[top(total[rows], size)]]), np.sort(total[top(total, size)]))


@pytest.mark.extra("ann")
def test_recall_through_the_index_finds_the_exact_recall_s_episodes():
    exact = build(1000, config=replace(DEFAULT, prune_from=300, neighbours_from=0))
    approximate = build(1000, config=replace(DEFAULT, prune_from=300, neighbours_from=300, neighbour_candidates=60))
    approximate.neighbours = NeighbourIndexes(None, encoder="hashing", dim=exact.index.dim)
    found, expected = [], []
    for text, _ in synthetic_texts(30, seed=3):
        expected.append([e.episode.id for e in exact.recall(text, principal="p0", situation="ops", k=10).episodes])
        found.append([e.episode.id for e in approximate.recall(text, principal="p0", situation="ops", k=10).episodes])
    shared = np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(found, expected)])
    assert shared >= 0.98 and np.mean([a == b for a, b in zip(found, expected)]) >= 0.9
    part = approximate.index.partition("p0")
    assert len(approximate.neighbours.of("p0", part, part.bounds)) == len(part)


@pytest.mark.extra("ann")
def test_an_index_is_written_once_then_read_back_and_extended_with_later_rows(tmp_path, caplog):
    part = _partition(300)
    NeighbourIndexes(tmp_path, encoder="hashing", dim=part.dim).of("p", part, part.bounds)
    path = index_file(tmp_path, "p")
    written = path.read_bytes()
    assert read_index_file(path).header["rows"] == 300
    vectors = HashingEncoder().encode([t for t, _ in synthetic_texts(50, seed=9)])
    for i, vector in enumerate(vectors):  # episodes closed by a later process
        part.add(episode(f"later{i}", hours=300 + i), vector)
    caplog.set_level(logging.INFO, logger="memory.retrieval.neighbour_store")
    kept = NeighbourIndexes(tmp_path, encoder="hashing", dim=part.dim)
    index = kept.of("p", part, part.bounds)
    assert len(index) == 350 and index.nearest(part.bounds.projections(340, 341)[0], 1)[0] == 340
    assert not caplog.records and path.read_bytes() == written  # read and extended, not built; written at close
    kept.save()
    assert read_index_file(path).header["rows"] == 350
    assert len(NeighbourIndexes(tmp_path, encoder="hashing", dim=part.dim).of("p", part, part.bounds)) == 350
    assert not caplog.records


@pytest.mark.extra("ann")
@pytest.mark.parametrize("change", ["damaged", "other episodes", "other basis", "other encoder"])
def test_an_index_that_does_not_match_its_partition_is_built_again(tmp_path, caplog, change):
    part = _partition(300)
    NeighbourIndexes(tmp_path, encoder="hashing", dim=part.dim).of("p", part, part.bounds)
    path = index_file(tmp_path, "p")
    encoder = "hashing"
    if change == "damaged":
        raw = bytearray(path.read_bytes())
        raw[-100] ^= 0xFF
        path.write_bytes(bytes(raw))
    elif change == "other episodes":
        part = _partition(300, ids="other")
    elif change == "other basis":  # as after an erasure: it deletes the stored basis, and another is fitted
        part = _partition(300, basis=_partition(300, seed=1).bounds.basis)
    else:
        encoder = "another"
    caplog.set_level(logging.INFO, logger="memory.retrieval.neighbour_store")
    NeighbourIndexes(tmp_path, encoder=encoder, dim=part.dim).of("p", part, part.bounds)
    assert "built again" in caplog.text
    stored = read_index_file(path)
    assert not damage(stored) and stored.header["encoder"] == encoder
    assert stored.header["ids"] == ids_digest(part.ids()) and stored.header["basis"] == basis_digest(part.bounds)


@pytest.mark.extra("ann")
def test_an_index_grown_a_few_rows_at_a_time_equals_one_built_at_once():
    rows = _partition(200).bounds.projections(0, 200)
    whole, steps = NeighbourIndex(rows.shape[1]), NeighbourIndex(rows.shape[1])
    whole.extend(rows)
    for start in range(0, 200, 37):
        steps.extend(rows[start : start + 37])
    assert whole.to_bytes() == steps.to_bytes()
    assert whole.nearest(rows[5], 3)[0] == 5


@pytest.mark.extra("ann")
def test_verify_checks_the_index_against_the_store_and_an_erasure_removes_it(tmp_path, capsys):
    path = tmp_path / "memory.sqlite"
    with EpisodicMemory(path, retriever=SMALL) as memory:
        play_incidents(memory)
        memory.flush()
        assert memory.recall("jobs stuck in the spool queue").episodes
    (file,) = index_folder(path).glob("*.index")
    assert memory_cli(["verify", str(path)]) == 0
    assert "approximate index" not in capsys.readouterr().out
    raw = bytearray(file.read_bytes())
    raw[-1] ^= 0xFF
    file.write_bytes(bytes(raw))
    assert memory_cli(["verify", str(path)]) == 0  # derived data: a note, not corruption of the store
    assert f"note {path}: approximate index {file}: its index does not match its digest" in capsys.readouterr().out
    with EpisodicMemory(path, retriever=SMALL) as memory:
        memory.recall("jobs stuck in the spool queue")  # built again, and written
        assert memory_cli(["verify", str(path)]) == 0 and "approximate index" not in capsys.readouterr().out
        entry = memory.recent(1)[0]
        memory.forget(entry_id=entry.id, reason="test")
        assert not list(index_folder(path).glob("*.index"))


@pytest.mark.extra("ann")
def test_an_index_folder_that_is_a_symbolic_link_is_not_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "memory.sqlite-ann").symlink_to(elsewhere)
    part = _partition(100)
    indexes = NeighbourIndexes(tmp_path / "memory.sqlite-ann", encoder="hashing", dim=part.dim)
    assert len(indexes.of("p", part, part.bounds)) == 100
    indexes.save()
    assert not list(elsewhere.iterdir())


@pytest.mark.extra("ann")
@pytest.mark.extra("embeddings")
def test_a_process_that_loaded_the_index_library_first_still_loads_onnxruntime():
    # usearch's compiled module carries parts of the C++ runtime; loaded first, onnxruntime's import segfaulted
    child = "from memory.retrieval.neighbours import NeighbourIndex; NeighbourIndex(8); import onnxruntime; print('ok')"
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-2000:]
