"""No command line writes its output over a store, a store's sidecar or its own input (`memory.outputs`)."""

import asyncio
import sqlite3

import pytest

from eval.compare import main as compare
from eval.report import main as report
from eval.tracks import main as tracks
from memory import EpisodicMemory
from memory.__main__ import main as memory_cli
from tests.builders import T0, open_timeline

SMALL = ("pool-vs-deploy", "--agents", "no_memory", "--seeds", "1", "--jobs", "1", "--quiet")


def _store(path, count=3):
    timeline = open_timeline(path)
    for i in range(count):
        timeline.append(f"entry {i}", kind="note", role="system", timestamp=T0, situation="s")
    timeline.store.close()
    return path


def _files(store):
    """The bytes of the store and of every sidecar beside it."""
    return {p.name: p.read_bytes() for p in sorted(store.parent.glob(f"{store.name}*"))}


@pytest.fixture(scope="module")
def small_log(tmp_path_factory):
    path = tmp_path_factory.mktemp("log") / "small.json"
    assert compare([*SMALL, "--json", str(path)], now=lambda: T0) == 0
    return path


# -- memory export ---------------------------------------------------------------------------------


def test_export_refuses_to_overwrite_another_store(tmp_path, capsys):
    source, other = _store(tmp_path / "a.db"), _store(tmp_path / "b.db", count=1)
    before = _files(other)
    assert memory_cli(["export", str(source), str(other)]) == 2
    assert capsys.readouterr().err == (
        f"error: {other} is an SQLite database (a memory store?): refusing to overwrite it\n"
    )
    assert _files(other) == before


@pytest.mark.parametrize("through_a_link", [False, True])
def test_export_refuses_to_overwrite_its_own_store(tmp_path, capsys, through_a_link):
    store = _store(tmp_path / "s.db")
    out = tmp_path / "backup.jsonl" if through_a_link else store
    if through_a_link:
        out.symlink_to(store)
    before = _files(store)
    assert memory_cli(["export", str(store), str(out)]) == 2
    assert capsys.readouterr().err == f"error: {out} is the store being exported: refusing to overwrite it\n"
    assert _files(store) == before


@pytest.mark.parametrize("suffix", ["-wal", "-anchor"])
def test_export_refuses_a_sidecar_name_of_a_store(tmp_path, capsys, suffix):
    store = _store(tmp_path / "s.db")
    before = _files(store)
    assert memory_cli(["export", str(store), f"{store}{suffix}"]) == 2
    assert capsys.readouterr().err == (
        f"error: {store}{suffix} is the {suffix} file of the SQLite database {store}: refusing to overwrite it\n"
    )
    assert _files(store) == before


# -- the harness's outputs -------------------------------------------------------------------------


