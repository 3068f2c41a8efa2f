"""Scenario loader and validator: shipped files, malformed inputs, fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import scenarios
from scenarios import ScenarioError
from scenarios.loader import MAX_BYTES
from scenarios.validate import main

BAD = Path(__file__).resolve().parents[1] / "scenarios" / "bad"
EXPECTED = yaml.safe_load((BAD / "expected.yaml").read_text())

VALID = """\
schema: 1
name: tiny
root_causes:
  a: {description: first cause}
  b: {description: second cause, signals: [x]}
rounds:
  - {id: r1, kind: learn, service: api, observations: [o], truth: a}
"""


@pytest.mark.parametrize("name", scenarios.shipped())
def test_shipped_scenario_loads_and_validates(name, capsys):
    s = scenarios.load(name)
    assert s.name == name == Path(s.source).stem
    assert main([name]) == 0
    assert capsys.readouterr().out == f"OK {name} ({s.source})\n"


@pytest.mark.parametrize(
    "path",
    sorted(str(p) for folder in ("heldout", "dev") for p in (Path(scenarios.__file__).parent / folder).glob("*.yaml")),
)
def test_held_out_and_development_files_validate(path, capsys):
    assert main([path]) == 0 and capsys.readouterr().out.startswith("OK ")


def test_at_least_four_shipped_scenarios_with_twelve_rounds_beyond_the_canonical_one():
    names = scenarios.shipped()
    assert "pool-vs-deploy" in names
    others = [scenarios.load(n) for n in names if n != "pool-vs-deploy"]
    assert len(others) >= 3
    for s in others:
        assert len(s.rounds) >= 12, s.name
        assert s.interludes and any(r.caused_by for r in s.rounds), s.name
        assert any(r.max_attempts == 3 for r in s.rounds), s.name
        assert any(r.kind == "drift" for r in s.rounds) and "Drift" in s.description, s.name


def test_canonical_scenario_shape():
    s = scenarios.load("pool-vs-deploy")
    assert [r.id for r in s.rounds] == [f"r{i}" for i in range(1, 10)]
    truth = {r.id: r.truth for r in s.rounds}
    pool, deploy = "connection_pool_exhaustion", "deployment_config_error"
    assert [truth[k] for k in ("r1", "r2", "r4", "r5", "r6", "r7")] == [pool] * 6
    assert [truth[k] for k in ("r3", "r8", "r9")] == [deploy] * 3
    assert s.round("r3").kind == "red_herring" and s.round("r8").correction


def test_all_fixture_cases_are_pinned():
    files = {p.name for p in BAD.iterdir() if p.name != "expected.yaml"}
    assert files == set(EXPECTED) and len(files) >= 20


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_malformed_input_reports_located_problems(case, capsys):
    path = str(BAD / case)
    assert main([path]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out == [line.replace("{file}", path) for line in EXPECTED[case]]


def test_several_problems_are_reported_at_once():
    with pytest.raises(ScenarioError) as err:
        scenarios.load(BAD / "many_problems.yaml")
    assert len(err.value.problems) >= 5
    assert str(err.value) == "\n".join(err.value.problems)


def test_missing_file_directory_and_unknown_name(tmp_path, capsys):
    missing = str(tmp_path / "nope.yaml")
    assert main([missing, str(tmp_path), "no-such-scenario"]) == 2
    shipped = ", ".join(scenarios.shipped())
    assert capsys.readouterr().out.splitlines() == [
        f"{missing}: (file): no such file",
        f"{tmp_path}: (file): is a directory; expected a scenario file",
        f"no-such-scenario: (file): no such file, and not a shipped scenario (shipped: {shipped})",
    ]


def test_huge_file_is_refused_before_parsing(tmp_path, capsys):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_BYTES + 1))
    assert main([str(big)]) == 2
    assert capsys.readouterr().out == (
        f"{big}: (file): file is {MAX_BYTES + 1} bytes; scenario files are limited to {MAX_BYTES} bytes\n"
    )


def test_mixed_good_and_bad_exit_two(tmp_path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text(VALID)
    assert main([str(good), str(BAD / "empty.yaml")]) == 2
    assert capsys.readouterr().out.splitlines()[0] == f"OK tiny ({good})"


def test_help_has_an_example(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    assert "example: python -m scenarios.validate" in capsys.readouterr().out


def test_loads_defaults_and_hash():
    s = scenarios.loads(VALID)
    r = s.rounds[0]
    assert (r.candidates, r.max_attempts, r.situation) == (("a", "b"), 2, "incident_response")
    assert s.source == "<string>" and len(s.sha256) == 64
    assert s.root_causes["a"].signals == () and s.start is None


def test_durations_and_timestamps_parse():
    text = VALID.replace("name: tiny\n", "name: tiny\nstart: '2026-02-02T10:00:00+02:00'\n")
    text += "  - {id: r2, kind: k, service: s, observations: [o], truth: b, after: 1h30m}\n"
    text += "  - {id: r3, kind: k, service: s, observations: [o], truth: b, at: 2026-02-04T09:00:00Z}\n"
    s = scenarios.loads(text)
    assert s.start.isoformat() == "2026-02-02T08:00:00+00:00"
    assert s.rounds[1].after.total_seconds() == 5400
    assert s.rounds[2].at.isoformat() == "2026-02-04T09:00:00+00:00"


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _dump(doc) -> str:
    return yaml.dump(doc, Dumper=_DUMPER, allow_unicode=True)


def _problems_or_ok(data) -> None:
    try:
        scenarios.loads(data, source="fuzz")
    except ScenarioError as err:
        assert err.problems and all(p.startswith("fuzz: ") for p in err.problems)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_fuzz_bytes_never_crash(data):
    _problems_or_ok(data)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abr:-[]{}\n #'\"&*!|>?,0123456789TZ.")), max_size=200))
def test_fuzz_yamlish_text_never_crashes(text):
    _problems_or_ok(text)


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["r1", "a", "b", "30m", "1d", "2026-01-01T00:00:00Z", "learn", "api"]),
)
_KEYS = st.sampled_from(
    [
        "schema",
        "name",
        "root_causes",
        "rounds",
        "interludes",
        "start",
        "id",
        "kind",
        "service",
        "observations",
        "truth",
        "candidates",
        "after",
        "at",
        "caused_by",
        "max_attempts",
        "description",
        "signals",
        "events",
        "situation",
        "a",
        "b",
        "extra",
    ]
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=6),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=8))
def test_fuzz_structures_never_crash(doc):
    _problems_or_ok(_dump(doc))


_ROUND_KEYS = st.sampled_from(
    [
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
        "bogus",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_ROUND_KEYS, _VALUES), min_size=1, max_size=4), st.booleans())
def test_fuzz_mutated_valid_rounds_never_crash(edits, second_round):
    doc = yaml.safe_load(VALID)
    rounds = doc["rounds"]
    if second_round:
        rounds.append(dict(rounds[0], id="r2"))
    for key, value in edits:
        rounds[-1][key] = value
    _problems_or_ok(_dump(doc))
