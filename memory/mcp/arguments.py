"""A tool call's arguments checked before the tool runs, every problem in one short message.

The SDK reports a pydantic dump (error types, input types, a documentation URL) and ignores
names the tool does not take. Here each problem names the argument, what the tool's published
input schema expects and what the call sent, e.g. ``status: expected one of 'success',
'failure', 'partial', found 'fine'``; an unknown name is a problem too, listed with the names
the tool takes. "Expected" is read from the same schema the client sees.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from pydantic import ValidationError

MAX_SHOWN = 80  # characters of a value quoted back to the caller


def check_arguments(tool: Tool, arguments: Mapping[str, Any]) -> None:
    """Raise `ToolError` naming every unknown argument and every invalid value of a call to `tool`."""
    properties: dict[str, Any] = tool.parameters.get("properties", {})
    problems = [_unknown(tool.name, list(properties), [key for key in arguments if key not in properties])]
    cause = None
    try:
        tool.fn_metadata.validate_arguments(dict(arguments))
    except ValidationError as exc:
        cause = exc
        problems += [_invalid(error, properties) for error in exc.errors()]
    problems = [p for p in problems if p]
    if problems:
        # chained to the validation error, so the SDK logs only the arguments' names, not their values
        raise ToolError(f"Error executing tool {tool.name}: {'; '.join(problems)}") from cause


def _unknown(tool: str, names: list[str], unknown: list[str]) -> str:
    if not unknown:
        return ""
    takes = f"{tool} takes {', '.join(names)}" if names else f"{tool} takes no arguments"
    quoted = ", ".join(repr(key) for key in unknown)
    return f"unknown argument{'s' if len(unknown) > 1 else ''} {quoted} ({takes})"


def _invalid(error: Mapping[str, Any], properties: Mapping[str, Any]) -> str:
    """One pydantic error as ``where: expected ..., found ...``."""
    where, schema = _located(error["loc"], properties)
    if error["type"] == "missing":
        return f"{where}: expected {describe(schema)}, found nothing (it is required)"
    return f"{where}: expected {describe(schema)}, found {_shown(error['input'])}"


def _located(loc: tuple[Any, ...], properties: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The argument path as a caller writes it (``relied_on[1]``) and the schema of the value there."""
    where, schema = str(loc[0]), properties.get(loc[0], {})
    for part in loc[1:]:
        items = next((s["items"] for s in [schema, *schema.get("anyOf", [])] if "items" in s), None)
        if not isinstance(part, int) or items is None:
            break  # a part the schema does not show (a union member's tag): the value as a whole is described
        where, schema = f"{where}[{part}]", items
    return where, schema


def describe(schema: Mapping[str, Any]) -> str:
    """What a JSON schema accepts, in words: 'an integer from 1 to 50', 'a list of strings or null'."""
    if "anyOf" in schema:
        return " or ".join(describe(s) for s in schema["anyOf"])
    if "enum" in schema:
        return "one of " + ", ".join(repr(value) for value in schema["enum"])
    kind = schema.get("type", "")  # "" (no type): described by the fallback, like any unknown type
    if kind == "string":
        return _string(schema.get("minLength", 0), schema.get("maxLength"))
    if kind in ("integer", "number"):
        low, high = schema.get("minimum"), schema.get("maximum")
        noun = "an integer" if kind == "integer" else "a number"
        if low is not None and high is not None:
            return f"{noun} from {low} to {high}"
        return noun + (f" >= {low}" if low is not None else "") + (f" <= {high}" if high is not None else "")
    if kind == "array":
        item = schema.get("items", {}).get("type")
        return f"a list of {item}s" if isinstance(item, str) else "a list"
    return {"boolean": "true or false", "null": "null", "object": "an object"}.get(kind, "a valid value")


def _string(low: int, high: int | None) -> str:
    if high is not None:
        return f"a string of {low} characters" if low == high else f"a string of {low} to {high} characters"
    if low:
        return "a non-empty string" if low == 1 else f"a string of at least {low} characters"
    return "a string"


def _shown(value: Any) -> str:
    """A value the caller sent, short: strings quoted as in the other messages, the rest as JSON."""
    text = repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"
