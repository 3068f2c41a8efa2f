"""Loads schema-1 scenario files strictly, reporting every problem at once.

``load`` accepts a file path or the name of a shipped scenario; ``loads`` parses text.
Both return a :class:`Scenario` or raise :class:`ScenarioError` whose lines are
``FILE: PATH: message``. YAML is read with a safe-loader subclass that also
rejects duplicate mapping keys (plain ``safe_load`` would silently keep the last one).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from scenarios import fields as f
from scenarios.schema import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_SITUATION,
    SCHEMA_VERSION,
    Interlude,
    RootCause,
    Round,
    Scenario,
    ScenarioError,
)

MAX_BYTES = 5 * 1024 * 1024  # larger files are refused before parsing
MAX_DEPTH = 64  # nesting of mappings and sequences; scenarios need fewer than 10
SHIPPED_DIR = Path(__file__).resolve().parent
# Used for time-order checks when neither `start` nor the first round's `at` is given;
# the simulator uses the same default.
DEFAULT_START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
DEFAULT_GAP = timedelta(days=1)

TOP_KEYS = ("schema", "name", "title", "description", "start", "root_causes", "interludes", "rounds")
TOP_REQUIRED = ("schema", "name", "root_causes", "rounds")
CAUSE_KEYS = ("description", "signals")
INTERLUDE_KEYS = ("situation", "events")
ROUND_KEYS = (
    "id",
    "kind",
    "situation",
    "service",
    "after",
    "at",
    "observations",
    "candidates",
    "truth",
    "max_attempts",
    "on_success",
    "on_failure",
    "correction",
    "caused_by",
    "runbook",
)
ROUND_REQUIRED = ("id", "kind", "service", "observations", "truth")
NAME_PATTERN = r"[a-z0-9-]+"
CAUSE_PATTERN = r"[a-z0-9_]+"


class _NoDuplicates:
    """Loader mixin that refuses duplicate keys in a mapping."""

    def construct_mapping(self, node, deep=False):  # PyYAML hook
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                ident = (key_node.tag, key_node.value)
                if ident in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key_node.value!r}", key_node.start_mark
                    )
                seen.add(ident)
        return super().construct_mapping(node, deep=deep)


class _Mapping(dict):
    """A YAML mapping that knows the line it starts on, so that a problem inside it can name the line."""

    __slots__ = ("line",)


def _mapping(loader, node):
    """Mapping constructor: a `_Mapping` carrying its 1-based line."""
    data = _Mapping()
    data.line = node.start_mark.line + 1
    yield data
    data.update(loader.construct_mapping(node))


class _StrictLoader(_NoDuplicates, yaml.SafeLoader):
    """Pure-Python safe loader: the reference for parse-error wording."""


# libyaml's parser is ~10x faster on long generated scenarios; its error wording
# differs, so failures are re-parsed with the pure-Python loader for stable messages.
def _fast_loader() -> type[yaml.SafeLoader] | type[yaml.CSafeLoader]:
    """libyaml's safe loader refusing duplicate keys, or the pure-Python one where PyYAML was built without it."""
    if not hasattr(yaml, "CSafeLoader"):
        return _StrictLoader

    class _FastLoader(_NoDuplicates, yaml.CSafeLoader):
        """libyaml's safe loader, refusing duplicate keys."""

    return _FastLoader


_FastLoader = _fast_loader()


def _timestamp(loader, node):
    """YAML timestamp constructor that reports impossible dates at their line."""
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    except (ValueError, OverflowError) as exc:
        raise yaml.constructor.ConstructorError(
            None, None, f"invalid timestamp {node.value!r} ({exc})", node.start_mark
        ) from None


for _loader in {_StrictLoader, _FastLoader}:
    _loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)
    _loader.add_constructor("tag:yaml.org,2002:map", _mapping)


def _parse(text: str):
    try:
        return yaml.load(text, Loader=_FastLoader)  # a safe loader subclass
    except yaml.YAMLError:
        if _FastLoader is _StrictLoader:
            raise
    return yaml.load(text, Loader=_StrictLoader)  # a safe loader subclass


