"""The run log, schema 1: one self-describing JSON object per comparison run.

Always present: ``schema`` (1), ``status`` ("success" or "error"), ``mode``,
``scenarios`` (``{name, sha256}``), ``seeds``, and ``agents`` keyed by agent name, each
with ``rounds`` (per-round records) and ``summary`` (with ``first_attempt_accuracy`` and
``solve_rate``); agents with an episodic memory also have ``layers``. Reports are computed
from the log alone: nothing needs to re-run an agent or call an LLM.
"""

from __future__ import annotations

import json
import platform
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory.outputs import write_atomic

SCHEMA = 1
CODE_ROOT = Path(__file__).resolve().parents[1]  # the checkout this code runs from, when it is one


def utc_now() -> datetime:
    """The wall clock, in UTC: the default of every clock parameter in `eval`."""
    return datetime.now(UTC)


def _git(*args: str, root: Path) -> str | None:
    """The stripped output of ``git -C root ARGS``; None when git is absent, fails or hangs."""
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def code_version(root: Path = CODE_ROOT) -> dict[str, str | None]:
    """The git commit the code at `root` was checked out at (``git rev-parse HEAD``) and whether its
    tree was ``"clean"`` or ``"dirty"`` (``git status --porcelain`` non-empty: uncommitted or untracked
    files); both None when git is missing or `root` is not the top of a git checkout (an installed copy)."""
    top = _git("rev-parse", "--show-toplevel", root=root)
    commit = _git("rev-parse", "HEAD", root=root) if top and Path(top).resolve() == root.resolve() else None
    # --no-optional-locks: reading the status never takes the index lock a concurrent git command needs
    status = _git("--no-optional-locks", "status", "--porcelain", root=root) if commit else None
    return {"commit": commit, "tree": None if status is None else ("dirty" if status else "clean")}


def environment(root: Path = CODE_ROOT) -> dict[str, Any]:
    """The ``environment`` block of a run log: Python, platform and the code's commit (`code_version`)."""
    return {"python": platform.python_version(), "platform": platform.platform(), **code_version(root)}


def new_log(
    *,
    mode: str,
    scenarios: list[dict[str, str]],
    seeds: list[int],
    agents: list[str],
    config: dict[str, Any],
    now: Callable[[], datetime] = utc_now,
    environment: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An empty run log in status "error" until `finish` marks it successful; `now` stamps its start.
    `environment` is the block `environment()` builds (the caller gathers it: it runs git); without it,
    only Python and the platform are recorded."""
    return {
        "schema": SCHEMA,
        "status": "error",
        "mode": mode,
        "scenarios": scenarios,
        "seeds": seeds,
        "agents": {name: {"rounds": [], "summary": {}, "runs": []} for name in agents},
        "config": config,
        "started_at": now().isoformat(),
        "finished_at": None,
        "error": None,
        "environment": environment or {"python": platform.python_version(), "platform": platform.platform()},
    }


def write(log: dict[str, Any], path: str | Path) -> None:
    """Write atomically (temp file + rename): a crash never leaves a torn log. Like every output, the
    file's mode follows the umask."""
    text = json.dumps(log, indent=2, sort_keys=False, ensure_ascii=False, default=str)
    write_atomic(path, text + "\n")


def read(path: str | Path) -> dict[str, Any]:
    """Read a run log and check the keys every consumer relies on."""
    if Path(path).exists() and not Path(path).is_file():  # a FIFO would block, a device never end
        raise ValueError(f"{path}: not a regular file; expected a run log")
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    missing = [key for key in ("schema", "status", "mode", "scenarios", "seeds", "agents") if key not in data]
    if missing or data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a schema-1 run log (missing {', '.join(missing) or 'schema 1'})")
    return data
