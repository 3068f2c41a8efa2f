"""PetShop: performance issues injected into a microservice application on AWS, one round each.

Reads one traffic-scenario folder of the PetShop dataset (Hardt et al., "The PetShop Dataset —
Finding Causes of Performance Issues across Microservices", arXiv 2311.04806, CC-BY-4.0) in place:

    graph.csv                    adjacency matrix; row -> column is a call edge
    noissue/metrics.csv          normal operation (optional: some folders lack it)
    train|test/issue_N/metrics.csv    the issue's window: 5-minute rows of every node's metrics
    train|test/issue_N/target.json    the symptom (target node, metric, statistic, time) and the label

Each issue becomes a round: the symptom and the other components' deviations from normal are
the observations, the target and everything it calls (directly or through others) are the
candidates, the labelled root-cause node is the truth, and the runbook is the ranking given by
the dataset's published baseline method, anomaly detection plus call-graph traversal
(:func:`rank_root_causes`). :func:`runbook_accuracy` measures that ranking on a folder:

    python -m scenarios.importers.petshop ../shared/datasets/petshop/high_traffic

The anomaly score of a metric is a robust z-score against normal operation (median and median
absolute deviation of noissue/metrics.csv, or where that is missing of the window rows that
precede each symptom), taken over the rows in which the symptom itself is anomalous, less any
deviation the metric already had before the symptom began: a cause shows while its effect does,
and changes with it.

Everything here is a pure function of the folder's files except the readers, which only read.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import networkx as nx
import numpy as np

from scenarios.importers.common import DatasetError, render_scenario

SPLITS = ("train", "test")  # the order rounds with the same timestamp are played in
INTERVAL_S = 300  # the dataset's rows are 5-minute aggregates, labelled by their start
ANOMALY_THRESHOLD = 3.0  # robust z-score; the textbook three-sigma rule, not fitted to labels
MAD_TO_SIGMA = 1.4826  # the median absolute deviation of a normal distribution is 0.6745 sigma
# A metric whose median absolute deviation is zero (availability at 100% but for rare dips)
# is scaled by its standard deviation; one that never varied at all has no spread to divide
# by, and a change of a thousandth of its normal level then counts as one standard deviation.
RELATIVE_SCALE_FLOOR = 0.001
ABSOLUTE_SCALE_FLOOR = 1e-6  # keeps a baseline of exact zeros finite
MIN_BASELINE_POINTS = 5  # fewer normal values than this cannot say what normal is
MAX_OBSERVATIONS = 12  # symptom line plus the strongest deviations: one dashboard screen
# Three tries: the runbook's top three cover most issues in the published evaluation, and an
# operator who is wrong three times escalates rather than keeps guessing.
MAX_ATTEMPTS = 3
HIGHER_IS_WORSE = {"latency": True, "availability": False}  # symptom metrics; requests may go either way
ID_PATTERN = re.compile(r"[^a-z0-9]+")
PUBLISHED = {  # the dataset paper's traversal baseline on TEST issues: (top-1, top-3)
    "high_traffic": {"latency": (0.571, 0.786), "availability": (0.667, 1.000)},
    "low_traffic": {"latency": (0.571, 0.571), "availability": (0.833, 1.000)},
    "temporal_traffic": {"latency": (1.000, 1.000), "availability": (0.750, 1.000)},
}

# General knowledge of AWS component types, keyed by the `_AWS::…` suffix X-Ray gives a node:
# (plain words for the type, signals an operator checks for such a component).
AWS_TYPES: dict[str, tuple[str, tuple[str, ...]]] = {
    "AWS::Lambda::Function": ("AWS Lambda function", ("duration", "errors", "throttles", "cold starts")),
    "AWS::Lambda": ("AWS Lambda service endpoint invoking", ("invocation latency", "throttles", "errors")),
    "AWS::ECS::Fargate": ("ECS service on Fargate", ("CPU", "memory", "task restarts", "5xx responses")),
    "AWS::ECS::Container": ("ECS container service", ("CPU", "memory", "task restarts", "5xx responses")),
    "AWS::DynamoDB::Table": ("DynamoDB table", ("throttled requests", "consumed capacity", "latency")),
    "AWS::DynamoDB": ("DynamoDB service endpoint", ("throttled requests", "latency")),
    "AWS::ApiGateway::Stage": ("API Gateway stage", ("integration latency", "4xx and 5xx responses")),
    "AWS::SQS::Queue": ("SQS queue", ("queue depth", "age of oldest message")),
    "AWS::S3": ("S3 storage service", ("request latency", "5xx responses")),
    "AWS::StepFunctions::StateMachine": ("Step Functions state machine", ("failed executions", "execution time")),
    "AWS::StepFunctions": ("Step Functions service endpoint", ("throttles", "latency")),
    "Database::SQL": ("SQL database", ("connections", "query latency", "CPU", "locks")),
}


class Column(NamedTuple):
    """One metric series of the dataset's three-row header."""

    node: str  # microservice
    metric: str  # latency, availability or requests
    statistic: str  # Average, p50 … p99, Sum


