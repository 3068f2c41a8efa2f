"""Rough edges of the command lines: unwritable outputs, quiet runs, located round problems, progress, figures."""

import io
import os
import re
import stat
import threading
from pathlib import Path

import pytest

import scenarios
from eval import runlog
from eval.compare import main as compare
from eval.report import main as report
from memory.outputs import write_atomic
from scenarios import ScenarioError
from tests.builders import T0

SMALL = ("pool-vs-deploy", "--agents", "no_memory", "--jobs", "1")


@pytest.fixture
def unwritable_folder(tmp_path):
    """A folder nobody may create files in (a read-only one, or sysfs when permissions do not bind root)."""
    if os.geteuid() == 0:
        return Path("/sys")
    folder = tmp_path / "locked"
    folder.mkdir(mode=0o555)
    return folder


@pytest.fixture(scope="module")
def small_log(tmp_path_factory):
    path = tmp_path_factory.mktemp("log") / "small.json"
    assert compare([*SMALL, "--seeds", "1", "--quiet", "--json", str(path)], now=lambda: T0) == 0
    return path


# -- 1. an output that cannot be written is refused before any run -------------------------------------


def test_an_unwritable_json_path_is_refused_in_one_line_before_playing(unwritable_folder, capsys):
    target = unwritable_folder / "x.json"
    assert compare([*SMALL, "--seeds", "1", "--json", str(target)]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # nothing was played, so nothing was reported
    assert err.splitlines() == [
        f"error: --json {target}: cannot create files in {unwritable_folder} (Permission denied)"
    ]
    assert not target.exists()


@pytest.mark.parametrize("flag", ["--csv", "--html"])
def test_unwritable_csv_and_html_are_refused_before_playing(unwritable_folder, capsys, flag):
    target = unwritable_folder / "out"
    assert compare([*SMALL, "--seeds", "1", flag, str(target)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        f"error: {flag} {target}: cannot create files in {unwritable_folder} (Permission denied)"
    ]


def test_a_fifo_as_the_json_target_is_refused_rather_than_read(tmp_path, capsys):
    fifo = tmp_path / "log.json"
    os.mkfifo(fifo)
    codes = []
    worker = threading.Thread(
        target=lambda: codes.append(compare([*SMALL, "--seeds", "1", "--json", str(fifo)])), daemon=True
    )
    worker.start()
    worker.join(10)
    if worker.is_alive():  # it blocked opening the FIFO: give it a writer so the thread can end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(10)
    assert codes == [2]
    assert capsys.readouterr().err.splitlines() == [
        f"error: --json {fifo}: not a regular file (a FIFO, socket or device); expected a file path"
    ]


def test_report_refuses_a_fifo_as_a_log_rather_than_read_it(tmp_path, capsys):
    fifo = tmp_path / "log.json"
    os.mkfifo(fifo)
    codes = []
    worker = threading.Thread(target=lambda: codes.append(report([str(fifo)])), daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(10)
    assert codes == [2]
    assert capsys.readouterr().err == f"error: {fifo}: not a regular file; expected a run log\n"


def test_report_refuses_an_unwritable_json_path(small_log, unwritable_folder, capsys):
    assert report([str(small_log), "--quiet", "--json", str(unwritable_folder / "merged.json")]) == 2
    assert capsys.readouterr().err.startswith("error: --json ")


# -- 2. what was written is said, and files follow the umask -------------------------------------------


def test_report_quiet_still_says_what_it_wrote(small_log, tmp_path, capsys):
    rows, merged = tmp_path / "rows.csv", tmp_path / "again.json"
    assert report([str(small_log), "--quiet", "--csv", str(rows), "--json", str(merged)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [f"wrote {merged} (run log)", f"wrote {rows} (CSV, one row per round)"]


def test_the_run_log_and_the_outputs_follow_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        log, table = tmp_path / "log.json", tmp_path / "table.csv"
        runlog.write({"schema": 1}, log)
        write_atomic(table, "a,b\n")
    finally:
        os.umask(old)
    assert [stat.S_IMODE(p.stat().st_mode) for p in (log, table)] == [0o640, 0o640]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.json", "table.csv"]  # no temp file left


# -- 3. a round's problem names its id and line ---------------------------------------------------------

ROUNDS = """\
schema: 1
name: tiny
root_causes:
  a: {description: first cause}
  b: {description: second cause}
rounds:
  - {id: r1, kind: learn, service: api, observations: [o], truth: a}
  - {kind: learn, service: api, observations: [o], truth: a}
  - id: r3
    kind: learn
    service: api
    observations: [o]
    truth: a
    caused_by: r9
"""


def test_round_problems_name_the_round_id_and_line():
    with pytest.raises(ScenarioError) as caught:
        scenarios.loads(ROUNDS, source="s.yaml")
    assert caught.value.problems == [
        "s.yaml: rounds[1] (line 8).id: required key is missing",
        "s.yaml: rounds[2] (id r3, line 9).caused_by: 'r9' is not an earlier round (rounds before this one: r1)",
    ]


# -- 4. progress: an ETA on a terminal, periodic lines elsewhere ---------------------------------------


def test_a_terminal_progress_bar_shows_the_time_left(monkeypatch, capsys):
    for name, value in (("TTY_COMPATIBLE", "1"), ("TTY_INTERACTIVE", "1"), ("TERM", "xterm")):
        monkeypatch.setenv(name, value)
    assert compare([*SMALL, "--seeds", "4"]) == 0
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", capsys.readouterr().err)  # colours and cursor moves
    assert re.search(r"4/4 \d:\d\d:\d\d (-:--:--|\d:\d\d:\d\d) left", shown)


def test_progress_lines_come_every_tenth_of_the_runs_or_30_s_whichever_is_later():
    from eval.compare import ProgressLines

    clock, out = [0.0], io.StringIO()
    lines = ProgressLines(100, out=out, clock=lambda: clock[0])
    for _ in range(5):  # 5 % of the runs in 40 s: not yet a tenth
        clock[0] += 8
        lines.advance()
    assert out.getvalue() == ""
    for _ in range(5):  # a tenth of the runs, 80 s in
        clock[0] += 8
        lines.advance()
    assert out.getvalue() == "progress: 10/100 runs (10%), 1 min 20 s elapsed, about 12 min left\n"
    for _ in range(10):  # another tenth, but only 20 s later: waits for 30 s
        clock[0] += 2
        lines.advance()
    assert out.getvalue().count("\n") == 1
    clock[0] += 10
    lines.advance()
    assert out.getvalue().splitlines()[-1] == "progress: 21/100 runs (21%), 1 min 50 s elapsed, about 6 min 54 s left"


# -- 5. no bands on the learning curve of a short scenario ----------------------------------------------


def _log(rounds):
    rows = [
        {"scenario": "s", "seed": 0, "round": f"r{i}", "kind": "k", "first_correct": i % 3 == 0, "attempts": 1}
        for i in range(rounds)
    ]
    return {
        "agents": {"a": {"rounds": rows}, "b": {"rounds": rows}},
        "scenarios": [{"name": "s"}],
        "seeds": [0],
        "mode": "heuristic",
    }


@pytest.mark.extra("plots")
@pytest.mark.parametrize("rounds, banded", [(19, False), (20, True)])
def test_the_learning_curve_draws_bands_only_from_20_rounds(rounds, banded):
    from eval.outputs import plots

    plt = plots.pyplot()
    figure = plots.learning_curve_figure(_log(rounds), "s")
    try:
        assert [bool(ax.collections) for ax in figure.axes[:2]] == [banded, banded]
        note = figure.texts[0].get_text()
        assert ("95% Wilson interval" in note) is banded
        assert (f"no bands: {rounds} rounds" in note) is not banded
    finally:
        plt.close(figure)
