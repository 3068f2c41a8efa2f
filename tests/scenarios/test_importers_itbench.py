"""ITBench importer: a small folder of ground-truth files written here, and the real folder when present."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import scenarios
from scenarios.importers import itbench
from scenarios.importers.__main__ import main
from scenarios.importers.common import DatasetError

REAL = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "itbench-sre"

FLAG_FAULT = {
    "category": "Configuration Setting",
    "condition": "cartFailure feature flag set",
    "entity": {"kind": "ConfigMap", "name": "flagd-config"},
    "fault_mechanism": "custom(flagd)",
}


def _service(gid: str, literal: str) -> dict:
    return {"id": gid, "kind": "Service", "namespace": "otel-demo", "filter": [literal + r"\b"]}


def _alert(name: str, group: str | None, description: str) -> dict:
    alert = {"id": name, "metadata": {"description": description}}
    if group is not None:
        alert["group_id"] = group
    return alert


# scenario_1: plain layout; the ConfigMap named by `name`; descriptions that explain the cause.
FLAG = {
    "alerts": [
        _alert("HighRequestErrorRate", "cart-service-1", "Cart service failing due to the cartFailure feature flag"),
        _alert("HighRequestErrorRate", "frontend-service-1", "Frontend errors when reading flagd-config values"),
        _alert("KubePodCrashLooping", None, "Cascade effect: cart pods restart"),
        _alert("HighRequestLatency", "mystery-thing", "Latency is above threshold"),
    ],
    "groups": [
        {
            "id": "flagd-config",
            "kind": "ConfigMap",
            "name": "flagd-config",
            "namespace": "otel-demo",
            "root_cause": True,
        },
        _service("cart-service-1", "cart"),
        _service("frontend-service-1", "frontend"),
    ],
    "fault": [FLAG_FAULT],
    "propagations": [
        {"source": "flagd-config", "target": "cart-service-1", "condition": "flag on", "effect": "cart fails"}
    ],
    "recommended_actions": [{"solution": {"id": "disable_cart_failure_flag", "actions": ["Disable the flag"]}}],
}
# scenario_2: wrapped in spec:, recommendedActions, the ConfigMap named by its filter, group_id None,
# and an alert on a group id the file does not list.
WRAPPED = {
    "apiVersion": "itbench/v1",
    "kind": "Scenario",
    "metadata": {"name": "scenario-2"},
    "spec": {
        "alerts": [
            _alert("KubePodNotReady", "checkout-pod-1", "Pods in not ready state"),
            _alert("HighRequestErrorRate", "None", "Error Rate is Above Threshold"),
            _alert("HighRequestErrorRate", "checkout-service", "Checkout errors - upstream flag"),
        ],
        "groups": [
            _service("checkout-service-1", "checkout"),
            {
                "id": "checkout-pod-1",
                "kind": "Pod",
                "namespace": "otel-demo",
                "filter": ["^checkout-[a-z0-9]+-[a-z0-9]+$"],
            },
            {
                "id": "flagd-configmap-1",
                "kind": "ConfigMap",
                "namespace": "otel-demo",
                "filter": [r"flagd-config\b"],
                "root_cause": True,
            },
        ],
        "fault": [FLAG_FAULT],
        "recommendedActions": [{"solution": {"id": "Restore the flag", "actions": ["Restore it"]}}],
    },
}
# scenario_3: two groups flagged; the first in file order is the truth.
TWO_ROOTS = {
    "alerts": [
        _alert("KubePodNotReady", "checkout-pod-1", "checkout pods cannot be scheduled"),
        _alert("HighRequestErrorRate", "frontend-service-1", "Frontend errors while strict-resource-quota is full"),
    ],
    "groups": [
        {
            "id": "resource-quota-1",
            "kind": "ResourceQuota",
            "namespace": "otel-demo",
            "filter": [r"strict-resource-quota\b"],
            "root_cause": True,
        },
        {
            "id": "flagd-config-1",
            "kind": "ConfigMap",
            "name": "flagd-config",
            "namespace": "otel-demo",
            "root_cause": True,
        },
        {"id": "checkout-pod-1", "kind": "Pod", "namespace": "otel-demo", "filter": ["checkout-.*"]},
        _service("frontend-service-1", "frontend"),
    ],
    "fault": [
        {
            "category": "Create",
            "condition": "ResourceQuota created too small",
            "entity": {"kind": "ResourceQuota", "name": "strict-resource-quota"},
            "fault_mechanism": "resource_quota_enforcement",
        }
    ],
}
# scenario_10: after scenario_3 in number order; no fault entry; the cause alerts itself.
SELF = {
    "alerts": [
        _alert("KubePodCrashLooping", "valkey-pod-1", "Valkey pod crashing due to storage exhaustion"),
        _alert("HighRequestErrorRate", "cart-service-1", "Request error rate in service cart is above 0"),
    ],
    "groups": [
        {
            "id": "valkey-pod-1",
            "kind": "Pod",
            "namespace": "otel-demo",
            "filter": ["valkey-cart-.*"],
            "root_cause": True,
        },
        _service("cart-service-1", "cart"),
    ],
}


def _write(folder: Path, number: int, doc) -> Path:
    path = folder / f"scenario_{number}" / itbench.FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "itbench-mini"
    for number, doc in ((1, FLAG), (2, WRAPPED), (3, TWO_ROOTS), (10, SELF)):
        _write(root, number, doc)
    (root / "LICENSE").write_text("Apache-2.0\n", encoding="utf-8")  # files beside the scenarios are ignored
    return root


def _rounds(folder: Path) -> dict:
    return {r.id: r for r in scenarios.loads(itbench.import_folder(folder, name=None)).rounds}


def test_the_import_loads_with_one_round_per_scenario_in_number_order(folder: Path) -> None:
    scenario = scenarios.loads(itbench.import_folder(folder, name=None))
    assert scenario.name == "itbench-mini"
    assert [r.id for r in scenario.rounds] == ["scenario-1", "scenario-2", "scenario-3", "scenario-10"]
    assert [r.kind for r in scenario.rounds] == ["configuration_setting", "configuration_setting", "create", "unknown"]
    assert {r.service for r in scenario.rounds} == {"otel-demo"}
    assert "ITBench" in scenario.description and "Apache-2.0" in scenario.description
    flagd = scenario.root_causes["flagd_config_configmap"]
    assert flagd.description == "Kubernetes ConfigMap flagd-config in otel-demo"
    assert flagd.signals == itbench.KINDS["ConfigMap"][1]


def test_an_entity_keeps_its_name_across_rounds_whatever_its_group_id(folder: Path) -> None:
    rounds = _rounds(folder)
    for rid in ("scenario-1", "scenario-2", "scenario-3"):  # name:, filter: flagd-config\b, id flagd-config-1
        assert "flagd_config_configmap" in rounds[rid].candidates
    assert rounds["scenario-2"].candidates == ("checkout_pod", "checkout_service", "flagd_config_configmap")
    assert "checkout_pod" in rounds["scenario-3"].candidates  # an anchored and a wildcard filter agree
    assert rounds["scenario-10"].truth == "valkey_cart_pod"  # the filter's literal, not the id
    for r in rounds.values():
        assert r.truth in r.candidates and list(r.candidates) == sorted(r.candidates)


def test_the_first_flagged_group_is_the_truth_and_the_correction_names_both(folder: Path) -> None:
    r = _rounds(folder)["scenario-3"]
    assert r.truth == "strict_resource_quota"
    assert r.correction == (
        "It was the ResourceQuota strict-resource-quota in otel-demo, together with the "
        "ConfigMap flagd-config (create fault): ResourceQuota created too small "
        "(mechanism: resource_quota_enforcement)."
    )


def test_explanations_that_name_the_cause_are_cut_from_observations(folder: Path) -> None:
    r = _rounds(folder)["scenario-1"]
    assert r.observations == (
        "HighRequestErrorRate on cart (Service): Cart service failing",
        "HighRequestErrorRate on frontend (Service): Frontend errors",  # "when reading flagd-config values" leaked
        "KubePodCrashLooping: cart pods restart",
        "HighRequestLatency on mystery-thing: Latency is above threshold",  # not a group: kept as plain text
    )
    assert not any("flag" in line.lower() or "cascade" in line.lower() for line in r.observations)
    quota = _rounds(folder)["scenario-3"]  # "while strict-resource-quota is full" names the root
    assert quota.observations[1] == "HighRequestErrorRate on frontend (Service): Frontend errors"


def test_leaks_reports_what_names_the_root_unless_the_alert_fired_on_it(folder: Path) -> None:
    scenario = itbench.read_scenario(folder / "scenario_1" / itbench.FILE_NAME, 1)
    by_group = itbench.name_groups(scenario)
    truth = itbench.truth_of(scenario, by_group, "otel-demo")
    cart, root = by_group["cart-service-1"], by_group["flagd-config"]

    def seen(entity, text):
        return itbench.Observation(
            alert="HighRequestErrorRate",
            entity=entity,
            description=text,
            shown_on=f"{entity.name} ({entity.kind})",
            on_truth=entity == root,
        )

    lines = [
        seen(cart, "Cart errors after the cartFailure flag"),
        seen(cart, "Cart errors"),
        seen(root, "flagd-config reload failed"),
    ]
    assert [(leak.index, leak.words) for leak in itbench.leaks(lines, truth)] == [(0, ("cartfailure", "flag"))]


def test_alerts_on_no_group_or_an_unlisted_group(folder: Path) -> None:
    r = _rounds(folder)["scenario-2"]
    assert r.observations == (
        "KubePodNotReady on checkout (Pod): Pods in not ready state",
        "HighRequestErrorRate: Error Rate is Above Threshold",  # group_id None
        "HighRequestErrorRate on checkout (Service): Checkout errors",  # checkout-service read as the Service
    )


def test_the_runbook_ranks_infrastructure_alerts_then_own_alerts_then_the_rest(folder: Path) -> None:
    rounds = _rounds(folder)
    assert rounds["scenario-2"].runbook == ("checkout_pod", "checkout_service", "flagd_config_configmap")
    assert rounds["scenario-10"].runbook == ("valkey_cart_pod", "cart_service")
    for r in rounds.values():
        assert sorted(r.runbook) == sorted(r.candidates)


def test_outcome_texts_are_short_and_neutral(folder: Path) -> None:
    rounds = _rounds(folder)
    assert rounds["scenario-1"].on_success == "Fixed by: disable cart failure flag."
    assert rounds["scenario-2"].on_success == "Fixed by: Restore the flag."
    assert rounds["scenario-10"].on_success == itbench.ON_SUCCESS
    assert {r.on_failure for r in rounds.values()} == {itbench.ON_FAILURE}
    assert rounds["scenario-10"].correction == "It was the Pod valkey-cart in otel-demo."


def test_the_output_is_byte_identical_twice(folder: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    assert main(["itbench", str(folder), "--out", str(first)]) == 0
    assert main(["itbench", str(folder), "--out", str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()
    assert str(tmp_path) not in first.read_text(encoding="utf-8")  # no absolute path in the header


@pytest.mark.parametrize(
    "case, expected",
    [
        ("not_yaml", r"scenario_1/groundtruth_v1\.yaml: expected YAML, found a syntax error at line 2"),
        ("no_root", r"scenario_1/groundtruth_v1\.yaml: groups: expected a group flagged root_cause: true, found none"),
        ("no_kind", r"scenario_1/groundtruth_v1\.yaml: groups\[0\]\.kind: expected text, found nothing"),
        ("empty", r"expected scenario_N/groundtruth_v1\.yaml files, found none"),
    ],
)
def test_malformed_input_names_the_file_and_writes_nothing(tmp_path: Path, capsys, case: str, expected: str) -> None:
    root = tmp_path / "bad"
    root.mkdir()
    if case == "not_yaml":
        _write(root, 1, "alerts: [unclosed\n")
    elif case == "no_root":
        _write(root, 1, {**FLAG, "groups": [{**g, "root_cause": False} for g in FLAG["groups"]]})
    elif case == "no_kind":
        _write(root, 1, {**FLAG, "groups": [{"id": "flagd-config", "namespace": "otel-demo", "root_cause": True}]})
    _write(root, 2, WRAPPED) if case != "empty" else None  # a good file beside the bad one changes nothing
    out = tmp_path / "out.yaml"
    assert main(["itbench", str(root), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert pytest.raises(DatasetError, itbench.import_folder, root, name=None).match(expected)
    assert not out.exists()


def test_the_real_folder_imports_without_leaks() -> None:
    if not REAL.is_dir():
        pytest.skip(f"dataset folder {REAL} is absent")
    text = itbench.import_folder(REAL, name=None)
    scenario = scenarios.loads(text)
    assert len(scenario.rounds) == len(itbench.scenario_files(REAL))
    for number, path in itbench.scenario_files(REAL):
        record = itbench.read_scenario(path, number)
        by_group = itbench.name_groups(record)
        truth = itbench.truth_of(record, by_group, itbench.application(record))
        observations, _ = itbench.observe(record, by_group, truth)
        assert itbench.leaks(observations, truth) == [], path
    for r in scenario.rounds:
        assert r.truth in r.candidates and sorted(r.runbook) == sorted(r.candidates)
