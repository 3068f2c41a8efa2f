"""Every caller of recall gets past problems whole: after wrong guess → failure → correction → fix, the
facade's context and the MCP server's recall show the failed attempt and the correction, not only the fix."""

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from memory import EpisodicMemory

T = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
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
        assert "2 attempts" not in context.render(max_chars=4000, incidents={})


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
