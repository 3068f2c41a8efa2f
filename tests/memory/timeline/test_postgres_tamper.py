"""A tamper battery for the PostgreSQL store: a store changed with plain SQL, by its owner (triggers
disabled where needed) or by the restricted application role of `grant_writer`, is named by
`python -m memory verify postgresql://...` (exit 1, no traceback) before and after one honest
write, and that write either goes ahead or is refused with a `StoreError` leaving the store as it
was; what the server refuses outright is asserted as refused.

Every case starts from a copy of one small store (two tenants, derived records of several kinds,
state runs, one erasure done, so the erasure's guard triggers are installed), made with
``CREATE DATABASE ... TEMPLATE``. A case that disables a trigger enables it again, so the damage
is to the rows, not to the schema (a disabled or missing trigger is a case of its own).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import NamedTuple

import pytest

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed: pip install -e '.[postgres]'")

from memory.__main__ import main  # noqa: E402
from memory.errors import ImmutableRecordError, StoreError  # noqa: E402
from memory.timeline import HashingEncoder, RecordKind, Timeline, erasure  # noqa: E402
from memory.timeline.anchor import row_digest  # noqa: E402
from memory.timeline.postgres import PostgresStore, grant_writer  # noqa: E402
from memory.timeline.postgres_schema import SCHEMA, triggers  # noqa: E402
from memory.timeline.schema import COLUMNS, chain_rows, prepare  # noqa: E402
from tests.builders import T0  # noqa: E402
from tests.memory.timeline.test_postgres_store import running_server, stop_server  # noqa: E402

APP = "tamper_app"  # the restricted application role: it writes team-a only
_names = itertools.count()


@pytest.fixture(scope="session")
def server():
    yield running_server()
    stop_server()


def _timeline(store: PostgresStore) -> Timeline:
    return Timeline(store, HashingEncoder(dim=32))


def _observe(timeline: Timeline, text: str, principal: str, minutes: int) -> str:
    return timeline.append(
        text,
        kind="observation",
        role="environment",
        situation="incident",
        principal=principal,
        timestamp=T0 + timedelta(minutes=minutes),
    ).id


def _episode(principal: str, entries: list[str], outcome: str) -> dict:
    return {"principal": principal, "entry_ids": entries, "outcome": outcome, "situation": "incident"}


def _fact(principal: str, fact_id: str, version: int, confidence: float) -> dict:
    return {"fact_id": fact_id, "version": version, "principal": principal, "confidence": confidence, "support": []}


def _derive(store: PostgresStore, ids: list[str], round_: int) -> list[tuple[str, str, dict]]:
    """(kind, id, body) of one round's derived records: an episode per tenant, their facts, edges, a mark."""
    rows: list[tuple[str, str, dict]] = []
    for principal, outcome in (("team-a", "SUCCESS"), ("team-b", "FAILURE")):
        rows.append(("episode", f"ep-{principal}-{round_}", _episode(principal, ids[:2], outcome)))
        rows.append(("fact_version", f"fact-{principal}@{round_}", _fact(principal, f"fact-{principal}", round_, 0.6)))
        if round_ > 1:
            rows.append(
                (
                    "edge",
                    f"edge-{principal}-{round_}",
                    {"source": f"ep-{principal}-1", "target": f"ep-{principal}-{round_}"},
                )
            )
    rows.append(("reinforcement", f"mark-{round_}", {"episode": f"ep-team-a-{round_}"}))
    return rows


def _store_records(store: PostgresStore, rows: list[tuple[str, str, dict]]) -> None:
    for kind, record_id, body in rows:
        store.add_records(kind, [(record_id, body)])


