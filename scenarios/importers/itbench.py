"""ITBench SRE: each scenario_N/groundtruth_v1.yaml becomes one round of alerts to diagnose.

Source: ITBench (IBM, Apache-2.0, github.com/itbench-hub/ITBench). A ground-truth file lists
the alerts that fired, the entities involved (``groups``: Kubernetes objects and chaos
experiments, one or two flagged ``root_cause``), the fault and how it propagated. The files
come with or without a top-level ``spec:`` wrapper and spell the actions
``recommended_actions`` or ``recommendedActions``; both are read.

Rules, all general (nothing names a particular scenario):

* **Names.** A group is named from what identifies the object: its ``name`` when given,
  else the literal part of its first ``filter`` with a literal part (regular-expression
  wildcards, classes, anchors and ``\\b`` removed; the pieces left joined with ``-``), else
  its ``id`` without the trailing ``-N`` index and without a trailing kind word
  (``cart-service-1`` → ``cart``). The candidate id is that name in snake case followed by
  the kind in lower case (``flagd-config`` ConfigMap → ``flagd_config_configmap``), unless
  the name already ends with it. So ``flagd-config``, ``flagd-config-1`` and
  ``flagd-configmap-1`` with filter ``flagd-config\\b`` are the same candidate in every
  round. Groups that get the same id in one scenario are one candidate; ids that differ only
  in separators (``frontendproxy_service``, ``frontend_proxy_service``) are spelled the one
  way with most separators, within a round and across the file. A group that yields no name
  is an error.
* **Truth.** The group flagged ``root_cause: true``; when two are, the first in file order,
  and the correction names the other too. Its fault entry (the one whose entity gets the
  same candidate id, else the first of the same kind, else the first) gives the round's
  ``kind`` (the category in ``[a-z_]+``, ``unknown`` without one) and the correction: the
  entity, the category, the condition and a short mechanism label, one sentence.
* **Observations.** One line per distinct alert, as an alert list shows it:
  ``<alert> on <entity> (<Kind>): <description>``. An alert whose ``group_id`` is not a group
  of the file is read with the naming rule (its trailing word taken as the kind of a group
  of the file); when that names a candidate it is on that candidate, otherwise it is kept as
  plain text, ``<alert> on <group_id>`` (an alert list shows what it is given; an error
  would refuse real files). An absent, null or ``None`` group_id shows the alert alone.
  Descriptions were written by people who knew the answer, so two steps keep the symptom
  and drop the explanation: (1) a leading label (``Something:``) is removed and the text is
  cut at the first English causal connective (``due to``, ``because``, ``caused by``,
  ``as a result of``, ``propagated from``, ``likely``, a spaced dash, ...); (2) `leaks` looks,
  in every observation not on the root entity (an alert on the root is data), for the
  root's name words (less the application's, and its kind when no other candidate has it)
  and the words of its fault's condition and mechanism label (less the words of the other
  entities' names, of the kinds and of the alert names: those are data); a leaking
  description is cut before its first clause that leaks (clauses split at punctuation,
  prepositions and conjunctions), and dropped when the first clause does. A description
  that only repeats its alert is dropped too. Words compare by their first six letters,
  an identifier (``cartFailure``) whole. Propagations, faults and recommended actions never
  reach the observations.
* **Runbook.** What a responder without memory would check, from the alerts alone:
  entities with an infrastructure alert first (the alert name speaks of a pod, container,
  node, crash or OOM), then entities with other alerts of their own, then those whose only
  alerts report missing traffic (the name starts with ``No``/``Zero`` or says ``Missing``,
  ``Absent``, ``Inactive``: a victim of trouble elsewhere), each tier by number of alerts,
  then by id. Entities that raised no alert follow, those sharing a name word with a ranked
  entity first (the objects behind what alerts), in the order of that entity, then by id.
* **Candidates** are listed in id order, so the file's group order (root often first)
  tells nothing. ``root_causes`` describe each candidate from its kind and name, with the
  signals general Kubernetes and Chaos Mesh knowledge gives for the kind (`KINDS`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scenarios.importers.common import DatasetError, render_scenario
from scenarios.loader import NAME_PATTERN

FILE_NAME = "groundtruth_v1.yaml"
FOLDER_PATTERN = re.compile(r"scenario_(\d+)")
GAP = "1h"  # time between rounds: separate incidents, in file order
SOURCE = "ITBench (IBM, Apache-2.0, github.com/itbench-hub/ITBench)"
NO_GROUP = ("", "none", "null")  # group_id values that mean the alert is on no entity
MECHANISM_WORDS = 5  # a longer fault_mechanism is prose; the condition says the fault itself
PLACEHOLDERS = ("to be specified", "tbd", "n/a", "none", "unknown", "custom", "")  # fault texts that say nothing
ON_FAILURE = "The alerts are still firing."
ON_SUCCESS = "The alerts cleared."

# What a kind of object is, and what its failure typically looks like: general Kubernetes and
# Chaos Mesh knowledge, never read from the ground truth.
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Service": ("Kubernetes Service", ("request errors", "no healthy endpoints", "connection refused")),
    "Pod": ("Kubernetes Pod", ("pod not ready", "crash looping", "container restarts", "OOM killed")),
    "Deployment": ("Kubernetes Deployment", ("rollout", "image pull errors", "pods not ready")),
    "ReplicaSet": ("Kubernetes ReplicaSet", ("pods not ready",)),
    "ConfigMap": ("Kubernetes ConfigMap", ("configuration change",)),
    "Secret": ("Kubernetes Secret", ("authentication failures", "invalid credentials")),
    "NetworkPolicy": ("Kubernetes NetworkPolicy", ("connection refused", "connection timeouts", "blocked traffic")),
    "ResourceQuota": ("Kubernetes ResourceQuota", ("pods pending", "quota exceeded", "scheduling failures")),
    "HorizontalPodAutoscaler": ("Kubernetes HorizontalPodAutoscaler", ("replica count changes", "scaling")),
    "PersistentVolumeClaim": ("Kubernetes PersistentVolumeClaim", ("volume mount failures", "pods pending")),
    "Namespace": ("Kubernetes Namespace", ()),
    "ServiceOperation": ("service endpoint", ("request errors", "high latency")),
    "NetworkChaos": ("Chaos Mesh NetworkChaos experiment", ("network delay", "packet loss", "network partition")),
    "PodChaos": ("Chaos Mesh PodChaos experiment", ("pod failures", "pod restarts")),
    "StressChaos": ("Chaos Mesh StressChaos experiment", ("CPU pressure", "memory pressure", "OOM killed")),
    "IOChaos": ("Chaos Mesh IOChaos experiment", ("disk I/O latency", "I/O errors")),
    "JVMChaos": ("Chaos Mesh JVMChaos experiment", ("JVM exceptions", "garbage collection pauses")),
    "Schedule": ("Chaos Mesh Schedule", ("recurring faults",)),
}

# English, not any file's vocabulary: a leading label, then causal connectives that start an explanation.
_LABEL = re.compile(r"^\s*[A-Za-z]+(?: [A-Za-z]+){0,2}:\s+")
_CAUSAL = re.compile(
    r"\b(?:due to|because|caused by|causing|as a (?:result|consequence) of|owing to|on account of|"
    r"result(?:s|ing)? (?:from|of)|triggered by|stemming from|attributed to|(?:most |very )?likely|probably|"
    r"(?:propagat|cascad)(?:e|es|ed|ing) (?:from|to)|cascade effect)\b|\s+-\s+|;",
    re.IGNORECASE,
)
_CLAUSE = re.compile(
    r"[,;:()]|\s+-\s+|\s+(?=(?:when|while|after|before|since|as|because|with|without|from|by|via|during|"
    r"where|which|that|for|to|in|on|at|of|and|or|but)\b)",
    re.IGNORECASE,
)
STOP_WORDS = frozenset(
    "a an the and or but if of in on at to for from by with without into is are was were be been being it its "
    "this that these those as so such not no all any each some more most can could may might will would should "
    "has have had do does did set when while after before where which who what how than then there also they "
    "them their cannot".split()
)
INFRASTRUCTURE = frozenset({"kube", "pod", "pods", "container", "containers", "node", "nodes", "crash", "oom"})
ABSENCE_FIRST = frozenset({"no", "zero"})  # an alert named No…/Zero… reports missing traffic
ABSENCE_ANY = frozenset({"missing", "absent", "inactive"})
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_WORD = re.compile(r"[a-z0-9]+")
_TOKEN = re.compile(r"[A-Za-z0-9]+")
_IDENTIFIER = re.compile(r"[a-z][A-Z]")  # camelCase: one name, not English words
_WILDCARD = re.compile(r"\[[^\]]*\][*+?]?|\\[bBdDwWsS][*+?]?|\.[*+?]?|[\^$*+?()|{}]")


@dataclass(frozen=True)
class Group:
    """An entity of a scenario: a Kubernetes object or a chaos experiment."""

    id: str  # the file's group id, e.g. cart-service-1
    kind: str  # Kubernetes kind, e.g. Service, ConfigMap, NetworkChaos
    namespace: str | None  # where it lives
    filter: tuple[str, ...]  # regular expressions matching the object's name (may be empty)
    name: str | None  # the object's exact name, when given
    root: bool  # flagged root_cause: true


@dataclass(frozen=True)
class Alert:
    """An alert that fired."""

    name: str  # alert name, e.g. HighRequestErrorRate
    group_id: str | None  # the group it fired on (None: no entity)
    description: str  # the file's metadata.description ("" when absent)


@dataclass(frozen=True)
class Fault:
    """One entry of the file's ``fault`` list."""

    category: str  # e.g. Configuration Setting
    condition: str  # e.g. cartFailure feature flag set
    kind: str  # the faulty entity's kind
    entity: str  # the faulty entity's name
    mechanism: str  # fault_mechanism, an identifier or a sentence


