"""Retention by policy: a tenant's old entries erased the way `forget` erases them, with a record that proves it.

A `RetentionPolicy` expires a principal's entries older than a maximum age (before its newest
entry, or before a given ``now``) and all but its newest ``max_entries``; with ``keep_lessons``
the entries of episodes that support or contradict one of its current active facts stay. What
it expires is erased by `memory.timeline.erasure` in one transaction: an erasure record that
names the policy and its parameters instead of a person's request (no content), blank rows,
the derived state rebuilt by a replay without them, the bytes purged. `verify` proves the rest
as after any erasure, and a second identical retention finds nothing to erase.

`expired` and `lesson_evidence` are pure; `retain` reads the store and applies the plan.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from memory.episodes import Episode
from memory.facts import ACTIVE, EvidenceErased, FactVersion, current_facts, evidence_lost, resolve_records
from memory.graph.edges import Edge, EdgeType
from memory.timeline import Entry, RecordKind, Store, format_timestamp
from memory.timeline.erasure import ERASURE, Selection, is_erased

INCIDENT_EDGES = (EdgeType.RETRY_OF, EdgeType.LEARNED_FROM)  # later attempt → earlier attempt at the same problem


@dataclass(frozen=True)
class RetentionPolicy:
    """How long a tenant's entries are kept (at least one of `max_age` and `max_entries`)."""

    max_age: timedelta | None = None  # entries older than this before the reference time expire
    max_entries: int | None = None  # all but the newest this many entries expire
    keep_lessons: bool = True  # entries of episodes supporting or contradicting a current fact stay

    def __post_init__(self) -> None:
        problems = []
        if self.max_age is None and self.max_entries is None:
            problems.append("a retention policy needs max_age or max_entries (or both)")
        if self.max_age is not None and (not isinstance(self.max_age, timedelta) or self.max_age <= timedelta(0)):
            problems.append(f"max_age must be a positive timedelta, not {self.max_age!r}")
        if self.max_entries is not None and (
            isinstance(self.max_entries, bool) or not isinstance(self.max_entries, int) or self.max_entries < 0
        ):
            problems.append(f"max_entries must be an int of at least 0, not {self.max_entries!r}")
        if problems:
            raise ValueError("; ".join(problems))

    def to_record(self, now: datetime | None) -> dict[str, Any]:
        """The policy as the erasure record keeps it (``now`` None: the age counts from the newest entry)."""
        return {
            "max_age_seconds": None if self.max_age is None else self.max_age.total_seconds(),
            "max_entries": self.max_entries,
            "keep_lessons": self.keep_lessons,
            "now": None if now is None else format_timestamp(now),
        }


_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def parse_age(text: str) -> timedelta:
    """A maximum age as people write it on a command line: a positive number with d, h or m (``90d``).

    Raises:
        ValueError: naming what was expected and what was found.
    """
    match = re.fullmatch(r"(\d+)([dhm])", text.strip())
    if match is None or int(match[1]) == 0:
        raise ValueError(f"expected a positive number with d, h or m (e.g. 90d), not {text!r}")
    return timedelta(**{_UNITS[match[2]]: int(match[1])})


class Retained(NamedTuple):
    """What `retain` erased (a dry run: what it would erase)."""

    entries: int  # entries erased, or that a dry run would erase
    record_id: str  # id of the erasure record ("" when nothing was erased, or a dry run)
    records: int  # derived records rewritten from the replay
    purged: bool  # no copy of the erased bytes is left in the store's files (True when nothing was erased)
    kept: int  # entries the policy expires but keeps as evidence of a current fact
    dry_run: bool  # nothing was changed


def expired(
    entries: Iterable[Entry], policy: RetentionPolicy, *, kept_evidence: Collection[str], now: datetime | None = None
) -> list[Entry]:
    """The entries (of one principal, in timeline order) `policy` expires, erased ones left out.

    Args:
        entries: one principal's entries, oldest first.
        policy: the retention policy.
        kept_evidence: ids of entries that stay whatever their age or rank (see `lesson_evidence`);
            they do not count towards ``max_entries``.
        now: the time ages count from; None: the newest entry's timestamp.
    """
    live = [e for e in entries if not is_erased(e)]
    if not live:
        return []
    cutoff = None
    if policy.max_age is not None:
        cutoff = (now or max(e.timestamp for e in live)) - policy.max_age
    newest = len(live) if policy.max_entries is None else policy.max_entries
    ranked = len(live) - newest  # the entries before this index are beyond the newest max_entries
    return [
        e
        for i, e in enumerate(live)
        if (i < ranked or (cutoff is not None and e.timestamp < cutoff)) and e.id not in kept_evidence
    ]


def lesson_evidence(
    facts: Iterable[FactVersion], episodes: Mapping[str, Episode], edges: Iterable[Edge], *, principal: str
) -> frozenset[str]:
    """Ids of the entries of the incidents whose episodes support or contradict a current active fact of `principal`.

    An incident is an episode and the earlier attempts it retried or learned from (RETRY_OF,
    LEARNED_FROM, followed back): a retry without observations of its own is evidence of what
    the failed attempt observed, so the failed attempt stays with it.
    """
    earlier: dict[str, list[str]] = {}
    for edge in edges:
        if edge.type in INCIDENT_EDGES:
            earlier.setdefault(edge.source, []).append(edge.target)
    todo = [
        episode_id
        for fact in current_facts(facts)
        if fact.principal == principal and fact.status == ACTIVE
        for episode_id in (*fact.support, *fact.contradict)
    ]
    cited: set[str] = set()
    while todo:
        episode_id = todo.pop()
        if episode_id not in cited:
            cited.add(episode_id)
            todo.extend(earlier.get(episode_id, ()))
    return frozenset(
        entry_id for episode_id in cited if episode_id in episodes for entry_id in episodes[episode_id].entry_ids
    )