@dataclass(frozen=True)
class MetricTable:
    """A metrics.csv file: rows of 5-minute aggregates, one column per (node, metric, statistic)."""

    columns: tuple[Column, ...]  # header order
    timestamps: tuple[float, ...]  # unix seconds, the start of each row's interval
    values: np.ndarray  # shape (rows, columns); NaN where nothing was recorded

    @cached_property
    def index(self) -> dict[Column, int]:
        """Column -> position (the first, should the header repeat one)."""
        index: dict[Column, int] = {}
        for i, column in enumerate(self.columns):
            index.setdefault(column, i)
        return index

    def series(self, column: Column) -> np.ndarray:
        """The column's values (all NaN when the file lacks the column)."""
        i = self.index.get(column)
        return self.values[:, i] if i is not None else np.full(len(self.timestamps), np.nan)


@dataclass(frozen=True)
class Issue:
    """One injected issue: its target.json and the place it came from."""

    split: str  # train or test
    number: int  # N of issue_N
    path: Path  # the issue folder
    target: str  # node showing the symptom
    metric: str  # the symptom metric (latency or availability)
    statistic: str  # its statistic (e.g. Average)
    timestamp: int  # unix seconds of the symptom
    root_cause: str  # the labelled root-cause node (evaluation only)
    command: str | None  # how the fault was reproduced (correction text only)

    @property
    def round_id(self) -> str:
        """The round's id, e.g. ``test-12``."""
        return f"{self.split}-{self.number}"


@dataclass(frozen=True)
class Dataset:
    """One traffic-scenario folder, read and checked."""

    name: str  # the folder's name, e.g. high_traffic
    graph: nx.DiGraph  # call graph: an edge caller -> callee
    normal: MetricTable | None  # noissue/metrics.csv, when the folder has it
    issues: tuple[Issue, ...]  # in playing order (timestamp, split, number)
    windows: Mapping[str, MetricTable]  # round id -> the issue's metrics

    @cached_property
    def normals(self) -> dict[Column, Normal | None]:
        """Every measured column's normal operation (None where too little was recorded)."""
        columns = {c: None for w in self.windows.values() for c in w.columns}
        return {column: baseline(normal_values(self, column)) for column in columns}


@dataclass(frozen=True)
class Normal:
    """What a column looks like in normal operation."""

    centre: float  # median of the baseline values
    scale: float  # robust standard deviation (floored; always > 0)


@dataclass(frozen=True)
class Deviation:
    """How far one column's worst row after the symptom's onset is from normal."""

    column: Column
    score: float  # robust z-score; signed so that positive is worse for symptom metrics
    value: float  # the measured value of the worst row
    normal: float  # the baseline's centre


@dataclass(frozen=True)
class Ranking:
    """The runbook for one issue: candidates best first, and why."""

    order: tuple[str, ...]  # every candidate node, best first
    roots: tuple[str, ...]  # anomalous nodes reached from the target with no anomalous callee
    anomalous: frozenset[str]  # nodes whose symptom metric deviates beyond the threshold


@dataclass(frozen=True)
class Hits:
    """Runbook accuracy on one split and symptom metric."""

    issues: int  # how many issues
    top1: int  # the labelled root cause was ranked first
    top3: int  # … among the first three


# ---------------------------------------------------------------- reading


def read_graph(path: Path) -> nx.DiGraph:
    """Reads graph.csv: a square adjacency matrix with node names as header and row labels.

    Raises:
        DatasetError: the file is missing, not square, or holds a value other than 0/1.
    """
    rows = _csv_rows(path)
    problems = []
    header = rows[0][1:] if rows else []
    labels = [row[0] for row in rows[1:] if row]
    if not header or header != labels:
        problems.append(
            f"{path}: expected the same node names across the header and down the first column, "
            f"found {len(header)} columns and {len(labels)} rows"
        )
    graph = nx.DiGraph()
    graph.add_nodes_from(header)
    for i, row in enumerate(rows[1:], start=2):
        if len(row) != len(header) + 1:
            problems.append(f"{path}: line {i}: expected {len(header) + 1} fields, found {len(row)}")
            continue
        for callee, cell in zip(header, row[1:]):
            try:
                weight = float(cell)
            except ValueError:
                problems.append(f"{path}: line {i}: expected 0 or 1, found {cell!r}")
                break
            if weight:
                graph.add_edge(row[0], callee)
    if problems:
        raise DatasetError(problems)
    return graph


