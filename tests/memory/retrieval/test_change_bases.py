"""Recall keeps the observation-independent part of the implicated changes (`ChangeBases`) between
questions: kept or built afresh, the answer is the same, and it is built again once the memory learns."""

from datetime import UTC, datetime, timedelta

from memory import EpisodicMemory
from memory.retrieval.changes import ChangeBases, changes_for

T = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LATER = T + timedelta(days=1)  # "now" for every question: after all the changes below
QUESTIONS = [
    ["orders errors since the payments retry change"],
    ["inventory sync stalls since the cache ttl change"],
    ["orders errors since the payments retry change", "inventory sync stalls after the cache ttl change"],
    ["nothing related at all"],
]


def _change(memory: EpisodicMemory, hours: float, service: str, seen: str, choice: str, did: str) -> None:
    at = lambda h: {"timestamp": T + timedelta(hours=h), "situation": "incident"}  # noqa: E731
    memory.observe(seen, metadata={"service": service}, **at(hours))
    memory.decide(f"Decision: {choice}", choice=choice, **at(hours + 0.1))
    memory.outcome(did, status="success", **at(hours + 0.2))
    memory.flush()


def _ids(memory: EpisodicMemory, bases: ChangeBases | None, observations: list[str]) -> list[tuple[str, float]]:
    found = changes_for(memory.state, observations, principal="team-a", at=LATER, subject="orders", bases=bases)
    return [(c.episode_id, c.probability) for c in found]


def test_kept_bases_answer_as_fresh_ones_and_are_built_again_once_the_memory_learns():
    with EpisodicMemory(principal="team-a") as memory:
        _change(memory, 0, "payments", "payments client timeouts", "retries", "Enabled aggressive retries")
        bases = ChangeBases(memory.state)
        first = [_ids(memory, bases, q) for q in QUESTIONS]
        assert first == [_ids(memory, None, q) for q in QUESTIONS]
        assert first[0] and first[0][0][0] == memory.episodes()[0].id
        assert bases.at("team-a", LATER) is bases.at("team-a", LATER)  # kept while nothing changed

        # a second change closes before the same "now": a basis kept past it would not know it
        _change(memory, 3, "inventory", "inventory sync slow", "ttl", "Raised the cache ttl to an hour")
        after = [_ids(memory, bases, q) for q in QUESTIONS]
        assert after == [_ids(memory, None, q) for q in QUESTIONS]
        assert memory.episodes()[1].id in {i for i, _ in after[1]}
        assert after != first


def test_a_basis_is_built_for_the_time_asked():
    with EpisodicMemory(principal="team-a") as memory:
        _change(memory, 0, "payments", "payments client timeouts", "retries", "Enabled aggressive retries")
        bases = ChangeBases(memory.state)
        before = bases.at("team-a", T - timedelta(hours=1))  # before the change closed: nothing in place
        assert before.candidates == [] and before.history == []
        assert [c.episode.id for c in bases.at("team-a", LATER).candidates] == [memory.episodes()[0].id]
