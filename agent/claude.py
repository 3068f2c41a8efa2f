"""The Claude reasoner: the same decision contract, answered by a model.

Only this module touches the network, and only when a request is not in the on-disk
cache. The ``anthropic`` SDK is imported lazily, so heuristic mode never needs it.

* The decision comes back through a tool whose JSON schema enumerates the candidates; it
  is validated (a known candidate, not one already tried while others remain), with one
  repair round when the model answers off-contract.
* The static system prompt is marked for prompt caching.
* Temperature 0 where the model accepts sampling parameters (newer families reject any
  non-default value; there the cache is what makes a run replayable).
* Retries with exponential backoff on rate limits, overload, server errors and timeouts:
  the SDK's own retry loop (``max_retries``), which honours ``retry-after``.
* Token and cost accounting per decision; every response is cached on disk under the
  SHA-256 of its request, so a finished run replays exactly without a key.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from agent.reasoner import Decision, Evidence, Problem

DEFAULT_MODEL = "claude-sonnet-4-6"
TOOL_NAME = "record_decision"
# USD per million tokens: (input, output). Cache writes cost 1.25x input, cache reads 0.1x.
PRICES: dict[str, tuple[float, float]] = {
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-sonnet-5": (2.0, 10.0),
    "claude-sonnet-5-5": (2.0, 10.0),
    "claude-opus-4-5": (5.0, 25.0),
}
# Families that reject non-default sampling parameters and forced tool choice with thinking.
NO_SAMPLING_PREFIXES = ("claude-sonnet-5", "claude-opus-5", "claude-fable", "claude-mythos", "claude-haiku-5")

SYSTEM_PROMPT = """You are an experienced on-call engineer diagnosing production incidents.
For each incident you get the observations, the candidate root causes (with descriptions and
typical signals), what was already tried in this incident, and a block of memory: past
episodes with their outcomes (SUCCESS/FAILURE), corrections you received, generalized facts
with confidence, and causal chains. Past failures and corrections are as informative as past
successes: do not repeat a diagnosis that failed in a near-identical situation, and prefer
the lesson of a correction over surface similarity. Memory can be wrong or irrelevant; weigh
it against the observations.

Choose exactly one candidate id. Never choose a candidate listed as already tried unless no
other remains. Answer only by calling the record_decision tool, with a confidence in [0, 1],
a one- or two-sentence rationale, and the ids of the memory items you relied on (ids are
shown in square brackets in the memory block; use an empty list if none)."""


class MissingKey(Exception):
    """Claude mode without ANTHROPIC_API_KEY and without a replay cache."""


class ReasonerError(Exception):
    """The model could not produce a valid decision (after retries and one repair)."""


class CacheMiss(ReasonerError):
    """Replay without a key asked for a request that is not in the cache."""


class ClaudeReasoner:
    """Reasoner backed by the Anthropic Messages API.

    Args:
        model: model id.
        api_key: the key; without one, only cached responses can be replayed.
        cache_dir: directory of cached responses (created when missing).
        client: a ready ``anthropic.Anthropic`` client (tests pass one with a fake transport).
        max_retries: SDK retries with backoff on 408/409/429/5xx/overload and timeouts.
        timeout: seconds per request.
    """

    name = "claude"

    def __init__(self, model: str = DEFAULT_MODEL, *, api_key: str | None = None, cache_dir: str | Path | None = None,
                 client: Any = None, max_retries: int = 6, timeout: float = 60.0) -> None:
        self.model = model
        self.cache_dir = Path(cache_dir) if cache_dir else None
        if client is None and not api_key and self.cache_dir is None:
            raise MissingKey("Claude mode needs ANTHROPIC_API_KEY (or --cache DIR holding a finished run to replay)")
        self._client = client
        self._api_key = api_key
        self._max_retries = max_retries
        self._timeout = timeout
        self.usage = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0,
                      "cache_creation_input_tokens": 0, "cost_usd": 0.0, "requests": 0, "cache_hits": 0}

    # -- request ---------------------------------------------------------------------------

    def build_request(self, problem: Problem, context_text: str, *, repair: str | None = None) -> dict[str, Any]:
        """The exact request sent (and hashed for the cache)."""
        ids = [c.id for c in problem.candidates]
        tool = {
            "name": TOOL_NAME,
            "description": "Record the diagnosis for this incident.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "root_cause": {"type": "string", "enum": ids},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                    "rationale": {"type": "string"},
                    "relied_on": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["root_cause", "confidence", "rationale", "relied_on"],
            },
        }
        messages: list[dict[str, Any]] = [{"role": "user", "content": _user_prompt(problem, context_text)}]
        if repair:
            messages.append({"role": "assistant", "content": repair})
            messages.append({"role": "user", "content": "That answer was not valid: call record_decision once, "
                                                        "with one of the allowed root_cause ids."})
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": 1024,
            "system": [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}],
            "messages": messages,
            "tools": [tool],
        }
        if self.model.startswith(NO_SAMPLING_PREFIXES):
            request["tool_choice"] = {"type": "auto"}
        else:
            request["tool_choice"] = {"type": "tool", "name": TOOL_NAME}
            request["temperature"] = 0
        return request

    # -- decision ----------------------------------------------------------------------------

    def decide(self, problem: Problem, evidence: Sequence[Evidence], context_text: str) -> Decision:
        started = time.perf_counter()
        usage_before = dict(self.usage)
        request = self.build_request(problem, context_text)
        response = self._respond(request)
        parsed, problem_text = _parse(response, problem)
        if parsed is None:
            response = self._respond(self.build_request(problem, context_text, repair=problem_text))
            parsed, problem_text = _parse(response, problem)
            if parsed is None:
                raise ReasonerError(f"model gave no valid decision: {problem_text}")
        known = {item.id for item in evidence}
        relied = tuple(i for i in parsed.get("relied_on", []) if isinstance(i, str) and i in known)
        usage = {key: self.usage[key] - usage_before[key] for key in ("input_tokens", "output_tokens", "cost_usd")}
        usage["latency_ms"] = (time.perf_counter() - started) * 1000.0
        return Decision(choice=parsed["root_cause"], confidence=float(min(1.0, max(0.0, parsed["confidence"]))),
                        rationale=str(parsed["rationale"])[:500], relied_on=relied, usage=usage)

    def _respond(self, request: dict[str, Any]) -> dict[str, Any]:
        key = hashlib.sha256(json.dumps(request, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        cached = self._cache_get(key)
        if cached is not None:
            self.usage["cache_hits"] += 1
            self._account(cached)
            return cached
        if self._client is None and not self._api_key:
            raise CacheMiss(f"no cached response for request {key[:12]}… and no ANTHROPIC_API_KEY to ask the model")
        response = self._client_or_new().messages.create(**_sdk_arguments(request))
        data = response.model_dump(mode="json") if hasattr(response, "model_dump") else dict(response)
        self.usage["requests"] += 1
        self._cache_put(key, data)
        self._account(data)
        return data

    def _client_or_new(self) -> Any:
        if self._client is None:
            import anthropic  # lazy: heuristic mode never imports the SDK

            self._client = anthropic.Anthropic(api_key=self._api_key, max_retries=self._max_retries,
                                               timeout=self._timeout)
        return self._client

    def _account(self, data: Mapping[str, Any]) -> None:
        usage = data.get("usage") or {}
        tokens = {key: int(usage.get(key) or 0) for key in
                  ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")}
        for key, value in tokens.items():
            self.usage[key] += value
        self.usage["cost_usd"] += cost_usd(self.model, **tokens)

    # -- cache -----------------------------------------------------------------------------------

    def _cache_get(self, key: str) -> dict[str, Any] | None:
        if self.cache_dir is None:
            return None
        path = self.cache_dir / f"{key}.json"
        if not path.exists():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    def _cache_put(self, key: str, data: dict[str, Any]) -> None:
        if self.cache_dir is None:
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=self.cache_dir, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, sort_keys=True)
        os.replace(temp, self.cache_dir / f"{key}.json")


def _sdk_arguments(request: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``messages.create``: sampling parameters the SDK's typed
    signature no longer lists travel in ``extra_body`` (the wire request is unchanged)."""
    arguments = dict(request)
    extra = {key: arguments.pop(key) for key in ("temperature",) if key in arguments}
    if extra:
        arguments["extra_body"] = extra
    return arguments


