"""Forgetting on request: an entry's or a principal's content erased, everything else still verifiable.

The same erasure serves a request (one entry, or a whole principal; the record says who asked
and why) and a retention policy (the set of a principal's entries it expires; the record names
the policy and its parameters, see `memory.retention`).

An entry's id is the SHA-256 of its content and its predecessor's id, so erased content
cannot be re-hashed. Erasure therefore keeps what the chain needs and records what it did:

- **An erasure record** (record kind ``erasure``: when, who asked, why, which principal or
  entry, how many entries, a SHA-256 over their ``seq id principal timestamp`` lines, the last
  snapshot seq then; no content) is stored like every derived record, so the digest chain and
  the anchor cover it, and the insert-only ``erased`` table lists each erased entry's seq and
  id under that record's id. Its digest is its authority: on SQLite the record is sealed
  (chained in ``digests``) before anything is blanked, and the triggers blank and delete only
  under a sealed record (`memory.timeline.erasure_sqlite`). A record inserted with plain SQL
  has no digest that verifies, or leaves the store past its anchor when it has the right one.
- **Blank rows.** The erased entries' rows keep seq, id, previous id, timestamp, principal,
  role and kind; text, situation, metadata, encoder and embedding are emptied. The only
  UPDATE the store permits is exactly this one, and only for rows listed in ``erased``.
  Their principal and timestamp, which the id can no longer vouch for, are covered by the
  record's listing digest (records of format 1, written before, cover seq and id only).
- **Derived state rebuilt.** Every derived record written before the erasure (episode
  summaries, edges, fact versions and their evidence, marks, flush points) and every state
  run is deleted (the only DELETE permitted: rows older than the newest sealed erasure record), and
  the records a replay of the timeline without the erased entries writes are stored in the
  same transaction; so the memory's projection equals `rebuild()` afterwards.
- **Bytes purged.** SQLite deletes with ``secure_delete``, then ``VACUUM`` and a truncating
  WAL checkpoint leave no copy in the file or its ``-wal``; PostgreSQL runs ``VACUUM FULL``
  on the tables (their owner only).

`verify` accepts a blank row when ``erased`` lists its seq and id and an erasure record's
digest covers that listing; it checks the row's links as before. A row emptied without that
(an erasure without a record), a listed row that still holds content, and a derived row
missing after the newest erasure are findings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from memory.errors import StoreChanged
from memory.timeline.entries import Entry, format_timestamp, parse_timestamp
from memory.timeline.protocols import Store
from memory.timeline.validation import check_label

ERASURE = "erasure"  # the record kind of erasure records
MAX_REASON = 1000  # characters of an erasure's reason and requester


class ErasurePlan(NamedTuple):
    """What one erasure writes, computed before the store's write lock is taken."""

    record_id: str  # id of the erasure record
    record: dict[str, Any]  # its body (no content)
    entries: list[tuple[int, str]]  # (seq, id) of the entries to erase, in timeline order
    records: list[tuple[str, str, str]]  # (kind, id, body JSON text) of the re-derived records, in order
    head: int  # the last timeline seq the replay read (the store must not have grown since)
    last_record: int  # the last record seq when the plan was made


class Erasure(NamedTuple):
    """What `forget` did."""

    record_id: str  # id of the erasure record
    entries: int  # entries erased
    records: int  # derived records rewritten from the replay
    purged: bool  # no copy of the erased bytes is left in the store's files (see `purge_sqlite`)


class Marks(NamedTuple):
    """The erasures a store holds, as `verify` reads them."""

    entries: dict[int, str]  # seq -> id of each erased entry
    records_before: int  # derived records with a lower seq may be absent (0: none)
    snapshots_upto: int  # snapshots up to this seq may be absent (0: none)
    findings: list[str]  # erasure bookkeeping that does not add up


def is_erased(entry: Entry) -> bool:
    """Whether an entry's content was erased (its row is blank: no situation, text, encoder or embedding).

    The timeline refuses an empty situation, so no recorded entry looks like this.
    """
    return entry.situation == "" and entry.text == "" and entry.encoder == "" and entry.embedding.size == 0


LISTING_FORMAT = 2  # erasure records from this format on cover each erased row's principal and timestamp


def listing_digest(entries: Iterable[tuple[object, ...]]) -> str:
    """SHA-256 over one line per erased entry, in the given order: ``seq id`` (format 1), or
    ``seq id principal timestamp`` (format 2: what an erased row keeps besides its links, which its id
    can no longer vouch for once its content is gone)."""
    h = hashlib.sha256()
    for fields in entries:
        h.update((" ".join(map(str, fields)) + "\n").encode("utf-8"))
    return h.hexdigest()


