"""The server side of `memory.timeline.postgres`: the tables, the triggers that keep them insert-only,
the integrity objects (digest chains, the anchor, per-principal write authority) and the advisory lock
every write takes.

The tables hold what `SQLiteStore`'s do, in the same row form (`memory.timeline.schema`);
`memory_refuse` makes the server refuse UPDATE, DELETE and TRUNCATE for every role, the
tables' owner included. `INTEGRITY` adds, owned by the store's owner:

- ``digests``: one row per ``records`` and ``snapshots`` row, the chained SHA-256 of
  `memory.timeline.anchor.row_digest`, written by the writer inside each write transaction.
- ``anchors``: one row appended by every write transaction (entry count, head id, the head of
  each digest chain, who wrote it), only through ``memory_anchor()``, a SECURITY DEFINER
  function that reads the head itself: an application role can call it but never chooses what
  it records, and has no privilege on the table but SELECT. A store holding fewer rows than
  its newest anchor lost its tail; more, and they were written past the store's writer.
- ``writers``: which principals each application role may write (`grant_writer`). Row-level
  security on ``timeline`` and ``records`` lets a role other than the owner insert only rows of
  those principals: an entry by its ``principal`` column, a derived record by the principal its
  body names, or the principals of the episodes it names (``source``, ``target``, ``episode``:
  edges and reinforcement marks). Erasure records, and bodies that are not JSON objects, are the
  owner's alone. The owner (and a superuser) is not subject to row-level security: its path is
  unchanged.
"""

from __future__ import annotations

from psycopg import sql

from memory.timeline.anchor import GENESIS
from memory.timeline.entries import GENESIS_ID

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
INTEGRITY_TABLES = ("digests", "anchors")  # insert-only like `TABLES` (``writers`` is the owner's configuration)
ROW_SECURED = ("timeline", "records")  # tables whose inserts are limited to a role's principals
POLICIES = ("memory_read", "memory_append")  # the row-level security policies of each of `ROW_SECURED`

# The principals a records row speaks for: the one its body names, else those of the episodes it names.
# NULL (the owner's alone): an erasure record, or a body that is not a JSON object.
_RECORD_PRINCIPALS = """
DECLARE
    parsed JSONB;
    named TEXT;
    found TEXT[] := '{}';
BEGIN
    IF record_kind = 'erasure' THEN
        RETURN NULL;
    END IF;
    BEGIN
        parsed := record_body::jsonb;
        IF jsonb_typeof(parsed) <> 'object' THEN
            RETURN NULL;
        END IF;
        IF parsed ? 'principal' THEN
            RETURN ARRAY[parsed->>'principal'];
        END IF;
        FOREACH named IN ARRAY ARRAY[parsed->>'source', parsed->>'target', parsed->>'episode'] LOOP
            IF named IS NOT NULL THEN
                found := found || ARRAY(
                    SELECT r.body::jsonb->>'principal' FROM records r
                    WHERE r.kind = 'episode' AND r.id = named AND r.body::jsonb ? 'principal'
                );
            END IF;
        END LOOP;
    EXCEPTION WHEN others THEN
        RETURN NULL;
    END;
    RETURN found;
END
"""

_MAY_WRITE = """
    SELECT principals IS NOT NULL AND NOT EXISTS (
        SELECT FROM unnest(principals) AS wanted(principal)
        WHERE wanted.principal IS NULL
           OR NOT EXISTS (SELECT FROM writers w WHERE w.role = who AND w.principal = wanted.principal)
    )
"""

_MAY_APPEND = """
BEGIN
    IF memory_may_write(who, ARRAY[entry_principal]) THEN
        RETURN true;
    END IF;
    RAISE EXCEPTION 'role % may not append entries of principal % (timeline seq=%): the store''s owner names '
        'the principals a role writes with grant_writer(url, role, principals=[...])',
        who, quote_literal(entry_principal), entry_seq USING ERRCODE = 'insufficient_privilege';
END
"""

_MAY_ADD = """
DECLARE
    principals TEXT[] := memory_record_principals(record_kind, record_body);
BEGIN
    IF memory_may_write(who, principals) THEN
        RETURN true;
    END IF;
    RAISE EXCEPTION 'role % may not add records kind=% id=% (%)', who, record_kind, record_id,
        CASE WHEN principals IS NULL
            THEN 'an erasure record, or a body that is not a JSON object: the owner''s alone'
            ELSE 'for principal ' || array_to_string(principals, ', ', '(none)') || ', not granted to it'
        END USING ERRCODE = 'insufficient_privilege';
END
"""

