"""The run log, schema 1: one self-describing JSON object per comparison run.

Always present: ``schema`` (1), ``status`` ("success" or "error"), ``mode``,
``scenarios`` (``{name, sha256}``), ``seeds``, and ``agents`` keyed by agent name, each
with ``rounds`` (per-round records) and ``summary`` (with ``first_attempt_accuracy`` and
``solve_rate``); agents with an episodic memory also have ``layers``. Reports are computed
from the log alone: nothing needs to re-run an agent or call an LLM.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

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
    """Write atomically (temp file + rename): a crash never leaves a torn log."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=".runlog-", suffix=".json", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(log, out, indent=2, sort_keys=False, ensure_ascii=False, default=str)
            out.write("\n")
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def read(path: str | Path) -> dict[str, Any]:
    """Read a run log and check the keys every consumer relies on."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    missing = [key for key in ("schema", "status", "mode", "scenarios", "seeds", "agents") if key not in data]
    if missing or data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a schema-1 run log (missing {', '.join(missing) or 'schema 1'})")
    return data
