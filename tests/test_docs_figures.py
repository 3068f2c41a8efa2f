"""Figures in the docs are the figures of a run log: generated sections name their logs and commands,
and the generator renders a log it is given (a tiny one written here, so no runs/ folder is needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eval import docs_pages
from eval.docs_pages import BEGIN, END, LOGS, SECTIONS, Section, render_pages, sections_in

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_generated_section_is_declared_and_names_its_logs_and_commands():
    declared = {(s.page, s.name) for s in SECTIONS}
    found = set()
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        where = page.relative_to(ROOT).as_posix()
        names = sections_in(text)
        assert len(names) == len(set(names)), f"{where}: a section appears twice"
        for name in names:
            assert (where, name) in declared, f"{where}: section {name!r} has no renderer in eval.docs_pages"
            found.add((where, name))
            block = text[text.index(BEGIN.format(name=name)) :]
            block = block[: block.index(END)]
            section = next(s for s in SECTIONS if (s.page, s.name) == (where, name))
            for log in section.logs:
                assert f"`{LOGS[log].path}`" in block, f"{where} {name}: log {LOGS[log].path} not named"
                for command in LOGS[log].commands:
                    assert command in block, f"{where} {name}: command not printed: {command}"
            assert "|" in block or "episodic" in block, f"{where} {name}: empty section"
    assert found == declared, f"declared sections missing from the pages: {sorted(declared - found)}"


def test_each_log_is_made_by_the_command_printed_for_it():
    for log in LOGS.values():
        assert any(log.path in command for command in log.commands), log.path


def _round(scenario: str, rnd: str, seed: int, kind: str, right: bool) -> dict:
    return {
        "scenario": scenario,
        "round": rnd,
        "seed": seed,
        "kind": kind,
        "first_correct": right,
        "solved": True,
        "attempts": 1 if right else 2,
    }


def _log(rights: dict[str, list[bool]]) -> dict:
    """A schema-1 run log by hand: one scenario of len(rights[...]) rounds, 2 seeds, every round's seeds alike."""
    kinds = ["plain", "transfer", "red_herring", "caused"]
    agents = {}
    for agent, pattern in rights.items():
        rows = [
            _round("s", f"r{i + 1}", seed, kinds[i % len(kinds)], right)
            for seed in (0, 1)
            for i, right in enumerate(pattern)
        ]
        layers = {"outcome_accuracy": 1.0, "edges": {"CAUSED_BY": {"correct": 1, "predicted": 2, "true": 2}}}
        agents[agent] = {
            "rounds": rows,
            "summary": {"retrieval": {}},
            "runs": [{"scenario": "s", "seed": seed, "layers": layers} for seed in (0, 1)],
        }
    return {
        "schema": 1,
        "status": "success",
        "mode": "heuristic",
        "scenarios": [{"name": "s", "sha256": "0"}],
        "seeds": [0, 1],
        "agents": agents,
    }


def test_a_generated_section_is_what_the_renderer_makes_of_its_log(tmp_path, monkeypatch):
    log = _log({"episodic": [True, True, True, False], "no_memory": [True, False, False, True]})
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "tiny.json").write_text(json.dumps(log))
    monkeypatch.setitem(
        LOGS, "tiny", docs_pages.Log("runs/tiny.json", ("python -m eval.compare s --json runs/tiny.json",))
    )
    section = Section(
        "docs/page.md",
        "tiny",
        ("tiny",),
        lambda logs: docs_pages.scenarios_table(logs["tiny"], ["episodic", "no_memory"]),
    )
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text(f"# Page\n\n{BEGIN.format(name='tiny')}\nstale figures\n{END}\n\nafter\n")

    text = render_pages(tmp_path, [section])[page]
    assert text.startswith("# Page\n\n<!-- generated: tiny -->") and text.endswith(f"{END}\n\nafter\n")
    assert "stale figures" not in text
    assert "Run logs: `runs/tiny.json`, made by:" in text and "python -m eval.compare s --json runs/tiny.json" in text
    # 4 scenario rounds: episodic 3 of 4, no_memory 2 of 4; episodic better in r2, r3, worse in r4
    assert "| s | 4 | 75.0% | 50.0% (+2/−1) |" in text
    assert "| all | 4 | 75.0% | 50.0% (+2/−1) |" in text

    page.write_text(text)  # rendered again from the same log: unchanged
    assert render_pages(tmp_path, [section])[page] == text