@pytest.fixture(scope="module")
def base(server) -> str:
    """The template database: two tenants' entries and records, one entry of team-a erased, more after it;
    `APP` may write team-a's rows."""
    name = f"tamper_base_{os.getpid()}"
    server.admin(
        f"DROP DATABASE IF EXISTS {name}",
        f"CREATE DATABASE {name}",
        f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP}') "
        f"THEN CREATE ROLE {APP} LOGIN; END IF; END $$",
    )
    url = server.url(name)
    with PostgresStore(url) as store:
        timeline = _timeline(store)
        ids = [_observe(timeline, f"orders p99 at {i} s", ("team-a", "team-b")[i % 2], i) for i in range(6)]
        secret = _observe(timeline, "the payroll export for Ingrid Vasquez", "team-a", 7)
        first = _derive(store, ids, 1)
        _store_records(store, first)
        store.add_snapshot("runs", "run-1", {"upto": store.last_record()}, b"\x00run one\xff")
        plan = erasure.make_plan(
            store,
            owner="team-a",
            rederive=lambda _: [(kind, rid, json.dumps(body, sort_keys=True)) for kind, rid, body in first],
            entry_id=secret,
            reason="request #7",
            requested_by="dpo",
        )
        store.erase(plan)
        ids += [_observe(timeline, f"spool queue at {i} jobs", ("team-a", "team-b")[i % 2], 10 + i) for i in range(8)]
        _store_records(store, _derive(store, ids[6:], 2) + _derive(store, ids[8:], 3))
        store.add_records(RecordKind.FLUSH, [("14", {"seq": 14})])
        store.add_snapshot("runs", "run-2", {"upto": store.last_record()}, b"\x00run two\xff")
    grant_writer(url, APP, principals=["team-a"])
    return name


@pytest.fixture
def url(server, base) -> str:
    """A fresh copy of the base store."""
    name = f"tamper_{os.getpid()}_{next(_names)}"
    server.admin(f"CREATE DATABASE {name} TEMPLATE {base} STRATEGY FILE_COPY")
    return server.url(name)


def app_url(url: str) -> str:
    """The same database, connected as the restricted role."""
    return url.replace("postgresql://postgres@", f"postgresql://{APP}@", 1)


# -- how the cases change the store ------------------------------------------------------------


@contextmanager
def sql(url: str, *disabled: str) -> Iterator[psycopg.Connection]:
    """A plain owner connection with the triggers `disabled` (``table_no_change``…), enabled again afterwards."""
    with psycopg.connect(url, autocommit=True) as db:
        for name in disabled:
            db.execute(f"ALTER TABLE {name.rsplit('_no_', 1)[0]} DISABLE TRIGGER {name}")
        try:
            yield db
        finally:
            for name in disabled:
                db.execute(f"ALTER TABLE {name.rsplit('_no_', 1)[0]} ENABLE TRIGGER {name}")


def seq_of(db: psycopg.Connection, kind: str, nth: int = -1) -> int:
    return [row[0] for row in db.execute("SELECT seq FROM records WHERE kind = %s ORDER BY seq", (kind,))][nth]


def next_digest(db: psycopg.Connection, row: tuple[str, str, str]) -> str:
    """The digest the store's writer would give `row` after the last one (an attacker who read the code)."""
    last = db.execute("SELECT digest FROM digests WHERE tbl = 'records' ORDER BY seq DESC LIMIT 1").fetchone()[0]
    return row_digest(last, row)


def forged_fact(principal: str) -> tuple[str, str, str]:
    body = _fact(principal, f"fact-{principal}", 9, 0.99)
    return "fact_version", "fact-forged@1", json.dumps(body, sort_keys=True, separators=(",", ":"))


def insert_record(db: psycopg.Connection, row: tuple[str, str, str], *, digest: bool = False) -> int:
    """Insert a records row after the last one (and the digest the writer would give it); its seq."""
    seq = db.execute("SELECT MAX(seq) + 1 FROM records").fetchone()[0]
    if digest:
        db.execute("INSERT INTO digests (tbl, seq, digest) VALUES ('records', %s, %s)", (seq, next_digest(db, row)))
    db.execute("INSERT INTO records (seq, kind, id, body) VALUES (%s, %s, %s, %s)", (seq, *row))
    return seq


def edit_entry(column: str, change: Callable[[str], str], seq: int = 5) -> Callable[[str], None]:
    def tamper(url: str) -> None:
        with sql(url, "timeline_no_change") as db:
            old = db.execute(f"SELECT {column} FROM timeline WHERE seq = %s", (seq,)).fetchone()[0]
            db.execute(f"UPDATE timeline SET {column} = %s WHERE seq = %s", (change(old), seq))

    return tamper


