from datetime import UTC, datetime, timedelta

import networkx as nx
import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memory.episodes import Episode, Outcome
from memory.facts import FactVersion, Usefulness
from memory.graph import Edge, EdgeType, add_edges, add_episode
from memory.retrieval import EpisodeIndex, Retriever, episode_vector
from memory.retrieval.config import DEFAULT, NO_FACTS, NO_GRAPH, NO_MMR, NO_OUTCOME_LABELS, RetrieverConfig
from memory.timeline import HashingEncoder

ENC = HashingEncoder(dim=256)
T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def episode(
    eid: str,
    text: str,
    *,
    principal: str = "p",
    situation: str = "ops",
    outcome=Outcome.SUCCESS,
    choices=("alpha",),
    corrections=(),
    age_days: float = 1.0,
) -> Episode:
    end = T0 - timedelta(days=age_days)
    return Episode(
        id=eid,
        entry_ids=(eid + "-e",),
        first_seq=0,
        last_seq=0,
        principal=principal,
        situation=situation,
        subject=None,
        start=end,
        end=end,
        summary=text,
        outcome=outcome,
        outcome_evidence="",
        decisions=tuple(f"Decision: {c}" for c in choices),
        choices=tuple(choices),
        corrections=tuple(corrections),
        observations=(text,),
    )


def fact(
    fid: str, condition, conclusion: str, *, principal: str = "p", confidence: float = 0.8, status: str = "active"
) -> FactVersion:
    return FactVersion(
        fact_id=fid,
        version=1,
        principal=principal,
        text=f"when {condition} → {conclusion}",
        condition=tuple(condition),
        conclusion=conclusion,
        confidence=confidence,
        support=("a", "b"),
        contradict=(),
        created_at=T0,
        supersedes=None,
        status=status,
        reason="test",
        usefulness=Usefulness(2, 2, 1.0, 0.5, 2.0, True),
    )


def retriever(episodes, *, config=DEFAULT, facts=(), graph=None) -> Retriever:
    index = EpisodeIndex(ENC.dim)
    for ep in episodes:
        index.add(ep, episode_vector(ENC.encode(list(ep.observations))))
    return Retriever(
        index,
        ENC.encode,
        graph=graph,
        config=config,
        facts=lambda principal: [f for f in facts if f.principal == principal],
    )


def test_relevance_ranks_the_matching_episode_first_with_score_parts():
    eps = [
        episode("a", "replica lag growing on the reporting database"),
        episode("b", "TLS certificate expired on the edge proxy"),
    ]
    ctx = retriever(eps).recall("certificate expired on proxy", principal="p", k=2)
    first = ctx.episodes[0]
    assert first.episode.id == "b"
    assert first.score.relevance > ctx.episodes[1].score.relevance
    total = (
        DEFAULT.relevance * first.score.relevance
        + DEFAULT.recency * first.score.recency
        + DEFAULT.situation * first.score.situation
        + DEFAULT.outcome * first.score.outcome
    )
    assert abs(first.score.total - total) < 1e-5
    assert "similar observations" in first.why


def test_labelled_outcomes_and_corrections_beat_unknown_and_situation_counts():
    text = "queue consumers stalled after broker failover"
    eps = [
        episode("unknown", text, outcome=Outcome.UNKNOWN, choices=()),
        episode("fixed", text + " again", corrections=("it was the consumer prefetch",), outcome=Outcome.FAILURE),
        episode("elsewhere", text, situation="planning"),
    ]
    ctx = retriever(eps, config=NO_MMR).recall(text, principal="p", situation="ops", k=3)
    parts = {r.episode.id: r.score for r in ctx.episodes}
    assert parts["fixed"].outcome > parts["unknown"].outcome == 0.0
    assert parts["unknown"].situation == 1.0 and parts["elsewhere"].situation == 0.0
    flat = retriever(eps, config=NO_OUTCOME_LABELS).recall(text, principal="p", k=3)
    assert all(r.score.outcome == 0.0 for r in flat.episodes)
    assert "outcome" not in flat.render() and "outcome SUCCESS" in ctx.render()


