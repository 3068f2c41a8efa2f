"""The MCP server end to end: the README walkthrough with the SDK's own stdio client, and tool errors."""

import asyncio
import json
from pathlib import Path

import pytest

from memory import EpisodicMemory

# The SDK is imported by the tests that run, not at collection: each of the suite's workers collects
# every module, and importing the SDK takes about a second.
pytestmark = pytest.mark.extra("mcp")

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "mcp.md"


def walkthrough() -> str:
    """The python block of the MCP page's walkthrough."""
    section = PAGE.read_text(encoding="utf-8")
    start = section.index("```python") + len("```python")
    return section[start : section.index("```", start)]


def printed() -> list[str]:
    """The lines the MCP page says the walkthrough prints."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("```text", text.index("It prints:")) + len("```text")
    return text[start : text.index("```", start)].strip().splitlines()


def _child_sees_this_checkout(monkeypatch):
    """The server process imports this checkout (the SDK passes only a safe subset of the environment)."""
    import mcp.client.stdio

    default = mcp.client.stdio.get_default_environment
    monkeypatch.setattr(mcp.client.stdio, "get_default_environment", lambda: {**default(), "PYTHONPATH": str(ROOT)})


def test_readme_walkthrough_records_an_incident_and_recalls_a_fact(tmp_path, monkeypatch, capfd):
    # capfd, not capsys: the SDK hands the server process `sys.stderr`, which must be a real file
    _child_sees_this_checkout(monkeypatch)
    monkeypatch.chdir(tmp_path)
    exec(compile(walkthrough(), "docs/mcp.md", "exec"), {"__name__": "walkthrough"})
    out = capfd.readouterr().out
    assert out.strip().splitlines() == printed()  # the page shows what the walkthrough prints
    assert (
        "tools: end_episode, forget_entry, list_facts, recall, record_correction, record_decision, record_observation, "
        "record_outcome, verify_store" in out
    )
    assert "fact: when an observation affirms connection + exhausted + pool → pool, not database confidence" in out
    assert "error: True" in out and "'last tuesday' is not an ISO-8601 time" in out
    assert "verify: {'ok': True, 'entries': 15, 'first_bad': None}" in out
    with EpisodicMemory(tmp_path / "mcp-memory.db", principal="team-a") as memory:  # what the server wrote
        episodes = memory.episodes()
        assert [e.outcome.value for e in episodes].count("FAILURE") == 1 and len(episodes) == 4
        assert [f.conclusion for f in memory.facts()] == ["pool"]
        assert any(e.corrections for e in episodes)


async def _in_process_calls(memory, calls, **options):
    """The same tools through the SDK's in-process client (the stdio transport is covered above)."""
    from mcp import Client

    from memory.mcp import build_server

    async with Client(build_server(memory, **options)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        return tools, [await client.call_tool(name, arguments) for name, arguments in calls]


def test_schemas_describe_the_arguments_and_mistakes_come_back_as_tool_errors(tmp_path):
    calls = [
        ("record_outcome", {"text": "errors gone", "status": "fine"}),  # not in the enum
        ("record_observation", {"text": ""}),  # empty text
        ("record_observation", {"text": "disk full", "timestamp": "yesterday"}),
        ("recall", {"query": "disk", "outcome": "MAYBE"}),
        ("recall", {"query": "disk", "since": "2026-03-03T00:00:00Z", "until": "2026-03-01T00:00:00Z"}),
        ("no_such_tool", {}),
        (
            "record_observation",
            {"text": "disk full on the build agents", "service": "ci", "timestamp": "2026-03-02T09:00:00Z"},
        ),
        ("list_facts", {}),
        ("verify_store", {}),
    ]
    with EpisodicMemory(tmp_path / "memory.sqlite", principal="p") as memory:
        tools, results = asyncio.run(_in_process_calls(memory, calls))
    decision = tools["record_decision"].input_schema
    assert decision["required"] == ["text", "choice"]
    assert decision["properties"]["choice"]["description"] and tools["record_decision"].description
    assert tools["record_outcome"].input_schema["properties"]["status"]["enum"] == ["success", "failure", "partial"]
    assert all(t.description for t in tools.values())
    assert [r.is_error for r in results] == [True] * 6 + [False] * 3
    assert "yesterday" in results[2].content[0].text and "ISO-8601" in results[2].content[0].text
    assert "is after until" in results[4].content[0].text
    assert "Unknown tool: no_such_tool" in results[5].content[0].text
    assert results[6].structured_content["seq"] == 0  # the server kept working after every mistake
    assert results[7].structured_content == {"principal": "p", "facts": []}
    assert json.loads(results[8].content[0].text)["ok"] is True


def test_forget_entry_erases_an_entry_of_the_served_principal(tmp_path):
    with EpisodicMemory(tmp_path / "memory.sqlite", principal="p") as memory:
        other = memory.observe("another tenant's note", principal="q")
        _, results = asyncio.run(
            _in_process_calls(
                memory,
                [
                    (
                        "record_observation",
                        {"text": "badge scan for Ingrid Vasquez at door 4", "timestamp": "2026-03-02T09:00:00Z"},
                    )
                ],
            )
        )
        entry_id = results[0].structured_content["entry_id"]
        _, results = asyncio.run(
            _in_process_calls(
                memory,
                [
                    ("forget_entry", {"entry_id": entry_id, "reason": "request of the person concerned"}),
                    ("forget_entry", {"entry_id": other.id}),
                    ("verify_store", {}),
                ],
            )
        )
        assert results[0].structured_content["erased"] == 1 and not results[0].is_error
        assert results[1].is_error and "no entry" in results[1].content[0].text  # another tenant's entry
        assert json.loads(results[2].content[0].text)["ok"] is True
        assert memory.store.get(entry_id).text == ""


def test_a_retention_policy_is_a_tool_and_facts_show_the_evidence_it_erased(tmp_path):
    from datetime import timedelta

    from memory.retention import RetentionPolicy
    from tests.builders import T0, play_incidents

    with EpisodicMemory(tmp_path / "memory.sqlite", principal="team-a") as memory:
        play_incidents(memory)
        play_incidents(memory, start=T0 + timedelta(days=30))  # the same lessons learned again a month later
        before = {f.fact_id: len(f.support) for f in memory.facts()}
        policy = RetentionPolicy(max_entries=len(memory.store) // 2, keep_lessons=False)  # the first month goes
        tools, results = asyncio.run(
            _in_process_calls(
                memory, [("apply_retention", {}), ("list_facts", {}), ("verify_store", {})], retention=policy
            )
        )
        assert f"all but the newest {policy.max_entries}" in tools["apply_retention"].description
        done = results[0].structured_content
        assert not results[0].is_error and done["erased"] == policy.max_entries and done["erasure_record"]
        facts = results[1].structured_content["facts"]
        assert len(facts) == len(before) and all("evidence_erased" in f for f in facts), facts
        for fact in facts:
            (note,) = fact["evidence_erased"]
            assert note["erasure"] == done["erasure_record"] and note["policy"] and note["now"] == fact["fact_id"]
            assert note["support"] == [before[note["fact"]], len(fact["support"])]
        assert json.loads(results[2].content[0].text)["ok"] is True
    tools, _ = asyncio.run(_in_process_calls(memory, []))
    assert "apply_retention" not in tools  # no policy, no tool


def test_cli_refuses_a_retention_policy_it_cannot_apply(tmp_path, capsys):
    from memory.mcp.__main__ import main

    store = str(tmp_path / "memory.sqlite")
    assert main(["--store", store, "--principal", "p", "--retain-max-entries", "-1"]) == 2
    assert "retention: max_entries must be an int of at least 0, not -1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--store", store, "--principal", "p", "--retain-max-age", "ninety days"])
    assert "expected a positive number with d, h or m (e.g. 90d), not 'ninety days'" in capsys.readouterr().err


def test_cli_store_that_cannot_be_opened_is_a_usage_error(tmp_path, capsys):
    from memory.mcp.__main__ import main

    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["--store", str(blocker / "memory.sqlite"), "--principal", "p"]) == 2
    assert "error:" in capsys.readouterr().err


def test_cli_refuses_a_store_another_encoder_wrote(tmp_path, capsys):
    from memory import HashingEncoder
    from memory.mcp.__main__ import main

    path = tmp_path / "memory.sqlite"
    with EpisodicMemory(path, encoder=HashingEncoder(dim=64)) as memory:
        memory.observe("disk full on db-1")
    assert main(["--store", str(path), "--encoder", "hashing"]) == 2
    assert "embedded by encoder 'hashing-v2-d64-c0.5'" in capsys.readouterr().err
