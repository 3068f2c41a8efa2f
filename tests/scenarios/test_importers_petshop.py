"""PetShop importer: a small dataset folder written here in the PetShop layout, and the real folders when present."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import scenarios
from scenarios.importers import petshop
from scenarios.importers.__main__ import main
from scenarios.importers.common import DatasetError

REAL = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "petshop"

FRONT, API, TABLE, CACHE, AUTH, BATCH = (
    "Front",
    "api_AWS::ECS::Fargate",
    "orders_AWS::DynamoDB::Table",
    "cache_remote",
    "auth_AWS::Lambda::Function",
    "batch_AWS::Lambda::Function",
)
NODES = (FRONT, API, TABLE, CACHE, AUTH, BATCH)
EDGES = ((FRONT, API), (API, TABLE), (API, CACHE), (FRONT, AUTH), (BATCH, TABLE))  # batch is not below Front
LATENCY = {FRONT: 0.100, API: 0.050, TABLE: 0.010, CACHE: 0.002, AUTH: 0.020, BATCH: 0.300}
STATISTICS = (("latency", "Average"), ("latency", "p99"), ("availability", "Average"), ("requests", "Sum"))
START = 1_700_000_000
ONSET = 2  # rows before this one end before the symptom
# issue -> (split, symptom metric, labelled root cause, {node: (latency factor, availability)} after onset)
ISSUES = {
    ("train", 0): ("latency", TABLE, {TABLE: (12.0, 100.0), API: (4.0, 100.0), FRONT: (2.5, 100.0)}),
    ("test", 0): ("availability", API, {API: (1.0, 90.0), FRONT: (1.0, 95.0)}),
    # Labelled cache, but only auth moves: the label must not leak into what the round shows.
    ("test", 1): ("latency", CACHE, {AUTH: (9.0, 100.0), FRONT: (2.0, 100.0)}),
}


def _metrics(path: Path, timestamps, effect=None, *, seed: int) -> None:
    rng = np.random.default_rng(seed)
    header = [["microservice"], ["metric"], ["statistic"], ["unix_timestamp"]]
    for node in NODES:
        for metric, statistic in STATISTICS:
            header[0].append(node)
            header[1].append(metric)
            header[2].append(statistic)
            header[3].append("")
    lines = [",".join(row) for row in header]
    for i, stamp in enumerate(timestamps):
        cells = [f"{stamp:.1f}"]
        for node in NODES:
            factor, availability = (effect or {}).get(node, (1.0, 100.0)) if i >= ONSET else (1.0, 100.0)
            latency = LATENCY[node] * factor * (1 + 0.03 * rng.standard_normal())
            cells += [f"{latency:.6f}", f"{latency * 3:.6f}", f"{availability:.3f}", f"{100 + rng.integers(0, 5)}"]
        lines.append(",".join(cells))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def make_folder(root: Path, *, name: str = "small_traffic", noissue: bool = True) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    rows = ["," + ",".join(NODES)]
    for caller in NODES:
        rows.append(caller + "," + ",".join("1.0" if (caller, callee) in EDGES else "0.0" for callee in NODES))
    (folder / "graph.csv").write_text("\n".join(rows) + "\n")
    if noissue:
        _metrics(folder / "noissue" / "metrics.csv", [START - 86_400 + 300 * i for i in range(40)], seed=1)
    for k, ((split, number), (metric, cause, effect)) in enumerate(sorted(ISSUES.items())):
        when = START + 7_200 * (k + 1)
        issue = folder / split / f"issue_{number}"
        _metrics(issue / "metrics.csv", [when + 300 * (i - ONSET) - 30 for i in range(5)], effect, seed=10 + k)
        (issue / "target.json").write_text(
            json.dumps(
                {
                    "target": {"node": FRONT, "metric": metric, "agg": "Average", "timestamp": when},
                    "root_cause": {"node": cause, "metric": None},
                    "metadata": {
                        "reproducibility": {
                            "command": f"aws ssm put-parameter --name '/shop/fault{k}' --value '500' --overwrite"
                        }
                    },
                }
            )
        )
    return folder


def _rounds(folder: Path):
    return {r.id: r for r in scenarios.loads(petshop.import_folder(folder)).rounds}


def test_rounds_offer_the_target_and_everything_it_calls(tmp_path):
    rounds = _rounds(make_folder(tmp_path))
    below = {petshop.component_id(n) for n in nx.descendants(nx.DiGraph(EDGES), FRONT) | {FRONT}}
    assert set(rounds) == {"train-0", "test-0", "test-1"}
    for r in rounds.values():
        assert set(r.candidates) == below and r.truth in r.candidates
        assert r.service == "front" and r.max_attempts == petshop.MAX_ATTEMPTS
        assert set(r.runbook) == below
    assert rounds["test-0"].kind == "availability" and rounds["train-0"].kind == "latency"
    assert "batch_aws_lambda_function" not in rounds["train-0"].candidates


def test_observations_show_the_data_and_name_the_root_cause_only_when_it_deviates(tmp_path):
    rounds = _rounds(make_folder(tmp_path))
    shown = rounds["train-0"].observations
    assert shown[0].startswith("Front latency (Average) is anomalous at ")
    assert any(line.startswith("orders DynamoDB table: latency") for line in shown[1:])
    quiet = rounds["test-1"]  # labelled cache, whose metrics never moved
    assert quiet.truth == "cache_remote"
    assert not any("cache" in line.lower() for line in quiet.observations)
    assert any(line.startswith("auth AWS Lambda function: latency") for line in quiet.observations)
    everything = " ".join(line for r in rounds.values() for line in r.observations)
    assert "put-parameter" not in everything and "/shop/fault" not in everything
    assert "/shop/fault0" in rounds["test-0"].correction and "api ECS service on Fargate" in rounds["test-0"].correction


def test_runbook_ranks_the_root_most_anomaly_first():
    graph = nx.DiGraph(EDGES)
    scores = {FRONT: 9.0, API: 40.0, TABLE: 6.0, CACHE: 0.5, AUTH: 1.0}
    ranking = petshop.rank_root_causes(graph, FRONT, scores)
    # The API is the strongest, but the table it calls explains it.
    assert ranking.order[:3] == (TABLE, API, FRONT)
    assert ranking.roots == (TABLE,)
    assert petshop.rank_root_causes(graph, FRONT, {FRONT: 9.0}).order[0] == FRONT


def test_imported_runbook_puts_the_injected_root_most_anomaly_first(tmp_path):
    rounds = _rounds(make_folder(tmp_path))
    assert rounds["train-0"].runbook[0] == "orders_aws_dynamodb_table"
    assert rounds["test-0"].runbook[0] == "api_aws_ecs_fargate"
    assert rounds["test-1"].runbook[0] == "auth_aws_lambda_function"


def test_import_is_byte_identical_wherever_the_folder_lies(tmp_path):
    folder = make_folder(tmp_path / "a")
    copy = tmp_path / "b" / folder.name
    shutil.copytree(folder, copy)
    text = petshop.import_folder(folder)
    assert text == petshop.import_folder(folder) == petshop.import_folder(copy)
    assert str(tmp_path) not in text and text.startswith("# PetShop dataset folder small_traffic")


def test_folder_without_normal_operation_uses_the_rows_before_each_symptom(tmp_path):
    folder = make_folder(tmp_path, noissue=False)
    scenario = scenarios.loads(petshop.import_folder(folder, name="petshop-derived"))
    assert scenario.name == "petshop-derived"
    assert "no normal-operation file" in scenario.description
    assert {r.id: r.runbook[0] for r in scenario.rounds}["train-0"] == "orders_aws_dynamodb_table"


def test_accuracy_counts_hits_per_split_and_metric(tmp_path):
    hits = petshop.runbook_accuracy(make_folder(tmp_path))
    assert hits["train"]["latency"] == petshop.Hits(issues=1, top1=1, top3=1)
    assert hits["test"]["availability"] == petshop.Hits(issues=1, top1=1, top3=1)
    assert hits["test"]["latency"].top1 == 0  # labelled cache, yet auth is what moved


def test_ids_are_lower_case_and_tell_case_variants_apart():
    ids = petshop.component_ids(["Servi-searc.elb_remote", "servi-searc.elb_remote", "PetSite"])
    assert ids == {
        "PetSite": "petsite",
        "servi-searc.elb_remote": "servi_searc_elb_remote",
        "Servi-searc.elb_remote": "servi_searc_elb_remote_s",
    }
    assert (
        petshop.describe_node("lambdastatusupdater_AWS::Lambda::Function") == "AWS Lambda function lambdastatusupdater"
    )


def _break(folder: Path, how: str) -> Path:
    if how == "missing target.json":
        path = folder / "test" / "issue_0" / "target.json"
        path.unlink()
    elif how == "ragged row":
        path = folder / "train" / "issue_0" / "metrics.csv"
        lines = path.read_text().splitlines()
        lines[5] += ",1.0"
        path.write_text("\n".join(lines) + "\n")
    else:
        path = folder / "test" / "issue_1" / "target.json"
        doc = json.loads(path.read_text())
        doc["root_cause"]["node"] = "ghost_AWS::S3"
        path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    "how, expected",
    [
        ("missing target.json", "found no such file"),
        ("ragged row", "line 6: expected 25 fields like the header, found 26"),
        ("unknown node", "expected root_cause.node to be a node of graph.csv, found 'ghost_AWS::S3'"),
    ],
)
def test_malformed_folder_is_refused_with_the_file_named_and_nothing_written(tmp_path, capsys, how, expected):
    folder = make_folder(tmp_path)
    broken = _break(folder, how)
    out = tmp_path / "out" / "petshop.yaml"
    assert main(["petshop", str(folder), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{broken}: " in err and expected in err
    assert not out.exists()
    with pytest.raises(DatasetError, match="ghost|no such file|fields"):
        petshop.build(folder)


def test_root_cause_outside_the_targets_calls_is_refused(tmp_path):
    folder = make_folder(tmp_path)
    path = folder / "test" / "issue_1" / "target.json"
    doc = json.loads(path.read_text())
    doc["root_cause"]["node"] = BATCH
    path.write_text(json.dumps(doc))
    with pytest.raises(DatasetError, match=r"target\.json: expected root_cause\.node 'batch_AWS::Lambda::Function'"):
        petshop.build(folder)


def test_real_petshop_folders_import():
    if not REAL.is_dir():
        pytest.skip(f"{REAL} is absent")
    folders = sorted(p for p in REAL.iterdir() if (p / "graph.csv").is_file())
    assert folders
    for folder in folders:
        scenario = scenarios.loads(petshop.import_folder(folder))
        assert len(scenario.rounds) == sum(1 for _ in folder.glob("*/issue_*/target.json"))
        for r in scenario.rounds:
            assert r.truth in r.candidates and r.runbook[0] in r.candidates
            assert len(r.observations) <= petshop.MAX_OBSERVATIONS