def read_metrics(path: Path) -> MetricTable:
    """Reads a metrics.csv: three header rows (microservice, metric, statistic), an index-name row, data.

    Raises:
        DatasetError: the file is missing, a header row is wrong, a row is ragged or a value not a number.
    """
    rows = _csv_rows(path)
    problems = []
    if len(rows) < 4 or [r[0] if r else "" for r in rows[:4]] != [
        "microservice",
        "metric",
        "statistic",
        "unix_timestamp",
    ]:
        raise DatasetError(
            [
                f"{path}: expected header rows microservice, metric, statistic, unix_timestamp, "
                f"found {[r[0] if r else '' for r in rows[:4]]}"
            ]
        )
    width = len(rows[0])
    columns = tuple(Column(*c) for c in zip(rows[0][1:], rows[1][1:], rows[2][1:]))
    timestamps, values = [], []
    for i, row in enumerate(rows[4:], start=5):
        if len(row) != width:
            problems.append(f"{path}: line {i}: expected {width} fields like the header, found {len(row)}")
            continue
        try:
            timestamps.append(float(row[0]))
            values.append([float(cell) if cell.strip() else math.nan for cell in row[1:]])
        except ValueError as exc:
            problems.append(f"{path}: line {i}: expected numbers or empty cells, found {exc}")
    if not values and not problems:
        problems.append(f"{path}: expected at least one row of values, found none")
    if problems:
        raise DatasetError(problems)
    return MetricTable(columns=columns, timestamps=tuple(timestamps), values=np.array(values, dtype=float))


def read_issue(folder: Path) -> Issue:
    """Reads an issue folder's target.json.

    Raises:
        DatasetError: the file is missing, not JSON, or lacks a field.
    """
    path = folder / "target.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError([f"{path}: expected the issue's target and root cause, found no such file"]) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError([f"{path}: expected a JSON object, could not read it ({exc})"]) from None
    try:
        target, cause = doc["target"], doc["root_cause"]
        fields = (target["node"], target["metric"], target["agg"], target["timestamp"], cause["node"])
    except (KeyError, TypeError):
        raise DatasetError(
            [
                f"{path}: expected target.node/metric/agg/timestamp and root_cause.node, "
                f"found keys {sorted(doc) if isinstance(doc, dict) else type(doc).__name__}"
            ]
        ) from None
    node, metric, statistic, stamp, root = fields
    named = all(isinstance(v, str) and v for v in (node, metric, statistic, root))
    if not named or isinstance(stamp, bool) or not isinstance(stamp, (int, float)):
        raise DatasetError([f"{path}: expected text node/metric/agg names and a numeric timestamp, found {fields}"])
    if metric not in HIGHER_IS_WORSE:
        raise DatasetError([f"{path}: expected a target metric of {' or '.join(HIGHER_IS_WORSE)}, found {metric!r}"])
    reproduced = doc.get("metadata")
    reproduced = reproduced.get("reproducibility") if isinstance(reproduced, dict) else None
    command = reproduced.get("command") if isinstance(reproduced, dict) else None
    return Issue(
        split=folder.parent.name,
        number=_issue_number(folder),
        path=folder,
        target=node,
        metric=metric,
        statistic=statistic,
        timestamp=int(stamp),
        root_cause=root,
        command=command if isinstance(command, str) else None,
    )


