"""The Claude reasoner against a fake transport: no network, no key."""

import json
import os

import pytest

try:  # the SDK's 2.x line ships its HTTP client as httpx2
    import httpx2 as httpx
except ImportError:  # pragma: no cover - older SDKs use httpx
    import httpx

from agent.claude import CacheMiss, ClaudeReasoner, MissingKey, ReasonerError, cost_usd
from agent.reasoner import CauseInfo, Evidence, Problem

PROBLEM = Problem(
    observations=("p99 latency up 4x", "threads blocked waiting for a connection"),
    candidates=(CauseInfo("pool", "client pool exhausted", ("pool exhausted",)),
                CauseInfo("config", "bad config shipped", ("right after deploy",))),
    situation="incident_response", service="checkout", attempt=1)
EVIDENCE = [Evidence(id="ep1", source="episode", text="pool fixed it", relevance=0.8, outcome="SUCCESS")]


def _message(tool_input, *, usage=None):
    return {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "record_decision", "input": tool_input}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": usage or {"input_tokens": 1000, "output_tokens": 50, "cache_read_input_tokens": 400,
                           "cache_creation_input_tokens": 0},
    }


def _client(handler):
    import anthropic

    return anthropic.Anthropic(api_key="test-key", max_retries=3,
                               http_client=httpx.Client(transport=httpx.MockTransport(handler)))


def test_decision_through_tool_schema_with_usage_and_cost(tmp_path):
    seen = []

    def handler(request):
        body = json.loads(request.content)
        seen.append(body)
        return httpx.Response(200, json=_message({"root_cause": "pool", "confidence": 0.8,
                                                  "rationale": "same as ep1", "relied_on": ["ep1", "bogus"]}))

    reasoner = ClaudeReasoner(client=_client(handler), cache_dir=tmp_path)
    decision = reasoner.decide(PROBLEM, EVIDENCE, "[ep1] pool fixed it")
    assert decision.choice == "pool" and decision.confidence == 0.8
    assert decision.relied_on == ("ep1",)  # unknown ids are dropped
    body = seen[0]
    assert body["temperature"] == 0
    assert body["tool_choice"] == {"type": "tool", "name": "record_decision"}
    assert body["tools"][0]["input_schema"]["properties"]["root_cause"]["enum"] == ["pool", "config"]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    expected = cost_usd("claude-sonnet-4-6", input_tokens=1000, output_tokens=50, cache_read_input_tokens=400)
    assert decision.usage["cost_usd"] == pytest.approx(expected) and expected == pytest.approx(0.00387)
    assert decision.usage["input_tokens"] == 1000


def test_retries_on_rate_limit_and_overload_then_succeeds():
    calls = []

    def handler(request):
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(429, headers={"retry-after-ms": "1"}, json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})
        if len(calls) == 2:
            return httpx.Response(529, headers={"retry-after-ms": "1"}, json={"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
        return httpx.Response(200, json=_message({"root_cause": "config", "confidence": 0.6, "rationale": "deploy",
                                                  "relied_on": []}))

    decision = ClaudeReasoner(client=_client(handler)).decide(PROBLEM, [], "")
    assert decision.choice == "config" and len(calls) == 3


def test_invalid_answer_gets_one_repair_then_fails_clearly():
    calls = []

    def handler(request):
        calls.append(json.loads(request.content))
        return httpx.Response(200, json=_message({"root_cause": "dns", "confidence": 0.5, "rationale": "x",
                                                  "relied_on": []}))

    with pytest.raises(ReasonerError, match="'dns' is not a candidate"):
        ClaudeReasoner(client=_client(handler)).decide(PROBLEM, [], "")
    assert len(calls) == 2 and len(calls[1]["messages"]) == 3


def test_cache_replays_without_key_and_misses_clearly(tmp_path):
    def handler(request):
        return httpx.Response(200, json=_message({"root_cause": "pool", "confidence": 0.9, "rationale": "r",
                                                  "relied_on": []}))

    first = ClaudeReasoner(client=_client(handler), cache_dir=tmp_path).decide(PROBLEM, EVIDENCE, "ctx")
    replay = ClaudeReasoner(cache_dir=tmp_path, api_key=None)
    again = replay.decide(PROBLEM, EVIDENCE, "ctx")
    assert again.choice == first.choice and replay.usage["cache_hits"] == 1
    with pytest.raises(CacheMiss, match="no cached response"):
        replay.decide(PROBLEM, EVIDENCE, "different context")


def test_missing_key_is_one_line(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingKey) as info:
        ClaudeReasoner(api_key=None)
    assert "\n" not in str(info.value)
    from eval.compare import main
    assert main(["--mode", "claude"]) == 2


def test_newer_models_get_no_sampling_parameters():
    request = ClaudeReasoner("claude-sonnet-5-5", api_key="k").build_request(PROBLEM, "")
    assert "temperature" not in request and request["tool_choice"] == {"type": "auto"}


@pytest.mark.claude
@pytest.mark.skipif(not os.environ.get("ANTHROPIC_API_KEY"), reason="needs ANTHROPIC_API_KEY")
def test_real_api_round_trip():
    decision = ClaudeReasoner(api_key=os.environ["ANTHROPIC_API_KEY"]).decide(PROBLEM, EVIDENCE, "[ep1] pool fixed it")
    assert decision.choice in {"pool", "config"}