def test_recency_decays_with_the_documented_half_life():
    eps = [
        episode("new", "disk full on build agents", age_days=0),
        episode("old", "disk full on build agents.", age_days=DEFAULT.half_life_days),
    ]
    ctx = retriever(eps, config=NO_MMR).recall("disk full on build agents", principal="p", k=2)
    recency = {r.episode.id: r.score.recency for r in ctx.episodes}
    assert recency["new"] == 1.0 and abs(recency["old"] - 0.5) < 1e-6


@given(st.lists(st.floats(0, 200 * 365, allow_nan=False), min_size=1, max_size=40))
@example([31_000.0, 31_900.0, 32_200.0, 32_240.0, 32_260.0, 32_400.0])  # about 1033 to 1080 halvings
def test_recency_is_the_half_life_power_exactly_also_where_it_underflows(ages):
    """Every row's recency is ``0.5 ** (age / half_life)`` and the rest of its score the weighted sum, to the
    bit, for ages up to 200 years (recency is subnormal from about 84 years on, 0 from 88)."""
    eps = [episode(f"e{i}", "disk full on build agents", age_days=age) for i, age in enumerate(ages)]
    memory = retriever(eps)
    part = memory.index.partition("p")
    recency, sit, outcome, rest = memory._parts(part, "ops", T0)
    halvings = np.maximum(T0.timestamp() - part.ends, 0.0) / 86400.0 / DEFAULT.half_life_days
    assert recency.tolist() == (0.5**halvings).tolist()
    expected = DEFAULT.recency * 0.5**halvings + DEFAULT.situation * sit + DEFAULT.outcome * part.outcomes
    assert rest.tolist() == expected.astype(np.float32).tolist() and sit.tolist() == [1.0] * len(ages)


def test_mmr_removes_near_duplicates():
    dup = "cron job overlapping with the nightly backup window"
    eps = [episode("d1", dup), episode("d2", dup + "."), episode("other", "nightly backup slow on the archive volume")]
    with_mmr = retriever(eps).recall(dup, principal="p", k=2)
    assert {r.episode.id for r in with_mmr.episodes} in ({"d1", "other"}, {"d2", "other"})
    without = retriever(eps, config=NO_MMR).recall(dup, principal="p", k=2)
    assert {r.episode.id for r in without.episodes} == {"d1", "d2"}


def test_graph_proximity_lifts_an_episode_linked_to_the_most_relevant_one():
    eps = [
        episode("seed", "api gateway returns 502 for uploads"),
        episode("linked", "object storage throttling writes"),
        episode("lonely", "object storage throttling writes!"),
    ]
    G = nx.MultiDiGraph()
    for ep in eps:
        add_episode(G, ep)
    add_edges(G, [Edge("linked", "seed", EdgeType.CAUSED_BY, 0.9, "test")])
    ctx = retriever(eps, graph=G, config=NO_MMR).recall("api gateway 502 on uploads", principal="p", k=3)
    parts = {r.episode.id: r.score for r in ctx.episodes}
    assert parts["linked"].graph > 0.0 == parts["lonely"].graph
    assert parts["linked"].total > parts["lonely"].total
    no_graph = retriever(eps, graph=G, config=NO_GRAPH).recall("api gateway 502 on uploads", principal="p", k=3)
    assert all(r.score.graph == 0.0 for r in no_graph.episodes)


def test_facts_apply_by_condition_terms_and_only_active_ones():
    facts = [
        fact("f1", ("certificate", "expir"), "rotate_cert"),
        fact("f2", ("replica", "lag"), "db"),
        fact("f3", ("certificate",), "old", status="retired"),
    ]
    r = retriever([episode("a", "x")], facts=facts)
    ctx = r.recall("the certificate has expired", principal="p")
    assert [x.fact.fact_id for x in ctx.facts] == ["f1"]
    assert ctx.facts[0].match == 1.0 and abs(ctx.facts[0].score - 0.8) < 1e-9
    assert "f1@1" in ctx.item_ids() and "[f1@1]" in ctx.render()
    assert (
        retriever([episode("a", "x")], facts=facts, config=NO_FACTS)
        .recall("the certificate has expired", principal="p")
        .facts
        == ()
    )


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=2000))
def test_render_stays_within_budget(budget):
    eps = [
        episode(f"e{i}", f"incident {i}: workers timing out " * 3, corrections=("long correction " * 20,))
        for i in range(4)
    ]
    ctx = retriever(eps, facts=[fact("f", ("worker",), "alpha")]).recall("workers timing out", principal="p")
    assert len(ctx.render(max_chars=budget)) <= budget


