"""`python -m memory` where a new user first stumbles: erased stores, unknown principals, help, new folders."""

import re

import pytest

from memory import EpisodicMemory
from memory.__main__ import main
from memory.timeline import HashingEncoder, open_store
from tests.builders import T0

COMMANDS = ("verify", "export", "import", "stats", "erase")


@pytest.fixture
def erased_store(tmp_path):
    """A store of two principals where one observation of team-a was erased; its path."""
    path = tmp_path / "m.sqlite"
    with EpisodicMemory(path, principal="team-a", encoder=HashingEncoder(dim=64)) as memory:
        secret = memory.observe("payroll export of Ingrid", timestamp=T0, situation="support")
        memory.observe("spool queue full", timestamp=T0, situation="support")
        memory.observe("disk at 90%", timestamp=T0, situation="ops", principal="team-b")
        memory.forget(entry_id=secret.id, reason="request 12", requested_by="dpo")
    return path


def test_export_of_an_erased_store_says_the_file_cannot_be_imported(erased_store, tmp_path, capsys):
    out = tmp_path / "backup.jsonl"
    assert main(["export", str(erased_store), str(out)]) == 0
    captured = capsys.readouterr()
    assert "exported 3 entries" in captured.out
    assert re.search(r"warning: .*cannot be imported by this version.*1 erased entry", captured.err)
    assert "copying the store file" in captured.err and captured.err.count("\n") == 1
    assert main(["import", str(out), str(tmp_path / "copy.sqlite")]) == 2  # what the warning announced
    assert "cannot be imported" in capsys.readouterr().err


def test_export_of_a_store_without_erasures_warns_of_nothing(tmp_path, capsys):
    path = tmp_path / "m.sqlite"
    with EpisodicMemory(path, principal="team-a", encoder=HashingEncoder(dim=64)) as memory:
        memory.observe("spool queue full", timestamp=T0, situation="support")
    assert main(["export", str(path), str(tmp_path / "a.jsonl")]) == 0
    assert capsys.readouterr().err == ""


def test_erasing_a_principal_without_entries_names_the_principals_present(erased_store, capsys):
    assert main(["erase", str(erased_store), "--principal", "nobody", "--reason", "x", "--by", "y"]) == 2
    err = capsys.readouterr().err
    assert "nothing of principal 'nobody' to erase" in err and "team-a, team-b" in err
    assert "verify" not in err and "cannot be read" not in err
    assert err.count("\n") == 1


def test_erasing_an_already_erased_principal_is_a_user_error_not_damage(erased_store, capsys):
    assert main(["erase", str(erased_store), "--principal", "team-b"]) == 0
    capsys.readouterr()
    assert main(["erase", str(erased_store), "--principal", "team-b"]) == 2
    err = capsys.readouterr().err
    assert "already erased" in err and "verify" not in err
    with open_store(str(erased_store), create=False) as store:
        erased = next(entry for entry in store.entries(principal="team-a") if not entry.situation)
    assert main(["erase", str(erased_store), "--entry", erased.id]) == 2
    assert f"entry {erased.id[:16]}… is already erased" in capsys.readouterr().err


def test_an_overlong_reason_and_requester_are_refused_together(erased_store, capsys):
    assert main(["erase", str(erased_store), "--principal", "team-b", "--reason", "x" * 1001, "--by", "y" * 1001]) == 2
    assert (
        "--reason of 1,001 characters and --by of 1,001 characters exceeds the limit of 1000" in capsys.readouterr().err
    )


def test_the_list_of_principals_present_is_shortened(tmp_path, capsys):
    path = tmp_path / "m.sqlite"
    with EpisodicMemory(path, principal="t00", encoder=HashingEncoder(dim=64)) as memory:
        for i in range(12):
            memory.observe("spool queue full", timestamp=T0, situation="support", principal=f"t{i:02d}")
    assert main(["erase", str(path), "--principal", "nobody"]) == 2
    err = capsys.readouterr().err
    assert "t00, t01" in err and "t11" not in err and "and 4 more" in err


def _help_items(text):
    """{argument: its help text} of an argparse help screen's argument sections."""
    items: dict[str, str] = {}
    section = name = None
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            section, name = line, None
        elif section in ("positional arguments:", "options:") and re.match(r"^  \S", line):
            name, _, rest = line.strip().partition("  ")  # its help follows on the line or deeper-indented lines
            items[name] = rest.strip()
        elif name is not None and re.match(r"^   +\S", line):
            items[name] = f"{items[name]} {line.strip()}".strip()
        else:
            name = None
    return items


@pytest.mark.parametrize("command", COMMANDS)
def test_every_argument_of_every_command_has_help_and_the_command_an_example(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    items = _help_items(text)
    assert len(items) >= 2  # at least -h and one argument
    assert {name: help for name, help in items.items() if not help} == {}
    assert re.search(rf"^  python -m memory {command} \S", text, re.MULTILINE)


def test_export_creates_the_missing_folders_of_its_target(erased_store, tmp_path, capsys):
    out = tmp_path / "backups" / "2024" / "m.jsonl"
    assert main(["export", str(erased_store), str(out)]) == 0
    assert len(out.read_text().splitlines()) == 3
    assert ".tmp" not in capsys.readouterr().err


def test_stats_after_an_erasure_counts_erased_rows_apart(erased_store, capsys):
    with open_store(str(erased_store), create=False) as store:
        stats = store.stats()
    assert stats.situations == {"support": 1, "ops": 1} and stats.erased == 1
    assert stats.encoders == ["hashing-v2-d64-c0.5"]
    assert main(["stats", str(erased_store)]) == 0
    out = capsys.readouterr().out
    assert "situation  " not in out and "situation │" not in out
    assert re.search(r"encoders\s+│ hashing-v2-d64-c0\.5\s", out)
    assert re.search(r"erased entries\s+│ 1\s", out)