def swap_entries(url: str) -> None:
    content = "situation, text, metadata, encoder, embedding"
    with sql(url, "timeline_no_change") as db:
        first, second = (db.execute(f"SELECT {content} FROM timeline WHERE seq = %s", (s,)).fetchone() for s in (0, 1))
        assignment = ", ".join(f"{column} = %s" for column in content.split(", "))
        for seq, row in ((0, second), (1, first)):
            db.execute(f"UPDATE timeline SET {assignment} WHERE seq = %s", (*row, seq))


def forge_entry(*, valid_id: bool) -> Callable[[str], None]:
    """An entry after the head: with an id that is not its content's hash, or chained exactly as the writer would."""

    def tamper(url: str) -> None:
        with sql(url) as db, PostgresStore(url, create=False) as store:
            seq, prev_id = db.execute("SELECT seq + 1, id FROM timeline ORDER BY seq DESC LIMIT 1").fetchone()
            draft = _timeline(store).draft(
                "the restart fixed it (forged)",
                kind="observation",
                role="environment",
                situation="incident",
                principal="team-b",
                timestamp=T0 + timedelta(days=1),
            )
            row = list(chain_rows(prepare([draft]), seq, prev_id)[1][0])
            if not valid_id:
                row[1] = hashlib.sha256(b"forged").hexdigest()
            db.execute(f"INSERT INTO timeline ({COLUMNS}) VALUES ({','.join(['%s'] * len(row))})", row)

    return tamper


def edit_body(kind: str, change: Callable[[dict], None], nth: int = -1) -> Callable[[str], None]:
    def tamper(url: str) -> None:
        with sql(url, "records_no_change") as db:
            seq = seq_of(db, kind, nth)
            body = json.loads(db.execute("SELECT body FROM records WHERE seq = %s", (seq,)).fetchone()[0])
            change(body)
            db.execute("UPDATE records SET body = %s WHERE seq = %s", (json.dumps(body, sort_keys=True), seq))

    return tamper


def swap_bodies(url: str) -> None:
    with sql(url, "records_no_change") as db:
        first, second = seq_of(db, "episode", -1), seq_of(db, "episode", -2)
        bodies = [db.execute("SELECT body FROM records WHERE seq = %s", (s,)).fetchone()[0] for s in (first, second)]
        db.execute("UPDATE records SET body = %s WHERE seq = %s", (bodies[1], first))
        db.execute("UPDATE records SET body = %s WHERE seq = %s", (bodies[0], second))


def forge_record(row: Callable[[psycopg.Connection], tuple[str, str, str]], *, digest: bool) -> Callable[[str], None]:
    def tamper(url: str) -> None:
        with sql(url) as db:
            insert_record(db, row(db), digest=digest)

    return tamper


def copied_edge(db: psycopg.Connection) -> tuple[str, str, str]:
    body = db.execute("SELECT body FROM records WHERE kind = 'edge' ORDER BY seq LIMIT 1").fetchone()[0]
    return "edge", "edge-forged", body


def run(*statements: str, disabled: tuple[str, ...] = ()) -> Callable[[str], None]:
    def tamper(url: str) -> None:
        with sql(url, *disabled) as db:
            for statement in statements:
                db.execute(statement)

    return tamper


_DELETE_BEFORE = "DELETE FROM records WHERE seq < %s AND kind <> 'erasure'"