def shipped() -> list[str]:
    """Names of the scenarios shipped in the ``scenarios`` package, sorted."""
    return sorted(p.stem for p in SHIPPED_DIR.glob("*.yaml"))


def load(ref: str | Path) -> Scenario:
    """Loads a scenario from a file path or a shipped scenario's name.

    Raises:
        ScenarioError: the file is missing, unreadable, too large, not YAML, or invalid.
    """
    path = Path(ref)
    looks_like_name = isinstance(ref, str) and "/" not in ref and not path.suffix
    if looks_like_name and not path.exists():
        if ref in shipped():
            path = SHIPPED_DIR / f"{ref}.yaml"
        else:
            names = ", ".join(shipped()) or "none"
            raise ScenarioError([f"{ref}: (file): no such file, and not a shipped scenario (shipped: {names})"])
    source = str(ref) if not looks_like_name else str(path)
    try:
        if path.is_dir():
            raise ScenarioError([f"{source}: (file): is a directory; expected a scenario file"])
        if path.exists() and not path.is_file():  # a FIFO would block, a device never end
            raise ScenarioError([f"{source}: (file): not a regular file; expected a scenario file"])
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ScenarioError([_too_large(source, size)])
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)  # the file may grow after the size check
    except FileNotFoundError:
        raise ScenarioError([f"{source}: (file): no such file"]) from None
    except OSError as exc:
        raise ScenarioError([f"{source}: (file): cannot read: {exc.strerror or exc}"]) from None
    return loads(data, source=source)


def load_all(refs: Sequence[str | Path]) -> tuple[list[Scenario], list[str]]:
    """Loads every scenario `refs` name; returns those that loaded and every problem found in the others.

    Scenarios loaded together are played and reported together, and every result is kept under
    its scenario's name: a name that two of them share is a problem of the second.
    """
    loaded, problems = [], []
    named: dict[str, Scenario] = {}
    for ref in refs:
        try:
            scenario = load(ref)
        except ScenarioError as exc:
            problems.extend(exc.problems)
            continue
        first = named.setdefault(scenario.name, scenario)
        if first is scenario:
            loaded.append(scenario)
        elif Path(first.source).resolve() == Path(scenario.source).resolve():
            problems.append(f"{scenario.source}: (file): listed twice; expected each scenario once")
        else:
            problems.append(
                f"{scenario.source}: name: {scenario.name!r} is also the name of {first.source}; "
                "expected distinct names (results are kept by scenario name)"
            )
    return loaded, problems


def loads(data: str | bytes, source: str = "<string>") -> Scenario:
    """Parses and validates scenario text (or bytes) read from `source`.

    Raises:
        ScenarioError: with every problem found, one per line.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > MAX_BYTES:
        raise ScenarioError([_too_large(source, len(raw))])
    if b"\x00" in raw:
        raise ScenarioError([f"{source}: (file): contains NUL bytes; expected a YAML text file"])
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            [f"{source}: (file): not UTF-8 text (invalid byte at offset {exc.start}); expected a YAML text file"]
        ) from None
    try:
        _check_depth(text)
        doc = _parse(text)
    except yaml.MarkedYAMLError as exc:
        raise ScenarioError([_yaml_problem(source, exc)]) from None
    except yaml.YAMLError as exc:
        raise ScenarioError([f"{source}: (file): could not parse YAML: {exc}"]) from None
    except (ValueError, OverflowError) as exc:  # e.g. a timestamp with month 13
        raise ScenarioError([f"{source}: (file): could not parse YAML: {exc}"]) from None
    except RecursionError:
        raise ScenarioError([f"{source}: (file): could not parse YAML: nesting is too deep"]) from None
    return _build(doc, source, hashlib.sha256(raw).hexdigest())


def _check_depth(text: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH before composing: libyaml's composer recurses in C and
    crashes the process on deep input; its event parser does not recurse."""
    depth = 0
    events = yaml.parse(text, Loader=_FastLoader)
    while True:
        try:
            event = next(events)
        except StopIteration:
            return
        except yaml.MarkedYAMLError as exc:  # a syntax error is reported by `_parse` in its stable wording,
            if "nesting depth" in str(exc.problem):  # except libyaml's own depth limit (1,000 from PyYAML 6.0.4 on)
                line = exc.problem_mark.line + 1 if exc.problem_mark is not None else "?"
                raise yaml.YAMLError(f"nesting deeper than {MAX_DEPTH} levels (line {line})") from None
            return
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark is not None else "?"
                raise yaml.YAMLError(f"nesting deeper than {MAX_DEPTH} levels (line {line})")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def _too_large(source: str, size: int) -> str:
    return f"{source}: (file): file is {size} bytes; scenario files are limited to {MAX_BYTES} bytes"


