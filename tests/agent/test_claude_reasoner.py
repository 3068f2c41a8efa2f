"""The Claude reasoner against a fake transport: no network, no key."""

import json
import os
import typing

import pytest

try:  # the SDK's 2.x line ships its HTTP client as httpx2
    import httpx2 as httpx
except ImportError:  # pragma: no cover - older SDKs use httpx
    import httpx

from agent.claude import CacheMiss, ClaudeReasoner, MissingKey, cost_usd
from agent.reasoner import CauseInfo, Evidence, Problem

PROBLEM = Problem(
    observations=("p99 latency up 4x", "threads blocked waiting for a connection"),
    candidates=(
        CauseInfo("pool", "client pool exhausted", ("pool exhausted",)),
        CauseInfo("config", "bad config shipped", ("right after deploy",)),
    ),
    situation="incident_response",
    service="checkout",
    attempt=1,
)
EVIDENCE = [Evidence(id="ep1", source="episode", text="pool fixed it", relevance=0.8, outcome="SUCCESS")]


def _message(tool_input, *, usage=None):
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "record_decision", "input": tool_input}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": usage
        or {
            "input_tokens": 1000,
            "output_tokens": 50,
            "cache_read_input_tokens": 400,
            "cache_creation_input_tokens": 0,
        },
    }


def _client(handler):
    import anthropic

    return anthropic.Anthropic(
        api_key="test-key", max_retries=3, http_client=httpx.Client(transport=httpx.MockTransport(handler))
    )


def test_decision_through_tool_schema_with_usage_and_cost(tmp_path):
    seen = []

    def handler(request):
        body = json.loads(request.content)
        seen.append(body)
        return httpx.Response(
            200,
            json=_message(
                {"root_cause": "pool", "confidence": 0.8, "rationale": "same as ep1", "relied_on": ["ep1", "bogus"]}
            ),
        )

    reasoner = ClaudeReasoner(client=_client(handler), cache_dir=tmp_path)
    decision = reasoner.decide(PROBLEM, EVIDENCE, "[ep1] pool fixed it")
    assert decision.choice == "pool" and decision.confidence == 0.8
    assert decision.relied_on == ("ep1",)  # unknown ids are dropped
    body = seen[0]
    assert body["temperature"] == 0 and body["thinking"] == {"type": "disabled"}
    assert body["tool_choice"] == {"type": "tool", "name": "record_decision", "disable_parallel_tool_use": True}
    tool = body["tools"][0]
    assert tool["strict"] is True and tool["input_schema"]["additionalProperties"] is False
    assert tool["input_schema"]["properties"]["root_cause"]["enum"] == ["config", "pool"]
    assert "[E1] pool fixed it" in body["messages"][0]["content"]  # the alias the model cites
    assert decision.prompt == body["messages"][0]["content"]  # what the run log records
    # guide, then the catalogue; the marker on the last block caches tools and system
    guide, catalogue = body["system"]
    assert "cache_control" not in guide and catalogue["cache_control"] == {"type": "ephemeral"}
    assert "- pool: client pool exhausted\n  Typical signals: pool exhausted" in catalogue["text"]
    assert any(n.startswith("prompt caching on") for n in decision.notes)
    assert decision.usage["cache_read_input_tokens"] == 400
    expected = cost_usd("claude-sonnet-4-6", input_tokens=1000, output_tokens=50, cache_read_input_tokens=400)
    assert decision.usage["cost_usd"] == pytest.approx(expected) and expected == pytest.approx(0.00387)
    assert decision.usage["input_tokens"] == 1000