def read_dataset(folder: Path) -> Dataset:
    """Reads and checks a traffic-scenario folder, collecting every problem before raising.

    Raises:
        DatasetError: with one line per problem, each naming its file.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DatasetError([f"{folder}: expected a PetShop traffic-scenario folder, found no such directory"])
    problems: list[str] = []
    graph = _collect(problems, read_graph, folder / "graph.csv")
    normal_path = folder / "noissue" / "metrics.csv"
    normal = _collect(problems, read_metrics, normal_path) if normal_path.exists() else None
    issues, windows = [], {}
    for split in SPLITS:
        for path in sorted((folder / split).glob("issue_*"), key=_issue_number):
            if not path.is_dir() or _issue_number(path) < 0:
                continue
            issue = _collect(problems, read_issue, path)
            window = _collect(problems, read_metrics, path / "metrics.csv")
            if issue is None or window is None:
                continue
            problems.extend(_unknown_nodes(issue, graph, window))
            issues.append(issue)
            windows[issue.round_id] = window
    if not issues and not problems:
        problems.append(f"{folder}: expected train/issue_N and test/issue_N folders, found none")
    if graph is not None:
        problems.extend(_id_collisions(graph, folder / "graph.csv"))
        for issue in issues:
            known = issue.target in graph and issue.root_cause in graph
            if known and issue.root_cause not in candidates(graph, issue.target):
                problems.append(
                    f"{issue.path / 'target.json'}: expected root_cause.node {issue.root_cause!r} among "
                    f"the nodes {issue.target!r} calls directly or through others in graph.csv, found "
                    "no call path"
                )
    if problems:
        raise DatasetError(problems)
    ordered = tuple(sorted(issues, key=lambda i: (i.timestamp, SPLITS.index(i.split), i.number)))
    return Dataset(name=folder.name, graph=graph, normal=normal, issues=ordered, windows=windows)


def _csv_rows(path: Path) -> list[list[str]]:
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            return list(csv.reader(handle))
    except FileNotFoundError:
        raise DatasetError([f"{path}: expected a CSV file, found no such file"]) from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DatasetError([f"{path}: expected a readable UTF-8 CSV file, could not read it ({exc})"]) from None


def _collect(problems: list[str], reader, path: Path):
    try:
        return reader(path)
    except DatasetError as exc:
        problems.extend(exc.problems)
        return None


def _issue_number(path: Path) -> int:
    suffix = path.name.removeprefix("issue_")
    return int(suffix) if suffix.isdigit() else -1


def _unknown_nodes(issue: Issue, graph: nx.DiGraph | None, window: MetricTable) -> list[str]:
    problems = []
    measured = {c.node for c in window.columns}
    for role, node in (("target.node", issue.target), ("root_cause.node", issue.root_cause)):
        if graph is not None and node not in graph:
            problems.append(f"{issue.path / 'target.json'}: expected {role} to be a node of graph.csv, found {node!r}")
        elif node not in measured:
            problems.append(
                f"{issue.path / 'target.json'}: expected {role} to be measured in "
                f"{issue.path / 'metrics.csv'}, found {node!r} missing there"
            )
    if Column(issue.target, issue.metric, issue.statistic) not in window.columns and issue.target in measured:
        problems.append(
            f"{issue.path / 'metrics.csv'}: expected a column {issue.target} / {issue.metric} / "
            f"{issue.statistic} for the symptom, found none"
        )
    return problems


# ---------------------------------------------------------------- names


def component_id(node: str) -> str:
    """The node's stable id: lower case, every run of other characters one ``_``, none at the ends.

    ``lambdastatusupdater_AWS::Lambda::Function`` -> ``lambdastatusupdater_aws_lambda_function``.
    X-Ray spells some hosts twice with different capitals (``Servi-searc…`` and ``servi-searc…``);
    :func:`component_ids` tells those apart.
    """
    return ID_PATTERN.sub("_", node.lower()).strip("_") or "node"


def component_ids(nodes: Iterable[str]) -> dict[str, str]:
    """Stable, distinct ids for `nodes`.

    A name spelled only in lower case keeps :func:`component_id`; a name that shares its id with
    another and has capitals gets ``_`` plus its capitals, lowered (``Servi-searc…`` ->
    ``servi_searc…_s``): derived from the name alone, so it is the same in every folder with the
    same look-alikes. Names that still collide are reported by :func:`read_dataset`.
    """
    nodes = sorted(set(nodes))
    base = {node: component_id(node) for node in nodes}
    shared = {i for i in base.values() if sum(1 for v in base.values() if v == i) > 1}
    ids = {}
    for node in nodes:
        capitals = "".join(ch for ch in node if ch.isupper()).lower()
        ids[node] = f"{base[node]}_{capitals}" if base[node] in shared and capitals else base[node]
    return ids


def _id_collisions(graph: nx.DiGraph, path: Path) -> list[str]:
    by_id: dict[str, list[str]] = {}
    for node, cid in component_ids(graph.nodes).items():
        by_id.setdefault(cid, []).append(node)
    return [
        f"{path}: expected node names that give distinct ids, found {names} all giving {cid!r}"
        for cid, names in sorted(by_id.items())
        if len(names) > 1
    ]


class NodeKind(NamedTuple):
    """A node name split into the component's own name and its type."""

    base: str  # e.g. petInfo
    label: str  # plain words for the type, e.g. DynamoDB table ("" when the name says nothing)
    signals: tuple[str, ...]  # what an operator checks for this type


def node_kind(node: str) -> NodeKind:
    """What the node's name says it is: its AWS type suffix, ``_remote``, ``_client`` or nothing."""
    for suffix, (label, signals) in sorted(AWS_TYPES.items(), key=lambda kv: -len(kv[0])):
        if node == suffix:
            return NodeKind(base="", label=label, signals=signals)
        if node.endswith("_" + suffix):
            return NodeKind(base=node[: -len(suffix) - 1], label=label, signals=signals)
    if node.startswith("AWS::"):  # an AWS type this table does not know: its words as they are
        return NodeKind(base="", label="AWS " + node.removeprefix("AWS::").replace("::", " "), signals=())
    if "_AWS::" in node:
        base, _, kind = node.partition("_AWS::")
        return NodeKind(base=base, label="AWS " + kind.replace("::", " ") + " service", signals=())
    if node.endswith("_remote"):
        return NodeKind(
            base=node.removesuffix("_remote"),
            label="remote endpoint",
            signals=("connection errors", "timeouts", "DNS resolution"),
        )
    if node.endswith("_client"):
        return NodeKind(base=node.removesuffix("_client"), label="client of", signals=("retries", "timeouts"))
    return NodeKind(base=node, label="", signals=())


