"""Relevance bounds (`memory.retrieval.Bounds`) prune scoring without changing any recall."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.agent_memory import EpisodicMemory
from memory.retrieval import DEFAULT, Bounds, relevance
from memory.retrieval import bounds as bounds_module
from memory.retrieval.relevance import top
from memory.timeline import HashingEncoder
from tests.memory.retrieval.test_retriever import build, synthetic_texts

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)


def recalls(prune_from, *, score_first=DEFAULT.score_first, n=600, principals=2):
    r = build(n, principals=principals, config=replace(DEFAULT, prune_from=prune_from, score_first=score_first))
    out = []
    for text, _ in synthetic_texts(25, seed=3):
        for k in (1, 5, 12):
            context = r.recall(text, principal="p1", situation="ops", k=k)
            out.append([(e.episode.id, e.score, e.why) for e in context.episodes])
    return out, r


@cache
def full_scan():
    """Recall without bounds, built once per process: several tests compare against it."""
    out, r = recalls(10**9)
    return out, r.index.partition("p1").bounds


def test_bounded_recall_equals_the_full_scan():
    full, bounds = full_scan()
    assert bounds is None
    pruned, r = recalls(1)
    assert r.index.partition("p1").bounds is not None
    assert pruned == full and any(full)


@pytest.mark.parametrize("score_first", [1, 3, 40])
def test_scoring_the_likeliest_rows_first_changes_no_recall(monkeypatch, score_first):
    full, _ = full_scan()
    batches = []
    exact = relevance.exact_relevance

    def spy(part, qvec, rows=None):
        batches.append(None if rows is None else len(rows))
        return exact(part, qvec, rows)

    monkeypatch.setattr(relevance, "exact_relevance", spy)
    pruned, _ = recalls(1, score_first=score_first)
    assert pruned == full
    assert len(batches) > 2 * 75  # some recalls scored a first batch before the rest (75 recalls)


def test_bounds_contain_the_exact_cosine_also_for_rows_added_after_fitting():
    rng = np.random.default_rng(0)
    rows = HashingEncoder().encode([t for t, _ in synthetic_texts(300)])
    bounds = Bounds(rows[:100], rank=16)
    bounds.extend(rows[:200])
    for row in rows[200:]:
        bounds.extend(row[None, :])
    for query in [rows[7], rows[250], rng.standard_normal(rows.shape[1]).astype(np.float32), np.zeros(rows.shape[1])]:
        exact = np.clip(rows @ query, 0.0, 1.0)
        low, high = bounds.relevance(query)
        assert np.all(low <= exact) and np.all(exact <= high)


@pytest.mark.parametrize("rank", [1, 2, 15, 16])
def test_first_pass_and_refined_bounds_both_contain_the_exact_cosine(rank):
    rng = np.random.default_rng(rank)
    rows = HashingEncoder().encode([t for t, _ in synthetic_texts(300)])
    bounds = Bounds(rows[:100], rank=rank)
    bounds.extend(rows[:250])
    for row in rows[250:]:
        bounds.extend(row[None, :])
    for query in [rows[3], rows[280], rng.standard_normal(rows.shape[1]).astype(np.float32)]:
        exact = np.clip(rows @ query, 0.0, 1.0)
        probe = bounds.probe(query)
        first = probe.high - probe.low
        assert np.all(probe.low <= exact) and np.all(exact <= probe.high)
        some = np.flatnonzero(rng.random(len(rows)) < 0.3)
        probe.refine(some)
        probe.refine(some[:5])  # refining twice changes nothing
        assert np.all(probe.low <= exact) and np.all(exact <= probe.high)
        assert np.all(probe.high[some] - probe.low[some] <= first[some] + 1e-6)  # refined bounds are no looser
        full_low, full_high = bounds.relevance(query)
        assert np.array_equal(full_low[some], probe.low[some]) and np.array_equal(full_high[some], probe.high[some])


@given(seed=st.integers(0, 2**32 - 1), scale=st.sampled_from([1e-6, 1e-3, 1.0]))
@settings(max_examples=25, deadline=None)
def test_refined_bounds_stay_exact_with_second_halves_in_half_precision(seed, scale):
    """Without the slack that covers float32 sums, refined bounds still contain the cosine: the
    bound accounts for what rounding the second halves to float16 lost (tiny values included)."""
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((120, 32)) * np.where(rng.random(32) < 0.5, scale, 1.0)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    bounds = Bounds(rows[:60], rank=16)
    bounds.extend(rows)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bounds_module, "BOUND_SLACK", 0.0)
        for query in (rows[5], rng.standard_normal(32)):
            query = (query / np.linalg.norm(query)).astype(np.float32)
            exact = np.clip(rows @ query.astype(np.float64), 0.0, 1.0)
            low, high = bounds.relevance(query)
            assert np.all(low <= exact + 1e-6) and np.all(exact <= high + 1e-6)


def test_only_a_large_first_pass_runs_on_more_than_one_blas_thread():
    from threadpoolctl import threadpool_info

    blas = lambda: [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]  # noqa: E731
    outside = blas()
    with bounds_module.blas_threads(1 << 20, threads=1):
        assert blas() and set(blas()) == {1}
    with bounds_module.blas_threads(bounds_module.PARALLEL_PASS_BYTES + 1, threads=1):
        assert blas() == outside
    assert blas() == outside


@pytest.mark.parametrize("threads", [None, 1])
def test_recall_hands_its_blas_threads_to_the_first_pass(monkeypatch, threads):
    asked, probe = [], Bounds.probe

    def spy(self, query, threads=None):
        asked.append(threads)
        return probe(self, query, threads)

    monkeypatch.setattr(Bounds, "probe", spy)
    r = build(300, config=replace(DEFAULT, prune_from=1, blas_threads=threads))  # every recall reads the bounds
    for text, _ in synthetic_texts(3, seed=1):
        r.recall(text, principal="p0", situation="ops", k=3)
    assert asked and set(asked) == {threads}


def test_top_breaks_ties_by_lower_index_also_at_the_cut():
    values = np.array([0.5, 0.9, 0.5, 0.5, 0.1, 0.9])
    assert top(values, 3).tolist() == [1, 5, 0]
    assert top(values, 4).tolist() == [1, 5, 0, 2]


def play(memory: EpisodicMemory, n: int) -> None:
    clock = T0
    for i, (text, cause) in enumerate(synthetic_texts(n, seed=5)):
        clock += timedelta(minutes=30)
        memory.observe(text, timestamp=clock, situation="ops", principal=f"p{i % 2}")
        clock += timedelta(minutes=2)
        memory.decide(f"Decision: {cause}", choice=cause, timestamp=clock, situation="ops", principal=f"p{i % 2}")
        clock += timedelta(minutes=2)
        ok = i % 3 != 0
        memory.outcome(
            "resolved" if ok else "still failing",
            status="success" if ok else "failure",
            timestamp=clock,
            situation="ops",
            principal=f"p{i % 2}",
        )
    memory.flush()


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 90), dim=st.sampled_from([8, 48, 160]), seed=st.integers(0, 2**16))
def test_a_basis_has_the_full_rank_and_its_leading_columns_hold_the_sample_principal_directions(rows, dim, seed):
    """Whatever the sample's size (fewer rows than dimensions takes another route), a basis has
    `min(rank, dim)` orthonormal columns (stored runs of one dimension share a rank), and its first
    columns capture as much of the sample as its leading singular directions do."""
    x = np.random.default_rng(seed).normal(size=(rows, dim))
    basis = Bounds(x, rank=32).basis
    k = min(32, dim)
    assert basis.shape == (dim, k)
    assert np.allclose(basis.T @ basis, np.eye(k), atol=1e-9)
    leading = min(rows, k)
    top_energy = (np.linalg.svd(x, compute_uv=False)[:leading] ** 2).sum()
    assert np.linalg.norm(x @ basis[:, :leading]) ** 2 == pytest.approx(top_energy, rel=1e-9)


@pytest.mark.parametrize("prune_from", [1, 10**9])
def test_a_reopened_store_recalls_what_the_live_memory_did(tmp_path, prune_from):
    config = replace(DEFAULT, prune_from=prune_from)
    path = tmp_path / "m.sqlite"
    queries = [t for t, _ in synthetic_texts(12, seed=9)]
    with EpisodicMemory(path, principal="p0", retriever=config) as live:
        play(live, 160)
        before = [[(e.episode.id, e.score) for e in live.recall(q, situation="ops", k=5).episodes] for q in queries]
        facts_before = [f.id for f in live.facts()]
        evidence_before = live.state.snapshot().evidence
    with EpisodicMemory(path, principal="p0", retriever=config) as reopened:
        after = [[(e.episode.id, e.score) for e in reopened.recall(q, situation="ops", k=5).episodes] for q in queries]
        assert [f.id for f in reopened.facts()] == facts_before
        assert reopened.state.snapshot().evidence == evidence_before
    assert after == before and any(before)


def test_bounds_loaded_full_grow_by_a_fraction_and_stay_exact():
    """An opened store's bounds are loaded exactly full; its first new episode must not double
    them (at a million rows that was 270 MB at once), and the grown bounds still hold."""
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(4000, 32)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    fitted = Bounds(rows[:512], rank=16)
    proj, resid = fitted.split(rows[:3000])
    loaded = Bounds.from_parts(fitted.basis, proj, resid)
    assert len(loaded._resid) == 3000
    loaded.extend(rows[3000:3001])
    assert 3001 <= len(loaded._resid) <= 3000 + 3000 // bounds_module.GROWTH
    loaded.extend(rows[3001:])
    query = rows[7]
    low, high = loaded.relevance(query)
    exact = np.clip(rows @ query, 0.0, 1.0)
    assert loaded.size == 4000 and (low <= exact + 1e-6).all() and (exact <= high + 1e-6).all()