def erase_other_tenant(*, digest: bool) -> Callable[[str], None]:
    """An erasure of team-b's entries made with SQL alone. Without the digest the writer would give its record,
    the erasure's guard refuses the blanking and the deletions (the record and its listing stay); with it, they
    go through, and the digest is past the newest anchor."""

    def tamper(url: str) -> None:
        with sql(url) as db:
            targets = db.execute("SELECT seq, id FROM timeline WHERE principal = 'team-b' ORDER BY seq").fetchall()
            body = {
                "at": "2026-03-20T09:00:00.000000+00:00",
                "by": "dpo",
                "reason": "tenant left",
                "principal": "team-b",
                "entries": len(targets),
                "entries_sha256": erasure.listing_digest(targets),
                "format": 1,
                "snapshots_upto": 0,
            }
            record_id = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
            newest = insert_record(db, ("erasure", record_id, json.dumps(body, sort_keys=True)), digest=digest)
            with db.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO erased (seq, id, erasure) VALUES (%s, %s, %s)",
                    [(seq, entry_id, record_id) for seq, entry_id in targets],
                )
            blank = (
                "UPDATE timeline SET situation = '', text = '', metadata = '{}', encoder = '', embedding = ''::bytea "
                "WHERE seq = ANY(%s)"
            )
            if not digest:  # the guard lets only a sealed erasure record blank rows and delete derived ones
                for statement, params in ((blank, [seq for seq, _ in targets]), (_DELETE_BEFORE, newest)):
                    with pytest.raises(psycopg.errors.RestrictViolation, match="insert-only"):
                        db.execute(statement, (params,))
                return
            db.execute(blank, ([seq for seq, _ in targets],))
            db.execute(_DELETE_BEFORE, (newest,))

    return tamper


def as_app(*statements: str, digest_of: Callable[[psycopg.Connection], tuple[str, str, str]] | None = None):
    """Statements run by the restricted role (`digest_of`: insert that row of team-a's with its digest)."""

    def tamper(url: str) -> None:
        with psycopg.connect(app_url(url), autocommit=True) as db:
            for statement in statements:
                db.execute(statement)
            if digest_of is not None:
                insert_record(db, digest_of(db), digest=True)

    return tamper


class Case(NamedTuple):
    """One way of tampering and what `verify` says about it."""

    tamper: Callable[[str], None]  # changes the copy of the base store
    finding: str  # a regex one CORRUPT line of verify's output matches
    refused: str = ""  # a regex the StoreError refusing the honest write matches ("": the write goes ahead)