@dataclass(frozen=True)
class ItbenchScenario:
    """One ground-truth file, read and checked."""

    number: int  # N of scenario_N
    source: str  # the file, for messages
    groups: tuple[Group, ...]  # in file order
    alerts: tuple[Alert, ...]  # in file order
    faults: tuple[Fault, ...]  # in file order
    actions: tuple[str, ...]  # recommended solutions by name, in file order


@dataclass(frozen=True)
class Entity:
    """A candidate as a round offers it."""

    id: str  # candidate id, [a-z0-9_]+
    name: str  # display name, e.g. flagd-config
    kind: str  # Kubernetes kind
    namespace: str | None  # where it lives


@dataclass(frozen=True)
class Observation:
    """One alert as the agent sees it."""

    alert: str  # alert name
    entity: Entity | None  # what it fired on (None: no known candidate)
    shown_on: str  # entity text shown, "" when none
    description: str  # the description kept
    on_truth: bool  # fired on the root entity: its words are data

    def line(self) -> str:
        """The observation text."""
        head = self.alert + (f" on {self.shown_on}" if self.shown_on else "")
        return f"{head}: {self.description}" if self.description else head


@dataclass(frozen=True)
class Truth:
    """What would give the answer away."""

    entity: Entity  # the root entity
    also: tuple[Entity, ...]  # other entities flagged root_cause
    fault: Fault | None  # the root's fault entry
    name_words: frozenset[str]  # stems of the root's distinctive name words
    mechanism_words: frozenset[str]  # stems of its fault's condition and mechanism words