def cost_usd(model: str, *, input_tokens: int = 0, output_tokens: int = 0, cache_read_input_tokens: int = 0,
             cache_creation_input_tokens: int = 0) -> float:
    """Dollar cost of one response (0.0 for a model without a price on file)."""
    price = PRICES.get(model)
    if price is None:
        base = next((m for m in sorted(PRICES, key=len, reverse=True) if model.startswith(m)), None)
        price = PRICES.get(base) if base else None
    if price is None:
        return 0.0
    per_in, per_out = price[0] / 1e6, price[1] / 1e6
    return (input_tokens * per_in + output_tokens * per_out + cache_read_input_tokens * per_in * 0.1
            + cache_creation_input_tokens * per_in * 1.25)


def _user_prompt(problem: Problem, context_text: str) -> str:
    lines = [f"Service: {problem.service}", f"Situation: {problem.situation}", f"Attempt: {problem.attempt}", "",
             "Observations:"]
    lines += [f"- {text}" for text in problem.observations]
    lines += ["", "Candidate root causes:"]
    for cause in problem.candidates:
        lines.append(f"- {cause.id}: {cause.description} (signals: {', '.join(cause.signals)})")
    if problem.tried:
        lines += ["", "Already tried in this incident and failed: " + ", ".join(problem.tried)]
    if problem.feedback:
        lines += ["", "Feedback so far in this incident:"] + [f"- {text}" for text in problem.feedback]
    lines += ["", "Memory:", context_text or "(nothing relevant)"]
    return "\n".join(lines)


def _parse(response: Mapping[str, Any], problem: Problem) -> tuple[dict[str, Any] | None, str]:
    """The validated tool input, or None and a description of what was wrong."""
    blocks = [b for b in response.get("content", []) if b.get("type") == "tool_use" and b.get("name") == TOOL_NAME]
    if not blocks:
        texts = " ".join(b.get("text", "") for b in response.get("content", []) if b.get("type") == "text")
        return None, f"no {TOOL_NAME} call (said: {texts[:200]!r})"
    data = blocks[0].get("input") or {}
    ids = [c.id for c in problem.candidates]
    choice = data.get("root_cause")
    if choice not in ids:
        return None, f"root_cause {choice!r} is not a candidate ({', '.join(ids)})"
    if choice in problem.tried and any(i not in problem.tried for i in ids):
        return None, f"root_cause {choice!r} was already tried"
    confidence = data.get("confidence")
    if not isinstance(confidence, (int, float)) or isinstance(confidence, bool):
        return None, f"confidence {confidence!r} is not a number"
    if not isinstance(data.get("rationale"), str):
        return None, "rationale missing"
    if not isinstance(data.get("relied_on", []), list):
        return None, "relied_on is not a list"
    return data, ""