def display_name(node: str) -> str:
    """How an operator's dashboard would label the node: ``petInfo DynamoDB table``."""
    kind = node_kind(node)
    if not kind.label:
        return kind.base
    if not kind.base:
        return kind.label
    if kind.label in ("client of", "AWS Lambda service endpoint invoking"):
        return f"{kind.label} {kind.base}"
    if kind.base.lower() in kind.label.lower().replace(" ", "") or (
        kind.label.startswith("AWS ") and kind.label.endswith(" service")
    ):
        return kind.label  # DynamoDB_AWS::DynamoDB, SSM_AWS::SSM: the base only repeats the type
    return f"{kind.base} {kind.label}"


def describe_node(node: str) -> str:
    """A sentence saying what the component is, from its name alone."""
    kind = node_kind(node)
    if kind.label == "remote endpoint":
        return f"Remote endpoint {kind.base}, called over the network"
    if kind.label == "client of":
        return f"Client-side view of the calls made to {kind.base}"
    if not kind.label:
        return f"Application component {kind.base}"
    text = display_name(node)
    if kind.base and text != kind.label and not text.startswith(kind.label):
        text = f"{kind.label} {kind.base}"
    return text[0].upper() + text[1:]


# ---------------------------------------------------------------- anomaly detection


def candidates(graph: nx.DiGraph, target: str) -> list[str]:
    """The target and every node it calls, directly or through others, in name order after the target."""
    return [target] + sorted(nx.descendants(graph, target) - {target})


def onset_rows(table: MetricTable, timestamp: int) -> np.ndarray:
    """Rows whose 5-minute interval ends after the symptom's time: the issue as it shows in the data."""
    return np.array([t + INTERVAL_S > timestamp for t in table.timestamps], dtype=bool)


def baseline(values: np.ndarray) -> Normal | None:
    """Median and robust spread of a column's normal values; None when fewer than enough were recorded."""
    values = values[np.isfinite(values)]
    if len(values) < MIN_BASELINE_POINTS:
        return None
    centre = float(np.median(values))
    spread = MAD_TO_SIGMA * float(np.median(np.abs(values - centre))) or float(np.std(values))
    return Normal(centre=centre, scale=max(spread, RELATIVE_SCALE_FLOOR * abs(centre), ABSOLUTE_SCALE_FLOOR))


def normal_values(dataset: Dataset, column: Column) -> np.ndarray:
    """The values normal operation gives for `column`.

    noissue/metrics.csv when the folder has it and the column was recorded there; otherwise the
    rows of every issue window of the folder that end before its symptom (the system before
    each fault was injected): no issue's fault rows enter it, and no label is read. Five such
    rows or more are needed (:data:`MIN_BASELINE_POINTS`); with 5-minute rows and a few issues
    per folder the rows before the symptoms are the only normal data those folders have.
    """
    if dataset.normal is not None:
        values = dataset.normal.series(column)
        if np.isfinite(values).sum() >= MIN_BASELINE_POINTS:
            return values
    parts = []
    for other in dataset.issues:
        window = dataset.windows[other.round_id]
        parts.append(window.series(column)[~onset_rows(window, other.timestamp)])
    return np.concatenate(parts) if parts else np.array([])


def signed_z(series: np.ndarray, normal: Normal, *, higher_is_worse: bool | None) -> np.ndarray:
    """Robust z-scores of a column, positive where worse (either way when `higher_is_worse` is None)."""
    z = (series - normal.centre) / normal.scale
    if higher_is_worse is None:
        return np.abs(z)
    return z if higher_is_worse else -z


def deviation(
    series: np.ndarray,
    normal: Normal,
    *,
    column: Column,
    judged: np.ndarray,
    before: np.ndarray,
    higher_is_worse: bool | None,
) -> Deviation | None:
    """How much worse than normal the column got while the symptom showed; None when unrecorded then.

    The score is the worst judged row's z-score less the worst z-score of the rows before the
    symptom (when positive): a component already that far from normal before the issue began
    has not changed with it.
    """
    z = signed_z(series, normal, higher_is_worse=higher_is_worse)
    rows = np.flatnonzero(judged & np.isfinite(z))
    if not len(rows):
        return None
    worst = rows[int(np.argmax(z[rows]))]
    prior = z[before & np.isfinite(z)]
    already = max(float(prior.max()), 0.0) if len(prior) else 0.0
    return Deviation(column=column, score=float(z[worst]) - already, value=float(series[worst]), normal=normal.centre)