@dataclass(frozen=True)
class Leak:
    """An observation that names the answer."""

    index: int  # position in the observations
    line: str  # its text
    words: tuple[str, ...]  # the stems that give it away


@dataclass(frozen=True)
class ImportedRound:
    """One round and what the import did to its descriptions."""

    round: dict[str, Any]  # the schema-1 round
    entities: tuple[Entity, ...]  # its candidates
    trimmed: tuple[tuple[str, str], ...]  # (original, kept) for every description changed


# -- reading ---------------------------------------------------------------------------------


def scenario_files(folder: Path) -> list[tuple[int, Path]]:
    """The ``scenario_N/groundtruth_v1.yaml`` files of `folder`, by N.

    Raises:
        DatasetError: the folder is missing or holds no scenario, or a scenario_N folder lacks its file.
    """
    folder = Path(folder)
    if not folder.is_dir():
        found = "a file" if folder.exists() else "no such folder"
        raise DatasetError([f"{folder}: expected a folder of scenario_N/ folders, found {found}"])
    files, problems = [], []
    for child in folder.iterdir():
        match = FOLDER_PATTERN.fullmatch(child.name)
        if match is None or not child.is_dir():
            continue
        path = child / FILE_NAME
        if path.is_file():
            files.append((int(match.group(1)), path))
        else:
            problems.append(f"{path}: expected the scenario's ground truth, found no such file")
    if not files and not problems:
        problems.append(f"{folder}: expected scenario_N/{FILE_NAME} files, found none")
    if problems:
        raise DatasetError(sorted(problems))
    return sorted(files)