WORDS = st.sampled_from("disk queue worker cache latency deploy cert replica lag proxy timeout pool".split())


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.lists(WORDS, min_size=1, max_size=5)), min_size=1, max_size=12
    ),
    st.lists(WORDS, min_size=1, max_size=4),
    st.sampled_from(["a", "b", "c"]),
)
def test_tenant_isolation_a_principal_never_recalls_another_principals_items(rows, query, who):
    eps = [episode(f"{p}-{i}", " ".join(words), principal=p) for i, (p, words) in enumerate(rows)]
    facts = [fact(f"fact-{p}-{i}", tuple(words[:2]), "x", principal=p) for i, (p, words) in enumerate(rows)]
    G = nx.MultiDiGraph()
    for ep in eps:
        add_episode(G, ep)
    add_edges(G, [Edge(a.id, b.id, EdgeType.LED_TO, 1.0, "t") for a, b in zip(eps, eps[1:])])  # even across tenants
    ctx = retriever(eps, facts=facts, graph=G).recall(" ".join(query), principal=who, k=10)
    assert all(r.episode.principal == who for r in ctx.episodes)
    assert all(r.fact.principal == who for r in ctx.facts)
    assert all(i.startswith((who + "-", f"fact-{who}-")) for i in ctx.item_ids())


# A synthetic corpus at scale (the bounds tests and the reopen tests share it; the benchmark,
# `python -m eval.bench`, times recall over stores of real episodes).
VOCAB = (
    "latency timeout pool queue worker disk cache replica lag deploy release config cert proxy dns "
    "memory leak cpu throttle lock index shard backup cron batch retry circuit breaker upstream"
).split()
CAUSES = ("alpha", "beta", "gamma", "delta")
SYNTHETIC_T0 = datetime(2026, 1, 1, tzinfo=UTC)


def synthetic_texts(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """`n` (observation text, cause) pairs; each cause favours its own quarter of the vocabulary."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        cause = int(rng.integers(len(CAUSES)))
        own = VOCAB[cause * 7 : cause * 7 + 7]
        words = list(rng.choice(own, 4)) + list(rng.choice(VOCAB, 4))
        out.append((" ".join(words) + f" on service-{int(rng.integers(50))}", CAUSES[cause]))
    return out


def build(n: int, *, principals: int = 1, seed: int = 0, config: RetrieverConfig = DEFAULT) -> Retriever:
    """A retriever over `n` synthetic closed episodes with a sparse graph."""
    encoder = HashingEncoder()
    texts = synthetic_texts(n, seed)
    vectors = encoder.encode([t for t, _ in texts])
    index, graph = EpisodeIndex(encoder.dim), nx.MultiDiGraph()
    for i, ((text, cause), vector) in enumerate(zip(texts, vectors)):
        at = SYNTHETIC_T0 + timedelta(hours=i)
        ep = Episode(
            id=f"ep{i:06d}",
            entry_ids=(f"e{i}",),
            first_seq=i,
            last_seq=i,
            principal=f"p{i % principals}",
            situation="ops",
            subject=None,
            start=at,
            end=at,
            summary=text,
            outcome=(Outcome.SUCCESS, Outcome.FAILURE)[i % 3 == 0],
            outcome_evidence="",
            choices=(cause,),
            observations=(text,),
        )
        index.add(ep, episode_vector(vector[None, :]))
        add_episode(graph, ep)
        if i >= principals and i % 4 == 0:
            add_edges(graph, [Edge(ep.id, f"ep{i - principals:06d}", EdgeType.RETRY_OF, 0.9, "synthetic")])
    return Retriever(index, encoder.encode, graph=graph, config=config)


def test_synthetic_corpus_recalls_its_own_cause():
    retriever = build(300)
    text, cause = synthetic_texts(300)[7]
    context = retriever.recall(text, principal="p0", k=5)
    assert context.episodes[0].episode.id == "ep000007" and context.episodes[0].episode.choices == (cause,)
    assert len(context.episodes) == 5
