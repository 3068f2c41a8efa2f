"""The memory as MCP tools, on the official ``mcp`` SDK (`MCPServer`).

One `EpisodicMemory` (one store, one principal) behind nine tools: four to record what
happens in an incident (observation, decision, outcome, correction), one to close the
current episode, one to recall a context (rendered prompt block and structured JSON), one
to list facts with their version history, one to verify the store's hash chain, and one to
forget an entry on request (`EpisodicMemory.forget`).

Tools are coroutines: they run on the event loop's thread, the thread that opened the
store (SQLite connections stay on their thread); each call is short, and a stdio server
has one client. A caller's mistake (an unknown argument, a value the schema refuses, a time
without a timezone, a relied-on id the memory does not know) comes back as a tool error the
agent can read and correct, naming the argument, what was expected and what was found
(`memory.mcp.arguments`); the SDK turns any other exception into an error result too, so no
call can bring the server down.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, InputRequiredResult, TextContent
from pydantic import Field

from memory.agent_memory import EpisodicMemory
from memory.errors import EpisodicMemoryError
from memory.facts import FactVersion
from memory.mcp.arguments import check_arguments
from memory.retention import RetentionPolicy
from memory.timeline import Entry, parse_timestamp

INSTRUCTIONS = """Experiential memory of past incidents: what was observed, decided, how it turned out,
and the corrections received, generalized into versioned heuristics with confidence.
While working an incident: call recall first (it returns past episodes with outcomes, facts and causal
chains); record each observation; record your decision with the ids of the recalled items you used;
record the outcome (status success or failure); if you were wrong and learn the real cause, record a
correction ("It was X, not Y"), decide again and record that outcome. Call end_episode when the
incident is over, so the memory links it and updates its facts."""

F = TypeVar("F", bound=Callable[..., Any])

Text = Annotated[str, Field(min_length=1, description="What happened, in plain words (one fact per call).")]
Service = Annotated[
    str | None, Field(description="Service or subject this is about, e.g. the service's name as your team writes it.")
]
Situation = Annotated[
    str, Field(description="Situation label; keep it stable within an incident, e.g. 'incident_response'.")
]
When = Annotated[
    str | None,
    Field(description="ISO-8601 time with a timezone (Z or an offset), e.g. '2026-03-02T09:00:00Z'; default now."),
]


class _Tools(list[Tool]):
    """The tools a server is built with, collected by a decorator like `MCPServer.tool`."""

    def tool(self, *, description: str) -> Callable[[F], F]:
        def add(fn: F) -> F:
            self.append(Tool.from_function(fn, description=description))
            return fn

        return add


class _CheckedServer(MCPServer):
    """An `MCPServer` that checks each call's arguments against the tool it was built with first."""

    def __init__(self, name: str, *, tools: list[Tool], **settings: Any):
        super().__init__(name, tools=tools, **settings)
        self._checked = {tool.name: tool for tool in tools}

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: Context[Any, Any] | None = None,
    ) -> CallToolResult | InputRequiredResult:
        if name in self._checked:
            check_arguments(self._checked[name], arguments)
        return await super().call_tool(name, arguments, context)