FACT_B = (
    "INSERT INTO records (seq, kind, id, body) SELECT MAX(seq) + 1, 'fact_version', 'fact-forged@1', '{}' FROM records"
)
CASES = {
    # timeline entries
    "edit entry text": Case(
        edit_entry("text", lambda text: text + " (edited)"), r"timeline seq=5 .*content does not match its id"
    ),
    "edit entry principal": Case(
        edit_entry("principal", lambda _: "team-a"), r"timeline seq=5 .*content does not match its id"
    ),
    "swap two entries": Case(swap_entries, r"timeline seq=0 .*content does not match its id"),
    "forge entry with a wrong id": Case(
        forge_entry(valid_id=False),
        r"timeline seq=15 .*content does not match its id",
        refused=r"timeline seq=15 and after were written past the store's writer",
    ),
    "forge entry chained like the writer": Case(
        forge_entry(valid_id=True),
        r"timeline seq=15\.\.15: written past the store's writer",
        refused=r"timeline seq=15 and after were written past the store's writer",
    ),
    "delete last 3 entries": Case(
        run("DELETE FROM timeline WHERE seq >= 12", disabled=("timeline_no_change",)),
        r"timeline: 12 entries, the anchor records 15: the tail was lost",
        refused=r"the store holds 12 entries but its anchor records 15: its tail was lost",
    ),
    "delete a middle entry": Case(
        run("DELETE FROM timeline WHERE seq = 9", disabled=("timeline_no_change",)),
        r"timeline seq=10 .*sequence number 10, expected 9",
    ),
    # derived records
    "edit episode outcome": Case(
        edit_body("episode", lambda body: body.update(outcome="SUCCESS")),
        r"records seq=\d+ kind=episode .*content does not match its digest",
    ),
    "edit fact confidence": Case(
        edit_body("fact_version", lambda body: body.update(confidence=0.99), 0),
        r"records seq=\d+ kind=fact_version .*content does not match its digest",
    ),
    "swap two bodies": Case(swap_bodies, r"records seq=\d+ kind=episode .*content does not match its digest"),
    "forge fact of another tenant": Case(
        forge_record(lambda _: forged_fact("team-b"), digest=False),
        r"kind=fact_version id=fact-forged@1: not covered by the digest chain",
        refused=r"kind=fact_version id=fact-forged@1 was written past the store's writer",
    ),
    "forge fact and its digest": Case(
        forge_record(lambda _: forged_fact("team-b"), digest=True),
        r"digests of records seq=(\d+)\.\.\1: written past the store's writer",
        refused=r"digests of records seq=\d+ and after were written past the store's writer",
    ),
    "forge edge": Case(
        forge_record(copied_edge, digest=False),
        r"kind=edge id=edge-forged: not covered by the digest chain",
        refused=r"id=edge-forged was written past the store's writer",
    ),
    "delete last 5 records": Case(
        run("DELETE FROM records WHERE seq > (SELECT MAX(seq) - 5 FROM records)", disabled=("records_no_change",)),
        r"records seq=\d+: digested row is missing",
        refused=r"records row seq=\d+ recorded by the anchor is missing",
    ),
    "delete a middle record": Case(
        run("DELETE FROM records WHERE seq = (SELECT MAX(seq) - 3 FROM records)", disabled=("records_no_change",)),
        r"records seq=\d+: a row and its digest are missing",
    ),
    # snapshots
    "edit a state run": Case(
        run("UPDATE snapshots SET body = body || '\\x00'::bytea WHERE id = 'run-2'", disabled=("snapshots_no_change",)),
        r"snapshots seq=\d+ kind=runs id=run-2: content does not match its digest",
    ),
    "delete the last state run": Case(
        run("DELETE FROM snapshots WHERE id = 'run-2'", disabled=("snapshots_no_change",)),
        r"snapshots seq=\d+: digested row is missing",
        refused=r"snapshots row seq=\d+ recorded by the anchor is missing",
    ),
    # digests
    "edit a digest": Case(
        run(
            "UPDATE digests SET digest = md5('another row') || md5('') WHERE tbl = 'records' AND seq = 20",
            disabled=("digests_no_change",),
        ),
        r"records seq=20 .*content does not match its digest",
    ),
    "delete a digest": Case(
        run("DELETE FROM digests WHERE tbl = 'records' AND seq = 15", disabled=("digests_no_change",)),
        r"records seq=15: a row and its digest are missing",
    ),
    "delete the last records and their digests": Case(
        run(
            "DELETE FROM records WHERE seq > (SELECT MAX(seq) - 2 FROM records)",
            "DELETE FROM digests WHERE tbl = 'records' AND seq > (SELECT MAX(seq) FROM records)",
            disabled=("records_no_change", "digests_no_change"),
        ),
        r"records seq=\d+: the anchored digest \w+… is missing",
        refused=r"records row seq=\d+ recorded by the anchor is missing",
    ),
    # anchors
    "delete the newest anchors": Case(
        run("DELETE FROM anchors WHERE seq > (SELECT MAX(seq) - 3 FROM anchors)", disabled=("anchors_no_change",)),
        r"written past the store's writer \(after the newest anchor",
        refused=r"written past the store's writer \(not anchored\)",
    ),
    "edit the newest anchor's head": Case(
        run(
            "UPDATE anchors SET head = md5('x') || md5('y') WHERE seq = (SELECT MAX(seq) FROM anchors)",
            disabled=("anchors_no_change",),
        ),
        r"timeline seq=14: not the anchored head",
        refused=r"entry seq=14 is not the anchored head",
    ),
    "delete every anchor": Case(
        run("DELETE FROM anchors", disabled=("anchors_no_change",)),
        r"anchors: the table holds no row",
        refused=r"the anchors table holds no row",
    ),
    "delete the tail and the anchors after it": Case(
        run(
            "DELETE FROM timeline WHERE seq >= 12",
            "DELETE FROM anchors WHERE entries > 12",
            disabled=("timeline_no_change", "anchors_no_change"),
        ),
        r"written past the store's writer|the tail was lost",
        refused=r"written past the store's writer|tail was lost",
    ),
    # schema: triggers, row-level security, functions
    "disable a refusal trigger": Case(
        run("ALTER TABLE records DISABLE TRIGGER records_no_change"),
        r"schema: refusal trigger records_no_change on records is disabled",
    ),
    "drop a refusal trigger": Case(
        run("DROP TRIGGER anchors_no_truncate ON anchors"),
        r"schema: refusal trigger anchors_no_truncate on anchors is missing",
    ),
    "replace the refusal function": Case(
        run(
            "CREATE OR REPLACE FUNCTION memory_refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RETURN COALESCE(NEW, OLD); END $$"
        ),
        r"schema: function memory_refuse was replaced",
    ),
    "disable row-level security": Case(
        run("ALTER TABLE records DISABLE ROW LEVEL SECURITY"), r"schema: row-level security on records is disabled"
    ),
    "add a permissive policy": Case(
        run("CREATE POLICY anyone ON records FOR INSERT WITH CHECK (true)"),
        r"schema: policy anyone on records is not the store's",
    ),
    "let every principal through": Case(
        run(
            "CREATE OR REPLACE FUNCTION memory_may_write(who NAME, principals TEXT[]) RETURNS BOOLEAN "
            "LANGUAGE sql AS 'SELECT true'"
        ),
        r"schema: function memory_may_write was replaced",
    ),
    # erasure
    "forge an erasure of another tenant": Case(
        erase_other_tenant(digest=False),
        r"kind=erasure id=\w+: not covered by the digest chain",
        refused=r"kind=erasure id=\w+ was written past the store's writer",
    ),
    "forge an erasure and its digest": Case(
        erase_other_tenant(digest=True),
        r"digests of records seq=\d+\.\.\d+: written past the store's writer",
        refused=r"digests of records seq=\d+ and after were written past the store's writer",
    ),
    # the restricted role, within its own principal
    "the role forges its tenant's fact": Case(
        as_app(FACT_B.replace("'{}'", '\'{"principal":"team-a","confidence":0.99}\'')),
        r"kind=fact_version id=fact-forged@1: not covered by the digest chain",
        refused=r"id=fact-forged@1 was written past the store's writer",
    ),
    "the role forges its tenant's fact and digest": Case(
        as_app(digest_of=lambda _: forged_fact("team-a")),
        r"digests of records seq=(\d+)\.\.\1: written past the store's writer",
        refused=r"digests of records seq=\d+ and after were written past the store's writer",
    ),
    "the role adds a digest of no row": Case(
        as_app(
            "INSERT INTO digests (tbl, seq, digest) SELECT 'records', MAX(seq) + 1, md5('') || md5('') FROM records"
        ),
        r"records seq=\d+: digested row is missing|digests of records seq=\d+\.\.\d+: written past",
        refused=r"digests of records seq=\d+ and after were written past the store's writer",
    ),
}


