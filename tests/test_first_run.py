"""A new user's first minutes: install, the README example anywhere, --store, LLM modes, graph export."""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from datetime import timedelta
from pathlib import Path

import networkx as nx

from eval.compare import main
from memory import EpisodicMemory
from memory.graph import export_dot, export_graphml
from tests.builders import T0
from tests.test_readme_example import readme_example

ROOT = Path(__file__).resolve().parents[1]
HEX_ID = re.compile(r"^[0-9a-f]{64}$")


def _shipped_packages(target: Path) -> None:
    """Copy what `pip install .` ships (pyproject's packages and package data) into `target`."""
    from setuptools import find_packages  # here, not at collection: setuptools takes half a second to import

    setup = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    data = setup.get("package-data", {})
    for package in find_packages(str(ROOT), include=setup["packages"]["find"]["include"]):
        source = ROOT / package.replace(".", "/")
        dest = target / package.replace(".", "/")
        dest.mkdir(parents=True, exist_ok=True)
        for pattern in ["*.py", *data.get(package, [])]:
            for path in source.glob(pattern):
                shutil.copy2(path, dest / path.name)


def test_requirements_install_the_project_and_the_readme_example_runs_from_any_folder(tmp_path):
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()]
    assert "-e ." in lines or "." in lines, "requirements.txt must install the project itself"
    site = tmp_path / "site"
    _shipped_packages(site)
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "example.py").write_text(readme_example(), encoding="utf-8")
    # -S: no site processing, so nothing but the shipped packages and the dependencies is importable
    # (not the checkout, not an editable install of it).
    paths = [str(site), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run(
        [sys.executable, "-S", "example.py"], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "6 episodes" in done.stdout and (work / "agent-memory.db").exists()


def test_store_creates_its_parent_folders(tmp_path, capsys):
    from memory.__main__ import main as memory_main

    store = tmp_path / "runs" / "nested" / "memory.sqlite"
    assert main(["--seeds", "1", "--agents", "episodic", "--store", str(store), "--quiet"], now=lambda: T0) == 0
    assert memory_main(["verify", str(store)]) == 0


def test_store_folder_that_cannot_be_made_is_a_usage_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["--store", str(blocker / "memory.sqlite"), "--quiet"]) == 2
    captured = capsys.readouterr()
    assert "--store" in captured.err and "Traceback" not in captured.err and captured.out == ""


def test_llm_modes_without_key_and_empty_cache_fail_before_playing(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    empty = tmp_path / "cache"
    assert main(["--mode", "claude", "--cache", str(empty)]) == 2
    captured = capsys.readouterr()
    assert "holds no cached responses" in captured.err and captured.out == ""
    assert main(["--mode", "openai", "--model", "m", "--cache", str(empty)]) == 2
    captured = capsys.readouterr()
    assert "OPENAI_API_KEY or --base-url" in captured.err and captured.out == ""
    assert main(["--mode", "openai", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "--model" in capsys.readouterr().err


def test_replay_stops_at_the_first_missing_response_without_empty_tables(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "unrelated.json").write_text("{}")  # a cache, but not of this run
    assert main(["--mode", "claude", "--cache", str(cache), "--seeds", "1", "--agents", "no_memory"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # no report of zero rounds
    assert "CacheMiss" in captured.err and "no cached response" in captured.err


def _incident_memory(path: Path) -> EpisodicMemory:
    memory = EpisodicMemory(path, principal="team-a")
    clock = T0
    for day, (guess, truth) in enumerate([("database", "pool"), ("pool", "pool")]):
        clock = T0 + timedelta(days=day)
        memory.observe(
            "checkout 5xx; connection pool exhausted",
            timestamp=clock,
            situation="incident",
            metadata={"service": "shop"},
        )
        for choice in dict.fromkeys([guess, truth]):
            clock += timedelta(minutes=5)
            memory.decide(
                f"Decision: {choice}",
                choice=choice,
                timestamp=clock,
                situation="incident",
                metadata={"service": "shop"},
            )
            status = "success" if choice == truth else "failure"
            memory.outcome(
                "errors gone" if choice == truth else "no change",
                status=status,
                timestamp=clock + timedelta(minutes=1),
                situation="incident",
            )
            if choice != truth:
                memory.correct(
                    f"It was the {truth}, not the {choice}",
                    timestamp=clock + timedelta(minutes=2),
                    situation="incident",
                )
    memory.flush()
    return memory


def test_graph_exports_as_documented_with_readable_labels(tmp_path):
    with _incident_memory(tmp_path / "m.db") as memory:
        assert memory.graph.number_of_edges() > 0
        export_graphml(memory.graph, tmp_path / "g.graphml", episodes=memory.episode)
        export_dot(memory.graph, tmp_path / "g.dot", episodes=memory.episode)
        summaries = {e.summary for e in memory.episodes()}
    back = nx.read_graphml(tmp_path / "g.graphml", force_multigraph=True)
    for _, data in back.nodes(data=True):
        assert not HEX_ID.match(data["label"])
        first, second = data["label"].split("\n")
        assert first in summaries or first.endswith("…")
        assert re.match(r"^(SUCCESS|FAILURE|PARTIAL|UNKNOWN) · \d{4}-\d\d-\d\d \d\d:\d\d$", second)
    for _, _, data in back.edges(data=True):
        assert re.match(rf"^{data['type']} \d\.\d\d$", data["label"])
    dot = (tmp_path / "g.dot").read_text(encoding="utf-8")
    labels = re.findall(r'label="([^"]*)"', dot)
    assert len(labels) == back.number_of_nodes() + back.number_of_edges()
    assert not any(HEX_ID.match(label) for label in labels)