def test_compare_csv_onto_a_store_is_refused_before_playing(tmp_path, capsys):
    store = _store(tmp_path / "memory.sqlite")
    before = _files(store)
    assert compare([*SMALL, "--csv", str(store)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (
        f"error: --csv {store} is an SQLite database (a memory store?): refusing to overwrite it\n"
    )
    assert _files(store) == before


def test_compare_json_onto_a_foreign_databases_wal_name_is_refused(tmp_path, capsys):
    foreign = tmp_path / "app.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    db.close()
    before = _files(foreign)
    assert compare([*SMALL, "--json", f"{foreign}-wal"]) == 2
    assert capsys.readouterr().err == (
        f"error: --json {foreign}-wal is the -wal file of the SQLite database {foreign}: refusing to overwrite it\n"
    )
    assert _files(foreign) == before


def test_report_json_onto_a_foreign_sqlite_file_and_html_onto_a_store_are_refused(small_log, tmp_path, capsys):
    foreign = tmp_path / "app.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    db.close()
    store = _store(tmp_path / "memory.sqlite")
    before = {**_files(foreign), **_files(store)}
    assert report([str(small_log), "--quiet", "--json", str(foreign)]) == 2
    assert capsys.readouterr().err == (
        f"error: --json {foreign} is an SQLite database (a memory store?): refusing to overwrite it\n"
    )
    assert report([str(small_log), "--quiet", "--html", str(store)]) == 2
    assert capsys.readouterr().err == (
        f"error: --html {store} is an SQLite database (a memory store?): refusing to overwrite it\n"
    )
    assert {**_files(foreign), **_files(store)} == before


def test_report_refuses_to_write_over_a_log_it_reads(small_log, capsys):
    before = small_log.read_bytes()
    assert report([str(small_log), "--quiet", "--json", str(small_log)]) == 2
    assert capsys.readouterr().err == (
        f"error: --json {small_log} is a run log this command reads: refusing to overwrite it\n"
    )
    assert small_log.read_bytes() == before


def test_tracks_json_onto_a_store_and_markdown_onto_its_log_are_refused(small_log, tmp_path, capsys):
    store = _store(tmp_path / "memory.sqlite")
    before, log = _files(store), small_log.read_bytes()
    assert tracks([str(small_log), "--json", str(store)]) == 2
    assert capsys.readouterr().err == (
        f"error: --json {store} is an SQLite database (a memory store?): refusing to overwrite it\n"
    )
    assert tracks([str(small_log), "--markdown", str(small_log)]) == 2
    assert capsys.readouterr().err == (
        f"error: --markdown {small_log} is a run log this command reads: refusing to overwrite it\n"
    )
    assert _files(store) == before and small_log.read_bytes() == log


def test_a_previous_output_of_the_same_kind_is_replaced_whole(small_log, tmp_path, capsys):
    """Only stores, sidecars and inputs are refused: an earlier JSON or Markdown output is replaced by a
    new file moved into place (never rewritten in place, where a reader could see half of it)."""
    earlier = {tmp_path / "tracks.json": '{"earlier": 1}', tmp_path / "tracks.md": "# earlier\n"}
    inodes = {}
    for path, text in earlier.items():
        path.write_text(text)
        inodes[path] = path.stat().st_ino
    assert (
        tracks([str(small_log), "--json", str(tmp_path / "tracks.json"), "--markdown", str(tmp_path / "tracks.md")])
        == 0
    )
    for path, text in earlier.items():
        assert path.read_text() != text and path.stat().st_ino != inodes[path]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tracks.json", "tracks.md"]  # no temporary file left


# -- the MCP server --------------------------------------------------------------------------------


async def _verify_store(memory):
    from mcp import Client

    from memory.mcp import build_server

    async with Client(build_server(memory)) as client:
        return (await client.call_tool("verify_store", {})).structured_content


@pytest.mark.extra("mcp")
def test_verify_store_shows_a_tenant_its_own_entries_only(tmp_path):
    path = tmp_path / "memory.sqlite"
    with EpisodicMemory(path, principal="p") as memory:
        for i in range(3):
            memory.observe(f"another tenant's note {i}", principal="q", timestamp=T0, situation="s")
        memory.observe("disk full on db-1", timestamp=T0, situation="s")
        assert asyncio.run(_verify_store(memory)) == {"ok": True, "entries": 1, "first_bad": None}
        other = next(memory.store.entries(principal="q"))
    with sqlite3.connect(path) as db:  # another tenant's entry altered: the store fails, without naming it
        db.execute("DROP TRIGGER timeline_no_update")
        db.execute("UPDATE timeline SET text = 'altered' WHERE id = ?", (other.id,))
        db.execute("CREATE TRIGGER timeline_no_update BEFORE UPDATE ON timeline BEGIN SELECT RAISE(ABORT, 'no'); END")
    db.close()
    with EpisodicMemory(path, principal="p") as memory:
        result = asyncio.run(_verify_store(memory))
    assert result["ok"] is False and result["entries"] == 1
    assert result["first_bad"]["id"] is None and "another principal" in result["first_bad"]["reason"]
