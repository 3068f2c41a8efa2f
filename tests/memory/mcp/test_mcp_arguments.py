"""MCP tool arguments: every mistake comes back as a short tool error naming the argument, what was
expected and what was found; unknown names, times without a timezone and unknown relied-on ids are refused."""

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from memory import EpisodicMemory

pytestmark = pytest.mark.extra("mcp")

AT = "2026-03-02T09:00:00Z"


async def _calls(memory, calls):
    """Each call's (is_error, text, structured content) through the SDK's in-process client."""
    from mcp import Client

    from memory.mcp import build_server

    async with Client(build_server(memory)) as client:
        results = [await client.call_tool(name, arguments) for name, arguments in calls]
    return [(r.is_error, r.content[0].text if r.content else "", r.structured_content) for r in results]


def _errors(memory, calls):
    """The text of each call, which must have failed."""
    results = asyncio.run(_calls(memory, calls))
    assert [is_error for is_error, _, _ in results] == [True] * len(calls)
    return [text for _, text, _ in results]


def test_argument_errors_name_the_argument_what_was_expected_and_what_was_found(tmp_path):
    calls = [
        ("record_outcome", {"text": "errors gone", "status": "fine"}),
        ("record_observation", {"text": 5}),
        ("record_decision", {"text": "raise the pool", "confidence": 2, "relied_on": "nope"}),
        ("record_decision", {"text": "raise the pool", "choice": "pool", "relied_on": ["ok", 7]}),
        ("recall", {"k": "many", "max_chars": 5, "outcome": "MAYBE"}),
        ("list_facts", {"history": "maybe"}),
        ("forget_entry", {"entry_id": "abc"}),
    ]
    with EpisodicMemory(tmp_path / "memory.sqlite", principal="p") as memory:
        texts = _errors(memory, calls)
        assert len(memory.store) == 0
    assert texts == [
        "Error executing tool record_outcome: status: expected one of 'success', 'failure', 'partial', found 'fine'",
        "Error executing tool record_observation: text: expected a non-empty string, found 5",
        "Error executing tool record_decision: choice: expected a non-empty string, found nothing (it is required); "
        "confidence: expected a number from 0 to 1 or null, found 2; relied_on: expected a list of strings, "
        "found 'nope'",
        "Error executing tool record_decision: relied_on[1]: expected a string, found 7",
        "Error executing tool recall: outcome: expected one of 'SUCCESS', 'FAILURE', 'PARTIAL', 'UNKNOWN' or null, "
        "found 'MAYBE'; k: expected an integer from 1 to 50, found 'many'; max_chars: expected an integer from 200 "
        "to 20000, found 5",
        "Error executing tool list_facts: history: expected true or false, found 'maybe'",
        "Error executing tool forget_entry: entry_id: expected a string of 64 characters, found 'abc'",
    ]
    assert not any("pydantic" in t or "http" in t or "type=" in t for t in texts)


def test_a_time_without_a_timezone_is_refused_with_the_fix(tmp_path):
    with EpisodicMemory(tmp_path / "memory.sqlite", principal="p") as memory:
        texts = _errors(
            memory,
            [
                ("record_observation", {"text": "disk full", "timestamp": "2026-04-06T18:00:00"}),
                ("recall", {"since": "2026-04-06"}),
                ("recall", {"until": "last tuesday"}),
            ],
        )
        ((failed, _, recorded),) = asyncio.run(
            _calls(memory, [("record_observation", {"text": "disk full", "timestamp": "2026-04-06T20:00:00+02:00"})])
        )
    assert texts == [
        "Error executing tool record_observation: timestamp: '2026-04-06T18:00:00' has no timezone; add Z or "
        "+00:00, e.g. 2026-04-06T18:00:00Z",
        "Error executing tool recall: since: '2026-04-06' has no timezone; add Z or +00:00, e.g. 2026-04-06T00:00:00Z",
        "Error executing tool recall: until: 'last tuesday' is not an ISO-8601 time (e.g. 2026-03-02T09:00:00Z)",
    ]
    assert not failed and recorded["timestamp"] == "2026-04-06T18:00:00+00:00"


def test_unknown_argument_names_are_refused_with_the_tools_arguments(tmp_path):
    calls = [
        ("record_observation", {"text": "disk full", "colour": "red", "timestmp": AT}),
        ("record_outcome", {"text": "errors gone", "status": "ok", "sevrice": "shop"}),
        ("end_episode", {"now": True}),
    ]
    with EpisodicMemory(tmp_path / "memory.sqlite", principal="p") as memory:
        texts = _errors(memory, calls)
        assert len(memory.store) == 0
    assert texts == [
        "Error executing tool record_observation: unknown arguments 'colour', 'timestmp' (record_observation takes "
        "text, service, situation, timestamp)",
        "Error executing tool record_outcome: unknown argument 'sevrice' (record_outcome takes text, status, "
        "service, situation, timestamp); status: expected one of 'success', 'failure', 'partial', found 'ok'",
        "Error executing tool end_episode: unknown argument 'now' (end_episode takes no arguments)",
    ]


def _learned_incidents(memory):
    """Two closed incidents caused by an exhausted pool, the first diagnosed wrong and corrected: a fact."""
    start = datetime(2026, 3, 2, 9, tzinfo=UTC)
    for day, (symptom, guess, correction) in enumerate(
        [
            (
                "connection pool exhausted; database idle",
                "database",
                "Not the database: the connection pool was exhausted",
            ),
            ("redis client pool exhausted; redis idle", "pool", ""),
        ]
    ):
        at = start + timedelta(days=day)
        memory.observe(symptom, timestamp=at)
        for minute, choice in enumerate(dict.fromkeys([guess, "pool"]), start=1):
            memory.decide(f"Decision: {choice}", choice=choice, timestamp=at + timedelta(minutes=10 * minute))
            status = "success" if choice == "pool" else "failure"
            memory.outcome("done", status=status, timestamp=at + timedelta(minutes=10 * minute + 5))
            if status == "failure":
                memory.correct(correction, timestamp=at + timedelta(minutes=10 * minute + 6))
        memory.flush()


def test_relied_on_ids_the_memory_does_not_know_are_refused(tmp_path):
    with EpisodicMemory(tmp_path / "memory.sqlite", principal="p") as memory:
        _learned_incidents(memory)
        episode, fact = memory.episodes()[0], memory.facts()[0]
        memory.observe("another tenant's incident", principal="q", timestamp=datetime(2026, 3, 9, tzinfo=UTC))
        memory.flush()
        theirs = memory.episodes("q")[0]  # another tenant's episode is not this memory's to cite
        entry = memory.observe("payments 5xx, connection pool exhausted", timestamp=datetime.now(UTC))
        results = asyncio.run(
            _calls(
                memory,
                [
                    ("record_decision", {"text": "raise the pool", "choice": "pool", "relied_on": ids})
                    for ids in (
                        ["nope", episode.id, entry.id, theirs.id],
                        ["nope"],
                        [episode.id, fact.id, fact.fact_id],
                    )
                ],
            )
        )
        assert [is_error for is_error, _, _ in results] == [True, True, False]
        assert results[0][1] == (
            f"Error executing tool record_decision: relied_on: 'nope', {entry.id!r}, {theirs.id!r} are no episode or "
            "fact id of this memory (use the ids recall returned)"
        )
        assert results[1][1] == (
            "Error executing tool record_decision: relied_on: 'nope' is no episode or fact id "
            "of this memory (use the ids recall returned)"
        )
        decision = memory.store.get(results[2][2]["entry_id"])
        assert decision.metadata["relied_on"] == [episode.id, fact.id, fact.fact_id]
