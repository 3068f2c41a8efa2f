"""What every LLM reasoner shares: the decision contract, the prompt, the response cache.

An LLM reasoner (`agent.claude`, `agent.openai`) differs only in how a request is shaped
for its API, how the decision is read back from a response, and what tokens cost. The
rest is here, written once:

* the system prompt and the user prompt built from a `Problem` and the memory block;
* the decision schema (a function/tool whose ``root_cause`` enumerates the candidates) and
  its validation: a known candidate, not one already tried while others remain, a numeric
  confidence, a rationale, a list of relied-on ids;
* one repair round when the model answers off-contract, then `ReasonerError`;
* the on-disk response cache, keyed by the SHA-256 of the exact request, so a finished run
  replays without a key or a server (`CacheMiss` when a request is not there);
* token and cost accounting per decision.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Mapping, Sequence

from agent.reasoner import Decision, Evidence, Problem

TOOL_NAME = "record_decision"
TOKEN_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")

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

REPAIR_PROMPT = "That answer was not valid: call record_decision once, with one of the allowed root_cause ids."


class MissingKey(Exception):
    """An LLM mode that can neither reach its model nor replay a cache."""


class ReasonerError(Exception):
    """The model could not produce a valid decision (after retries and one repair)."""


class CacheMiss(ReasonerError):
    """Replay without a key asked for a request that is not in the cache."""


def decision_schema(problem: Problem) -> dict[str, Any]:
    """JSON schema of the decision: ``root_cause`` enumerates the candidates."""
    return {
        "type": "object",
        "properties": {
            "root_cause": {"type": "string", "enum": [c.id for c in problem.candidates]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "rationale": {"type": "string"},
            "relied_on": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["root_cause", "confidence", "rationale", "relied_on"],
    }


def user_prompt(problem: Problem, context_text: str) -> str:
    """The user message: the incident, the candidates, what was tried, and the memory block."""
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


class CachedLLMReasoner(ABC):
    """The decision loop of an LLM reasoner; subclasses speak one API.

    A subclass sets `name`, `model` and `key_name` and implements `build_request`,
    `_call` (send one request, return the response as JSON data), `_answer` (the decision
    arguments in a response, or None and what the model said) and `_tokens` (token counts
    under `TOKEN_KEYS`); `_cost` prices them (0 by default).
    """

    name = "llm"
    key_name = "API key"  # environment variable named in messages

    def __init__(self, model: str, *, cache_dir: str | Path | None, can_call: bool) -> None:
        self.model = model
        self.cache = ResponseCache(cache_dir)
        self._can_call = can_call
        self.usage: dict[str, float] = {key: 0 for key in TOKEN_KEYS}
        self.usage.update(cost_usd=0.0, requests=0, cache_hits=0)

    @property
    def cache_dir(self) -> Path | None:
        return self.cache.directory

    def check_ready(self) -> None:
        """Raise `MissingKey` unless a run can start: the model is reachable or a cache is there to replay."""
        if not self._can_call and not self.cache.has_responses():
            where = f"{self.cache.directory} holds no cached responses" if self.cache.directory else "no --cache DIR"
            raise MissingKey(f"{self.name} mode cannot reach the model (no {self.key_name}) and {where} to replay")

    @abstractmethod
    def build_request(self, problem: Problem, context_text: str, *, repair: str | None = None) -> dict[str, Any]:
        """See the class docstring."""

    def decide(self, problem: Problem, evidence: Sequence[Evidence], context_text: str) -> Decision:
        started = time.perf_counter()
        usage_before = dict(self.usage)
        response = self._respond(self.build_request(problem, context_text))
        parsed, problem_text = self._parse(response, problem)
        if parsed is None:
            response = self._respond(self.build_request(problem, context_text, repair=problem_text))
            parsed, problem_text = self._parse(response, problem)
            if parsed is None:
                raise ReasonerError(f"model gave no valid decision: {problem_text}")
        known = {item.id for item in evidence}
        relied = tuple(i for i in parsed.get("relied_on", []) if isinstance(i, str) and i in known)
        usage = {key: self.usage[key] - usage_before[key] for key in ("input_tokens", "output_tokens", "cost_usd")}
        usage["latency_ms"] = (time.perf_counter() - started) * 1000.0
        return Decision(choice=parsed["root_cause"], confidence=float(min(1.0, max(0.0, parsed["confidence"]))),
                        rationale=str(parsed["rationale"])[:500], relied_on=relied, usage=usage)

    def _parse(self, response: Mapping[str, Any], problem: Problem) -> tuple[dict[str, Any] | None, str]:
        data, said = self._answer(response)
        if data is None:
            return None, said
        return validate(data, problem)

    def _respond(self, request: dict[str, Any]) -> dict[str, Any]:
        key = self.cache.key(request)
        cached = self.cache.get(key)
        if cached is not None:
            self.usage["cache_hits"] += 1
            self._account(cached)
            return cached
        if not self._can_call:
            raise CacheMiss(f"no cached response for request {key[:12]}… and no {self.key_name} to ask the model")
        data = self._call(request)
        self.usage["requests"] += 1
        self.cache.put(key, data)
        self._account(data)
        return data

    def _account(self, data: Mapping[str, Any]) -> None:
        tokens = self._tokens(data)
        for key, value in tokens.items():
            self.usage[key] += value
        self.usage["cost_usd"] += self._cost(tokens)

    @abstractmethod
    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        """See the class docstring."""

    @abstractmethod
    def _answer(self, response: Mapping[str, Any]) -> tuple[Any, str]:
        """See the class docstring."""

    @abstractmethod
    def _tokens(self, response: Mapping[str, Any]) -> dict[str, int]:
        """See the class docstring."""

    def _cost(self, tokens: Mapping[str, int]) -> float:
        return 0.0
