"""Recall filters (metadata and time range, applied before scoring) and the Context's JSON form."""

import json
from datetime import datetime, timedelta

import pytest

from memory import EpisodicMemory
from memory.episodes import Outcome
from tests.builders import T0

# one kind of incident on two services, a day apart each, told in different words
SERVICES = ["checkout", "billing", "checkout", "billing"]
WORDS = [
    "connection pool exhausted in the client logs",
    "threads blocked waiting for a pooled connection",
    "timeouts acquiring a connection from the pool",
    "pool at its maximum size, requests queue",
]


def _memory() -> EpisodicMemory:
    memory = EpisodicMemory(principal="team")
    for day, service in enumerate(SERVICES):
        clock = T0 + timedelta(days=day)
        memory.observe(
            f"{service} 5xx; {WORDS[day]}", timestamp=clock, situation="incident", metadata={"service": service}
        )
        ok = day % 2 == 0
        memory.decide(
            "Decision: pool",
            choice="pool",
            timestamp=clock + timedelta(minutes=5),
            situation="incident",
            metadata={"service": service},
        )
        memory.outcome(
            "errors gone" if ok else "no change",
            status="success" if ok else "failure",
            timestamp=clock + timedelta(minutes=10),
            situation="incident",
            metadata={"service": service},
        )
    memory.flush()
    return memory


def test_where_service_keeps_only_that_services_episodes_even_when_others_score_higher():
    memory = _memory()
    query = f"billing 5xx; {WORDS[1]}"
    unfiltered = memory.recall(query, k=1)
    assert unfiltered.episodes[0].episode.subject == "billing"
    context = memory.recall(query, k=5, where={"service": "checkout"})
    assert len(context.episodes) == 2
    assert {r.episode.subject for r in context.episodes} == {"checkout"}
    assert memory.recall(query, where={"service": "nowhere"}).episodes == ()


def test_where_outcome_and_time_range():
    memory = _memory()
    failures = memory.recall("pool exhausted", where={"outcome": "failure"})
    assert failures.episodes and {r.episode.outcome for r in failures.episodes} == {Outcome.FAILURE}
    both = memory.recall("pool exhausted", where={"outcome": ["SUCCESS", Outcome.FAILURE]})
    assert len(both.episodes) == 4
    window = memory.recall("pool exhausted", since=T0 + timedelta(days=1), until=T0 + timedelta(days=2, hours=1))
    ends = sorted(r.episode.end for r in window.episodes)
    assert len(ends) == 2 and T0 + timedelta(days=1) <= ends[0] and ends[-1] <= T0 + timedelta(days=2, hours=1)
    late = memory.recall("pool exhausted", since=T0 + timedelta(days=3), where={"service": "billing"})
    assert [r.episode.start.date() for r in late.episodes] == [(T0 + timedelta(days=3)).date()]


def test_malformed_filters_are_named():
    memory = _memory()
    with pytest.raises(ValueError, match="unknown key 'team'"):
        memory.recall("x", where={"team": "a"})
    with pytest.raises(ValueError, match="since must be timezone-aware"):
        memory.recall("x", since=datetime(2026, 3, 2))
    with pytest.raises(ValueError, match="is after until"):
        memory.recall("x", since=T0 + timedelta(days=2), until=T0)


def test_context_json_carries_provenance_and_reasons():
    memory = _memory()
    context = memory.recall("checkout 5xx; connection pool exhausted")
    data = json.loads(context.to_json())
    assert data == context.to_dict() and data["principal"] == "team"
    assert [e["id"] for e in data["episodes"]] + [f["id"] for f in data["facts"]] == context.item_ids()
    stored = {entry.id for entry in memory.store.entries()}
    for item, recalled in zip(data["episodes"], context.episodes):
        assert item["provenance"]["entry_ids"] and set(item["provenance"]["entry_ids"]) <= stored
        assert item["provenance"]["subject"] in {"checkout", "billing"}
        assert item["outcome"] == recalled.episode.outcome.value and item["why"] == recalled.why
        assert item["score"]["total"] == recalled.score.total
    for item in data["facts"]:
        assert item["provenance"]["support"] and item["why"]