def _user_errors(tool: F) -> F:
    """Report a caller's mistake as a tool error with its message (the SDK hides other exceptions' text)."""

    @functools.wraps(tool)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await tool(*args, **kwargs)
        except (ValueError, TypeError, EpisodicMemoryError) as exc:
            raise ToolError(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


def _time(text: str | None, name: str = "timestamp") -> datetime | None:
    """A caller's time; one without a timezone is refused, as everywhere in the memory, not guessed to be UTC."""
    if text is None:
        return None
    try:
        written = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{name}: {text!r} is not an ISO-8601 time (e.g. 2026-03-02T09:00:00Z)") from None
    if written.utcoffset() is None:
        raise ValueError(f"{name}: {text!r} has no timezone; add Z or +00:00, e.g. {written.isoformat()}Z")
    return parse_timestamp(text)


def _unknown_items(memory: EpisodicMemory, ids: list[str]) -> None:
    """Refuse relied-on ids that are no episode, fact or fact version of the memory's principal."""
    unknown = [
        item
        for item in ids
        if memory.episode(item) is None and not any(item in (v.id, v.fact_id) for v in memory.fact_history(item))
    ]
    if unknown:
        quoted = ", ".join(repr(item) for item in unknown)
        raise ValueError(
            f"relied_on: {quoted} {'is' if len(unknown) == 1 else 'are'} no episode or fact id of "
            "this memory (use the ids recall returned)"
        )


def _fields(service: str | None, situation: str, timestamp: str | None) -> dict[str, Any]:
    return {
        "metadata": {"service": service} if service else None,
        "situation": situation,
        "timestamp": _time(timestamp) or datetime.now(UTC),
    }


def _recorded(entry: Entry) -> dict[str, Any]:
    return {"entry_id": entry.id, "seq": entry.seq, "kind": entry.kind.value, "timestamp": entry.timestamp.isoformat()}


def _verified(memory: EpisodicMemory) -> dict[str, Any]:
    """What `verify_store` tells the served principal: whether the whole chain holds, and only its own part of it.

    A store holds every tenant's entries: the count and a broken entry's id are the caller's own only.
    """
    broken = memory.store.verify()
    own = {entry.seq for entry in memory.store.entries(principal=memory.principal)}
    bad = (
        None
        if broken is None
        else (
            {"seq": broken.seq, "id": broken.id, "reason": broken.reason}
            if broken.seq in own
            else {
                "seq": None,
                "id": None,
                "reason": "an entry of another principal (the store's owner can run "
                "`python -m memory verify` on the store)",
            }
        )
    )
    return {"ok": broken is None, "entries": len(own), "first_bad": bad}


def fact_dict(fact: FactVersion) -> dict[str, Any]:
    """A fact version as plain data."""
    return {
        "id": fact.id,
        "fact_id": fact.fact_id,
        "version": fact.version,
        "text": fact.text,
        "condition": list(fact.condition),
        "conclusion": fact.conclusion,
        "confidence": fact.confidence,
        "status": fact.status,
        "reason": fact.reason,
        "created_at": fact.created_at.isoformat(),
        "supersedes": fact.supersedes,
        "support": list(fact.support),
        "contradict": list(fact.contradict),
    }


def build_server(
    memory: EpisodicMemory, *, name: str = "episodic-memory", retention: RetentionPolicy | None = None
) -> MCPServer:
    """An MCP server whose tools read and write `memory` (for its default principal); with `retention`, an
    ``apply_retention`` tool erases what that policy expires of the principal's entries."""
    tools = _Tools()
    _recording_tools(tools, memory)
    _reading_tools(tools, memory)
    if retention is not None:
        _add_apply_retention(tools, memory, retention)
    # WARNING: a caller's mistake is the caller's to read, not the server log's
    return _CheckedServer(name, tools=tools, instructions=INSTRUCTIONS, log_level="WARNING")


def _recording_tools(tools: _Tools, memory: EpisodicMemory) -> None:
    """The tools that write: an incident's four kinds of record, and the end of its episode."""
    for add in (
        _add_record_observation,
        _add_record_decision,
        _add_record_outcome,
        _add_record_correction,
        _add_end_episode,
    ):
        add(tools, memory)


def _add_record_observation(tools: _Tools, memory: EpisodicMemory) -> None:
    @tools.tool(description="Record something observed in the current incident (a symptom, a log line, a metric).")
    @_user_errors
    async def record_observation(
        text: Text, service: Service = None, situation: Situation = "incident_response", timestamp: When = None
    ) -> dict[str, Any]:
        return _recorded(memory.observe(text, **_fields(service, situation, timestamp)))


def _add_record_decision(tools: _Tools, memory: EpisodicMemory) -> None:
    @tools.tool(
        description="Record a decision: the root cause or fix chosen (`choice`, a short stable id such as "
        "'connection_pool'), with the ids of recalled items it relied on."
    )
    @_user_errors
    async def record_decision(
        text: Text,
        choice: Annotated[
            str, Field(min_length=1, description="Short, stable id of what was chosen, e.g. 'connection_pool'.")
        ],
        confidence: Annotated[float | None, Field(ge=0, le=1)] = None,
        relied_on: Annotated[
            list[str], Field(description="Ids (from recall: episodes, facts) of the items this decision relied on.")
        ] = [],  # noqa: B006
        service: Service = None,
        situation: Situation = "incident_response",
        timestamp: When = None,
    ) -> dict[str, Any]:
        _unknown_items(memory, relied_on)
        entry = memory.decide(
            text,
            choice=choice,
            confidence=confidence,
            retrieved=relied_on,
            relied_on=relied_on,
            **_fields(service, situation, timestamp),
        )
        return _recorded(entry)


def _add_record_outcome(tools: _Tools, memory: EpisodicMemory) -> None:
    @tools.tool(
        description="Record how the last decision turned out: status 'success' when the problem is gone, "
        "'failure' when it persists, 'partial' when it only improved."
    )
    @_user_errors
    async def record_outcome(
        text: Text,
        status: Literal["success", "failure", "partial"],
        service: Service = None,
        situation: Situation = "incident_response",
        timestamp: When = None,
    ) -> dict[str, Any]:
        fields = _fields(service, situation, timestamp)
        meta = {**(fields.pop("metadata") or {}), "status": status}
        return _recorded(memory.outcome(text, metadata=meta, **fields))


def _add_record_correction(tools: _Tools, memory: EpisodicMemory) -> None:
    @tools.tool(description="Record a correction of a wrong decision, ideally 'It was X, not Y, because ...'.")
    @_user_errors
    async def record_correction(
        text: Text, service: Service = None, situation: Situation = "incident_response", timestamp: When = None
    ) -> dict[str, Any]:
        return _recorded(memory.correct(text, **_fields(service, situation, timestamp)))


def _add_end_episode(tools: _Tools, memory: EpisodicMemory) -> None:
    @tools.tool(
        description="Close the current episode now (the incident is over): the memory links it to past "
        "episodes and updates its facts. Returns the episodes closed."
    )
    @_user_errors
    async def end_episode() -> dict[str, Any]:
        closed = memory.flush()
        return {
            "closed": [
                {
                    "id": e.id,
                    "summary": e.summary,
                    "outcome": e.outcome.value,
                    "subject": e.subject,
                    "start": e.start.isoformat(),
                    "end": e.end.isoformat(),
                }
                for e in closed
            ],
            "facts": len(memory.facts()),
        }


def _reading_tools(tools: _Tools, memory: EpisodicMemory) -> None:
    """The tools that read (recall, list_facts, verify_store) and forget_entry."""
    for add in (_add_recall, _add_list_facts, _add_verify_store, _add_forget_entry):
        add(tools, memory)


def _add_recall(tools: _Tools, memory: EpisodicMemory) -> None:
    @tools.tool(
        description="Recall past experience for the current problem: past incidents whole (symptoms, every "
        "attempt with its outcome, the corrections, the final fix, weighed by closeness and "
        "credit), applicable facts with confidence, recent changes the observations implicate, "
        "causal chains. The text is a prompt block; the structured result has every item's id, "
        "provenance and reasons."
    )
    @_user_errors
    async def recall(
        query: Annotated[
            str | None,
            Field(
                description="What you are looking at; default: the observations recorded since the last closed episode."
            ),
        ] = None,
        service: Annotated[str | None, Field(description="Only episodes about this service.")] = None,
        outcome: Annotated[
            Literal["SUCCESS", "FAILURE", "PARTIAL", "UNKNOWN"] | None,
            Field(description="Only episodes with this outcome."),
        ] = None,
        since: Annotated[
            str | None, Field(description="Only episodes that ended at or after this ISO-8601 time with a timezone.")
        ] = None,
        until: Annotated[
            str | None, Field(description="Only episodes that ended at or before this ISO-8601 time with a timezone.")
        ] = None,
        k: Annotated[int, Field(ge=1, le=50, description="Most episodes.")] = 5,
        max_chars: Annotated[int, Field(ge=200, le=20000, description="Longest text.")] = 3000,
    ) -> CallToolResult:
        where = {key: value for key, value in (("service", service), ("outcome", outcome)) if value}
        context = memory.recall(
            query, k=k, where=where or None, since=_time(since, "since"), until=_time(until, "until"), subject=service
        )
        text = context.render(max_chars=max_chars) or "(no past experience matches)"
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=context.to_dict())