_ANCHOR = f"""
DECLARE
    last_entry BIGINT;
    last_id TEXT;
    records_top BIGINT;
    records_top_digest TEXT;
    snapshots_top BIGINT;
    snapshots_top_digest TEXT;
BEGIN
    PERFORM pg_advisory_xact_lock({WRITE_LOCK});
    SELECT t.seq, t.id INTO last_entry, last_id FROM timeline t ORDER BY t.seq DESC LIMIT 1;
    SELECT d.seq, d.digest INTO records_top, records_top_digest FROM digests d
        WHERE d.tbl = 'records' ORDER BY d.seq DESC LIMIT 1;
    SELECT d.seq, d.digest INTO snapshots_top, snapshots_top_digest FROM digests d
        WHERE d.tbl = 'snapshots' ORDER BY d.seq DESC LIMIT 1;
    INSERT INTO anchors (seq, entries, head, records_seq, records_digest, snapshots_seq, snapshots_digest,
                         written_by, written_at)
    SELECT COALESCE(MAX(a.seq), 0) + 1, COALESCE(last_entry + 1, 0), COALESCE(last_id, '{GENESIS_ID}'),
           COALESCE(records_top, 0), COALESCE(records_top_digest, '{GENESIS}'),
           COALESCE(snapshots_top, 0), COALESCE(snapshots_top_digest, '{GENESIS}'), session_user, now()
    FROM anchors a;
END
"""

# name -> (arguments, returns, language, volatility, security definer, body): `verify` compares the stored
# bodies with these, so a function replaced to let everything through is a finding.
FUNCTIONS = {
    "memory_record_principals": (
        "record_kind TEXT, record_body TEXT",
        "TEXT[]",
        "plpgsql",
        "STABLE",
        _RECORD_PRINCIPALS,
    ),
    "memory_may_write": ("who NAME, principals TEXT[]", "BOOLEAN", "sql", "STABLE", _MAY_WRITE),
    "memory_may_append": (
        "who NAME, entry_seq BIGINT, entry_principal TEXT",
        "BOOLEAN",
        "plpgsql",
        "STABLE",
        _MAY_APPEND,
    ),
    "memory_may_add": (
        "who NAME, record_kind TEXT, record_id TEXT, record_body TEXT",
        "BOOLEAN",
        "plpgsql",
        "STABLE",
        _MAY_ADD,
    ),
    "memory_anchor": ("", "VOID", "plpgsql", "VOLATILE", _ANCHOR),
}

_INTEGRITY_TABLES_DDL = """
CREATE TABLE IF NOT EXISTS digests (
    tbl TEXT NOT NULL,
    seq BIGINT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (tbl, seq)
);
CREATE TABLE IF NOT EXISTS anchors (
    seq BIGINT PRIMARY KEY,
    entries BIGINT NOT NULL,
    head TEXT NOT NULL,
    records_seq BIGINT NOT NULL,
    records_digest TEXT NOT NULL,
    snapshots_seq BIGINT NOT NULL,
    snapshots_digest TEXT NOT NULL,
    written_by TEXT NOT NULL,
    written_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS writers (
    role TEXT NOT NULL,
    principal TEXT NOT NULL,
    PRIMARY KEY (role, principal)
);
"""


def triggers(tables: tuple[str, ...] = TABLES) -> str:
    """The statements that make each of `tables` refuse UPDATE, DELETE and TRUNCATE."""
    return "".join(
        f"CREATE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION memory_refuse();"
        f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION memory_refuse();"
        for table in tables
    )


def integrity(schema: str) -> sql.Composed:
    """The statements adding the digests, the anchor and the per-principal authority to a store in `schema`.

    The SECURITY DEFINER functions run with ``search_path`` fixed to the store's schema, so a role
    cannot make them read its own tables of the same names.
    """
    path = sql.SQL("{}, pg_temp").format(sql.Identifier(schema))
    statements: list[sql.Composable] = [sql.SQL(_INTEGRITY_TABLES_DDL), sql.SQL(triggers(INTEGRITY_TABLES))]
    for name, (arguments, returns, language, volatility, body) in FUNCTIONS.items():
        statements.append(
            sql.SQL(
                "CREATE OR REPLACE FUNCTION {name}({arguments}) RETURNS {returns} LANGUAGE {language} {volatility} "
                "SECURITY DEFINER SET search_path = {path} AS {body};"
            ).format(
                name=sql.Identifier(name),
                arguments=sql.SQL(arguments),
                returns=sql.SQL(returns),
                language=sql.SQL(language),
                volatility=sql.SQL(volatility),
                path=path,
                body=sql.Literal(body),
            )
        )
    statements.append(sql.SQL("REVOKE ALL ON FUNCTION memory_anchor() FROM PUBLIC;"))
    for table in ROW_SECURED:
        check = (
            "memory_may_append(current_user, seq, principal)"
            if table == "timeline"
            else "memory_may_add(current_user, kind, id, body)"
        )
        statements.append(
            sql.SQL(
                f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;"
                f"CREATE POLICY memory_read ON {table} FOR SELECT USING (true);"
                f"CREATE POLICY memory_append ON {table} FOR INSERT WITH CHECK ({check});"
            )
        )
    return sql.SQL("\n").join(statements)
