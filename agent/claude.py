"""The Claude reasoner: the same decision contract, answered by a model.

Only this module touches Anthropic's API, and only when a request is not in the on-disk
cache. The ``anthropic`` SDK is imported lazily, so heuristic mode never needs it. The
contract, prompts, validation, repair round and cache are shared with every LLM reasoner
(`agent.llm`); this module shapes Messages API requests and reads their tool calls.

* The decision comes back through one forced tool call (parallel tool use disabled) whose
  strict schema enumerates the scenario's root causes; an off-contract answer is repaired
  through an ``is_error`` tool result.
* Thinking is disabled explicitly (a forced tool call cannot be combined with it); a model
  that refuses ``thinking`` or ``temperature`` with a 400 gets them dropped for the run (and
  a model that then thinks gets ``tool_choice: auto`` and a larger budget).
* Prompt caching: the tool definition and the system prompt (instructions, worked examples
  and the scenario's catalogue of root causes) are the same for every request of a
  scenario; the round's candidates and memory come after them, in the user message. The
  cache marker is sent when that prefix is above the model's minimum cacheable length
  (`CACHE_MINIMUM`), and `caching_note` says which in the run log; a marked response that
  reports neither a cache write nor a read is noted too.
* Retries with exponential backoff on rate limits, overload, server errors and timeouts:
  the SDK's own retry loop (``max_retries``), which honours ``retry-after``.
* Token and cost accounting per decision from `PRICES` (a model without a price is
  warned about); every response is cached on disk under the SHA-256 of its request, so a
  finished run replays exactly without a key.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.llm import (
    TOKEN_KEYS,
    CachedLLMReasoner,
    CacheMiss,
    MissingKey,
    ReasonerError,
    Rejected,
    decision_schema,
    drop_parameters,
    named_parameter,
    user_prompt,
)
from agent.prompt import REPAIR_PROMPT, TOOL_NAME, system_parts
from agent.reasoner import Problem

__all__ = ["DEFAULT_MODEL", "CacheMiss", "ClaudeReasoner", "MissingKey", "ReasonerError", "cost_usd"]

DEFAULT_MODEL = "claude-sonnet-4-6"
# USD per million tokens: (input, output). A 5-minute cache write costs CACHE_WRITE_RATE x input,
# a cache read CACHE_READ_RATE x input.
PRICES: dict[str, tuple[float, float]] = {
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-6": (5.0, 25.0),
}
CACHE_WRITE_RATE = 1.25
CACHE_READ_RATE = 0.1
# Minimum cacheable prompt length in tokens: where published figures disagree, the largest
# (Anthropic's prompt-caching page and third-party tables, looked up 2026-11; a model listed
# here by id or dated snapshot only). A model not listed is taken to need the largest.
CACHE_MINIMUM: dict[str, int] = {
    "claude-opus-5": 2048,
    "claude-fable-5": 2048,
    "claude-mythos-5": 2048,
    "claude-sonnet-5": 1024,
    "claude-opus-4-8": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4-6": 2048,
    "claude-opus-4-7": 2048,
    "claude-haiku-4-5": 4096,
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
}
CHARS_PER_TOKEN = 4  # a conservative estimate for English prose and JSON


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

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        api_key: str | None = None,
        cache_dir: str | Path | None = None,
        client: Any = None,
        max_retries: int = 6,
        timeout: float = 60.0,
    ) -> None:
        if client is None and not api_key and not cache_dir:
            raise MissingKey("Claude mode needs ANTHROPIC_API_KEY (or --cache DIR holding a finished run to replay)")
        super().__init__(model, cache_dir=cache_dir, can_call=client is not None or bool(api_key))
        self._client = client
        self._api_key = api_key
        self._max_retries = max_retries
        self._timeout = timeout
        if cost_usd(model) is None:
            note = f"no price on file for {model}: its cost is reported as $0.00 (add it to agent.claude.PRICES)"
            self.notes.append(note)
            warnings.warn(note, stacklevel=2)

    def caching_note(self, problem: Problem) -> tuple[bool, str]:
        """Whether the stable prefix (tool and system prompt) is long enough to be cached for this model, and why."""
        prefix = len(json.dumps(self._tool(problem))) + sum(len(part) for part in system_parts(problem))
        tokens = prefix // CHARS_PER_TOKEN
        minimum = _by_model(CACHE_MINIMUM, self.model) or max(CACHE_MINIMUM.values())
        if tokens >= minimum:
            return True, f"prompt caching on: stable prefix ~{tokens} tokens >= {minimum} for {self.model}"
        return False, f"prompt caching off: stable prefix ~{tokens} tokens < {minimum} for {self.model}"

    def build_request(
        self, problem: Problem, context_text: str, *, repair: tuple[Mapping[str, Any], str] | None = None
    ) -> dict[str, Any]:
        """The exact request sent (and hashed for the cache), before refused parameters are dropped.

        The system prompt is two blocks, the guide and the scenario's catalogue; the cache
        marker on the last one caches the tool definition and both.
        """
        messages: list[dict[str, Any]] = [{"role": "user", "content": user_prompt(problem, context_text)}]
        if repair:
            messages += _repair_turns(*repair)
        system: list[dict[str, Any]] = [{"type": "text", "text": text} for text in system_parts(problem)]
        cache, note = self.caching_note(problem)
        if note not in self.notes:
            self.notes.append(note)
        if cache:
            system[-1]["cache_control"] = {"type": "ephemeral"}
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": messages,
            "tools": [self._tool(problem)],
            "thinking": {"type": "disabled"},
            "temperature": 0,
            "tool_choice": {"type": "tool", "name": TOOL_NAME, "disable_parallel_tool_use": True},
        }
        if "thinking" in self.dropped:  # the model thinks: a forced tool call is not allowed then
            request["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
            request["max_tokens"] = max(self.max_tokens, THINKING_MAX_TOKENS)
        return request

    @staticmethod
    def _tool(problem: Problem) -> dict[str, Any]:
        return {
            "name": TOOL_NAME,
            "description": "Record the diagnosis for this incident.",
            "strict": True,
            "input_schema": decision_schema(problem),
        }

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._client is None:
            import anthropic  # lazy: heuristic mode never imports the SDK

            self._client = anthropic.Anthropic(
                api_key=self._api_key, max_retries=self._max_retries, timeout=self._timeout
            )
        import anthropic

        try:
            response = self._client.messages.create(**_sdk_arguments(request))
        except anthropic.BadRequestError as exc:
            parameter = named_parameter(str(exc))
            if parameter is None or not _sent(request, parameter):
                raise
            raise Rejected(parameter, str(exc)) from exc
        data = response.model_dump(mode="json") if hasattr(response, "model_dump") else dict(response)
        self._check_caching(request, data)
        return data

    def _check_caching(self, request: Mapping[str, Any], response: Mapping[str, Any]) -> None:
        """Note (once) when a request with the cache marker was neither written to nor read from the cache."""
        marked = any("cache_control" in block for block in request.get("system", []))
        tokens = self._tokens(response)
        if marked and not tokens["cache_creation_input_tokens"] and not tokens["cache_read_input_tokens"]:
            note = (
                f"{self.model} cached nothing of a prefix marked for caching: its minimum cacheable "
                "length is above the estimate in agent.claude.CACHE_MINIMUM"
            )
            if note not in self.notes:
                self.notes.append(note)

    def _answer(self, response: Mapping[str, Any]) -> tuple[Any, str]:
        blocks = [b for b in response.get("content", []) if b.get("type") == "tool_use"]
        if not blocks:
            texts = " ".join(b.get("text", "") for b in response.get("content", []) if b.get("type") == "text")
            return None, f"no {TOOL_NAME} call (said: {texts[:200]!r})"
        if len(blocks) > 1 or blocks[0].get("name") != TOOL_NAME:
            return None, f"expected one {TOOL_NAME} call, got {', '.join(str(b.get('name')) for b in blocks)}"
        return blocks[0].get("input") or {}, ""

    def _truncated(self, response: Mapping[str, Any]) -> bool:
        return response.get("stop_reason") == "max_tokens"

    def _tokens(self, response: Mapping[str, Any]) -> dict[str, int]:
        usage = response.get("usage") or {}
        return {key: int(usage.get(key) or 0) for key in TOKEN_KEYS}

    def _cost(self, tokens: Mapping[str, int]) -> float:
        return cost_usd(self.model, **tokens) or 0.0


THINKING_MAX_TOKENS = 4096  # a model that cannot stop thinking needs room to think and answer


def _repair_turns(response: Mapping[str, Any], complaint: str) -> list[dict[str, Any]]:
    """The model's answer replayed as the assistant turn, and the complaint as an error tool result."""
    content = [
        {k: v for k, v in b.items() if k in ("type", "id", "name", "input", "text")}
        for b in response.get("content", [])
        if b.get("type") in ("tool_use", "text")
    ]
    calls = [b for b in content if b["type"] == "tool_use"]
    text = REPAIR_PROMPT.format(complaint=complaint)
    if not calls:  # nothing to attach an error result to: the complaint goes in a user turn
        return [
            {"role": "assistant", "content": content or [{"type": "text", "text": "(no answer)"}]},
            {"role": "user", "content": text},
        ]
    results = [{"type": "tool_result", "tool_use_id": b["id"], "is_error": True, "content": text} for b in calls]
    return [{"role": "assistant", "content": content}, {"role": "user", "content": results}]