def symptom_rows(dataset: Dataset, issue: Issue) -> np.ndarray:
    """The rows after onset in which the symptom itself is anomalous (all rows after onset if none is).

    A cause shows while its effect does: a component that deviates only after the symptom has
    cleared did not produce it.
    """
    window = dataset.windows[issue.round_id]
    after = onset_rows(window, issue.timestamp)
    column = Column(issue.target, issue.metric, issue.statistic)
    normal = dataset.normals.get(column)
    if normal is None:
        return after
    z = signed_z(window.series(column), normal, higher_is_worse=HIGHER_IS_WORSE[issue.metric])
    showing = after & np.isfinite(z) & (z >= ANOMALY_THRESHOLD)
    return showing if showing.any() else after


def deviations(dataset: Dataset, issue: Issue, nodes: Iterable[str]) -> list[Deviation]:
    """Every recorded column of `nodes` in the issue's window, scored against normal operation."""
    window = dataset.windows[issue.round_id]
    before = ~onset_rows(window, issue.timestamp)
    judged = symptom_rows(dataset, issue)
    wanted = set(nodes)
    out = []
    for column in window.columns:
        if column.node not in wanted:
            continue
        normal = dataset.normals.get(column)
        if normal is None:
            continue
        found = deviation(
            window.series(column),
            normal,
            judged=judged,
            before=before,
            higher_is_worse=HIGHER_IS_WORSE.get(column.metric),
            column=column,
        )
        if found is not None:
            out.append(found)
    return out


def symptom_scores(dataset: Dataset, issue: Issue) -> dict[str, float]:
    """Each candidate's deviation in the symptom's own metric and statistic (0 when unmeasured)."""
    nodes = candidates(dataset.graph, issue.target)
    scores = {node: 0.0 for node in nodes}
    for found in deviations(dataset, issue, nodes):
        if (found.column.metric, found.column.statistic) == (issue.metric, issue.statistic):
            scores[found.column.node] = found.score
    return scores


def rank_root_causes(
    graph: nx.DiGraph, target: str, scores: Mapping[str, float], *, threshold: float = ANOMALY_THRESHOLD
) -> Ranking:
    """Ranks the target's candidates by anomaly detection plus call-graph traversal.

    Walks from the target down the call edges, entering only anomalous nodes (score at or above
    `threshold`). An anomalous node reached this way none of whose callees is anomalous is a
    root: nothing below it explains its anomaly. Roots come first (strongest first), then the
    other anomalous nodes reached (whose anomaly a callee may explain), then every other
    candidate by score; ties by name. The target is a root when none of its callees is anomalous.
    """

    def anomalous(node: str) -> bool:
        return scores.get(node, 0.0) >= threshold

    reached = {target}
    frontier = [target]
    while frontier:
        node = frontier.pop()
        for callee in graph.successors(node):
            if callee not in reached and anomalous(callee):
                reached.add(callee)
                frontier.append(callee)
    roots = {
        n
        for n in reached
        if (anomalous(n) or n == target) and not any(anomalous(c) and c != n for c in graph.successors(n))
    }
    flagged = frozenset(n for n in candidates(graph, target) if anomalous(n))

    def key(node: str):
        tier = 0 if node in roots else 1 if node in reached else 2
        return tier, -scores.get(node, 0.0), node

    order = tuple(sorted(candidates(graph, target), key=key))
    return Ranking(order=order, roots=tuple(n for n in order if n in roots), anomalous=flagged)


def runbook(dataset: Dataset, issue: Issue, *, threshold: float = ANOMALY_THRESHOLD) -> Ranking:
    """The published baseline's ranking for one issue: symptom-metric anomalies, then traversal."""
    return rank_root_causes(dataset.graph, issue.target, symptom_scores(dataset, issue), threshold=threshold)


def runbook_accuracy(folder: Path, *, threshold: float = ANOMALY_THRESHOLD) -> dict[str, dict[str, Hits]]:
    """Top-1/top-3 hits of the runbook per split and symptom metric: ``{split: {metric: Hits}}``."""
    dataset = read_dataset(folder)
    counts: dict[str, dict[str, list[int]]] = {}
    for issue in dataset.issues:
        order = runbook(dataset, issue, threshold=threshold).order
        cell = counts.setdefault(issue.split, {}).setdefault(issue.metric, [0, 0, 0])
        cell[0] += 1
        cell[1] += order[0] == issue.root_cause
        cell[2] += issue.root_cause in order[:3]
    return {
        split: {metric: Hits(*cell) for metric, cell in sorted(by.items())}
        for split, by in sorted(counts.items(), key=lambda kv: SPLITS.index(kv[0]))
    }


# ---------------------------------------------------------------- wording


def _format(metric: str, value: float) -> str:
    if metric == "latency":  # seconds in the dataset
        return f"{value * 1000:,.0f} ms" if abs(value) < 1 else f"{value:,.2f} s"
    if metric == "availability":
        return f"{value:.1f}%"
    return f"{value:,.0f}"


