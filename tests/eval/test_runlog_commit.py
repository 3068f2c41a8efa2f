"""A run log records the commit of the code that made it, and still writes when git is not there."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from eval import runlog


def _new(environment=None):
    return runlog.new_log(
        mode="heuristic", scenarios=[], seeds=[0], agents=["episodic"], config={}, environment=environment
    )


@pytest.mark.skipif(
    shutil.which("git") is None or not (runlog.CODE_ROOT / ".git").exists(),
    reason="needs git and a git checkout of the project",
)
def test_inside_a_git_checkout_the_environment_names_the_commit_and_the_tree():
    environment = runlog.environment()
    head = subprocess.run(
        ["git", "-C", str(runlog.CODE_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{40}", environment["commit"]) and environment["commit"] == head
    assert environment["tree"] in ("clean", "dirty")
    assert environment["python"] and environment["platform"]
    assert _new(environment)["environment"]["commit"] == head


def test_without_git_the_commit_is_none_and_the_log_is_still_made(monkeypatch):
    def absent(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(runlog.subprocess, "run", absent)
    environment = runlog.environment()
    assert environment["commit"] is None and environment["tree"] is None
    assert environment["python"]
    assert _new(environment)["environment"]["commit"] is None


def test_a_copy_outside_a_checkout_names_no_commit(tmp_path):
    assert runlog.code_version(tmp_path) == {"commit": None, "tree": None}


def test_a_git_that_hangs_or_fails_names_no_commit(monkeypatch):
    def hangs(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], 10)

    monkeypatch.setattr(runlog.subprocess, "run", hangs)
    assert runlog.code_version() == {"commit": None, "tree": None}
    monkeypatch.setattr(
        runlog.subprocess,
        "run",
        lambda *a, **k: subprocess.CompletedProcess(a[0], 128, "", "fatal: not a git repository"),
    )
    assert runlog.code_version() == {"commit": None, "tree": None}


def test_a_log_made_without_an_environment_keeps_python_and_platform():
    assert set(_new()["environment"]) == {"python", "platform"}
