"""What every importer shares: the dataset error and the deterministic, all-or-nothing writer."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from scenarios.loader import loads


class DatasetError(Exception):
    """A dataset folder could not be imported; carries every problem found.

    Each problem is one line ``FILE: message`` naming the file and what was expected.
    """

    def __init__(self, problems: list[str]):
        self.problems: list[str] = list(problems)  # one line each
        super().__init__("\n".join(self.problems))


class _Dumper(yaml.SafeDumper):
    """Safe dumper that writes multi-line strings as blocks and never emits aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def render_scenario(scenario: Mapping[str, Any], *, header: str = "") -> str:
    """The scenario mapping as YAML text (keys in the mapping's order), checked by the strict loader.

    Args:
        scenario: a schema-1 scenario as plain data.
        header: comment lines put above the document (each prefixed with ``# ``).

    Raises:
        scenarios.ScenarioError: the mapping is not a valid scenario (an importer bug).
    """
    body = yaml.dump(dict(scenario), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    comment = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    text = comment + body
    loads(text, source=f"<import of {scenario.get('name', 'scenario')}>")
    return text


def write_scenario(text: str, out: Path) -> None:
    """Writes `text` to `out` atomically: a temporary file in the same folder, then a rename."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