def _measure(column: Column) -> str:
    statistic = "average" if column.statistic == "Average" else column.statistic
    if column.metric == "requests":
        return "requests per 5 minutes"
    return f"{column.metric} {statistic}"


def describe_deviation(found: Deviation) -> str:
    """One dashboard line: ``petInfo DynamoDB table: latency p99 4.1× its normal level (312 ms vs 76 ms)``."""
    column = found.column
    value, normal = _format(column.metric, found.value), _format(column.metric, found.normal)
    if column.metric == "availability" or found.normal <= 0:
        change = f"{value}, normally {normal}"
    else:
        ratio = found.value / found.normal
        level = f"{ratio:.1f}× its normal level" if ratio >= 1 else f"down to {ratio:.0%} of its normal level"
        change = f"{level} ({value} vs {normal})"
    return f"{display_name(column.node)}: {_measure(column)} {change}"


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


def observations(dataset: Dataset, issue: Issue, *, limit: int = MAX_OBSERVATIONS) -> list[str]:
    """What the data shows: the symptom, then the candidates' strongest deviations from normal.

    One line per component (its most deviating metric), strongest first, then by name; only
    deviations beyond the anomaly threshold. Nothing here reads the label or the fault's command.
    """
    nodes = candidates(dataset.graph, issue.target)
    found = deviations(dataset, issue, nodes)
    symptom = Column(issue.target, issue.metric, issue.statistic)
    own = next((d for d in found if d.column == symptom), None)
    when = _utc(issue.timestamp).strftime("%Y-%m-%d %H:%M UTC")
    head = f"{display_name(issue.target)} {issue.metric} ({issue.statistic}) is anomalous at {when}"
    if own is not None:
        head += f": {_format(issue.metric, own.value)} against a normal {_format(issue.metric, own.normal)}"
    lines = [head]
    strongest: dict[str, Deviation] = {}
    for d in found:
        if d.column == symptom or d.score < ANOMALY_THRESHOLD:
            continue
        best = strongest.get(d.column.node)
        if best is None or d.score > best.score:  # ties keep the header's first column
            strongest[d.column.node] = d
    ranked = sorted(strongest.values(), key=lambda d: (-d.score, d.column.node))
    lines.extend(describe_deviation(d) for d in ranked[: limit - 1])
    return lines


_SSM = re.compile(r"put-parameter\s+--name\s+'?([^'\s]+)'?\s+--value\s+'?([^'\s]*)'?")
_SED = re.compile(r"sed\s.*?'s/(.*?)/(.*?)/g?'\s+(\S+)")
_MODULE = re.compile(r"python\s+-m\s+(\S+)(.*)")


def describe_fault(command: str | None) -> str:
    """The reproduction command in words, by the kind of command (one rule each, else a short quote).

    ``aws ssm put-parameter`` -> the parameter set; ``sed … && cdk deploy`` -> the edited file and
    the redeploy; ``python -m MODULE ARGS`` -> the load generator run; anything else is quoted
    up to its first ``&&``, cut at 100 characters.
    """
    if not command:
        return ""
    if m := _SSM.search(command):
        return f"the fault was injected by setting the parameter {m.group(1)} to {m.group(2)}"
    if m := _SED.search(command):
        path = m.group(3).lstrip("./")
        redeploy = " and redeploying" if "deploy" in command else ""
        return f"the fault was injected by editing {path} (replacing '{m.group(1)}' with '{m.group(2)}'){redeploy}"
    if m := _MODULE.search(command):
        args = " ".join(a.lstrip("-") for a in m.group(2).split())
        return f"the fault was injected by running {m.group(1)}" + (f" ({args})" if args else "")
    short = command.split("&&")[0].strip()
    return f"the fault was injected with: {short[:100]}"


# ---------------------------------------------------------------- the scenario


def build(folder: Path, name: str | None = None) -> dict[str, Any]:
    """The scenario for a traffic-scenario folder as plain data (schema 1, with runbooks).

    Raises:
        DatasetError: with every problem found in the folder.
    """
    dataset = read_dataset(Path(folder))
    ids = component_ids(dataset.graph.nodes)
    rounds, used = [], set()
    previous: datetime | None = None
    for issue in dataset.issues:
        used.update(candidates(dataset.graph, issue.target))
        at = _utc(issue.timestamp)
        if previous is not None and at <= previous:
            # Rounds must be in strictly increasing time; issues injected within the same second
            # are played one second apart, in split and number order.
            at = previous + timedelta(seconds=1)
        previous = at
        rounds.append(build_round(dataset, issue, ids, at=at))
    causes = {
        ids[node]: {"description": describe_node(node), "signals": list(node_kind(node).signals)}
        for node in sorted(used, key=lambda n: ids[n])
    }
    return {
        "schema": 1,
        "name": name or "petshop-" + component_id(dataset.name).replace("_", "-"),
        "title": f"PetShop {dataset.name.replace('_', ' ')}: performance issues across microservices",
        "description": _description(dataset),
        "root_causes": causes,
        "rounds": rounds,
    }


