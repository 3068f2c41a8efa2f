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
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from memory.outputs import write_atomic

SCHEMA = 1


def utc_now() -> datetime:
    """The wall clock, in UTC: the default of every clock parameter in `eval`."""
    return datetime.now(timezone.utc)


def new_log(*, mode: str, scenarios: list[dict[str, str]], seeds: list[int], agents: list[str],
            config: dict[str, Any], now: Callable[[], datetime] = utc_now) -> dict[str, Any]:
    """An empty run log in status "error" until `finish` marks it successful; `now` stamps its start."""
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
        "environment": {"python": platform.python_version(), "platform": platform.platform()},
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
