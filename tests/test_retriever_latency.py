"""Recall latency at scale: a benchmark helper, not a timed test.

    python tests/test_retriever_latency.py               # retriever over 1k and 10k episodes
    python tests/test_retriever_latency.py --facade 1000  # also through EpisodicMemory + SQLite

The test below only checks that the synthetic corpus is recalled correctly.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import networkx as nx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory.timeline import HashingEncoder  # noqa: E402
from memory.episodes import Edge, EdgeType, Episode, Outcome  # noqa: E402
from memory.graph import add_edges, add_episode  # noqa: E402
from memory.retriever import DEFAULT, EpisodeIndex, Retriever, episode_vector  # noqa: E402

VOCAB = ("latency timeout pool queue worker disk cache replica lag deploy release config cert proxy dns "
         "memory leak cpu throttle lock index shard backup cron batch retry circuit breaker upstream").split()
CAUSES = ("alpha", "beta", "gamma", "delta")
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


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


def build(n: int, *, principals: int = 1, seed: int = 0) -> Retriever:
    """A retriever over `n` synthetic closed episodes with a sparse graph."""
    encoder = HashingEncoder()
    texts = synthetic_texts(n, seed)
    vectors = encoder.encode([t for t, _ in texts])
    index, graph = EpisodeIndex(encoder.dim), nx.MultiDiGraph()
    for i, ((text, cause), vector) in enumerate(zip(texts, vectors)):
        at = T0 + timedelta(hours=i)
        ep = Episode(id=f"ep{i:06d}", entry_ids=(f"e{i}",), first_seq=i, last_seq=i, principal=f"p{i % principals}",
                     situation="ops", subject=None, start=at, end=at, summary=text,
                     outcome=(Outcome.SUCCESS, Outcome.FAILURE)[i % 3 == 0], outcome_evidence="", choices=(cause,),
                     observations=(text,))
        index.add(ep, episode_vector(vector[None, :]))
        add_episode(graph, ep)
        if i >= principals and i % 4 == 0:
            add_edges(graph, [Edge(ep.id, f"ep{i - principals:06d}", EdgeType.RETRY_OF, 0.9, "synthetic")])
    return Retriever(index, encoder.encode, graph=graph, config=DEFAULT)


def time_recall(recall, queries: list[str], *, repeat: int = 3) -> tuple[float, float]:
    """Median and 95th-percentile latency (ms) of `recall(query)` over the queries."""
    recall(queries[0])  # warm caches
    times = []
    for _ in range(repeat):
        for q in queries:
            start = time.perf_counter()
            recall(q)
            times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def test_synthetic_corpus_recalls_its_own_cause():
    retriever = build(300)
    text, cause = synthetic_texts(300)[7]
    context = retriever.recall(text, principal="p0", k=5)
    assert context.episodes[0].episode.id == "ep000007" and context.episodes[0].episode.choices == (cause,)
    assert len(context.episodes) == 5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Recall latency at 1k and 10k episodes.")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--facade", type=int, default=0, help="also time EpisodicMemory.recall with this many episodes")
    args = parser.parse_args(argv)
    queries = [t for t, _ in synthetic_texts(50, seed=99)]
    for n in args.sizes:
        start = time.perf_counter()
        retriever = build(n)
        built = time.perf_counter() - start
        median, p95 = time_recall(lambda q: retriever.recall(q, principal="p0", k=5), queries)
        print(f"retriever  {n:>6} episodes: recall median {median:.2f} ms, p95 {p95:.2f} ms (built in {built:.1f} s)")
    if args.facade:
        import tempfile

        from memory.agent_memory import EpisodicMemory

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "bench.db"
            start = time.perf_counter()
            with EpisodicMemory(path, principal="bench") as memory:
                clock = T0
                for text, cause in synthetic_texts(args.facade):
                    clock += timedelta(hours=1)
                    memory.observe(text, timestamp=clock, situation="ops")
                    memory.decide(f"Decision: {cause}", choice=cause, timestamp=clock + timedelta(minutes=1),
                                  situation="ops")
                    memory.outcome("resolved", status="success", timestamp=clock + timedelta(minutes=2),
                                   situation="ops")
                memory.flush()
            built = time.perf_counter() - start
            start = time.perf_counter()
            with EpisodicMemory(path, principal="bench") as memory:
                opened = time.perf_counter() - start
                median, p95 = time_recall(lambda q: memory.recall(q, k=5), queries)
                print(f"facade     {len(memory.episodes()):>6} episodes: recall median {median:.2f} ms, p95 {p95:.2f} ms "
                      f"(recorded in {built:.1f} s, reopened in {opened:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
