"""The OpenAI-compatible reasoner: the decision contract over Chat Completions.

Any server that speaks OpenAI's Chat Completions with function calling works: OpenAI itself,
Ollama, vLLM, llama.cpp's server, LM Studio. The decision comes back through a forced
function call whose JSON schema enumerates the scenario's root causes; everything else
(prompts, validation, one repair round, the response cache and key-less replay, token
accounting) is shared with the Claude reasoner in `agent.llm`. The system prompt is the
same for a whole scenario, so a server that caches prompt prefixes (OpenAI does above
1,024 tokens) reuses it; its ``cached_tokens`` are counted as cache reads. The ``openai`` SDK is imported lazily,
so heuristic mode never needs it; its own retry loop (``max_retries``) backs off on rate
limits, server errors, timeouts and dropped connections.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.llm import (
    CachedLLMReasoner,
    MissingKey,
    Rejected,
    decision_schema,
    drop_parameters,
    named_parameter,
    user_prompt,
)
from agent.prompt import REPAIR_PROMPT, TOOL_NAME, system_parts
from agent.reasoner import Problem

__all__ = ["OpenAIReasoner"]

# Local servers accept any bearer token but the SDK insists on sending one.
_KEYLESS = "no-key"


class OpenAIReasoner(CachedLLMReasoner):
    """Reasoner backed by an OpenAI-compatible Chat Completions endpoint.

    Args:
        model: model name as the server knows it (e.g. ``llama3.1:8b`` for Ollama).
        base_url: the API root (e.g. ``http://127.0.0.1:11434/v1``); None means OpenAI's.
        api_key: the key, when the server needs one (OpenAI's does; local servers usually not).
        cache_dir: directory of cached responses (created when missing).
        client: a ready ``openai.OpenAI`` client (tests may pass one).
        max_retries: SDK retries with backoff on 408/409/429/5xx, timeouts and connection errors.
        timeout: seconds per request.
    """

    name = "openai"
    key_name = "OPENAI_API_KEY or --base-url"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        cache_dir: str | Path | None = None,
        client: Any = None,
        max_retries: int = 4,
        timeout: float = 120.0,
    ) -> None:
        if not model:
            raise MissingKey("OpenAI mode needs --model NAME (the model as the server knows it)")
        # OpenAI's own endpoint needs a key; a server at --base-url may not.
        reachable = client is not None or bool(api_key) or bool(base_url)
        if not reachable and not cache_dir:
            raise MissingKey(
                "OpenAI mode needs --base-url URL (a local or self-hosted server) or OPENAI_API_KEY, "
                "or --cache DIR holding a finished run to replay"
            )
        super().__init__(model, cache_dir=cache_dir, can_call=reachable)
        self.base_url = base_url
        self._client = client
        self._api_key = api_key
        self._max_retries = max_retries
        self._timeout = timeout

    def build_request(
        self, problem: Problem, context_text: str, *, repair: tuple[Mapping[str, Any], str] | None = None
    ) -> dict[str, Any]:
        """The exact request sent (and hashed for the cache; the server's address is not part of it)."""
        function = {
            "name": TOOL_NAME,
            "description": "Record the diagnosis for this incident.",
            "strict": True,
            "parameters": decision_schema(problem),
        }
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "\n\n".join(system_parts(problem))},
            {"role": "user", "content": user_prompt(problem, context_text)},
        ]
        if repair:
            messages += _repair_turns(*repair)
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": 0,
            "messages": messages,
            "tools": [{"type": "function", "function": function}],
            "tool_choice": {"type": "function", "function": {"name": TOOL_NAME}},
            "parallel_tool_calls": False,
        }

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._client is None:
            import openai  # lazy: heuristic mode never imports the SDK

            self._client = openai.OpenAI(
                api_key=self._api_key or _KEYLESS,
                base_url=self.base_url,
                max_retries=self._max_retries,
                timeout=self._timeout,
            )
        import openai

        try:
            response = self._client.chat.completions.create(**request)
        except openai.BadRequestError as exc:
            parameter = named_parameter(str(exc))
            if parameter is None or drop_parameters(dict(request), [parameter]) == request:
                raise
            raise Rejected(parameter, str(exc)) from exc
        return response.model_dump(mode="json") if hasattr(response, "model_dump") else dict(response)

    def _answer(self, response: Mapping[str, Any]) -> tuple[Any, str]:
        choices = response.get("choices") or []
        message = (choices[0].get("message") or {}) if choices else {}
        calls = [c for c in message.get("tool_calls") or [] if (c.get("function") or {}).get("name") == TOOL_NAME]
        if len(calls) > 1:
            return None, f"expected one {TOOL_NAME} call, got {len(calls)}"
        if not calls:
            return None, f"no {TOOL_NAME} call (said: {str(message.get('content') or '')[:200]!r})"
        arguments = calls[0]["function"].get("arguments")
        try:
            return (json.loads(arguments) if isinstance(arguments, str) else arguments), ""
        except json.JSONDecodeError as exc:
            return None, f"{TOOL_NAME} arguments are not JSON ({exc.msg}: {str(arguments)[:120]!r})"

    def _truncated(self, response: Mapping[str, Any]) -> bool:
        choices = response.get("choices") or []
        return bool(choices) and choices[0].get("finish_reason") == "length"

    def _tokens(self, response: Mapping[str, Any]) -> dict[str, int]:
        usage = response.get("usage") or {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        return {
            "input_tokens": int(usage.get("prompt_tokens") or 0) - int(cached),
            "output_tokens": int(usage.get("completion_tokens") or 0),
            "cache_read_input_tokens": int(cached),
            "cache_creation_input_tokens": 0,
        }


def _repair_turns(response: Mapping[str, Any], complaint: str) -> list[dict[str, Any]]:
    """The model's answer replayed as the assistant turn, and the complaint as the tool's error result."""
    choices = response.get("choices") or []
    message = (choices[0].get("message") or {}) if choices else {}
    calls = [c for c in message.get("tool_calls") or [] if c.get("id")]
    text = REPAIR_PROMPT.format(complaint=complaint)
    if not calls:
        return [
            {"role": "assistant", "content": str(message.get("content") or "(no answer)")},
            {"role": "user", "content": text},
        ]
    assistant = {
        "role": "assistant",
        "content": message.get("content"),
        "tool_calls": [{"id": c["id"], "type": "function", "function": c.get("function") or {}} for c in calls],
    }
    return [assistant, *({"role": "tool", "tool_call_id": c["id"], "content": f"Error: {text}"} for c in calls)]