# -- what is checked ---------------------------------------------------------------------------


def verify(url: str, capsys) -> tuple[int, str]:
    """`python -m memory verify URL`, in-process: (exit code, what it printed)."""
    code = main(["verify", url])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out + err


_TABLES = {
    "timeline": "seq",
    "records": "seq",
    "snapshots": "seq",
    "digests": "tbl, seq",
    "anchors": "seq",
    "erased": "seq",
}


def contents(url: str) -> tuple[str, ...]:
    """A fingerprint of every table's rows: what a refused honest write may not change."""
    query = ", ".join(
        f"(SELECT md5(COALESCE(string_agg(t::text, '|' ORDER BY {order}), '')) FROM {table} t)"
        for table, order in _TABLES.items()
    )
    with psycopg.connect(url, autocommit=True) as db:
        return tuple(db.execute(f"SELECT {query}").fetchone())


def honest_write(url: str) -> str:
    """Open the store, append one entry and a derived record; "" when written, else the `StoreError`
    that refused it (the store unchanged)."""
    before = contents(url)
    try:
        with PostgresStore(url, create=False) as store:
            _observe(_timeline(store), "spool queue growing again", "team-b", 600)
            store.add_records(RecordKind.FLUSH, [("15", {"seq": 15})])
    except StoreError as exc:
        assert contents(url) == before
        return str(exc)
    return ""