def test_retries_on_rate_limit_and_overload_then_succeeds():
    calls = []

    def handler(request):
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(
                429,
                headers={"retry-after-ms": "1"},
                json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
            )
        if len(calls) == 2:
            return httpx.Response(
                529,
                headers={"retry-after-ms": "1"},
                json={"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
            )
        return httpx.Response(
            200, json=_message({"root_cause": "config", "confidence": 0.6, "rationale": "deploy", "relied_on": []})
        )

    decision = ClaudeReasoner(client=_client(handler)).decide(PROBLEM, [], "")
    assert decision.choice == "config" and len(calls) == 3


def test_invalid_answer_is_repaired_by_an_error_tool_result_then_recorded_as_invalid():
    calls = []

    def handler(request):
        calls.append(json.loads(request.content))
        return httpx.Response(
            200, json=_message({"root_cause": "dns", "confidence": 0.5, "rationale": "x", "relied_on": []})
        )

    decision = ClaudeReasoner(client=_client(handler)).decide(PROBLEM, [], "")
    assert decision.choice == "" and "'dns' is not a candidate" in decision.invalid
    assert len(calls) == 2 and [m["role"] for m in calls[1]["messages"]] == ["user", "assistant", "user"]
    assert calls[1]["messages"][1]["content"][0]["type"] == "tool_use"
    result = calls[1]["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] is True and result["tool_use_id"] == "toolu_1"
    assert "not a candidate" in result["content"]


def test_already_tried_choice_is_repaired():
    tried = Problem(**{**PROBLEM.__dict__, "tried": ("pool",), "attempt": 2})
    answers = iter(["pool", "config"])

    def handler(request):
        return httpx.Response(
            200, json=_message({"root_cause": next(answers), "confidence": 0.5, "rationale": "x", "relied_on": []})
        )

    decision = ClaudeReasoner(client=_client(handler)).decide(tried, [], "")
    assert decision.choice == "config" and not decision.invalid


def test_text_only_answer_gets_a_user_turn_repair():
    calls = []

    def handler(request):
        calls.append(json.loads(request.content))
        if len(calls) == 1:
            return httpx.Response(
                200,
                json={**_message({}), "content": [{"type": "text", "text": "I think pool"}], "stop_reason": "end_turn"},
            )
        return httpx.Response(
            200, json=_message({"root_cause": "pool", "confidence": 0.7, "rationale": "r", "relied_on": []})
        )

    decision = ClaudeReasoner(client=_client(handler)).decide(PROBLEM, [], "")
    assert decision.choice == "pool"
    assert calls[1]["messages"][1]["content"] == [{"type": "text", "text": "I think pool"}]
    assert "no record_decision call" in calls[1]["messages"][2]["content"]


@pytest.mark.filterwarnings("ignore:no price on file")
def test_a_refused_parameter_is_dropped_for_the_run():
    calls = []

    def handler(request):
        body = json.loads(request.content)
        calls.append(body)
        if "temperature" in body:
            return httpx.Response(
                400,
                json={
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "temperature is deprecated for this model."},
                },
            )
        return httpx.Response(
            200, json=_message({"root_cause": "pool", "confidence": 0.7, "rationale": "r", "relied_on": []})
        )

    reasoner = ClaudeReasoner("claude-opus-4-8", client=_client(handler))
    first = reasoner.decide(PROBLEM, [], "")
    second = reasoner.decide(PROBLEM, [], "other")
    assert first.choice == second.choice == "pool"
    assert ["temperature" in c for c in calls] == [True, False, False]  # one 400, remembered
    assert any("refused 'temperature'" in n for n in first.notes)


def test_a_model_that_must_think_gets_auto_tool_choice_and_room():
    calls = []

    def handler(request):
        body = json.loads(request.content)
        calls.append(body)
        if body.get("thinking") == {"type": "disabled"}:
            return httpx.Response(
                400,
                json={
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "thinking cannot be disabled for this model"},
                },
            )
        return httpx.Response(
            200, json=_message({"root_cause": "pool", "confidence": 0.7, "rationale": "r", "relied_on": []})
        )

    decision = ClaudeReasoner(client=_client(handler)).decide(PROBLEM, [], "")
    assert decision.choice == "pool"
    assert calls[1]["tool_choice"]["type"] == "auto" and calls[1]["max_tokens"] >= 4096


def test_max_tokens_stop_raises_the_budget_and_never_takes_the_truncated_input():
    calls = []

    def handler(request):
        body = json.loads(request.content)
        calls.append(body["max_tokens"])
        if body["max_tokens"] < 4096:  # a parsable but cut input
            return httpx.Response(
                200,
                json={
                    **_message({"root_cause": "config", "confidence": 0.1, "rationale": "", "relied_on": []}),
                    "stop_reason": "max_tokens",
                },
            )
        return httpx.Response(
            200, json=_message({"root_cause": "pool", "confidence": 0.7, "rationale": "r", "relied_on": []})
        )

    decision = ClaudeReasoner(client=_client(handler)).decide(PROBLEM, [], "")
    assert decision.choice == "pool" and calls == [1024, 2048, 4096]
    assert any("budget raised to 4096" in n for n in decision.notes)


def test_gives_up_after_the_client_retries_with_a_clear_error():
    import anthropic

    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(
            500,
            headers={"retry-after-ms": "1"},
            json={"type": "error", "error": {"type": "api_error", "message": "boom"}},
        )

    with pytest.raises(anthropic.InternalServerError):
        ClaudeReasoner(client=_client(handler)).decide(PROBLEM, [], "")
    assert len(calls) == 4  # the first try and max_retries=3


def test_a_cached_invalid_answer_is_asked_again_when_the_model_is_reachable(tmp_path):
    answers = {"choice": "dns"}

    def handler(request):
        return httpx.Response(
            200, json=_message({"root_cause": answers["choice"], "confidence": 0.5, "rationale": "x", "relied_on": []})
        )

    assert ClaudeReasoner(client=_client(handler), cache_dir=tmp_path).decide(PROBLEM, [], "").invalid
    offline = ClaudeReasoner(cache_dir=tmp_path).decide(PROBLEM, [], "")  # replay: the same invalid round
    assert offline.invalid
    answers["choice"] = "pool"
    again = ClaudeReasoner(client=_client(handler), cache_dir=tmp_path)
    assert again.decide(PROBLEM, [], "").choice == "pool" and again.usage["requests"] == 1


