"""The server side of `memory.timeline.postgres`: the tables, the triggers that keep them insert-only,
the advisory lock every write takes, and the grants of an application role.

The tables hold what `SQLiteStore`'s do, in the same row form (`memory.timeline.schema`);
`memory_refuse` makes the server refuse UPDATE, DELETE and TRUNCATE for every role, the
tables' owner included.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

# One advisory lock key per database: every write of a store serializes on it. Advisory
# locks are scoped to the current database, so stores in different databases do not contend.
WRITE_LOCK = 0x45504D31  # "EPM1", the SQLite store's application id

SCHEMA = """
CREATE TABLE timeline (
    seq BIGINT PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    prev_id TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    principal TEXT NOT NULL,
    situation TEXT NOT NULL,
    role TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    encoder TEXT NOT NULL,
    embedding BYTEA NOT NULL
);
CREATE INDEX timeline_scope ON timeline (principal, situation, seq);
CREATE TABLE records (
    seq BIGINT PRIMARY KEY,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (kind, id)
);
CREATE INDEX records_kind ON records (kind, seq);
CREATE TABLE snapshots (
    seq BIGINT PRIMARY KEY,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    meta TEXT NOT NULL,
    body BYTEA NOT NULL,
    UNIQUE (kind, id)
);
CREATE FUNCTION memory_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is insert-only: % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'restrict_violation';
END $$;
"""

TABLES = ("timeline", "records", "snapshots")


def triggers() -> str:
    """The statements that make each of `TABLES` refuse UPDATE, DELETE and TRUNCATE."""
    return "".join(
        f"CREATE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION memory_refuse();"
        f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION memory_refuse();"
        for table in TABLES
    )


def grant_writer(url: str, role: str) -> None:
    """Let `role` read and append to the store at `url`, and nothing else (run as the tables' owner)."""
    with psycopg.connect(url, autocommit=True) as conn:
        database = conn.info.dbname
        for statement in (
            "GRANT CONNECT ON DATABASE {db} TO {role}",
            "GRANT USAGE ON SCHEMA public TO {role}",
            "REVOKE ALL ON timeline, records, snapshots FROM {role}",
            "GRANT SELECT, INSERT ON timeline, records, snapshots TO {role}",
        ):
            conn.execute(sql.SQL(statement).format(db=sql.Identifier(database), role=sql.Identifier(role)))
        erased = conn.execute("SELECT to_regclass('erased')").fetchone()
        if erased is not None and erased[0] is not None:  # a store that erased
            conn.execute(sql.SQL("GRANT SELECT ON erased TO {}").format(sql.Identifier(role)))