def _yaml_problem(source: str, exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(file)"
    what = "; ".join(str(x) for x in (exc.context, exc.problem) if x)
    if "'\\t'" in what:  # PyYAML's wording names the tab but not the rule
        what += " (YAML indents with spaces only: replace the tab with spaces)"
    return f"{source}: {where}: could not parse YAML: {what}"


def _build(doc: Any, source: str, sha256: str) -> Scenario:
    p = f.Problems(source)
    if doc is None:
        p.add("(top level)", "the file is empty; expected a scenario mapping (schema, name, root_causes, rounds)")
        raise ScenarioError(p.lines)
    if not isinstance(doc, dict):
        p.add("(top level)", f"expected a mapping of scenario keys, found {f.describe(doc)}")
        raise ScenarioError(p.lines)
    f.check_keys(p, doc, "", TOP_KEYS, TOP_REQUIRED)
    if "schema" in doc:
        v = doc["schema"]
        if isinstance(v, bool) or v != SCHEMA_VERSION:
            p.add("schema", f"unsupported schema version {f.describe(v)}; this version reads schema {SCHEMA_VERSION}")
    name = f.text(p, doc["name"], "name", pattern=NAME_PATTERN) if "name" in doc else None
    title = f.text(p, doc["title"], "title") if doc.get("title") is not None else ""
    desc = f.text(p, doc["description"], "description") if doc.get("description") is not None else ""
    start = f.timestamp(p, doc["start"], "start") if "start" in doc else None
    causes, known = _root_causes(p, doc["root_causes"]) if "root_causes" in doc else (None, None)
    interludes = _interludes(p, doc["interludes"]) if "interludes" in doc else ()
    rounds = _rounds(p, doc["rounds"], known, start) if "rounds" in doc else None
    if p.lines or name is None or title is None or desc is None or causes is None or rounds is None:
        raise ScenarioError(p.lines)  # every None above came with a problem
    return Scenario(
        name=name,
        title=title,
        description=desc,
        start=start,
        root_causes=causes,
        interludes=interludes,
        rounds=rounds,
        source=source,
        sha256=sha256,
    )


def _root_causes(p: f.Problems, value: Any) -> tuple[dict[str, RootCause] | None, list[str] | None]:
    """Returns (valid root causes, every id named) so references are checked once."""
    path = "root_causes"
    if not isinstance(value, dict):
        p.add(path, f"expected a mapping of root-cause id to {{description, signals}}, found {f.describe(value)}")
        return None, None
    if len(value) < 2:
        p.add(path, f"at least 2 root causes are required, found {len(value)}")
    causes: dict[str, RootCause] = {}
    for cid, body in value.items():
        here = f.join(path, cid)
        ok = f.text(p, cid, here, pattern=CAUSE_PATTERN, what="a root-cause id") is not None
        if not isinstance(body, dict):
            p.add(here, f"expected a mapping with description and signals, found {f.describe(body)}")
            continue
        f.check_keys(p, body, here, CAUSE_KEYS, ("description",))
        desc = f.text(p, body["description"], f"{here}.description") if "description" in body else None
        signals = f.text_list(p, body["signals"], f"{here}.signals", allow_empty=True) if "signals" in body else ()
        if ok and desc is not None and signals is not None:
            causes[cid] = RootCause(id=cid, description=desc, signals=signals)
    return causes, [cid for cid in value if isinstance(cid, str)]


def _interludes(p: f.Problems, value: Any) -> tuple[Interlude, ...]:
    if not isinstance(value, list):
        p.add("interludes", f"expected a list of {{situation, events}} mappings, found {f.describe(value)}")
        return ()
    out = []
    for i, body in enumerate(value):
        here = f"interludes[{i}]"
        if not isinstance(body, dict):
            p.add(here, f"expected a mapping with situation and events, found {f.describe(body)}")
            continue
        f.check_keys(p, body, here, INTERLUDE_KEYS, INTERLUDE_KEYS)
        situation = f.text(p, body["situation"], f"{here}.situation") if "situation" in body else None
        events = f.text_list(p, body["events"], f"{here}.events") if "events" in body else None
        if situation is not None and events is not None:
            out.append(Interlude(situation=situation, events=events))
    return tuple(out)


def _rounds(p: f.Problems, value: Any, known: list[str] | None, start: datetime | None) -> tuple[Round, ...] | None:
    if not isinstance(value, list):
        p.add("rounds", f"expected a list of rounds, found {f.describe(value)}")
        return None
    if not value:
        p.add("rounds", "at least 1 round is required, found an empty list")
        return None
    first_index: dict[str, int] = {}  # round id -> index where it first appears
    rounds: list[Round] = []
    clock: datetime | None = start or DEFAULT_START  # nominal time of the previous round
    for i, body in enumerate(value):
        here = _round_location(i, body)
        if not isinstance(body, dict):
            p.add(here, f"expected a mapping describing a round, found {f.describe(body)}")
            clock = None
            continue
        r, clock = _round(p, body, here, i, known, first_index, clock)
        if r is not None:
            rounds.append(r)
    return tuple(rounds)


def _round_location(index: int, body: Any) -> str:
    """Where a round's problems are: ``rounds[2] (id r3, line 14)``, with the id and line when known."""
    known = []
    rid = body.get("id") if isinstance(body, dict) else None
    if isinstance(rid, str) and rid.strip():
        known.append(f"id {rid}" if re.fullmatch(r"[\w.:@/+-]{1,40}", rid) else f"id {rid[:40]!r}")
    if getattr(body, "line", None):
        known.append(f"line {body.line}")
    return f"rounds[{index}]" + (f" ({', '.join(known)})" if known else "")


def _round(p, body, here, index, known, first_index, clock):
    """Checks one round; returns (Round or None, nominal time of this round or None)."""
    before = len(p.lines)
    f.check_keys(p, body, here, ROUND_KEYS, ROUND_REQUIRED)
    rid = f.text(p, body["id"], f"{here}.id") if "id" in body else None
    if rid is not None:
        if rid in first_index:
            p.add(f"{here}.id", f"duplicate round id {rid!r} (first used by rounds[{first_index[rid]}])")
        else:
            first_index[rid] = index
    kind = f.text(p, body["kind"], f"{here}.kind") if "kind" in body else None
    situation = f.text(p, body["situation"], f"{here}.situation") if "situation" in body else DEFAULT_SITUATION
    service = f.text(p, body["service"], f"{here}.service") if "service" in body else None
    after = f.duration(p, body["after"], f"{here}.after") if "after" in body else None
    at = f.timestamp(p, body["at"], f"{here}.at") if "at" in body else None
    if "after" in body and "at" in body:
        p.add(here, "give either 'after' or 'at', not both")
    observations = f.text_list(p, body["observations"], f"{here}.observations") if "observations" in body else None
    candidates = _candidates(p, body, here, known)
    truth = _truth(p, body, here, known, candidates)
    max_attempts = (
        f.positive_int(p, body["max_attempts"], f"{here}.max_attempts")
        if "max_attempts" in body
        else DEFAULT_MAX_ATTEMPTS
    )
    texts = {}
    for key in ("on_success", "on_failure", "correction"):
        texts[key] = f.text(p, body[key], f"{here}.{key}") if body.get(key) is not None else None
    caused_by = _caused_by(p, body, here, index, rid, first_index)
    runbook = _runbook(p, body, here, candidates)
    now = _nominal_time(p, here, index, clock, body, after, at)
    if len(p.lines) > before:
        return None, now
    return Round(
        id=rid,
        kind=kind,
        situation=situation,
        service=service,
        after=after,
        at=at,
        observations=observations,
        candidates=candidates,
        truth=truth,
        max_attempts=max_attempts,
        caused_by=caused_by,
        runbook=runbook or (),
        **texts,
    ), now


def _nominal_time(p, here, index, clock, body, after, at):
    """This round's time before seeded jitter (None when it cannot be known)."""
    if "at" in body:
        if at is not None and index and clock is not None and at <= clock:
            p.add(
                f"{here}.at",
                f"{at.isoformat()} is not after the previous round's time "
                f"{clock.isoformat()}; rounds must be in time order",
            )
        return at
    if clock is None or ("after" in body and after is None):
        return None
    gap = after if after is not None else (DEFAULT_GAP if index else timedelta(0))
    try:
        return clock + gap
    except OverflowError:
        p.add(f"{here}.after", "the round's time falls outside the supported calendar")
        return None


def _candidates(p, body, here, known):
    if "candidates" not in body:
        return tuple(known) if known is not None else None
    path = f"{here}.candidates"
    raw = body["candidates"]
    if not isinstance(raw, list):
        p.add(path, f"expected a list of root-cause ids, found {f.describe(raw)}")
        return None
    if not raw:
        p.add(path, "expected a non-empty list of root-cause ids, found an empty list (omit the key to offer all)")
        return None
    ok = True
    seen: set[str] = set()
    for j, cid in enumerate(raw):
        item = f"{path}[{j}]"
        if f.text(p, cid, item, what="a root-cause id") is None:
            ok = False
        elif known is not None and cid not in known:
            p.add(item, _not_a_cause(cid, known))
            ok = False
        elif cid in seen:
            p.add(item, f"{cid!r} is listed twice")
            ok = False
        else:
            seen.add(cid)
    return tuple(raw) if ok else None


def _truth(p, body, here, known, candidates):
    if "truth" not in body:
        return None
    path = f"{here}.truth"
    truth = f.text(p, body["truth"], path, what="a root-cause id")
    if truth is None:
        return None
    if known is not None and truth not in known:
        p.add(path, _not_a_cause(truth, known))
        return None
    if candidates is not None and truth not in candidates:
        p.add(path, f"{truth!r} is not among this round's candidates (candidates: {', '.join(candidates)})")
        return None
    return truth


def _runbook(p, body, here, candidates):
    """The optional ranking of this round's candidates by the site's standard method (best first)."""
    if body.get("runbook") is None:
        return None
    path = f"{here}.runbook"
    raw = body["runbook"]
    if not isinstance(raw, list) or not raw:
        p.add(path, f"expected a non-empty list of this round's candidate ids, best first, found {f.describe(raw)}")
        return None
    ranked: list[str] = []
    for j, cid in enumerate(raw):
        item = f"{path}[{j}]"
        if f.text(p, cid, item, what="a candidate id") is None:
            return None
        if candidates is not None and cid not in candidates:
            p.add(item, f"{cid!r} is not among this round's candidates (candidates: {f.listing(list(candidates))})")
            return None
        if cid in ranked:
            p.add(item, f"{cid!r} is ranked twice")
            return None
        ranked.append(cid)
    return tuple(ranked)


def _caused_by(p, body, here, index, rid, first_index):
    if body.get("caused_by") is None:
        return None
    path = f"{here}.caused_by"
    ref = f.text(p, body["caused_by"], path, what="an earlier round id")
    if ref is None:
        return None
    if ref == rid:
        p.add(path, "a round cannot be caused by itself")
    elif first_index.get(ref, index) >= index:
        earlier = [r for r, j in first_index.items() if j < index][-12:] if len(p.lines) < f.MAX_PROBLEMS else []
        p.add(path, f"{ref!r} is not an earlier round (rounds before this one: {f.listing(earlier)})")
    else:
        return ref
    return None


def _not_a_cause(cid: str, known: list[str]) -> str:
    return f"{cid!r} is not a root cause of this scenario (known: {f.listing(known)})"