def _kept_fields(store: Store, targets: Sequence[tuple[int, str]]) -> list[tuple[int, str, str, str]]:
    """(seq, id, principal, stored timestamp) of the entries an erasure blanks."""
    entries = {entry.id: entry for entry in store.get_many([entry_id for _, entry_id in targets])}
    return [
        (seq, entry_id, entries[entry_id].principal, format_timestamp(entries[entry_id].timestamp))
        for seq, entry_id in targets
    ]


class Selection(NamedTuple):
    """The entries one erasure covers and what its record says of them (no content)."""

    entries: list[tuple[int, str]]  # (seq, id) of the entries to erase, in timeline order
    scope: dict[str, Any]  # the record's target and ground: {"by", "reason", "entry"|"principal"} or a policy's


def make_plan(
    store: Store,
    *,
    owner: str,
    rederive: Callable[[frozenset[int]], list[tuple[str, str, str]]],
    entry_id: str | None = None,
    principal: str | None = None,
    select: Callable[[Store], Selection] | None = None,
    reason: str = "",
    requested_by: str = "",
    summarize: Callable[[list[tuple[str, str, str]]], Mapping[str, Any]] | None = None,
) -> ErasurePlan:
    """The plan of erasing one entry of `owner` (by id), every entry of a principal, or the set `select` picks.

    Args:
        store: the memory's store.
        owner: the principal an entry id must belong to (tenants never erase each other's entries by id).
        rederive: the records a replay of the timeline writes with the given seqs erased.
        entry_id, principal, select: exactly one of them; `select` reads the store (after the plan noted
            its head) and picks entries of one principal, e.g. those a retention policy expires.
        reason, requested_by: kept in the erasure record of a request (no content belongs there).
        summarize: fields the record adds about the re-derived records (ids and counts, no content),
            e.g. which lessons lose evidence.

    Raises:
        ValueError: not exactly one target, an unknown entry, another tenant's entry, nothing to erase.
    """
    if sum(target is not None for target in (entry_id, principal, select)) != 1:
        raise ValueError("forget needs exactly one of entry_id or principal")
    for name, value in (("reason", reason), ("requested_by", requested_by)):
        if not isinstance(value, str) or len(value) > MAX_REASON:
            raise ValueError(f"{name} must be a str of at most {MAX_REASON} characters")
    head, last_record = len(store) - 1, store.last_record()  # before the replay: the store must not move after
    if select is not None:
        targets, scope = select(store)
    else:
        targets, scope = _requested(store, entry_id, principal, owner)
        scope = {"by": requested_by, "reason": reason, **scope}
    if not targets:
        raise ValueError("nothing to erase: the content is already erased")
    rows = rederive(frozenset(seq for seq, _ in targets))
    body = {
        "at": datetime.now(UTC).isoformat(timespec="microseconds"),
        **scope,
        "entries": len(targets),
        "entries_sha256": listing_digest(_kept_fields(store, targets)),
        "format": LISTING_FORMAT,
        **(summarize(rows) if summarize is not None else {}),
    }
    record_id = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return ErasurePlan(record_id, body, targets, rows, head, last_record)


def _requested(store: Store, entry_id: str | None, principal: str | None, owner: str) -> Selection:
    """The entries a request names: one entry of `owner`, or every entry of a principal (not yet erased)."""
    if entry_id is not None:
        entry = store.get(entry_id)
        if entry is None or entry.principal != owner:
            raise ValueError(f"no entry {entry_id[:16]}… of principal {owner!r} in this store")
        return Selection([] if is_erased(entry) else [(entry.seq, entry.id)], {"entry": entry.id})
    who = check_label("principal", principal)
    return Selection([(e.seq, e.id) for e in store.entries(principal=who) if not is_erased(e)], {"principal": who})


