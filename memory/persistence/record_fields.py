"""What each kind of derived record must hold: the fields its readers rely on, with their JSON types.

The store reads any JSON object as a record body (`memory.timeline.record_body`); opening a
memory also needs each record of the kinds it reads to hold these fields (`checked`), and
their values to convert (an outcome name, a timestamp: `converted`). A record that does not
is malformed: opening raises `DamagedStore` naming its row (``records row seq=… kind=…
id=…``) and `findings` lists every one, read-only. Kinds not listed here (erasure records)
are read by code that checks them itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from memory.errors import DamagedStore
from memory.timeline import record_body

T = TypeVar("T")


class JsonType(NamedTuple):
    """A JSON type a field may hold."""

    name: str  # as a message says it ("a string")
    types: tuple[type, ...]  # the Python types `json.loads` gives for it (bool is never a number)


STRING = JsonType("a string", (str,))
INTEGER = JsonType("an integer", (int,))
NUMBER = JsonType("a number", (int, float))
LIST = JsonType("a list", (list,))
OBJECT = JsonType("an object", (dict,))
STRING_OR_NULL = JsonType("a string or null", (str, type(None)))
INTEGER_OR_NULL = JsonType("an integer or null", (int, type(None)))
LIST_OR_OBJECT = JsonType("a list or an object", (list, dict))

_EPISODE_LISTS = ("entry_ids", "decisions", "choices", "assumptions", "corrections", "actions", "observations")
# kind -> (required fields, optional fields), each field -> its JSON type (`memory.episodes`, `memory.facts`)
FIELDS: dict[str, tuple[dict[str, JsonType], dict[str, JsonType]]] = {
    "episode": (
        {
            "id": STRING,
            "first_seq": INTEGER,
            "last_seq": INTEGER,
            "principal": STRING,
            "situation": STRING,
            "subject": STRING_OR_NULL,
            "start": STRING,
            "end": STRING,
            "summary": STRING,
            "outcome": STRING,
            "outcome_evidence": STRING,
        },
        {**{name: LIST for name in _EPISODE_LISTS}, "outcome_text": STRING},
    ),
    "edge": ({"source": STRING, "target": STRING, "type": STRING, "weight": NUMBER, "evidence": STRING}, {}),
    "fact_version": (
        {
            "fact_id": STRING,
            "version": INTEGER,
            "principal": STRING,
            "text": STRING,
            "condition": LIST,
            "conclusion": STRING,
            "confidence": NUMBER,
            "created_at": STRING,
            "status": STRING,
            "supersedes": INTEGER_OR_NULL,
            "reason": STRING,
            "usefulness": OBJECT,
        },
        # wording: an object since `memory.facts.Wording`, a list in records stored before it
        {"since": STRING_OR_NULL, "kind": STRING, "unless": LIST, "wording": LIST_OR_OBJECT, "rejected": LIST},
    ),
    "reinforcement": ({"episode": STRING}, {}),
    "flush": ({"seq": INTEGER}, {}),
}
# A fact version stores its evidence whole, or as changes to the base version it follows.
FACT_WHOLE = {"support": LIST, "contradict": LIST}
FACT_CHANGES = {
    "base": INTEGER,
    **{f"{name}_{how}": LIST for name in ("support", "contradict") for how in ("add", "drop")},
}


def json_name(value: Any) -> str:
    """How a message names the JSON type of a parsed value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    found = next((t for t in (STRING, INTEGER, NUMBER, LIST, OBJECT) if isinstance(value, t.types)), None)
    return found.name if found is not None else type(value).__name__


def _checks(kind: str, changes: bool) -> tuple[dict[str, JsonType], dict[str, JsonType]]:
    """(required, every typed field) of a kind; a fact version's depend on whether it stores `changes`."""
    required, optional = FIELDS[kind]
    if kind == "fact_version":
        required = {**required, **(FACT_CHANGES if changes else FACT_WHOLE)}
    return required, {**required, **optional}


_CHECKS = {(kind, changes): _checks(kind, changes) for kind in FIELDS for changes in (False, True)}


def problem(kind: str, body: Any) -> str:
    """What is wrong with a parsed body of a record of `kind` ("" when it holds what its readers need)."""
    if not isinstance(body, dict):
        return f"the body is {json_name(body)}, not an object"
    checks = _CHECKS.get((kind, "base" in body))
    if checks is None:
        return ""
    required, typed = checks
    if not required.keys() <= body.keys():
        missing = [name for name in required if name not in body]
        return f"required field{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} missing"
    for name, value in body.items():
        expected = typed.get(name)
        if expected is not None and not (isinstance(value, expected.types) and not isinstance(value, bool)):
            return f"field {name!r} holds {json_name(value)}, expected {expected.name}"
    return ""


def checked(body: Any, path: str, kind: str, record_id: str, seq: int | None = None) -> Any:
    """`body` (a parsed record of `kind`), once it holds what its readers need.

    Raises:
        DamagedStore: it does not; the message names the row.
    """
    wrong = problem(kind, body)
    if wrong:
        raise record_body.malformed(path, kind, record_id, wrong, seq)
    return body


def converted(
    convert: Callable[[Any], T], body: Any, path: str, kind: str, record_id: str, seq: int | None = None
) -> T:
    """`convert(body)` of a `checked` body, raising `DamagedStore` naming the row when a value cannot be converted."""
    checked(body, path, kind, record_id, seq)
    try:
        return convert(body)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise unreadable(exc, path, kind, record_id) from exc


def unreadable(exc: BaseException, path: str, kind: str, record_id: str) -> DamagedStore:
    """The error for a record whose conversion raised `exc`."""
    what = f"required field {exc.args[0]!r} missing" if isinstance(exc, KeyError) else f"cannot be read ({exc})"
    return record_body.malformed(path, kind, record_id, what)