def test_the_base_store_verifies_and_the_restricted_role_writes_its_own_principal(url, capsys):
    code, output = verify(url, capsys)
    assert code == 0 and re.search(r"^OK postgresql://\S+: 15 entries, chain intact, head \w{64}$", output, re.M)
    with PostgresStore(app_url(url), create=False) as app:
        _observe(_timeline(app), "an entry of the role's own tenant", "team-a", 700)
        assert app.add_records(RecordKind.FACT, [("fact-own@1", _fact("team-a", "fact-own", 1, 0.5))]) == 1
        # another tenant's derived record is left to that tenant's writer, not refused
        assert app.add_records(RecordKind.FACT, [("fact-other@1", _fact("team-b", "fact-other", 1, 0.5))]) == 0
        with pytest.raises(ImmutableRecordError, match=r"role tamper_app may not append entries of principal 'team-b'"):
            _observe(_timeline(app), "an entry of another tenant", "team-b", 701)
        assert app.verify() is None
    code, output = verify(url, capsys)
    assert code == 0, output


@pytest.mark.parametrize("name", list(CASES))
def test_tampering_is_named_before_and_after_an_honest_write(url, name, capsys):
    case = CASES[name]
    case.tamper(url)
    for moment in ("before", "after"):
        code, output = verify(url, capsys)
        assert code == 1, f"{moment} the honest write: {output}"
        assert re.search(rf"^CORRUPT postgresql://\S+: .*{case.finding}", output, re.M), f"{moment}: {output}"
        if "tail was lost" not in case.finding:  # a broken chain or a missing middle row is not a lost tail
            assert "the tail was lost" not in output, output
        if moment == "before":
            refusal = honest_write(url)
            assert re.search(case.refused, refusal) if case.refused else refusal == "", refusal


REFUSED_FOR_THE_ROLE = {
    "a fact of another tenant": (
        FACT_B.replace("'{}'", '\'{"principal":"team-b","confidence":0.99}\''),
        r"role tamper_app may not add records kind=fact_version id=fact-forged@1 \(for principal team-b",
    ),
    "an episode of another tenant": (
        "INSERT INTO records (seq, kind, id, body) SELECT MAX(seq) + 1, 'episode', 'ep-forged', "
        '\'{"principal":"team-b","outcome":"SUCCESS"}\' FROM records',
        r"may not add records kind=episode id=ep-forged \(for principal team-b",
    ),
    "an edge between another tenant's episodes": (
        "INSERT INTO records (seq, kind, id, body) SELECT MAX(seq) + 1, 'edge', 'edge-forged', "
        '\'{"source":"ep-team-b-1","target":"ep-team-b-2"}\' FROM records',
        r"may not add records kind=edge id=edge-forged \(for principal team-b, team-b",
    ),
    "a mark of another tenant's episode": (
        "INSERT INTO records (seq, kind, id, body) SELECT MAX(seq) + 1, 'reinforcement', 'mark-forged', "
        '\'{"episode":"ep-team-b-2"}\' FROM records',
        r"may not add records kind=reinforcement id=mark-forged \(for principal team-b",
    ),
    "an erasure record": (
        "INSERT INTO records (seq, kind, id, body) SELECT MAX(seq) + 1, 'erasure', 'erasure-forged', "
        '\'{"principal":"team-a"}\' FROM records',
        r"may not add records kind=erasure id=erasure-forged \(an erasure record",
    ),
    "a body that is not JSON": (
        "INSERT INTO records (seq, kind, id, body) SELECT MAX(seq) + 1, 'fact_version', 'f', 'not json' FROM records",
        r"may not add records kind=fact_version id=f \(an erasure record, or a body that is not a JSON object",
    ),
    "an entry of another tenant": (
        f"INSERT INTO timeline ({COLUMNS}) SELECT seq + 1, md5('x'), id, timestamp, 'team-b', situation, role, kind, "
        "text, metadata, encoder, embedding FROM timeline ORDER BY seq DESC LIMIT 1",
        r"role tamper_app may not append entries of principal 'team-b' \(timeline seq=15\)",
    ),
    "an anchor row": (
        "INSERT INTO anchors SELECT seq + 1, entries, head, records_seq, records_digest, snapshots_seq, "
        "snapshots_digest, written_by, written_at FROM anchors ORDER BY seq DESC LIMIT 1",
        r"permission denied for table anchors",
    ),
    "an update": ("UPDATE records SET body = '{}'", r"permission denied for table records"),
    "a delete": ("DELETE FROM digests", r"permission denied for table digests"),
    "disabling a trigger": ("ALTER TABLE timeline DISABLE TRIGGER timeline_no_change", r"must be owner"),
    "disabling row-level security": ("ALTER TABLE records DISABLE ROW LEVEL SECURITY", r"must be owner"),
    "a permissive policy": ("CREATE POLICY anyone ON records FOR INSERT WITH CHECK (true)", r"must be owner|denied"),
    "replacing the authority": (
        "CREATE OR REPLACE FUNCTION memory_may_write(who NAME, principals TEXT[]) RETURNS BOOLEAN "
        "LANGUAGE sql AS 'SELECT true'",
        r"must be owner|permission denied for schema",
    ),
    "granting itself a principal": ("INSERT INTO writers VALUES ('tamper_app', 'team-b')", r"permission denied"),
}