def _add_list_facts(tools: _Tools, memory: EpisodicMemory) -> None:
    @tools.tool(
        description="List the generalized facts (heuristics) learned so far, each with its version history: "
        "how its confidence changed and on which episodes' evidence."
    )
    @_user_errors
    async def list_facts(
        include_retired: Annotated[bool, Field(description="Also list retired facts.")] = False,
        history: Annotated[bool, Field(description="Include every version of each fact.")] = True,
    ) -> dict[str, Any]:
        facts = []
        for fact in memory.facts(include_retired=include_retired):
            item = fact_dict(fact)
            if history:
                item["history"] = [fact_dict(v) for v in memory.fact_history(fact.fact_id)]
                erased = memory.evidence_erased(fact.fact_id)
                if erased:  # what a replay without the erased entries cannot tell
                    item["evidence_erased"] = [note._asdict() for note in erased]
            facts.append(item)
        return {"principal": memory.principal, "facts": facts}


def _add_verify_store(tools: _Tools, memory: EpisodicMemory) -> None:
    @tools.tool(
        description="Verify the store: recompute the hash chain of every timeline entry. ok is false when "
        "the chain is broken anywhere in the store; entries counts this principal's entries; "
        "first_bad names the first altered entry when it is one of this principal's."
    )
    @_user_errors
    async def verify_store() -> dict[str, Any]:
        return _verified(memory)