def stored_evidence(store: Store, principal: str) -> frozenset[str]:
    """`lesson_evidence` from the fact versions, episodes and edges a store holds (every writer's)."""
    facts = resolve_records(body for _, body in store.records(RecordKind.FACT))
    episodes = {
        e.id: e
        for e in (Episode.from_record(body) for _, body in store.records(RecordKind.EPISODE))
        if e.principal == principal
    }
    edges = (Edge.from_record(body) for _, body in store.records(RecordKind.EDGE))
    return lesson_evidence(facts, episodes, edges, principal=principal)


class Expiry(NamedTuple):
    """What a policy expires in a store now, and what it keeps as evidence."""

    selection: Selection  # the entries to erase and the record's scope
    kept: int  # expired entries kept as evidence


def expiry(store: Store, policy: RetentionPolicy, *, principal: str, now: datetime | None) -> Expiry:
    """What `policy` expires of `principal`'s entries in `store` as it is."""
    entries = list(store.entries(principal=principal))
    kept = stored_evidence(store, principal) if policy.keep_lessons else frozenset()
    chosen = expired(entries, policy, kept_evidence=kept, now=now)
    spared = len(expired(entries, policy, kept_evidence=(), now=now)) - len(chosen) if kept else 0
    scope = {"principal": principal, "policy": policy.to_record(now)}
    return Expiry(Selection([(e.seq, e.id) for e in chosen], scope), spared)


def retain(
    memory: Any,
    policy: RetentionPolicy,
    *,
    settle: Callable[..., tuple[Any, bool]],
    reload: Callable[[Any], None],
    principal: str | None = None,
    now: datetime | None = None,
    dry_run: bool = False,
) -> Retained:
    """Erase what `policy` expires of a principal's entries of `memory` (`EpisodicMemory.retain`).

    Args:
        memory: the memory (its store, principal and replay settings are read).
        policy: the retention policy.
        settle: plans and applies an erasure, planning again when another writer appended
            (`memory.agent_memory.erase_settled`).
        reload: rebuilds the memory's state from its store after the erasure.
        principal: the tenant (default: the memory's).
        now: the time ages count from (timezone-aware); None: the principal's newest entry.
        dry_run: count what would be erased; change nothing.

    Raises:
        ValueError: a naive `now`.
        StoreChanged: the store kept growing under every plan.
    """
    if now is not None and now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    who = memory.principal if principal is None else principal
    first = expiry(memory.store, policy, principal=who, now=now)
    if dry_run or not first.selection.entries:
        return Retained(len(first.selection.entries), "", 0, not first.selection.entries, first.kept, dry_run)
    picked: list[Expiry] = []

    def select(store: Store) -> Selection:
        picked.append(expiry(store, policy, principal=who, now=now))
        return picked[-1].selection

    plan, purged = settle(memory, select=select)
    reload(memory.state.graph_config)
    return Retained(len(plan.entries), plan.record_id, len(plan.records), purged, picked[-1].kept, False)


def summary(done: Retained, principal: str) -> str:
    """One line saying what a retention did."""
    noun = "entry" if done.entries == 1 else "entries"
    kept = f"; {done.kept} kept as evidence of current facts" if done.kept else ""
    if done.dry_run:
        return f"would erase {done.entries} expired {noun} of {principal}{kept} (dry run: nothing changed)"
    if not done.entries:
        return f"nothing of {principal} expired{kept}"
    return (
        f"erased {done.entries} expired {noun} of {principal} (erasure record {done.record_id[:16]}…){kept}; "
        f"{done.records} derived records rebuilt; "
        + (
            "no copy left in the store's files"
            if done.purged
            else "old copies may remain until the store is vacuumed (another process held it, or not the owner)"
        )
    )


__all__ = ["Retained", "RetentionPolicy", "expired", "lesson_evidence", "retain", "summary"]


def evidence_note(versions: Iterable[FactVersion], rows: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    """What an erasure record says of the facts that lose evidence (`memory.facts.evidence_lost`): `versions`
    before it, `rows` the (kind, id, body JSON) records a replay without the erased entries derives."""
    after = list(resolve_records(json.loads(body) for kind, _, body in rows if kind == RecordKind.FACT))
    lost = evidence_lost(versions, after)
    return {"evidence_lost": lost} if lost else {}


def evidence_erased(store: Store, principal: str, fact_id: str) -> list[EvidenceErased]:
    """The notes of `store`'s erasure records on a principal's fact, named by its id before or after them
    (a version id names its fact), oldest first: the part of its history a replay without the erased
    entries cannot tell."""
    fact = fact_id.split("@", 1)[0]
    notes = [note for rid, body in store.records(ERASURE) for note in EvidenceErased.of_record(rid, body)]
    return [note for note in notes if note.principal == principal and fact in (note.fact, note.now)]
