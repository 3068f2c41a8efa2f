"""What every LLM reasoner shares: the decision contract, the prompt, the response cache.

An LLM reasoner (`agent.claude`, `agent.openai`) differs only in how a request is shaped
for its API, how the decision is read back from a response, and what tokens cost. The
rest is here, written once:

* the prompts (`agent.prompt`): a system prompt that stays the same for a whole scenario
  (instructions, worked examples, the scenario's catalogue of root causes), so a provider
  can cache it, and a user message per decision built from a `Problem` and the memory
  block, which `Decision.prompt` carries to the run log; the memory block shows each
  evidence item under a short alias (``E1``, ``F1``, ``C1``) that resolves back to the
  item's full id, so citations survive and no per-run name (a store principal, a content
  hash) enters the request;
* the decision schema: one forced tool call (parallel calls disabled) whose strict schema
  enumerates the scenario's root causes, so the tool definition stays the same all run;
  validation then asks for one of this round's candidates, not one already tried while
  others remain, a numeric confidence, a rationale and a list of relied-on ids;
* one repair round when the model answers off-contract, told through an error tool result;
  when that fails too the decision comes back *invalid* (no choice, the attempt counts as
  wrong, the run goes on);
* capabilities learned from the model rather than listed: a 400 that names a parameter
  (``temperature``, ``thinking``, ``strict`` ...) is retried once without it and the
  parameter stays dropped for the run; a ``max_tokens`` stop is retried with a doubled
  budget (a truncated tool input is never accepted);
* the on-disk response cache, keyed by the SHA-256 of the exact request, so a finished run
  replays without a key or a server (`CacheMiss` when a request is not there); answers that
  broke the contract are marked so, and a run that can reach the model asks again;
* token and cost accounting per decision (a replayed response costs nothing).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agent.prompt import catalogue_of, user_prompt
from agent.reasoner import Decision, Evidence, Problem

TOKEN_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
MAX_TOKENS = 1024  # the first output budget; doubled on a max_tokens stop
MAX_TOKENS_CAP = 16384  # the largest budget asked for before the answer counts as invalid
# Parameters a model may refuse; a 400 naming one is retried once without it.
OPTIONAL_PARAMETERS = (
    "temperature",
    "top_p",
    "top_k",
    "thinking",
    "strict",
    "disable_parallel_tool_use",
    "parallel_tool_calls",
)
_ALIAS_PREFIX = {"episode": "E", "incident": "E", "fact": "F", "chunk": "C"}


class MissingKey(Exception):
    """An LLM mode that can neither reach its model nor replay a cache."""


class ReasonerError(Exception):
    """The model could not be asked (it kept failing after the client's retries)."""


class CacheMiss(ReasonerError):
    """Replay without a key asked for a request that is not in the cache."""


class Rejected(Exception):
    """The API refused a request because of one named parameter."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter


def decision_schema(problem: Problem) -> dict[str, Any]:
    """Strict JSON schema of the decision; ``root_cause`` enumerates the scenario's causes.

    The enumeration is the scenario's catalogue (stable all run, so the tool definition
    can sit in a cached prompt prefix); the round's candidates are checked by `validate`.
    """
    ids = [cause.id for cause in catalogue_of(problem)]
    return {
        "type": "object",
        "properties": {
            "root_cause": {"type": "string", "enum": ids},
            "confidence": {"type": "number", "description": "in [0, 1]"},
            "rationale": {"type": "string"},
            "relied_on": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["root_cause", "confidence", "rationale", "relied_on"],
        "additionalProperties": False,
    }


def aliases(evidence: Sequence[Evidence]) -> dict[str, str]:
    """Full evidence id → the short alias the prompt shows (``E1``, ``F1``, ``C1``, in order)."""
    counts: dict[str, int] = {}
    out: dict[str, str] = {}
    for item in evidence:
        if item.id in out:
            continue
        prefix = _ALIAS_PREFIX.get(item.source, "M")
        counts[prefix] = counts.get(prefix, 0) + 1
        out[item.id] = f"{prefix}{counts[prefix]}"
    return out


def show_aliases(context_text: str, alias: Mapping[str, str]) -> str:
    """The memory block with every bracketed evidence id replaced by its alias."""
    if not alias:
        return context_text
    pattern = re.compile(r"\[(" + "|".join(re.escape(i) for i in sorted(alias, key=len, reverse=True)) + r")\]")
    return pattern.sub(lambda m: f"[{alias[m.group(1)]}]", context_text)


def resolve_citations(cited: Any, alias: Mapping[str, str]) -> tuple[str, ...]:
    """The evidence ids behind the cited aliases (full ids are accepted too; unknown ones dropped)."""
    back = {short: full for full, short in alias.items()}
    out: list[str] = []
    for item in cited if isinstance(cited, list) else []:
        if not isinstance(item, str):
            continue
        key = item.strip().strip("[]")
        full = back.get(key) or back.get(key.upper()) or (key if key in alias else None)
        if full and full not in out:
            out.append(full)
    return tuple(out)


def validate(data: Any, problem: Problem) -> tuple[dict[str, Any] | None, str]:
    """The decision arguments when they keep the contract, else None and what was wrong."""
    if not isinstance(data, dict):
        return None, f"arguments are not an object ({type(data).__name__})"
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


def drop_parameters(request: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """`request` without the named parameters, wherever an API puts them (top level, tools, tool choice)."""
    if not names:
        return request
    out = {k: v for k, v in request.items() if k not in names}
    if isinstance(out.get("tool_choice"), dict):
        out["tool_choice"] = {k: v for k, v in out["tool_choice"].items() if k not in names}
    tools = []
    for tool in out.get("tools", []):
        tool = {k: v for k, v in tool.items() if k not in names}
        if isinstance(tool.get("function"), dict):
            tool["function"] = {k: v for k, v in tool["function"].items() if k not in names}
        tools.append(tool)
    if "tools" in out:
        out["tools"] = tools
    return out


def named_parameter(message: str) -> str | None:
    """The optional parameter a 400's message names, if any."""
    text = message.lower()
    return next((p for p in OPTIONAL_PARAMETERS if re.search(rf"\b{p}\b", text)), None)