def test_the_server_refuses_the_restricted_role_other_principals_and_the_schema(url, capsys):
    before = contents(url)
    with psycopg.connect(app_url(url), autocommit=True) as db:
        for name, (statement, message) in REFUSED_FOR_THE_ROLE.items():
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match=message):
                db.execute(statement)
            assert name
    assert contents(url) == before
    code, output = verify(url, capsys)
    assert code == 0, output
    assert honest_write(url) == ""
    assert verify(url, capsys)[0] == 0


def test_records_past_the_anchored_chain_are_not_served(url):
    forge_record(lambda _: forged_fact("team-b"), digest=False)(url)
    with PostgresStore(url, create=False) as store:
        assert store.record(RecordKind.FACT, "fact-forged@1") is None
        assert "fact-forged@1" not in dict(store.records(RecordKind.FACT))
    with sql(url) as db:  # now with the digest the writer would give it: still past the newest anchor
        seq = db.execute("SELECT seq FROM records WHERE id = 'fact-forged@1'").fetchone()[0]
        last = db.execute("SELECT digest FROM digests WHERE tbl = 'records' AND seq = %s", (seq - 1,)).fetchone()[0]
        db.execute(
            "INSERT INTO digests (tbl, seq, digest) VALUES ('records', %s, %s)",
            (seq, row_digest(last, forged_fact("team-b"))),
        )
    with PostgresStore(url, create=False) as store:
        assert store.record(RecordKind.FACT, "fact-forged@1") is None
        assert store.record(RecordKind.FACT, "fact-team-b@3") is not None


def test_a_store_created_before_digests_opens_and_its_owner_s_first_write_adds_them(server, capsys):
    name = f"tamper_legacy_{os.getpid()}"
    server.admin(f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}")
    url = server.url(name)
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(SCHEMA + triggers())  # the tables as the previous version created them
    with PostgresStore(url, create=False) as store:  # opens; nothing written yet
        with psycopg.connect(url, autocommit=True) as db:
            draft = _timeline(store).draft(
                "an old entry", kind="note", role="user", situation="s", principal="team-a", timestamp=T0
            )
            db.execute(
                f"INSERT INTO timeline ({COLUMNS}) VALUES ({','.join(['%s'] * 12)})",
                chain_rows(prepare([draft]), 0, "0" * 64)[1][0],
            )
            db.execute("INSERT INTO records (seq, kind, id, body) VALUES (1, 'flush', '0', '{\"seq\":0}')")
        assert dict(store.records(RecordKind.FLUSH)) == {"0": {"seq": 0}}  # served: nothing is sealed yet
    code, output = verify(url, capsys)
    assert code == 0 and "note postgresql://" in output and "created before digests and anchors" in output, output
    with PostgresStore(url, create=False) as store:
        _observe(_timeline(store), "the first write here", "team-a", 5)
        assert dict(store.records(RecordKind.FLUSH)) == {"0": {"seq": 0}}  # chained by that write
    code, output = verify(url, capsys)
    assert code == 0 and "note" not in output, output
