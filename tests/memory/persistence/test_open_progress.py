"""A long first open's progress: the loader's records carry how far it is, and the command lines
that open stores show them on stderr (a bar on a terminal, lines otherwise)."""

import io
import logging

import pytest
from rich.console import Console

from memory import EpisodicMemory
from memory.cli.graph import main as graph_main
from memory.persistence import Persistence, loader
from memory.persistence.progress import LOADER_LOGGER, shown_on_stderr
from tests.memory.retrieval.test_retriever_bounds import play

NO_RUNS = Persistence(use_runs=False, open_run_min=10**9)  # every open indexes every episode from its records


def stored(tmp_path, episodes=30):
    path = tmp_path / "m.sqlite"
    with EpisodicMemory(path, principal="p0", persistence=NO_RUNS) as memory:
        play(memory, episodes)
    return path


def test_a_long_first_open_reports_how_many_episodes_it_indexed_of_how_many(tmp_path, monkeypatch, caplog):
    path = stored(tmp_path)
    monkeypatch.setattr(loader, "PROGRESS_FROM", 1)  # report from the first episode on (20,000 by default)
    with caplog.at_level(logging.INFO, logger=LOADER_LOGGER):
        EpisodicMemory(path, principal="p0", persistence=NO_RUNS).close()
    reports = [(r.indexed, r.total) for r in caplog.records if hasattr(r, "indexed")]
    assert reports and reports[-1] == (30, 30)


def test_the_progress_is_a_bar_on_a_terminal_and_lines_elsewhere(tmp_path, monkeypatch):
    path = stored(tmp_path)
    monkeypatch.setattr(loader, "PROGRESS_FROM", 1)
    shown = {}
    for terminal in (True, False):
        out = io.StringIO()
        with shown_on_stderr(Console(file=out, force_terminal=terminal, width=100)):
            EpisodicMemory(path, principal="p0", persistence=NO_RUNS).close()
        shown[terminal] = out.getvalue()
    assert "indexing episodes from their records" in shown[True] and "30/30" in shown[True]
    assert "indexed 30 of 30 episodes from their records" in shown[False] and "\x1b[" not in shown[False]
    assert logging.getLogger(LOADER_LOGGER).handlers == []  # the command line's handler is gone afterwards


@pytest.mark.extra("plots")
@pytest.mark.filterwarnings("ignore:Tight layout not applied")  # the picture is not what is tested
def test_drawing_a_store_s_graph_shows_the_first_open_s_progress_on_stderr(tmp_path, monkeypatch, capsys):
    path = stored(tmp_path)
    monkeypatch.setattr(loader, "PROGRESS_FROM", 1)
    assert graph_main([str(path), "--principal", "p0", "--out", str(tmp_path / "g.svg"), "--engine", "matplotlib"]) == 0
    captured = capsys.readouterr()
    assert "indexed 30 of 30 episodes from their records" in captured.err
    assert "wrote" in captured.out and "indexed" not in captured.out