class ResponseCache:
    """Responses on disk, one JSON file per request hash (written atomically)."""

    def __init__(self, directory: str | Path | None) -> None:
        self.directory = Path(directory) if directory else None

    @staticmethod
    def key(request: Mapping[str, Any]) -> str:
        """SHA-256 of the request's canonical JSON."""
        return hashlib.sha256(json.dumps(request, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def has_responses(self) -> bool:
        """Whether the directory holds at least one cached response."""
        return self.directory is not None and self.directory.is_dir() and any(self.directory.glob("*.json"))

    def get(self, key: str) -> dict[str, Any] | None:
        if self.directory is None:
            return None
        path = self.directory / f"{key}.json"
        if not path.exists():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    def put(self, key: str, data: Mapping[str, Any]) -> None:
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, sort_keys=True)
        os.replace(temp, self.directory / f"{key}.json")

    def mark_invalid(self, key: str, complaint: str) -> None:
        """Flag a cached response as off-contract: replayed offline, asked again when the model is reachable."""
        data = self.get(key)
        if data is not None and data.get(INVALID_MARK) != complaint:
            self.put(key, {**data, INVALID_MARK: complaint})


INVALID_MARK = "_off_contract"  # cache-file field naming why a response broke the contract


class CachedLLMReasoner(ABC):
    """The decision loop of an LLM reasoner; subclasses speak one API.

    A subclass sets `name`, `model` and `key_name` and implements `build_request` (with
    ``self.max_tokens`` as the output budget), `_call` (send one request, return the
    response as JSON data; raise `Rejected` on a 400 that names a parameter), `_answer`
    (the decision arguments in a response, or None and what the model said), `_truncated`
    (whether the response stopped at the output budget) and `_tokens` (token counts under
    `TOKEN_KEYS`); `_cost` prices them (0 by default). `notes` collects, for the run log,
    what was learned about the model (parameters dropped, budgets raised).
    """

    name = "llm"
    key_name = "API key"  # environment variable named in messages

    def __init__(self, model: str, *, cache_dir: str | Path | None, can_call: bool) -> None:
        self.model = model
        self.cache = ResponseCache(cache_dir)
        self._can_call = can_call
        self.usage: dict[str, float] = {key: 0 for key in TOKEN_KEYS}
        self.usage.update(cost_usd=0.0, requests=0, cache_hits=0, invalid=0)
        self.max_tokens = MAX_TOKENS
        self.dropped: list[str] = []  # parameters the model refused, left out from then on
        self.notes: list[str] = []

    @property
    def cache_dir(self) -> Path | None:
        return self.cache.directory

    def check_ready(self) -> None:
        """Raise `MissingKey` unless a run can start: the model is reachable or a cache is there to replay."""
        if not self._can_call and not self.cache.has_responses():
            where = f"{self.cache.directory} holds no cached responses" if self.cache.directory else "no --cache DIR"
            raise MissingKey(f"{self.name} mode cannot reach the model (no {self.key_name}) and {where} to replay")

    @abstractmethod
    def build_request(
        self, problem: Problem, context_text: str, *, repair: tuple[Mapping[str, Any], str] | None = None
    ) -> dict[str, Any]:
        """See the class docstring; `repair` is the previous response and what was wrong with it."""

    def request_for(
        self, problem: Problem, context_text: str, *, repair: tuple[Mapping[str, Any], str] | None = None
    ) -> dict[str, Any]:
        """The request as sent: `build_request` without the parameters the model refused."""
        return drop_parameters(self.build_request(problem, context_text, repair=repair), self.dropped)

    def decide(self, problem: Problem, evidence: Sequence[Evidence], context_text: str) -> Decision:
        started = time.perf_counter()
        usage_before, notes_before = dict(self.usage), len(self.notes)
        alias = aliases(evidence)
        shown = show_aliases(context_text, alias)
        parsed, complaint, previous = None, "", None
        for _ in range(2):  # the answer, then one repair
            response, key = self._ask(problem, shown, previous)
            parsed, complaint = self._parse(response, problem)
            if parsed is not None:
                break
            self.cache.mark_invalid(key, complaint)
            previous = (response, complaint)
        usage = {key: self.usage[key] - usage_before[key] for key in (*TOKEN_KEYS, "cost_usd")}
        usage["latency_ms"] = (time.perf_counter() - started) * 1000.0
        notes = tuple(self.notes[notes_before:])
        prompt = user_prompt(problem, shown)
        if parsed is None:
            self.usage["invalid"] += 1
            return Decision(
                choice="",
                confidence=0.0,
                rationale="",
                usage=usage,
                notes=notes,
                prompt=prompt,
                invalid=f"no valid decision after one repair: {complaint}",
            )
        return Decision(
            choice=parsed["root_cause"],
            confidence=float(min(1.0, max(0.0, parsed["confidence"]))),
            rationale=str(parsed["rationale"])[:500],
            relied_on=resolve_citations(parsed.get("relied_on"), alias),
            usage=usage,
            notes=notes,
            prompt=prompt,
        )

    def _ask(
        self, problem: Problem, context_text: str, previous: tuple[Mapping[str, Any], str] | None
    ) -> tuple[dict[str, Any], str]:
        """One answer the model did not cut short, learning refused parameters and budgets on the way."""
        while True:
            request = self.request_for(problem, context_text, repair=previous)
            key = self.cache.key(request)
            try:
                response = self._respond(request, key)
            except Rejected as exc:
                if exc.parameter in self.dropped:
                    raise ReasonerError(f"{self.model} still refuses the request: {exc}") from exc
                self.dropped.append(exc.parameter)
                self.notes.append(f"{self.model} refused {exc.parameter!r} (HTTP 400); sent without it from now on")
                continue
            if self._truncated(response) and self.max_tokens < MAX_TOKENS_CAP:
                self.max_tokens = min(MAX_TOKENS_CAP, self.max_tokens * 2)
                self.notes.append(f"{self.model} stopped at max_tokens; budget raised to {self.max_tokens}")
                continue
            return response, key

    def _parse(self, response: Mapping[str, Any], problem: Problem) -> tuple[dict[str, Any] | None, str]:
        if self._truncated(response):
            return None, f"the answer was cut at max_tokens={self.max_tokens}"
        data, said = self._answer(response)
        if data is None:
            return None, said
        return validate(data, problem)

    def _respond(self, request: dict[str, Any], key: str) -> dict[str, Any]:
        cached = self.cache.get(key)
        # An off-contract answer is replayed only when the model cannot be asked again.
        if cached is not None and not (self._can_call and INVALID_MARK in cached):
            self.usage["cache_hits"] += 1
            if "rejected" in cached:
                raise Rejected(cached["rejected"], cached.get("message", ""))
            self._account(cached, billed=False)
            return cached
        if not self._can_call:
            raise CacheMiss(f"no cached response for request {key[:12]}… and no {self.key_name} to ask the model")
        self.usage["requests"] += 1
        try:
            data = self._call(request)
        except Rejected as exc:  # cached so that a replay learns the same capability
            self.cache.put(key, {"rejected": exc.parameter, "message": str(exc)})
            raise
        self.cache.put(key, data)
        self._account(data, billed=True)
        return data

    def _account(self, data: Mapping[str, Any], *, billed: bool) -> None:
        tokens = self._tokens(data)
        for key, value in tokens.items():
            self.usage[key] += value
        if billed:  # a replayed response was paid for by the run that cached it
            self.usage["cost_usd"] += self._cost(tokens)

    @abstractmethod
    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        """See the class docstring."""

    @abstractmethod
    def _answer(self, response: Mapping[str, Any]) -> tuple[Any, str]:
        """See the class docstring."""

    @abstractmethod
    def _truncated(self, response: Mapping[str, Any]) -> bool:
        """See the class docstring."""

    @abstractmethod
    def _tokens(self, response: Mapping[str, Any]) -> dict[str, int]:
        """See the class docstring."""

    def _cost(self, tokens: Mapping[str, int]) -> float:
        return 0.0
