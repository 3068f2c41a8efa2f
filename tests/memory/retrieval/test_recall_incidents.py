"""Every caller of recall gets past problems whole: after wrong guess → failure → correction → fix, the
facade's context and the MCP server's recall show the failed attempt and the correction, not only the fix."""

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from memory import EpisodicMemory

T = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
OBSERVED = "checkout 5xx at 7%; connection pool exhausted, database idle"
FAILED = "errors persist after restarting the database"
CORRECTION = "Not the database: the connection pool was exhausted"


def _corrected_then_fixed(memory):
    at = lambda minutes: {"timestamp": T + timedelta(minutes=minutes), "situation": "incident"}  # noqa: E731
    memory.observe(OBSERVED, **at(0))
    memory.decide("Decision: database", choice="database", **at(5))
    memory.outcome(FAILED, status="failure", **at(10))
    memory.correct(CORRECTION, **at(11))
    memory.decide("Decision: pool", choice="pool", **at(15))
    memory.outcome("pool raised to 80; errors gone", status="success", **at(20))
    memory.flush()


def _shows_the_whole_incident(text: str) -> None:
    assert "(2 attempts, final fix: pool)" in text and f"Symptom: {OBSERVED}" in text
    assert "tried database, outcome FAILURE" in text and f"Result: {FAILED}" in text
    assert f"Correction: {CORRECTION}" in text
    assert text.index("tried database") < text.index("tried pool, outcome SUCCESS")


def test_the_facade_recalls_the_failed_attempt_and_the_correction_beside_the_fix():
    with EpisodicMemory(principal="team-a") as memory:
        _corrected_then_fixed(memory)
        context = memory.recall("payments 5xx; redis pool exhausted")
        assert len(context.episodes) >= 1
        _shows_the_whole_incident(context.render(max_chars=4000))
        # an explicit note (what an agent passes) still wins over the memory's own
        assert "2 attempts" not in context.render(max_chars=4000, notes={})


@pytest.mark.extra("mcp")
def test_the_mcp_server_recalls_the_failed_attempt_and_the_correction(tmp_path):
    from mcp import Client

    from memory.mcp import build_server

    async def recall():
        with EpisodicMemory(tmp_path / "m.db", principal="team-a") as memory:
            _corrected_then_fixed(memory)
            async with Client(build_server(memory)) as client:
                return await client.call_tool("recall", {"query": "payments 5xx; redis pool exhausted"})

    result = asyncio.run(recall())
    assert not result.is_error
    _shows_the_whole_incident(result.content[0].text)
    unit = result.structured_content["incidents"][0]
    assert [(a["choice"], a["outcome"]) for a in unit["attempts"]] == [("database", "FAILURE"), ("pool", "SUCCESS")]
    assert unit["corrections"] == [CORRECTION] and unit["final_fix"] == "pool"
    assert unit["closeness"] > 0 and unit["credit"] == 1.0 and "closeness" in unit["why"]


def test_a_recalled_incident_carries_every_attempt_the_corrections_the_fix_and_its_weights():
    with EpisodicMemory(principal="team-a") as memory:
        _corrected_then_fixed(memory)
        context = memory.recall(["checkout 5xx; connection pool exhausted"], situation="incident", subject="checkout")
        [unit] = context.incidents
        assert [(a.choice, a.outcome) for a in unit.incident.attempts] == [("database", "FAILURE"), ("pool", "SUCCESS")]
        assert unit.incident.corrections == (CORRECTION,) and unit.incident.resolution == "pool"
        assert unit.outcome == "SUCCESS" and unit.incident.symptoms == (OBSERVED,)
        assert [e.id for e in unit.episodes] == list(unit.incident.episode_ids) and len(unit.episodes) == 2
        assert unit.id in unit.incident.episode_ids and unit.sequence == 2
        assert 0 < unit.closeness <= 1 and unit.credit == 1.0
        assert f"closeness {unit.closeness:.2f}" in unit.why and unit.recalled.why in unit.why
        # the service at hand says where, not what: its name shared with the past symptoms brings nothing
        query = ["checkout 5xx; redis timeouts"]
        named = memory.recall(query, situation="incident", subject="checkout").incidents[0].closeness
        assert named < memory.recall(query, situation="incident").incidents[0].closeness


def test_one_by_one_each_episode_is_a_unit_with_only_its_own_outcome():
    with EpisodicMemory(principal="team-a") as memory:
        _corrected_then_fixed(memory)
        failed, fixed = memory.episodes()
        units = {
            u.id: u
            for outcome in ("FAILURE", "SUCCESS")
            for u in memory.recall(
                [OBSERVED], situation="incident", unit="episode", where={"outcome": outcome}
            ).incidents
        }
        assert set(units) == {failed.id, fixed.id}
        assert memory.recall([OBSERVED], situation="incident", unit="episode").notes == {}
        assert all(len(u.incident.attempts) == 1 and len(u.episodes) == 1 for u in units.values())
        assert units[failed.id].incident.resolution is None and units[fixed.id].incident.resolution == "pool"
        assert units[failed.id].outcome == "FAILURE" and units[failed.id].incident.corrections == (CORRECTION,)
        with pytest.raises(ValueError, match="unit must be one of incident, episode"):
            memory.recall([OBSERVED], unit="problem")


def test_excluded_entries_take_their_whole_incident_out_and_a_limit_counts_incidents():
    with EpisodicMemory(principal="team-a") as memory:
        _corrected_then_fixed(memory)
        failed = memory.episodes()[0]
        assert memory.recall([OBSERVED], situation="incident").incidents
        left = memory.recall([OBSERVED], situation="incident", exclude=failed.entry_ids[:1])
        assert left.incidents == () and failed.id not in {r.episode.id for r in left.episodes}
        assert len(memory.recall([OBSERVED], situation="incident", incidents=1).incidents) == 1


def test_a_note_of_another_situation_that_reached_no_outcome_is_no_unit():
    with EpisodicMemory(principal="team-a") as memory:
        _corrected_then_fixed(memory)
        memory.observe(
            "checkout 5xx review: connection pool exhausted was discussed",
            situation="review",
            timestamp=T + timedelta(hours=2),
        )
        memory.flush()
        context = memory.recall([OBSERVED], situation="incident")
        assert {e.situation for e in (r.episode for r in context.episodes)} == {"incident"}
        assert memory.recall([OBSERVED], situation="review").episodes  # in its own situation it is recalled


def test_recall_names_the_recent_change_the_observations_implicate():
    with EpisodicMemory(principal="team-a") as memory:
        at = lambda hours: {"timestamp": T + timedelta(hours=hours), "situation": "incident"}  # noqa: E731
        memory.observe("payments client timeouts", metadata={"service": "payments"}, **at(0))
        memory.decide("Decision: retries", choice="retries", **at(0.1))
        memory.outcome("Enabled aggressive retries in the payments client", status="success", **at(0.2))
        memory.flush()
        memory.observe("orders errors since the payments retry change", metadata={"service": "orders"}, **at(5))
        context = memory.recall(subject="orders")
        [change] = context.changes
        assert change.change.episode_id == memory.episodes()[0].id and change.sequence == 1
        assert "payments" in change.change.chain and change.change.resolved == "retries"
        assert f"[{change.change.episode_id}] {change.change.chain}" in context.render()
        data = context.to_dict()["changes"][0]
        assert data["id"] == change.change.episode_id and data["probability"] == change.change.probability
