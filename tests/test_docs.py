"""The documentation covers every command line: each command, subcommand and option appears in the docs."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {  # the command a user types → the module whose main() builds its parser
    "python -m eval.compare": "eval.compare",
    "python -m eval.report": "eval.report",
    "python -m eval.tracks": "eval.tracks",
    "python -m eval.layers": "eval.layers",
    "python -m eval.graph": "eval.graph",
    "python -m eval.redaction": "eval.redaction",
    "python -m eval.bench": "eval.bench.cli",
    "python -m eval.bench.shared": "eval.bench.shared",
    "python -m eval.bench.retention": "eval.bench.retention",
    "python -m eval.docs_pages": "eval.docs_pages",
    "python -m memory": "memory.__main__",  # its subcommands too
    "python -m memory.mcp": "memory.mcp.__main__",
    "python -m scenarios.validate": "scenarios.validate",
    "python -m scenarios.importers": "scenarios.importers.__main__",
    "python -m scenarios.importers.petshop": "scenarios.importers.petshop",
    "python -m simulator.generate": "simulator.generate",
}


class _Built(Exception):
    def __init__(self, parser: argparse.ArgumentParser):
        self.parser = parser


def built_parser(module: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser a command's main() builds, caught when it starts parsing (nothing runs)."""

    def catch(self, *args, **kwargs):
        raise _Built(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", catch)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", catch)
    with pytest.raises(_Built) as caught:
        importlib.import_module(module).main([])
    return caught.value.parser


def options(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, str]]:
    """(where, option or subcommand) for every long option and subcommand, subcommands' own options too."""
    found = []
    for action in parser._actions:  # argparse keeps no public list of a parser's arguments
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((prefix, name))
                found.extend(options(sub, f"{prefix} {name}".strip()))
        for option in action.option_strings:
            if option.startswith("--") and option != "--help":
                found.append((prefix, option))
    return found


def documented() -> str:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


# `python -m memory.mcp` imports the MCP SDK before it parses its options.
@pytest.mark.parametrize(
    "command",
    [pytest.param(c, marks=pytest.mark.extra("mcp")) if c == "python -m memory.mcp" else c for c in sorted(COMMANDS)],
)
def test_every_command_and_option_is_documented(command, monkeypatch):
    text = documented()
    assert command in text, f"{command} is not in the docs"
    parser = built_parser(COMMANDS[command], monkeypatch)
    missing = [
        f"{command} {where} {option}".replace("  ", " ")
        for where, option in options(parser)
        if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text)
    ]
    assert missing == []


def test_the_tutorial_scenario_teaches_what_the_page_says(tmp_path):
    import json

    from eval.compare import main

    page = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")
    start = page.index("```yaml") + len("```yaml")
    path = tmp_path / "shop.yaml"
    path.write_text(page[start : page.index("```", start)], encoding="utf-8")
    log = tmp_path / "shop.json"
    assert (
        main(
            [
                str(path),
                "--seeds",
                "3",
                "--agents",
                "episodic",
                "no_memory",
                "--json",
                str(log),
                "--quiet",
                "--jobs",
                "1",
            ]
        )
        == 0
    )
    rounds = json.loads(log.read_text())["agents"]
    first = {
        agent: {(r["round"], r["seed"]): r["first_decision"] for r in data["rounds"]} for agent, data in rounds.items()
    }
    for seed in range(3):
        assert first["episodic"][("r1", seed)] == first["no_memory"][("r1", seed)] == "slow_queries"
        assert first["episodic"][("r2", seed)] == "connection_pool_exhaustion"
        assert first["no_memory"][("r2", seed)] == "slow_queries"
        assert first["episodic"][("r3", seed)] == first["no_memory"][("r3", seed)] == "bad_release"


def test_the_docs_install_extras_without_replacing_the_editable_install():
    # `pip install '.[x]'` from a checkout replaces the editable install with a copy; `-e` keeps it
    text = documented()
    assert re.findall(r"pip install (?!-e)['\"]?\.\[", text) == []
    assert "pip install -e '.[postgres]'" in text and 'psql "$MEMORY_URL" -c "CREATE ROLE agent LOGIN"' in text
