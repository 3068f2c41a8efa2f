"""A tamper battery: a store changed with plain SQL or bytes, the way an attacker or a broken tool
would, is named by `python -m memory verify` (exit 1, no traceback), before and after one honest
write, and that write either goes ahead or is refused with a `StoreError` leaving the store as it was.

Every case starts from a copy of one store (two tenants' incidents, one erasure done, so the
narrowed erasure triggers are installed). A case that drops a trigger restores it as it was,
so the damage is to the rows, not to the schema (a missing trigger is a finding of its own).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import NamedTuple

import pytest

from memory import EpisodicMemory
from memory.__main__ import main
from memory.errors import StoreError
from memory.timeline import anchor as anchor_file
from memory.timeline import record_body
from memory.timeline.erasure import listing_digest
from tests.builders import INCIDENTS, T0, play_incidents

SECRET = "the payroll export for Ingrid Vasquez"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """Incidents of team-a and team-b, one of team-a's entries erased, more incidents after it."""
    path = tmp_path_factory.mktemp("base") / "m.sqlite"
    with EpisodicMemory(path, principal="team-a") as memory:
        play_incidents(memory, INCIDENTS[:3])
        secret = memory.observe(SECRET, timestamp=T0 + timedelta(days=4), situation="support")
        play_incidents(memory, INCIDENTS[:2], principal="team-b", start=T0 + timedelta(days=5))
        memory.flush()
        memory.forget(entry_id=secret.id, reason="request #7", requested_by="dpo")
        play_incidents(memory, INCIDENTS[3:4], start=T0 + timedelta(days=8))
        memory.flush()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("VACUUM")  # one copy of every row, in the main file: a flipped byte is a live row's
    db.close()
    return path


@pytest.fixture
def store(base, tmp_path) -> Path:
    """A fresh copy of the base store and its anchor."""
    target = tmp_path / base.name
    for suffix in ("", "-anchor"):
        shutil.copyfile(f"{base}{suffix}", f"{target}{suffix}")
    return target


# -- how the cases change the store ------------------------------------------------------------


@contextmanager
def sql(path: Path, *triggers: str) -> Iterator[sqlite3.Connection]:
    """A plain connection with `triggers` dropped, restored as they were (narrowed or not) afterwards."""
    db = sqlite3.connect(path, isolation_level=None)
    saved = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall())
    for name in triggers:
        db.execute(f"DROP TRIGGER {name}")
    try:
        yield db
    finally:
        for name in triggers:
            db.execute(saved[name])
        db.close()


def flip(path: Path, needle: bytes, at: int = 0) -> None:
    """Flip the lowest bit of one byte of the only copy of `needle` in the file, as a failing disk would."""
    data = bytearray(path.read_bytes())
    where = data.find(needle)
    assert where >= 0 and data.find(needle, where + 1) < 0, "the bytes to flip are not stored exactly once"
    data[where + at] ^= 0x01
    path.write_bytes(bytes(data))


def value(path: Path, query: str) -> object:
    with closing(sqlite3.connect(path)) as db:
        return db.execute(query).fetchone()[0]


def record(db: sqlite3.Connection, seq: int) -> tuple[str, str, dict]:
    """(kind, id, body) of one records row."""
    kind, record_id, body = db.execute("SELECT kind, id, body FROM records WHERE seq = ?", (seq,)).fetchone()
    return kind, record_id, json.loads(record_body.unpack(body))


def seq_of(db: sqlite3.Connection, kind: str, nth: int = -1) -> int:
    return [row[0] for row in db.execute("SELECT seq FROM records WHERE kind = ? ORDER BY seq", (kind,))][nth]


def rewrite_body(db: sqlite3.Connection, seq: int, change: Callable[[dict], None]) -> None:
    """Decompress a record's body, change it and store it compressed again (records_no_update dropped)."""
    _, _, body = record(db, seq)
    change(body)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    db.execute("UPDATE records SET body = ? WHERE seq = ?", (record_body.pack(text), seq))