def _add_forget_entry(tools: _Tools, memory: EpisodicMemory) -> None:
    @tools.tool(
        description="Forget one recorded entry for good, on a person's request (e.g. it held personal "
        "data): its text is erased from the store, what the memory learned is rebuilt "
        "without it, and the store still verifies. Irreversible; only this principal's entries."
    )
    @_user_errors
    async def forget_entry(
        entry_id: Annotated[
            str, Field(min_length=64, max_length=64, description="The entry_id a record_* tool returned.")
        ],
        reason: Annotated[
            str,
            Field(description="Why (kept in the erasure record, no content); e.g. 'request of the person concerned'."),
        ] = "",
    ) -> dict[str, Any]:
        done = memory.forget(entry_id=entry_id, reason=reason, requested_by="mcp")
        return {
            "erased": done.entries,
            "erasure_record": done.record_id,
            "rebuilt_records": done.records,
            "purged": done.purged,
        }


def _add_apply_retention(tools: _Tools, memory: EpisodicMemory, policy: RetentionPolicy) -> None:
    limits = [
        f"older than {policy.max_age} before the newest entry" if policy.max_age else "",
        f"all but the newest {policy.max_entries}" if policy.max_entries is not None else "",
    ]

    @tools.tool(
        description="Apply the server's retention policy to this principal's entries: erase "
        + " and ".join(limit for limit in limits if limit)
        + (", keeping the evidence of current facts" if policy.keep_lessons else "")
        + ". Recorded like an erasure (the record names the policy); the store still verifies. Irreversible."
    )
    @_user_errors
    async def apply_retention() -> dict[str, Any]:
        done = memory.retain(policy)
        return {
            "erased": done.entries,
            "kept_as_evidence": done.kept,
            "erasure_record": done.record_id,
            "rebuilt_records": done.records,
            "purged": done.purged,
        }