def test_the_summaries_follow_the_log():
    log = _log(
        {
            "episodic": [True, True, False, False],
            "classifier": [True, False, False, False],
            "episodic-no-graph": [True, False, True, False],
        }
    )
    assert docs_pages.accuracy(docs_pages._rows(log, "episodic")) == 0.5
    assert docs_pages.differing_rounds(log, "episodic", "episodic-no-graph") == (["s r2"], ["s r3"])
    kinds = "\n".join(docs_pages.kinds_table(log, ["episodic", "classifier"]))
    assert "| recurrences (1) | 100.0% | 0.0% |" in kinds and "| all (4) | 50.0% | 25.0% |" in kinds
    layers = "\n".join(docs_pages.layers_table([("tiny", log, None)]))
    assert "0.50 / 0.50 (2/4/4)" in layers
    result = docs_pages.paired(log, "episodic", "classifier")
    assert (result["a_better"], result["b_better"], result["n_rounds"]) == (1, 0, 4)
    assert re.search(
        r"episodic better in 1, worse in 0; sign test p = 1, not significant",
        docs_pages.paired_line(result, "episodic", "classifier"),
    )


def test_a_missing_log_is_named_with_the_command_that_makes_it(tmp_path, monkeypatch, capsys):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(f"{BEGIN.format(name='tiny')}\n{END}\n")
    monkeypatch.setitem(
        LOGS, "tiny", docs_pages.Log("runs/tiny.json", ("python -m eval.compare s --json runs/tiny.json",))
    )
    monkeypatch.setattr(docs_pages, "ROOT", tmp_path)
    monkeypatch.setattr(docs_pages, "SECTIONS", (Section("docs/page.md", "tiny", ("tiny",), lambda logs: []),))
    monkeypatch.setattr(docs_pages, "render_pages", lambda: render_pages(tmp_path, docs_pages.SECTIONS))
    assert docs_pages.main([]) == 2
    err = capsys.readouterr().err
    assert "runs/tiny.json is missing" in err and "python -m eval.compare s --json runs/tiny.json" in err


@pytest.mark.parametrize("page", ["docs/results.md", "docs/bench.md", "docs/graph.md", "docs/index.md", "README.md"])
def test_the_pages_whose_figures_moved_to_logs_carry_generated_sections(page):
    assert sections_in((ROOT / page).read_text(encoding="utf-8"))


def test_the_commit_a_log_records_is_printed_beside_the_command_that_wrote_it(tmp_path, monkeypatch):
    log = _log({"episodic": [True, False], "no_memory": [False, False]})
    log["environment"] = {"python": "3.11", "commit": "0123456789abcdef0123456789abcdef01234567", "tree": "dirty"}
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "tiny.json").write_text(json.dumps(log))
    make = (
        "python -m simulator.generate --out runs/tiny.yaml",
        "python -m eval.compare runs/tiny.yaml --json runs/tiny.json",
    )
    monkeypatch.setitem(LOGS, "tiny", docs_pages.Log("runs/tiny.json", make))
    (tmp_path / "README.md").write_text(f"{BEGIN.format(name='tiny')}\n{END}\n")
    section = Section(
        "README.md",
        "tiny",
        ("tiny",),
        lambda logs: docs_pages.groups_table(
            [("tiny files", logs["tiny"])], ["episodic", "no_memory"], "no_memory", sources=["runs/tiny.json"]
        ),
        commands_below=True,
    )

    text = render_pages(tmp_path, [section])[tmp_path / "README.md"]
    assert f"{make[0]}\n" in text  # the generating command carries no commit: it did not write the log
    assert f"{make[1]}  # commit 0123456789ab, uncommitted changes\n" in text
    assert "| tiny files | 2 | 50.0% | 0.0% | +1/−0, p = 1 | `runs/tiny.json` |" in text
    assert text.index("| tiny files") < text.index("```bash")  # the commands follow the table

    log["environment"] = {"python": "3.11"}  # a log made before commits were recorded
    assert docs_pages.commit_of(log) is None
    assert docs_pages.commands_of(["tiny"], {"tiny": log}) == list(make)
    assert docs_pages.commit_of({"machine": {"commit": "feedface" * 5, "tree": "clean"}}) == "commit feedfacefeed"