def forged_fact(db: sqlite3.Connection) -> tuple[str, str, bytes]:
    """A fact of team-a's, restated for team-b with confidence 0.99: (kind, id, packed body)."""
    kind, _, body = record(db, seq_of(db, "fact_version"))
    body.update(principal="team-b", confidence=0.99)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return kind, "fact-forged@1", record_body.pack(text)


def next_digest(db: sqlite3.Connection, row: tuple[str, str, bytes]) -> bytes:
    """The digest the store's writer would give `row` after the last one (an attacker who read the code)."""
    last = db.execute("SELECT digest FROM digests WHERE tbl = 'records' ORDER BY seq DESC LIMIT 1").fetchone()[0]
    return bytes.fromhex(anchor_file.row_digest(last.hex(), row))


def flip_text(path: Path) -> None:
    flip(path, b"garbled output after the driver update")


def flip_body(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db:
        body = db.execute("SELECT body FROM records WHERE seq = ?", (seq_of(db, "episode", 2),)).fetchone()[0]
    flip(path, body, len(body) // 2)


def flip_digest(path: Path) -> None:
    flip(path, value(path, "SELECT digest FROM digests WHERE tbl = 'records' AND seq = 45"), 7)


def flip_anchor(path: Path) -> None:
    """One bit of the head id in the anchor's newest slot (the highest counter)."""
    file = Path(anchor_file.sidecar(str(path)))
    data = bytearray(file.read_bytes())
    slots = [anchor_file.decode(bytes(data[i * anchor_file.SLOT : (i + 1) * anchor_file.SLOT])) for i in range(3)]
    newest = max((i for i, s in enumerate(slots) if s is not None), key=lambda i: slots[i].counter)
    slot, head = anchor_file.SLOT * newest, slots[newest].anchor.head
    data[slot + data[slot:].find(head.encode()) + 5] ^= 0x01
    file.write_bytes(bytes(data))


def edit_entry(column: str, change: Callable[[str], str], seq: int = 5) -> Callable[[Path], None]:
    def tamper(path: Path) -> None:
        with sql(path, "timeline_no_update") as db:
            old = db.execute(f"SELECT {column} FROM timeline WHERE seq = ?", (seq,)).fetchone()[0]
            db.execute(f"UPDATE timeline SET {column} = ? WHERE seq = ?", (change(old), seq))

    return tamper


def edit_outcome(path: Path) -> None:
    with sql(path, "records_no_update") as db:
        seq = next(
            s
            for s in (row[0] for row in db.execute("SELECT seq FROM records WHERE kind = 'episode'"))
            if record(db, s)[2]["outcome"] == "SUCCESS"
        )
        rewrite_body(db, seq, lambda body: body.update(outcome="FAILURE"))


def edit_confidence(path: Path) -> None:
    with sql(path, "records_no_update") as db:
        rewrite_body(db, seq_of(db, "fact_version", 0), lambda body: body.update(confidence=0.99))


def edit_digest(path: Path) -> None:
    with sql(path, "digests_no_update") as db:
        db.execute(
            "UPDATE digests SET digest = ? WHERE tbl = 'records' AND seq = 50",
            (hashlib.sha256(b"another row").digest(),),
        )


def forge_entry(path: Path) -> None:
    """An entry after the head whose id is not the hash of its content."""
    with sql(path) as db:
        row = list(db.execute("SELECT * FROM timeline ORDER BY seq DESC LIMIT 1").fetchone())
        row[0], row[1], row[2] = row[0] + 1, hashlib.sha256(b"forged").hexdigest(), ""
        row[8] = "the restart fixed it (forged)"
        db.execute(f"INSERT INTO timeline VALUES ({','.join('?' * len(row))})", row)


def forge_fact(path: Path) -> None:
    with sql(path) as db:
        db.execute("INSERT INTO records (kind, id, body) VALUES (?,?,?)", forged_fact(db))


def forge_fact_with_digest(path: Path) -> None:
    with sql(path) as db:
        row = forged_fact(db)
        seq = db.execute("INSERT INTO records (kind, id, body) VALUES (?,?,?)", row).lastrowid
        db.execute("INSERT INTO digests (tbl, seq, digest) VALUES ('records', ?, ?)", (seq, next_digest(db, row)))


def forge_edge(path: Path) -> None:
    with sql(path) as db:
        _, _, body = db.execute("SELECT kind, id, body FROM records WHERE kind = 'edge' LIMIT 1").fetchone()
        db.execute("INSERT INTO records (kind, id, body) VALUES ('edge', ?, ?)", ("edge-forged", body))


def delete(query: str, trigger: str) -> Callable[[Path], None]:
    def tamper(path: Path) -> None:
        with sql(path, trigger) as db:
            db.execute(query)

    return tamper


def delete_anchor(path: Path) -> None:
    Path(anchor_file.sidecar(str(path))).unlink()


CONTENT = "situation, text, metadata, encoder, embedding"


def swap_entries(path: Path) -> None:
    with sql(path, "timeline_no_update") as db:
        first, second = (db.execute(f"SELECT {CONTENT} FROM timeline WHERE seq = ?", (s,)).fetchone() for s in (0, 1))
        assignment = ", ".join(f"{column} = ?" for column in CONTENT.split(", "))
        for seq, content in ((0, second), (1, first)):
            db.execute(f"UPDATE timeline SET {assignment} WHERE seq = ?", (*content, seq))


def swap_bodies(path: Path) -> None:
    with sql(path, "records_no_update") as db:
        first, second = (seq_of(db, "episode", n) for n in (1, 2))
        bodies = [db.execute("SELECT body FROM records WHERE seq = ?", (s,)).fetchone()[0] for s in (first, second)]
        db.execute("UPDATE records SET body = ? WHERE seq = ?", (bodies[1], first))
        db.execute("UPDATE records SET body = ? WHERE seq = ?", (bodies[0], second))


DELETE_BEFORE = "DELETE FROM records WHERE seq < ? AND kind != 'erasure'"


def erase_other_tenant(with_digest: bool) -> Callable[[Path], None]:
    """An erasure of team-b's entries made with SQL alone: the narrowed triggers allow every statement."""

    def tamper(path: Path) -> None:
        with sql(path) as db:
            targets = db.execute("SELECT seq, id FROM timeline WHERE principal = 'team-b' ORDER BY seq").fetchall()
            body = {
                "at": "2026-03-20T09:00:00.000000+00:00",
                "by": "dpo",
                "reason": "tenant left",
                "principal": "team-b",
                "entries": len(targets),
                "entries_sha256": listing_digest(targets),
                "format": 1,
                "snapshots_upto": 0,
            }
            record_id = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
            row = ("erasure", record_id, json.dumps(body, sort_keys=True, separators=(",", ":")))
            newest = db.execute("INSERT INTO records (kind, id, body) VALUES (?,?,?)", row).lastrowid
            if with_digest:
                db.execute(
                    "INSERT INTO digests (tbl, seq, digest) VALUES ('records', ?, ?)", (newest, next_digest(db, row))
                )
            db.executemany(
                "INSERT INTO erased (seq, id, erasure) VALUES (?,?,?)",
                [(seq, entry_id, record_id) for seq, entry_id in targets],
            )
            blank = (
                "UPDATE timeline SET situation = '', text = '', metadata = '{}', encoder = '', embedding = X'' "
                "WHERE seq = ?"
            )
            if not with_digest:  # the triggers blank and delete only under a sealed erasure record
                for statement, params in ((blank, (targets[0][0],)), (DELETE_BEFORE, (newest,))):
                    with pytest.raises(sqlite3.IntegrityError, match="refused"):
                        db.execute(statement, params)
                return
            db.executemany(blank, [(seq,) for seq, _ in targets])
            db.execute(DELETE_BEFORE, (newest,))

    return tamper


def forge_entry_like_the_writer(path: Path) -> None:
    """An entry chained exactly as the writer chains it (right id, right link), inserted with plain SQL: the
    row is written by the library into a copy of the store, then copied over."""
    scratch = path.with_name("scratch.sqlite")
    for suffix in ("", "-anchor"):
        shutil.copyfile(f"{path}{suffix}", f"{scratch}{suffix}")
    with EpisodicMemory(scratch, principal="team-a") as memory:
        memory.observe("the restart fixed it (forged)", timestamp=T0 + timedelta(days=20), situation="support")
    with closing(sqlite3.connect(scratch)) as copy:
        row = copy.execute("SELECT * FROM timeline ORDER BY seq DESC LIMIT 1").fetchone()
    with sql(path) as db:
        db.execute(f"INSERT INTO timeline VALUES ({','.join('?' * len(row))})", row)


def forge_state_run(path: Path) -> None:
    with sql(path) as db:
        db.execute("INSERT INTO snapshots (kind, id, meta, body) VALUES ('lexicon/1', 'forged', '{}', X'00')")


def edit_state_run(path: Path) -> None:
    with sql(path, "snapshots_no_update") as db:
        db.execute("UPDATE snapshots SET body = zeroblob(length(body)) WHERE seq = (SELECT MAX(seq) FROM snapshots)")


def edit_erased_principal(path: Path) -> None:
    """The erased row keeps its principal and timestamp, which nothing but its unrecomputable id covers."""
    with sql(path, "timeline_no_update") as db:
        db.execute("UPDATE timeline SET principal = 'team-b' WHERE seq = (SELECT seq FROM erased LIMIT 1)")


def rewind_version(path: Path) -> None:
    with sql(path) as db:
        db.execute("PRAGMA user_version = 3")


class Case(NamedTuple):
    """One way of tampering and what `verify` says about it."""

    tamper: Callable[[Path], None]  # changes the copy of the base store
    finding: str  # a regex verify's output must match (a CORRUPT line, or a note's text for `note`)
    note: bool = False  # the docs promise a note, not a finding (exit 0)
    refused: str = ""  # a regex the StoreError refusing the honest write matches ("": the write may go ahead)
    gap: str = ""  # why verify cannot see it (the case is an expected failure), "" when it does


CASES = {
    # bit flips
    "flip timeline text": Case(flip_text, r"timeline seq=11 .*content does not match its id"),
    "flip records body": Case(
        flip_body,
        r"records seq=\d+ kind=episode .*(malformed|does not match its digest)",
        refused=r"records row seq=\d+ kind=episode .*it does not decompress",
    ),
    "flip digest": Case(flip_digest, r"records seq=45 .*content does not match its digest"),
    "flip anchor": Case(
        flip_anchor,
        r"anchor file: slot \d is damaged \(one bit differs from a valid slot",
        refused=r"anchor file: slot \d is damaged",
    ),
    # edited rows
    "edit entry text": Case(
        edit_entry("text", lambda text: text.replace("spool", "network")),
        r"timeline seq=5 .*content does not match its id",
    ),
    "edit entry timestamp": Case(
        edit_entry("timestamp", lambda ts: ts.replace("T09", "T08")), r"timeline seq=5 .*content does not match its id"
    ),
    "edit entry principal": Case(
        edit_entry("principal", lambda _: "team-b"), r"timeline seq=5 .*content does not match its id"
    ),
    "edit episode outcome": Case(edit_outcome, r"records seq=\d+ kind=episode .*content does not match its digest"),
    "edit fact confidence": Case(
        edit_confidence, r"records seq=\d+ kind=fact_version .*content does not match its digest"
    ),
    "forge a state run": Case(
        forge_state_run,
        r"snapshots seq=\d+ kind=lexicon/1 id=forged: not covered by the digest chain",
        refused=r"snapshots seq=\d+ kind=lexicon/1 id=forged was written past the store's writer",
    ),
    "edit a state run": Case(edit_state_run, r"snapshots seq=\d+ .*content does not match its digest"),
    "edit digest": Case(edit_digest, r"records seq=50 .*content does not match its digest"),
    # forged rows
    "forge entry with a wrong id": Case(forge_entry, r"timeline seq=34 .*content does not match its id"),
    "forge entry chained like the writer": Case(
        forge_entry_like_the_writer,
        r"timeline seq=34\.\.34: entries past the anchored head",
        refused=r"timeline seq=34\.\.34: entries past the anchored head",
    ),
    "forge fact of another tenant": Case(
        forge_fact,
        r"kind=fact_version id=fact-forged@1: not covered by the digest",
        refused=r"id=fact-forged@1 was written past the store's writer",
    ),
    "forge fact and its digest": Case(
        forge_fact_with_digest,
        r"records seq=\d+\.\.\d+ kind=fact_version id=fact-forged@1: digested rows past the anchored digest",
        refused=r"id=fact-forged@1: digested rows past the anchored digest",
    ),
    "forge edge": Case(
        forge_edge,
        r"kind=edge id=edge-forged: not covered by the digest chain",
        refused=r"id=edge-forged was written past the store's writer",
    ),
    # deleted rows
    "delete last 3 entries": Case(
        delete("DELETE FROM timeline WHERE seq >= 31", "timeline_no_delete"),
        r"timeline: 31 entries, the anchor records 34: the tail was lost",
        refused=r"timeline: 31 entries, the anchor records 34: the tail was lost",
    ),
    "delete a middle entry": Case(
        delete("DELETE FROM timeline WHERE seq = 10", "timeline_no_delete"),
        r"timeline seq=11 .*sequence number 11, expected 10",
    ),
    "delete last 5 records": Case(
        delete("DELETE FROM records WHERE seq > (SELECT MAX(seq) - 5 FROM records)", "records_no_delete"),
        r"records seq=\d+: digested row is missing",
        refused=r"records seq=\d+: the anchored row is missing",
    ),
    "delete the last state run": Case(
        delete("DELETE FROM snapshots WHERE seq = (SELECT MAX(seq) FROM snapshots)", "snapshots_no_delete"),
        r"snapshots seq=\d+: (digested row is missing|the anchored row is missing)",
        refused=r"snapshots seq=\d+: the anchored row is missing",
    ),
    "delete an erased listing row": Case(
        delete("DELETE FROM erased", "erased_no_delete"),
        r"timeline seq=18 .*content does not match its id",
    ),
    "delete a digest": Case(
        delete("DELETE FROM digests WHERE tbl = 'records' AND seq = 50", "digests_no_delete"), r"records seq=50"
    ),
    "delete the anchor": Case(delete_anchor, r"no anchor file", note=True),
    # swapped rows
    "swap two entries": Case(swap_entries, r"timeline seq=0 .*content does not match its id"),
    "swap two bodies": Case(swap_bodies, r"records seq=\d+ kind=episode .*content does not match its digest"),
    # forged erasure
    "forge an erasure of another tenant": Case(
        erase_other_tenant(with_digest=False),
        r"kind=erasure id=\w+: not covered by the digest chain",
        refused=r"kind=erasure id=\w+ was written past the store's writer",
    ),
    "forge an erasure and its digest": Case(
        erase_other_tenant(with_digest=True),
        r"records seq=\d+\.\.\d+ kind=erasure id=\w+: digested rows past the anchored digest",
        refused=r"kind=erasure id=\w+: digested rows past the anchored digest",
    ),
    "edit an erased row's principal": Case(
        edit_erased_principal,
        r"erased: the entries listed under \w+… are not those its erasure record covers \(or an erased row's "
        r"principal or timestamp changed\)",
    ),
    # schema
    "rewind the schema version": Case(
        rewind_version,
        r"schema version 3 recorded .*the version was rewound",
        refused=r"schema version 3 recorded .*the version was rewound",
    ),
}


# -- what is checked ---------------------------------------------------------------------------


def verify(path: Path, capsys) -> tuple[int, str]:
    """`python -m memory verify`, in-process: (exit code, what it printed)."""
    code = main(["verify", str(path)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out + err


def contents(path: Path) -> dict[str, object]:
    """Every row, the schema, the version and the anchor's bytes: what an honest write may not change when refused."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        db.text_factory = bytes  # a flipped byte may leave text that is not UTF-8
        found: dict[str, object] = {table: sorted(map(repr, db.execute(f"SELECT * FROM {table}"))) for table in tables}
        found["schema"] = sorted(map(repr, db.execute("SELECT * FROM sqlite_master")))
        found["version"] = db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()
    anchor = Path(anchor_file.sidecar(str(path)))
    found["anchor"] = anchor.read_bytes() if anchor.exists() else None
    return found


def honest_write(path: Path) -> str:
    """Open the memory and observe one entry; "" when written, else the `StoreError` that refused it."""
    before = contents(path)
    try:
        with EpisodicMemory(path, principal="team-b") as memory:
            memory.observe("spool queue growing again", timestamp=T0 + timedelta(days=30), situation="support")
    except StoreError as exc:
        assert str(path) in str(exc)
        assert contents(path) == before
        return str(exc)
    return ""


def test_the_base_store_verifies(base, capsys):
    assert verify(base, capsys)[0] == 0


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=case.gap)) if case.gap else name
        for name, case in CASES.items()
    ],
)
def test_tampering_is_named_before_and_after_an_honest_write(store, name, capsys):
    case = CASES[name]
    case.tamper(store)
    for moment in ("before", "after"):
        untouched = contents(store)
        code, output = verify(store, capsys)
        assert contents(store) == untouched  # verify is read-only, also on a damaged store
        if case.note and moment == "after":  # the honest write wrote the anchor again
            assert code == 0, output
            break
        assert code == (0 if case.note else 1), f"{moment} the honest write: {output}"
        prefix = "note" if case.note else "CORRUPT"
        assert re.search(rf"^{prefix} {re.escape(str(store))}: .*{case.finding}", output, re.M), output
        if "tail was lost" not in case.finding:  # a broken chain or a missing middle row is not a lost tail
            assert "the tail was lost" not in output, output
        if moment == "before":
            refusal = honest_write(store)
            assert re.search(case.refused, refusal) if case.refused else True, refusal


def tear_newest_anchor_slot(path: Path) -> None:
    """What a crash during the newest slot's write leaves: its first half new, its second half the older
    record it overwrote (here: the bytes of another slot)."""
    file = Path(anchor_file.sidecar(str(path)))
    data = bytearray(file.read_bytes())
    size = anchor_file.SLOT
    slots = [anchor_file.decode(bytes(data[i * size : (i + 1) * size])) for i in range(3)]
    newest = max(range(3), key=lambda i: slots[i].counter)
    other = (newest + 1) % 3
    data[newest * size + 100 : (newest + 1) * size] = data[other * size + 100 : (other + 1) * size]
    file.write_bytes(bytes(data))


def test_a_torn_anchor_slot_is_noted_and_the_other_slots_used(store, capsys):
    tear_newest_anchor_slot(store)
    code, output = verify(store, capsys)
    assert code == 0 and re.search(
        rf"^note {re.escape(str(store))}: anchor file: slot \d fails its checksum \(a write torn by a crash\)",
        output,
        re.M,
    ), output
    delete("DELETE FROM timeline WHERE seq = 33", "timeline_no_delete")(store)  # the other slots anchor seq 33 too
    code, output = verify(store, capsys)
    assert code == 1 and "timeline: 33 entries, the anchor records 34: the tail was lost" in output
    assert honest_write(store)  # refused: the store lost what its anchor records
