"""The Claude reasoner: the same decision contract, answered by a model.

Only this module touches Anthropic's API, and only when a request is not in the on-disk
cache. The ``anthropic`` SDK is imported lazily, so heuristic mode never needs it. The
contract, prompts, validation, repair round and cache are shared with every LLM reasoner
(`agent.llm`); this module shapes Messages API requests and reads their tool calls.

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

from pathlib import Path
from typing import Any, Mapping

from agent.llm import (
    REPAIR_PROMPT,
    SYSTEM_PROMPT,
    TOKEN_KEYS,
    TOOL_NAME,
    CachedLLMReasoner,
    CacheMiss,
    MissingKey,
    ReasonerError,
    decision_schema,
    user_prompt,
)
from agent.reasoner import Problem

__all__ = ["DEFAULT_MODEL", "CacheMiss", "ClaudeReasoner", "MissingKey", "ReasonerError", "cost_usd"]

DEFAULT_MODEL = "claude-sonnet-4-6"
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


class ClaudeReasoner(CachedLLMReasoner):
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
    key_name = "ANTHROPIC_API_KEY"

    def __init__(self, model: str = DEFAULT_MODEL, *, api_key: str | None = None, cache_dir: str | Path | None = None,
                 client: Any = None, max_retries: int = 6, timeout: float = 60.0) -> None:
        if client is None and not api_key and not cache_dir:
            raise MissingKey("Claude mode needs ANTHROPIC_API_KEY (or --cache DIR holding a finished run to replay)")
        super().__init__(model, cache_dir=cache_dir, can_call=client is not None or bool(api_key))
        self._client = client
        self._api_key = api_key
        self._max_retries = max_retries
        self._timeout = timeout

    def build_request(self, problem: Problem, context_text: str, *, repair: str | None = None) -> dict[str, Any]:
        """The exact request sent (and hashed for the cache)."""
        tool = {"name": TOOL_NAME, "description": "Record the diagnosis for this incident.",
                "input_schema": decision_schema(problem)}
        messages: list[dict[str, Any]] = [{"role": "user", "content": user_prompt(problem, context_text)}]
        if repair:
            messages.append({"role": "assistant", "content": repair})
            messages.append({"role": "user", "content": REPAIR_PROMPT})
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

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._client is None:
            import anthropic  # lazy: heuristic mode never imports the SDK

            self._client = anthropic.Anthropic(api_key=self._api_key, max_retries=self._max_retries,
                                               timeout=self._timeout)
        response = self._client.messages.create(**_sdk_arguments(request))
        return response.model_dump(mode="json") if hasattr(response, "model_dump") else dict(response)

    def _answer(self, response: Mapping[str, Any]) -> tuple[Any, str]:
        blocks = [b for b in response.get("content", []) if b.get("type") == "tool_use" and b.get("name") == TOOL_NAME]
        if not blocks:
            texts = " ".join(b.get("text", "") for b in response.get("content", []) if b.get("type") == "text")
            return None, f"no {TOOL_NAME} call (said: {texts[:200]!r})"
        return blocks[0].get("input") or {}, ""

    def _tokens(self, response: Mapping[str, Any]) -> dict[str, int]:
        usage = response.get("usage") or {}
        return {key: int(usage.get(key) or 0) for key in TOKEN_KEYS}

    def _cost(self, tokens: Mapping[str, int]) -> float:
        return cost_usd(self.model, **tokens)


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