def build_round(dataset: Dataset, issue: Issue, ids: Mapping[str, str], *, at: datetime) -> dict[str, Any]:
    """One issue as a schema-1 round, with the runbook's ranking of its candidates."""
    fault = describe_fault(issue.command)
    correction = f"The root cause was {display_name(issue.root_cause)} ({ids[issue.root_cause]})"
    return {
        "id": issue.round_id,
        "kind": issue.metric,
        "service": ids[issue.target],
        "at": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "observations": observations(dataset, issue),
        "candidates": [ids[n] for n in candidates(dataset.graph, issue.target)],
        "truth": ids[issue.root_cause],
        "max_attempts": MAX_ATTEMPTS,
        "on_success": "The fix at that component cleared the symptom.",
        "on_failure": "The symptom persists after the change there.",
        "correction": correction + (f"; {fault}." if fault else "."),
        "runbook": [ids[n] for n in runbook(dataset, issue).order],
    }


def _description(dataset: Dataset) -> str:
    normal = (
        "noissue/metrics.csv (normal operation; for a metric it lacks, the rows of the issue windows "
        "that precede each symptom)"
        if dataset.normal is not None
        else "the rows of the folder's issue windows that precede each symptom (this folder has no "
        "normal-operation file)"
    )
    return (
        f'Imported from the PetShop dataset, folder {dataset.name} (Hardt et al., "The PetShop Dataset — '
        'Finding Causes of Performance Issues across Microservices", arXiv 2311.04806, CLeaR 2024; '
        "github.com/amazon-science/petshop-root-cause-analysis; licence CC-BY-4.0). One round per "
        "injected issue, train and test, in time order; kind is the symptom metric. Candidates are "
        "the symptom's node and every component it calls in the dataset's call graph. Observations "
        f"are deviations from normal measured against {normal} with a robust z-score (median and "
        f"median absolute deviation, threshold {ANOMALY_THRESHOLD:g}) over the rows in which the symptom "
        "shows, less any deviation already present before it. The runbook is the dataset "
        "paper's baseline, anomaly detection plus call-graph traversal: anomalous components reached "
        "from the symptom through anomalous callers, with no anomalous callee, first."
    )


def import_folder(folder: Path, *, name: str | None = None) -> str:
    """The scenario for `folder` as deterministic YAML text, checked by the strict loader.

    Raises:
        DatasetError: with every problem found in the folder, each line naming its file.
    """
    folder = Path(folder)
    scenario = build(folder, name)
    header = (
        f"PetShop dataset folder {folder.name} (CC-BY-4.0, Hardt et al., arXiv 2311.04806)\n"
        f"python -m scenarios.importers petshop {folder.name} --out FILE.yaml"
    )
    return render_scenario(scenario, header=header)


# ---------------------------------------------------------------- figures


def accuracy_table(folders: Sequence[Path], *, threshold: float = ANOMALY_THRESHOLD) -> list[str]:
    """Lines comparing the runbook's top-1/top-3 on test issues with the published figures."""
    lines = [f"{'folder':20} {'split':6} {'metric':13} {'issues':>6} {'top-1':>6} {'top-3':>6}   published"]
    for folder in folders:
        folder = Path(folder)
        published = PUBLISHED.get(re.sub(r"\d+$", "", folder.name), {})
        for split, by_metric in runbook_accuracy(folder, threshold=threshold).items():
            for metric, hits in by_metric.items():
                paper = published.get(metric) if split == "test" else None
                quoted = f"{paper[0]:.3f} / {paper[1]:.3f}" if paper else ""
                lines.append(
                    f"{folder.name:20} {split:6} {metric:13} {hits.issues:6d} "
                    f"{hits.top1 / hits.issues:6.3f} {hits.top3 / hits.issues:6.3f}   {quoted}"
                )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Prints the runbook's accuracy on each folder given; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m scenarios.importers.petshop",
        description="Top-1/top-3 of the PetShop runbook (anomaly detection plus call-graph traversal) per "
        "split and symptom metric, next to the dataset paper's figures for test issues.",
        epilog="example:\n  python -m scenarios.importers.petshop ../shared/datasets/petshop/high_traffic",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("folders", nargs="+", type=Path, metavar="DIR", help="PetShop traffic-scenario folders")
    parser.add_argument(
        "--threshold",
        type=float,
        default=ANOMALY_THRESHOLD,
        help=f"anomaly threshold as a robust z-score (default {ANOMALY_THRESHOLD:g})",
    )
    args = parser.parse_args(argv)
    try:
        print("\n".join(accuracy_table(args.folders, threshold=args.threshold)))
    except DatasetError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