def _sent(request: Mapping[str, Any], parameter: str) -> bool:
    """Whether `parameter` is in the request (so dropping it changes something)."""
    return drop_parameters(dict(request), [parameter]) != request


def _sdk_arguments(request: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``messages.create``: sampling parameters the SDK's typed
    signature no longer lists travel in ``extra_body`` (the wire request is unchanged)."""
    arguments = dict(request)
    extra = {key: arguments.pop(key) for key in ("temperature",) if key in arguments}
    if extra:
        arguments["extra_body"] = extra
    return arguments


def _by_model(table: Mapping[str, Any], model: str) -> Any:
    """The entry for `model` or for the model it is a dated snapshot of (``-YYYYMMDD``), else None."""
    if model in table:
        return table[model]
    base = re.sub(r"-\d{8}$", "", model)
    return table.get(base)


def cost_usd(
    model: str,
    *,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cache_read_input_tokens: int = 0,
    cache_creation_input_tokens: int = 0,
) -> float | None:
    """Dollar cost of one response (None for a model without a price on file)."""
    price = _by_model(PRICES, model)
    if price is None:
        return None
    per_in, per_out = price[0] / 1e6, price[1] / 1e6
    return (
        input_tokens * per_in
        + output_tokens * per_out
        + cache_read_input_tokens * per_in * CACHE_READ_RATE
        + cache_creation_input_tokens * per_in * CACHE_WRITE_RATE
    )