def test_unpriced_model_is_warned_about_and_replays_cost_nothing(tmp_path):
    def handler(request):
        return httpx.Response(
            200, json=_message({"root_cause": "pool", "confidence": 0.5, "rationale": "x", "relied_on": []})
        )

    with pytest.warns(UserWarning, match="no price on file for claude-opus-4-8"):
        reasoner = ClaudeReasoner("claude-opus-4-8", client=_client(handler))
    assert reasoner.decide(PROBLEM, [], "").usage["cost_usd"] == 0.0
    assert cost_usd("claude-opus-4-8", input_tokens=10) is None
    paid = ClaudeReasoner(client=_client(handler), cache_dir=tmp_path).decide(PROBLEM, [], "")
    replayed = ClaudeReasoner(cache_dir=tmp_path).decide(PROBLEM, [], "")
    assert paid.usage["cost_usd"] > 0 and replayed.usage["cost_usd"] == 0.0


def test_cache_replays_without_key_and_misses_clearly(tmp_path):
    def handler(request):
        return httpx.Response(
            200, json=_message({"root_cause": "pool", "confidence": 0.9, "rationale": "r", "relied_on": []})
        )

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


@pytest.mark.filterwarnings("ignore:no price on file")
def test_the_stable_prefix_is_cached_for_every_model_the_sdk_lists():
    from anthropic.types import ModelParam  # here, not at collection: the SDK takes seconds to import

    models = typing.get_args(typing.get_args(ModelParam)[0])
    two_causes = Problem(**{**PROBLEM.__dict__, "catalogue": PROBLEM.candidates})
    notes = {model: ClaudeReasoner(model, api_key="k").caching_note(two_causes) for model in models}
    assert len(models) > 5
    assert {model: note for model, (on, note) in notes.items() if not on} == {}


def test_the_stable_prefix_does_not_change_with_the_round():
    catalogue = (*PROBLEM.candidates, CauseInfo("disk", "disk full", ("no space left",)))
    first = Problem(**{**PROBLEM.__dict__, "catalogue": catalogue})
    later = Problem(
        **{
            **first.__dict__,
            "candidates": catalogue[1:],
            "attempt": 2,
            "tried": ("config",),
            "observations": ("other",),
        }
    )
    reasoner = ClaudeReasoner(api_key="k")
    a, b = reasoner.build_request(first, "[E1] x"), reasoner.build_request(later, "[E2] y")
    assert a["tools"] == b["tools"] and a["system"] == b["system"]
    assert a["tools"][0]["input_schema"]["properties"]["root_cause"]["enum"] == ["config", "disk", "pool"]


def test_a_marked_prefix_the_model_did_not_cache_is_noted():
    def handler(request):
        return httpx.Response(
            200,
            json=_message(
                {"root_cause": "pool", "confidence": 0.5, "rationale": "x", "relied_on": []},
                usage={"input_tokens": 5000, "output_tokens": 9},
            ),
        )

    decision = ClaudeReasoner(client=_client(handler)).decide(PROBLEM, [], "")
    assert any("cached nothing of a prefix marked for caching" in n for n in decision.notes)


def test_cache_writes_and_reads_are_priced_at_their_rates():
    base = cost_usd("claude-sonnet-4-6", input_tokens=1_000_000)
    assert cost_usd("claude-sonnet-4-6", cache_creation_input_tokens=1_000_000) == pytest.approx(base * 1.25)
    assert cost_usd("claude-sonnet-4-6", cache_read_input_tokens=1_000_000) == pytest.approx(base * 0.1)
    assert cost_usd("claude-sonnet-4-6-20260101", input_tokens=1_000_000) == base  # a dated snapshot


@pytest.mark.claude
@pytest.mark.skipif(not os.environ.get("ANTHROPIC_API_KEY"), reason="needs ANTHROPIC_API_KEY")
def test_real_api_round_trip():
    decision = ClaudeReasoner(api_key=os.environ["ANTHROPIC_API_KEY"]).decide(PROBLEM, EVIDENCE, "[ep1] pool fixed it")
    assert decision.choice in {"pool", "config"}


def test_an_incident_item_is_aliased_like_an_episode():
    from agent.llm import aliases

    items = [
        Evidence("i1", "incident", "t", 0.5),
        Evidence("f@1", "fact", "t", 0.5),
        Evidence("e2", "episode", "t", 0.5),
    ]
    assert aliases(items) == {"i1": "E1", "f@1": "F1", "e2": "E2"}
