"""`python -m memory` in-process: exit codes and messages."""

import sqlite3

import pytest

from memory import EpisodicMemory
from memory.__main__ import main
from tests.builders import T0, open_timeline


def _store(path, count=3):
    timeline = open_timeline(path)
    for i in range(count):
        timeline.append(f"entry {i}", kind="note", role="system", timestamp=T0, situation="s")
    timeline.store.close()


def test_verify_ok_and_corrupt(tmp_path, capsys):
    path = tmp_path / "m.db"
    _store(path)
    assert main(["verify", str(path)]) == 0
    assert "chain intact" in capsys.readouterr().out
    raw = sqlite3.connect(path)
    raw.execute("DROP TRIGGER timeline_no_update")
    raw.execute("UPDATE timeline SET text = 'entry X' WHERE seq = 1")
    raw.commit()
    assert main(["verify", str(path)]) == 1
    assert "CORRUPT" in capsys.readouterr().out


@pytest.mark.parametrize("version", [1, 4])
def test_verify_reports_a_schema_version_rewound_below_what_the_rows_were_written_with(tmp_path, capsys, version):
    path = tmp_path / "m.db"
    _store(path)
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {version}")
    raw.commit()
    raw.close()
    assert main(["verify", str(path)]) == 1
    assert (
        f"CORRUPT {path}: schema version {version} recorded (PRAGMA user_version), but the store holds previous "
        f"ids stored as links, which only schema 5 and later write" in capsys.readouterr().out
    )


def test_user_mistakes_exit_2_with_one_line(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "missing.db")]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "no such memory store" in err
    (tmp_path / "junk").write_text("hello")
    assert main(["stats", str(tmp_path / "junk")]) == 2
    assert "not a memory store" in capsys.readouterr().err
    assert main(["import", str(tmp_path / "nope.jsonl"), str(tmp_path / "new.db")]) == 2
    assert "cannot read file" in capsys.readouterr().err


def test_export_import_stats(tmp_path, capsys):
    _store(tmp_path / "a.db", count=5)
    assert main(["export", str(tmp_path / "a.db"), str(tmp_path / "a.jsonl")]) == 0
    assert main(["import", str(tmp_path / "a.jsonl"), str(tmp_path / "b.db")]) == 0
    assert main(["verify", str(tmp_path / "b.db")]) == 0
    assert main(["stats", str(tmp_path / "b.db")]) == 0
    out = capsys.readouterr().out
    assert "imported 5 entries" in out and "entries" in out


@pytest.mark.extra("plots")
def test_graph_draws_a_store_and_its_own_parser_runs_the_same_command(tmp_path, capsys):
    from memory.cli.graph import main as own_parser
    from tests.memory.retrieval.test_retriever_bounds import play

    store = tmp_path / "m.sqlite"
    with EpisodicMemory(store, principal="p0") as memory:
        play(memory, 6)
    outs = []
    for run, name in ((main, "new.svg"), (lambda argv: own_parser(argv[1:]), "own.svg")):
        picture = tmp_path / name
        assert run(["graph", str(store), "--principal", "p0", "--out", str(picture), "--engine", "matplotlib"]) == 0
        outs.append(capsys.readouterr().out.replace(name, "PICTURE"))
        assert picture.read_text(encoding="utf-8").startswith("<?xml")
    assert outs[0] == outs[1] == "wrote " + str(tmp_path / "PICTURE") + " (matplotlib)\n"
    assert main(["graph", str(tmp_path / "none.sqlite"), "--out", str(tmp_path / "g.png")]) == 2
    assert "no store at" in capsys.readouterr().err
    assert main(["graph", str(store), "--principal", "p0", "--out", str(tmp_path / "g.jpg")]) == 2
    assert "must end in .png or .svg" in capsys.readouterr().err