def dumps(body: Mapping[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# -- shared by both stores ------------------------------------------------------------------

BLANK_ROW = (  # the one UPDATE an erasure makes: content emptied, links kept
    "NEW.seq = OLD.seq AND NEW.id = OLD.id AND NEW.prev_id = OLD.prev_id AND NEW.timestamp = OLD.timestamp "
    "AND NEW.principal = OLD.principal AND NEW.role = OLD.role AND NEW.kind = OLD.kind AND NEW.situation = '' "
    "AND NEW.text = '' AND NEW.metadata = '{}' AND NEW.encoder = '' AND length(NEW.embedding) = 0"
)


# An erasure's authority is its record once sealed: chained in ``digests`` (which plain SQL cannot extend
# with a digest that verifies, nor with the right one without leaving the store past its anchor).
def check_unchanged(head: int, last_record: int, plan: ErasurePlan) -> None:
    if head != plan.head or last_record != plan.last_record:
        raise StoreChanged("the store changed while the erasure was prepared (another writer appended)")


LISTED = (
    "SELECT erased.seq, erased.id, erased.erasure, timeline.principal, timeline.timestamp "
    "FROM erased LEFT JOIN timeline ON timeline.seq = erased.seq ORDER BY erased.seq"
)


def marks_of(
    listed: Sequence[tuple[int, str, str, str | None, str | None]],
    bodies: Sequence[tuple[str, Mapping[str, Any]]],
    newest: int,
) -> Marks:
    """Check the ``erased`` listing (seq, id, erasure record id, the row's principal and timestamp) against
    the erasure records that must cover it."""
    findings = []
    by_record: dict[str, list[tuple[int, str, str | None, str | None]]] = {}
    for seq, entry_id, record_id, principal, timestamp in listed:
        by_record.setdefault(record_id, []).append((int(seq), entry_id, principal, _canonical(timestamp)))
    known = dict(bodies)
    for record_id, rows in by_record.items():
        body = known.get(record_id)
        if body is None:
            findings.append(
                f"erased: {len(rows)} entries listed under {record_id[:16]}…, which is no erasure "
                f"record (an erasure without a record)"
            )
        elif body.get("entries") != len(rows) or body.get("entries_sha256") != listing_digest(
            rows if body.get("format", 1) >= LISTING_FORMAT else [row[:2] for row in rows]
        ):
            findings.append(
                f"erased: the entries listed under {record_id[:16]}… are not those its erasure record covers"
                + (
                    " (or an erased row's principal or timestamp changed)"
                    if body.get("format", 1) >= LISTING_FORMAT
                    else ""
                )
            )
    upto = max((int(body.get("snapshots_upto", 0)) for _, body in bodies), default=0)
    return Marks({seq: entry_id for seq, entry_id, *_ in listed}, newest, upto, findings)


def _canonical(timestamp: str | None) -> str | None:
    """A stored timestamp in the form the erasure record covered (as stored when it does not parse)."""
    try:
        return None if timestamp is None else format_timestamp(parse_timestamp(timestamp))
    except ValueError:
        return timestamp


def blank_row_finding(row: Sequence[Any], listed_id: str) -> str:
    """What is wrong with a timeline row `erased` lists ("" when it is an intact erased row)."""
    seq, id_, _, _, _, situation, _, _, text, metadata, encoder, embedding = row
    where = f"timeline seq={seq} id={str(id_)[:16]}…"
    if id_ != listed_id:
        return f"{where}: erased as {listed_id[:16]}…, but the row holds another id"
    if situation or text or metadata != "{}" or encoder or len(embedding):
        return f"{where}: listed as erased but its content is still stored"
    return ""


# -- PostgreSQL --------------------------------------------------------------------------


def purge_postgres(db: Any) -> bool:
    """After the erasure committed: ``VACUUM FULL`` rewrites the tables without the old row versions.

    Only the tables' owner may; for another role (or while other sessions hold locks) this
    returns False and the old versions stay until the owner vacuums. Copies in the server's
    WAL segments and backups are outside any table (see the README).
    """
    try:
        db.execute("VACUUM FULL timeline, records, snapshots, erased")
    except Exception:  # not the owner, or locks held: the erasure stands
        return False
    return True


def postgres_marks(db: Any) -> Marks:
    """The erasures of a PostgreSQL store."""
    has_table = db.execute(
        "SELECT EXISTS (SELECT FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'erased')"
    ).fetchone()[0]
    listed = db.execute(LISTED).fetchall() if has_table else []
    bodies = [
        (rid, json.loads(body))
        for rid, body in db.execute("SELECT id, body FROM records WHERE kind = %s ORDER BY seq", (ERASURE,)).fetchall()
    ]
    newest = db.execute("SELECT COALESCE(MAX(seq), 0) FROM records WHERE kind = %s", (ERASURE,)).fetchone()[0]
    return marks_of(listed, bodies, newest)