def read_scenario(path: Path, number: int) -> ItbenchScenario:
    """Reads and checks one ground-truth file.

    Raises:
        DatasetError: every problem of the file, one line each.
    """
    source = str(path)
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError([f"{source}: expected a readable UTF-8 text file, found an error: {exc}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise DatasetError(
            [f"{source}: expected YAML, found a syntax error{where}: {getattr(exc, 'problem', None) or exc}"]
        ) from None
    if isinstance(doc, dict) and isinstance(doc.get("spec"), dict):
        doc = doc["spec"]  # some files wrap the ground truth in a Kubernetes-style resource
    if not isinstance(doc, dict):
        raise DatasetError([f"{source}: expected a mapping with alerts and groups, found {_describe(doc)}"])
    problems: list[str] = []
    groups = _groups(doc.get("groups"), source, problems)
    alerts = _alerts(doc.get("alerts"), source, problems)
    faults = _faults(doc.get("fault"), source, problems)
    actions = _actions(doc.get("recommended_actions", doc.get("recommendedActions")), source, problems)
    if groups and not any(g.root for g in groups):
        problems.append(f"{source}: groups: expected a group flagged root_cause: true, found none")
    if problems:
        raise DatasetError(problems)
    return ItbenchScenario(number=number, source=source, groups=groups, alerts=alerts, faults=faults, actions=actions)


def _describe(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return f"text {value[:40]!r}"
    if isinstance(value, (list, dict)):
        return f"a {'list' if isinstance(value, list) else 'mapping'} of {len(value)}"
    return f"{type(value).__name__} {value!r}"


def _text(value: Any) -> str | None:
    """Non-empty text, stripped; numbers read as text (a YAML id may parse as one)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    return (value.strip() or None) if isinstance(value, str) else None


def _groups(value: Any, source: str, problems: list[str]) -> tuple[Group, ...]:
    if not isinstance(value, list) or not value:
        problems.append(f"{source}: groups: expected a non-empty list of entities, found {_describe(value)}")
        return ()
    out = []
    for i, raw in enumerate(value):
        here = f"{source}: groups[{i}]"
        if not isinstance(raw, dict):
            problems.append(f"{here}: expected a mapping with id and kind, found {_describe(raw)}")
            continue
        gid, kind = _text(raw.get("id")), _text(raw.get("kind"))
        filters = raw.get("filter") if raw.get("filter") is not None else []
        filters = [filters] if isinstance(filters, str) else filters
        root = raw.get("root_cause", False)
        checks = (
            ("id", gid is not None, "text"),
            ("kind", kind is not None, "text"),
            (
                "filter",
                isinstance(filters, list) and all(isinstance(x, str) for x in filters),
                "a list of regular expressions",
            ),
            ("root_cause", isinstance(root, bool) or root is None, "true or false"),
        )
        failed = [(key, what) for key, ok, what in checks if not ok]
        for key, what in failed:
            problems.append(f"{here}.{key}: expected {what}, found {_describe(raw.get(key))}")
        if (
            not failed and gid is not None and kind is not None and isinstance(filters, list)
        ):  # all hold when none failed
            out.append(
                Group(
                    id=gid,
                    kind=kind,
                    namespace=_text(raw.get("namespace")),
                    filter=tuple(filters),
                    name=_text(raw.get("name")),
                    root=bool(root),
                )
            )
    return tuple(out)


def _alerts(value: Any, source: str, problems: list[str]) -> tuple[Alert, ...]:
    if not isinstance(value, list) or not value:
        problems.append(f"{source}: alerts: expected a non-empty list of alerts, found {_describe(value)}")
        return ()
    out = []
    for i, raw in enumerate(value):
        here = f"{source}: alerts[{i}]"
        name = _text(raw.get("id")) if isinstance(raw, dict) else None
        if name is None:
            found = _describe(raw.get("id")) if isinstance(raw, dict) else _describe(raw)
            problems.append(f"{here}: expected a mapping whose id is the alert name, found {found}")
            continue
        group = raw.get("group_id")
        group_text = None if group is None else _text(group)
        if group is not None and group_text is None:
            problems.append(f"{here}.group_id: expected a group id, found {_describe(group)}")
            continue
        group_id = None if group_text is None or group_text.lower() in NO_GROUP else group_text
        meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        description = meta.get("description")
        out.append(
            Alert(name=name, group_id=group_id, description=description.strip() if isinstance(description, str) else "")
        )
    return tuple(out)


def _faults(value: Any, source: str, problems: list[str]) -> tuple[Fault, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(x, dict) for x in value):
        problems.append(f"{source}: fault: expected a list of fault mappings, found {_describe(value)}")
        return ()
    out = []
    for raw in value:
        entity = raw.get("entity") if isinstance(raw.get("entity"), dict) else {}
        out.append(
            Fault(
                category=_text(raw.get("category")) or "",
                condition=_text(raw.get("condition")) or "",
                kind=_text(entity.get("kind")) or "",
                entity=_text(entity.get("name")) or "",
                mechanism=_text(raw.get("fault_mechanism")) or "",
            )
        )
    return tuple(out)


def _actions(value: Any, source: str, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(f"{source}: recommended_actions: expected a list of solutions, found {_describe(value)}")
        return ()
    out = []
    for item in value:  # a solution's id names the fix ("fix_service_port"); else its first action
        solution = item.get("solution") if isinstance(item, dict) else None
        solution = solution if isinstance(solution, dict) else {"actions": [item]}
        actions = solution.get("actions")
        steps = actions if isinstance(actions, list) else []
        said = _text(solution.get("id")) or next((t for t in map(_text, steps) if t), None)
        if said:
            out.append(re.sub(r"[_\-]+", " ", said) if " " not in said else said)
    return tuple(out)


# -- naming ----------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return "-".join(_WORD.findall(text.lower()))


def kind_words(kind: str) -> tuple[str, ...]:
    """A kind's words in lower case: HorizontalPodAutoscaler → horizontal, pod, autoscaler."""
    return tuple(w.lower() for w in _CAMEL.findall(kind))


def filter_literal(pattern: str) -> str:
    """The literal part of a name filter: ``^frontend-[a-z0-9]+-[a-z0-9]+$`` → ``frontend``."""
    return "-".join(piece for piece in (_slug(p) for p in _WILDCARD.split(pattern)) if piece)


def _without_kind(group_id: str, kind: str) -> str:
    """A group id without its trailing ``-N`` index and trailing kind word."""
    base = re.sub(r"(?:-\d+)+$", "", _slug(group_id))
    for word in ("-".join(kind_words(kind)), _slug(kind).replace("-", "")):
        if word and base.endswith("-" + word):
            return base[: -len(word) - 1]
    return base


def entity_name(group: Group) -> str:
    """The object's name: its ``name``, else its filter's literal part, else its id without index and kind."""
    if group.name and _slug(group.name):
        return _slug(group.name)
    for pattern in group.filter:
        if literal := filter_literal(pattern):
            return literal
    return _without_kind(group.id, group.kind)


def candidate_id(name: str, kind: str) -> str:
    """``flagd-config`` + ConfigMap → ``flagd_config_configmap``; a name ending in its kind keeps it once."""
    word = re.sub(r"[^a-z0-9]", "", kind.lower())
    if not name or not word:
        return ""
    ends = any(name == w or name.endswith("-" + w) for w in (word, "-".join(kind_words(kind))))
    return name.replace("-", "_") if ends else f"{name.replace('-', '_')}_{word}"


def name_groups(scenario: ItbenchScenario) -> dict[str, Entity]:
    """Each group's candidate by group id; groups named alike share one.

    Raises:
        DatasetError: a group yields no name.
    """
    named, problems = [], []
    for group in scenario.groups:
        name = entity_name(group)
        if not candidate_id(name, group.kind):
            problems.append(
                f"{scenario.source}: groups[{group.id!r}]: expected a name, a filter with a literal "
                f"part or an id to name the {group.kind} by, found none"
            )
        named.append((group, name))
    if problems:
        raise DatasetError(problems)
    spelling = canonical([candidate_id(name, group.kind) for group, name in named])
    by_id: dict[str, Entity] = {}
    for group, name in sorted(named, key=lambda pair: candidate_id(pair[1], pair[0].kind) not in spelling.values()):
        cid = spelling[candidate_id(name, group.kind)]  # the entity spelled as its id is shown
        by_id.setdefault(cid, Entity(id=cid, name=name, kind=group.kind, namespace=group.namespace))
    return {group.id: by_id[spelling[candidate_id(name, group.kind)]] for group, name in named}


def canonical(ids: Sequence[str]) -> dict[str, str]:
    """Each id's spelling among ids that differ only in separators: the one with most (``frontend_proxy``
    over ``frontendproxy``), then the first alphabetically."""
    twins: dict[str, list[str]] = {}
    for cid in ids:
        twins.setdefault(cid.replace("_", ""), []).append(cid)
    best = {key: min(group, key=lambda c: (-c.count("_"), c)) for key, group in twins.items()}
    return {cid: best[cid.replace("_", "")] for cid in ids}


def alert_entity(group_id: str | None, by_group: dict[str, Entity]) -> Entity | None:
    """The candidate an alert fired on; a group_id that is no group is read by the naming rule."""
    if group_id is None or group_id in by_group:
        return by_group.get(group_id) if group_id else None
    by_id = {e.id: e for e in by_group.values()}
    plain = re.sub(r"(?:-\d+)+$", "", _slug(group_id))
    for kind in sorted({e.kind for e in by_group.values()}):
        base = _without_kind(group_id, kind)
        if base != plain and candidate_id(base, kind) in by_id:
            return by_id[candidate_id(base, kind)]
    return None


# -- words -----------------------------------------------------------------------------------


def stems(text: str) -> frozenset[str]:
    """Content words of `text`, plural folded and cut to six letters (``exhausted`` ~ ``exhaustion``).

    An identifier (``cartFailure``, ``HighRequestErrorRate``) stays whole: its first six
    letters would name something else (``paymentUnreachable`` is not ``payment``).
    """
    out = set()
    for token in _TOKEN.findall(text):
        word = token.lower()
        if word in STOP_WORDS:
            continue
        if _IDENTIFIER.search(token):
            out.add(word)
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.add(word[:6])
    return frozenset(out)


def _alert_words(name: str) -> tuple[str, ...]:
    return tuple(w.lower() for w in _CAMEL.findall(name))


def truth_of(scenario: ItbenchScenario, by_group: dict[str, Entity], service: str) -> Truth:
    """The root entity, its fault, and the words that would give it away."""
    roots = [by_group[g.id] for g in scenario.groups if g.root and g.id in by_group]
    entity = roots[0]
    also = tuple(dict.fromkeys(e for e in roots[1:] if e != entity))
    fault = _fault_of(scenario.faults, entity)
    common = stems(service.replace("-", " "))  # every entity of the application shares these
    kinds = {e.kind for e in by_group.values()}
    others = {e.kind for e in by_group.values() if e != entity}
    names = stems(entity.name.replace("-", " "))
    if entity.kind not in others:  # a kind no other candidate has names the root too
        names |= stems(" ".join(kind_words(entity.kind)))
    if entity.name == service:  # the application itself: every alert is "in" it, nothing points at it
        names = frozenset()
    entities = stems(" ".join(e.name.replace("-", " ") for e in by_group.values() if e != entity))
    generic = (
        common
        | entities
        | stems(" ".join(" ".join(kind_words(k)) for k in kinds))
        | stems(" ".join(" ".join(_alert_words(a.name)) for a in scenario.alerts))
    )
    mechanism: frozenset[str] = frozenset()
    if fault is not None:
        said = " ".join(t for t in (fault.condition, _label(fault.mechanism)) if t.lower() not in PLACEHOLDERS)
        mechanism = frozenset(w for w in stems(re.sub(r"[_()]", " ", said)) if len(w) >= 4) - generic
    return Truth(entity=entity, also=also, fault=fault, name_words=names - common, mechanism_words=mechanism)


def _label(mechanism: str) -> str:
    """A mechanism that is a short label (``memory_stress``); "" for prose about what the fault simulates."""
    return mechanism if len(mechanism.split()) <= MECHANISM_WORDS else ""


def _fault_of(faults: Sequence[Fault], entity: Entity) -> Fault | None:
    """The fault entry of the root: same candidate id, else the same kind, else the first."""
    for fault in faults:
        if fault.entity and candidate_id(_slug(fault.entity), fault.kind) == entity.id:
            return fault
        if fault.entity and candidate_id(_without_kind(fault.entity, fault.kind), fault.kind) == entity.id:
            return fault
    same_kind = [f for f in faults if f.kind == entity.kind]
    found = same_kind or list(faults)
    return found[0] if found else None


def leaks(observations: Sequence[Observation], truth: Truth) -> list[Leak]:
    """Observations not on the root entity that name it or its fault's mechanism."""
    found = []
    for i, obs in enumerate(observations):
        if obs.on_truth:
            continue
        words = stems(obs.line()) & (truth.name_words | truth.mechanism_words)
        words -= _own_words(obs)
        if words:
            found.append(Leak(index=i, line=obs.line(), words=tuple(sorted(words))))
    return found


def _own_words(obs: Observation) -> frozenset[str]:
    """Words an observation may say of itself: its entity's name and kind."""
    if obs.entity is not None:
        return stems(obs.entity.name.replace("-", " ") + " " + " ".join(kind_words(obs.entity.kind)))
    return stems(obs.shown_on.replace("-", " "))


# -- observations ----------------------------------------------------------------------------


def symptom(description: str) -> str:
    """The description without a leading label and from its first causal connective on."""
    text = _LABEL.sub("", description.strip(), count=1)
    cut = _CAUSAL.search(text)
    return _tidy(text[: cut.start()]) if cut else text.strip()


def unleak(text: str, banned: frozenset[str]) -> str:
    """`text` cut before its first clause that holds a banned word ("" when the first one does)."""
    if not stems(text) & banned:
        return text
    bounds = [0] + [m.start() for m in _CLAUSE.finditer(text)] + [len(text)]
    for start, end in zip(bounds, bounds[1:]):
        if stems(text[start:end]) & banned:
            return _tidy(text[:start])
    return text


def _tidy(text: str) -> str:
    """A cut text without the punctuation and function words left dangling at its end."""
    words = text.strip().rstrip(" ,;:-(").split()
    while words and words[-1].lower() in STOP_WORDS:
        words.pop()
    return " ".join(words).rstrip(" ,;:-(")


def observe(
    scenario: ItbenchScenario, by_group: dict[str, Entity], truth: Truth
) -> tuple[list[Observation], list[tuple[str, str]]]:
    """The alerts as observations, each distinct line once, and every (description, kept) that changed."""
    observations: list[Observation] = []
    trimmed: list[tuple[str, str]] = []
    seen: set[str] = set()
    for alert in scenario.alerts:
        entity = alert_entity(alert.group_id, by_group)
        shown = f"{entity.name} ({entity.kind})" if entity else (alert.group_id or "")
        obs = Observation(
            alert=alert.name, entity=entity, shown_on=shown, description="", on_truth=entity == truth.entity
        )
        kept = symptom(alert.description)
        if not obs.on_truth:
            kept = unleak(kept, (truth.name_words | truth.mechanism_words) - _own_words(obs))
        if not stems(kept) - stems(f"{alert.name} {shown}"):
            kept = ""  # it only repeats the alert ("HighRequestErrorRate for checkout service")
        obs = Observation(alert=obs.alert, entity=entity, shown_on=shown, description=kept, on_truth=obs.on_truth)
        if kept != alert.description:
            trimmed.append((alert.description, kept))
        if obs.line() not in seen:
            seen.add(obs.line())
            observations.append(obs)
    return observations, trimmed


# -- runbook ---------------------------------------------------------------------------------


def _tier(alert_names: Sequence[str]) -> int:
    """0: an infrastructure alert; 1: another alert of its own; 2: only missing-traffic alerts."""
    words = [_alert_words(name) for name in alert_names]
    if any(INFRASTRUCTURE & set(w) for w in words):
        return 0
    absent = [bool(w) and (w[0] in ABSENCE_FIRST or bool(ABSENCE_ANY & set(w))) for w in words]
    return 2 if all(absent) else 1


def runbook(scenario: ItbenchScenario, by_group: dict[str, Entity], service: str) -> list[str]:
    """Candidates in the order a responder without memory would check them (module docstring)."""
    fired: dict[str, list[str]] = {}
    for alert in scenario.alerts:
        entity = alert_entity(alert.group_id, by_group)
        if entity is not None:
            fired.setdefault(entity.id, []).append(alert.name)
    ranked = sorted(fired, key=lambda cid: (_tier(fired[cid]), -len(fired[cid]), cid))
    entities = {e.id: e for e in by_group.values()}
    common = stems(service.replace("-", " "))

    def words(cid: str) -> frozenset[str]:
        return stems(entities[cid].name.replace("-", " ")) - common

    def behind(cid: str) -> tuple[int, str]:
        shared = [i for i, other in enumerate(ranked) if words(cid) & words(other)]
        return (min(shared) if shared else len(ranked), cid)

    return ranked + sorted((cid for cid in entities if cid not in fired), key=behind)


# -- rounds and the scenario -----------------------------------------------------------------


def application(scenario: ItbenchScenario) -> str:
    """The namespace most of the scenario's entities live in (the first of equals).

    Raises:
        DatasetError: no group names a namespace.
    """
    counts = Counter(g.namespace for g in scenario.groups if g.namespace)
    if not counts:
        raise DatasetError([f"{scenario.source}: groups: expected a namespace on at least one group, found none"])
    return counts.most_common(1)[0][0]


def fault_kind(fault: Fault | None) -> str:
    """The fault category as a label in ``[a-z_]+`` (``unknown`` without one)."""
    label = re.sub(r"[^a-z]+", "_", fault.category.lower()).strip("_") if fault else ""
    return label or "unknown"


def correction(truth: Truth) -> str:
    """What the ground truth says, as a person would: the root entity and its fault, in one sentence."""
    entity = truth.entity
    where = f" in {entity.namespace}" if entity.namespace and entity.namespace != entity.name else ""
    text = f"It was the {entity.kind} {entity.name}{where}"
    if truth.also:
        text += ", together with " + " and ".join(f"the {e.kind} {e.name}" for e in truth.also)
    fault = truth.fault
    if fault is None:
        return text + "."
    if fault.category.lower() not in PLACEHOLDERS:
        text += f" ({fault.category.lower()} fault)"
    condition = fault.condition.rstrip(".") if fault.condition.lower() not in PLACEHOLDERS else ""
    label = _label(fault.mechanism) if fault.mechanism.lower() not in PLACEHOLDERS else ""
    if not condition:  # without a condition, a prose mechanism's first sentence says what happened
        condition = re.split(r"(?<=[.!?])\s", fault.mechanism, maxsplit=1)[0].rstrip(".") if not label else ""
    text += f": {condition}" if condition else ""
    return text + (f" (mechanism: {label})." if label else ".")


def import_round(scenario: ItbenchScenario, *, first: bool) -> ImportedRound:
    """One scenario as a schema-1 round.

    Raises:
        DatasetError: a group cannot be named, or no group has a namespace.
    """
    by_group = name_groups(scenario)
    service = application(scenario)
    truth = truth_of(scenario, by_group, service)
    observations, trimmed = observe(scenario, by_group, truth)
    entities = tuple(sorted(set(by_group.values()), key=lambda e: e.id))
    action = scenario.actions[0].rstrip(".") if scenario.actions else ""
    body: dict[str, Any] = {"id": f"scenario-{scenario.number}", "kind": fault_kind(truth.fault), "service": service}
    if not first:
        body["after"] = GAP
    body.update(
        {
            "observations": [obs.line() for obs in observations],
            "candidates": [e.id for e in entities],
            "truth": truth.entity.id,
            "runbook": runbook(scenario, by_group, service),
            "on_success": f"Fixed by: {action}." if action else ON_SUCCESS,
            "on_failure": ON_FAILURE,
            "correction": correction(truth),
        }
    )
    return ImportedRound(round=body, entities=entities, trimmed=tuple(trimmed))


def import_rounds(folder: Path) -> list[ImportedRound]:
    """Every scenario of `folder` as a round, in scenario-number order.

    Raises:
        DatasetError: every problem of every file.
    """
    problems: list[str] = []
    rounds: list[ImportedRound] = []
    for number, path in scenario_files(folder):
        try:
            rounds.append(import_round(read_scenario(path, number), first=not rounds))
        except DatasetError as exc:
            problems.extend(exc.problems)
    if problems:
        raise DatasetError(problems)
    return rounds


def respelled(body: dict[str, Any], spelling: dict[str, str]) -> dict[str, Any]:
    """A round with its candidate ids spelled the one way the whole scenario file uses."""
    return {
        **body,
        "candidates": sorted({spelling[c] for c in body["candidates"]}),
        "truth": spelling[body["truth"]],
        "runbook": list(dict.fromkeys(spelling[c] for c in body["runbook"])),
    }


def describe_entity(entity: Entity, namespaces: Sequence[str]) -> str:
    """Plain words from the kind and name: ``Kubernetes ConfigMap flagd-config in otel-demo``."""
    phrase = KINDS.get(entity.kind, (entity.kind, ()))[0]
    where = f" in {' or '.join(namespaces)}" if namespaces else ""
    return f"{phrase} {entity.name}{where}"


def build(folder: Path, name: str | None = None) -> dict[str, Any]:
    """The schema-1 scenario of an ITBench folder, as plain data.

    Raises:
        DatasetError: every problem found, one line each.
    """
    folder = Path(folder)
    name = name if name is not None else _slug(folder.resolve().name) or "itbench"
    if not re.fullmatch(NAME_PATTERN, name):
        raise DatasetError([f"--name: expected a scenario name of {NAME_PATTERN}, found {name!r}"])
    rounds = import_rounds(folder)
    spelling = canonical(sorted({e.id for imported in rounds for e in imported.entities}))
    entities: dict[str, Entity] = {}
    namespaces: dict[str, list[str]] = {}
    found = [e for imported in rounds for e in imported.entities]
    for entity in sorted(found, key=lambda e: spelling[e.id] != e.id):  # stable: round order within each
        entities.setdefault(spelling[entity.id], entity)  # described as spelled, when a round spells it so
    for entity in found:
        seen = namespaces.setdefault(spelling[entity.id], [])
        if entity.namespace and entity.namespace not in seen:
            seen.append(entity.namespace)
    if len(entities) < 2:
        raise DatasetError([f"{folder}: expected at least 2 entities across the scenarios, found {len(entities)}"])
    causes = {
        cid: {
            "description": describe_entity(entities[cid], namespaces[cid]),
            "signals": list(KINDS.get(entities[cid].kind, ("", ()))[1]),
        }
        for cid in sorted(entities)
    }
    return {
        "schema": 1,
        "name": name,
        "title": "ITBench SRE incidents",
        "description": (
            f"Fault scenarios of {SOURCE}, imported from their ground-truth files. A round is one scenario: "
            "the alerts that fired are the observations (explanations their authors added are cut), the "
            "scenario's Kubernetes objects and chaos experiments are the candidates under names that recur "
            "across rounds, the entity flagged as root cause is the truth, and the runbook ranks the "
            "candidates from the alerts alone."
        ),
        "root_causes": causes,
        "rounds": [respelled(imported.round, spelling) for imported in rounds],
    }


def import_folder(folder: Path, *, name: str | None = None) -> str:
    """The scenario file's text for an ITBench folder (deterministic).

    Raises:
        DatasetError: every problem found, one line each.
    """
    scenario = build(folder, name)
    header = (
        f"ITBench SRE scenarios ({len(scenario['rounds'])} rounds) imported from {Path(folder).resolve().name}/\n"
        f"by `python -m scenarios.importers itbench`. Source: {SOURCE}.\n"
        "Generated file: change the importer (scenarios/importers/itbench.py), not this file."
    )
    return render_scenario(scenario, header=header)
