"""Shared test data: one clock and small builders for entries, episodes, evidence and timelines.

Also `INCIDENTS` and `play_incidents`, a few support incidents played through the
`EpisodicMemory` facade like an agent loop (also from a subprocess, which imports them here).

Every moment in the tests is an offset from `T0`, so no test depends on which calendar
date was picked; builders take keyword defaults so a test names only what it is about.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from memory.episodes import Episode, Outcome
from memory.facts import EpisodeEvidence, terms
from memory.timeline import HashingEncoder, NoRedaction, SQLiteStore, Timeline
from memory.timeline.entries import GENESIS_ID, EntryDraft, Kind, Role, chain

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # the tests' clock: a Monday, 09:00 UTC

# The role each entry kind has when a fixture item does not name one.
DEFAULT_ROLE = {
    "observation": "environment",
    "outcome": "environment",
    "decision": "agent",
    "action": "agent",
    "correction": "user",
    "note": "user",
}
_ENCODER = HashingEncoder()


def at(*, days: float = 0, hours: float = 0, minutes: float = 0, seconds: float = 0) -> datetime:
    """The moment that far after `T0`."""
    return T0 + timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


def open_timeline(path=":memory:", *, dim: int = 64, redactor=None) -> Timeline:
    """A timeline on a SQLite store (in memory by default) with the hashing encoder and no redaction."""
    return Timeline(SQLiteStore(path), HashingEncoder(dim=dim), redactor=redactor or NoRedaction())


def entries_from(items: Iterable[dict], *, start: datetime = T0) -> list:
    """Chain fixture items into timeline entries, as the golden files describe them.

    Each item is ``{at: minutes after start, kind, text}`` with optional ``principal``
    (default "default"), ``situation`` ("incident_response"), ``role`` (by kind),
    ``metadata`` and ``vector`` (a raw embedding, normalized here; otherwise the text is encoded).
    """
    out, prev = [], GENESIS_ID
    for seq, item in enumerate(items):
        if "vector" in item:
            vector = np.asarray(item["vector"], dtype=np.float32)
            vector = vector / np.linalg.norm(vector)
        else:
            vector = _ENCODER.encode([item["text"]])[0]
        draft = EntryDraft(
            timestamp=start + timedelta(minutes=item["at"]),
            principal=item.get("principal", "default"),
            situation=item.get("situation", "incident_response"),
            role=Role(item.get("role", DEFAULT_ROLE[item["kind"]])),
            kind=Kind(item["kind"]),
            text=item["text"],
            metadata=item.get("metadata", {}),
            embedding=vector,
            encoder="fixture",
        )
        entry = chain(draft, prev_id=prev, seq=seq)
        out.append(entry)
        prev = entry.id
    return out


def episode(
    eid: str = "ep",
    outcome: Outcome = Outcome.UNKNOWN,
    choice: str | None = None,
    *,
    hours: int = 0,
    corrections: Iterable[str] = (),
    principal: str = "p",
    situation: str = "ops",
    subject: str | None = "svc",
    **fields,
) -> Episode:
    """A one-entry episode `hours` after `T0` that tested `choice` (if any) with `outcome`.

    The entry id is the episode id and the sequence number is `hours`, so episodes built
    with increasing hours are in timeline order. Any other `Episode` field can be given.
    """
    moment = T0 + timedelta(hours=hours)
    base = dict(
        id=eid,
        entry_ids=(eid,),
        first_seq=hours,
        last_seq=hours,
        principal=principal,
        situation=situation,
        subject=subject,
        start=moment,
        end=moment,
        summary=eid,
        outcome=outcome,
        outcome_evidence="",
        decisions=(f"Decision: {choice}",) if choice else (),
        choices=(choice,) if choice else (),
        corrections=tuple(corrections),
    )
    return Episode(**{**base, **fields})


def evidence(
    i: int,
    text: str,
    choice: str,
    outcome: Outcome | bool = True,
    *,
    principal: str = "p",
    cited: Iterable[str] = (),
    words: Iterable[str] | None = None,
    hours: int | None = None,
) -> EpisodeEvidence:
    """Evidence of episode ``e{i:02d}``, ending `i` (or `hours`) hours after `T0`, that tested `choice`.

    `outcome` True/False stand for SUCCESS/FAILURE. The terms are those of `text`, or
    exactly `words` when given (already normalized).
    """
    if isinstance(outcome, bool):
        outcome = Outcome.SUCCESS if outcome else Outcome.FAILURE
    found = frozenset(words) if words is not None else terms(text)
    return EpisodeEvidence(
        f"e{i:02d}",
        principal,
        found,
        choice,
        outcome,
        T0 + timedelta(hours=i if hours is None else hours),
        frozenset(cited),
    )


def evidence_of(ep: Episode, text: str) -> EpisodeEvidence:
    """The evidence a closed episode gives, with `text` as its observations."""
    return EpisodeEvidence(ep.id, ep.principal, terms(text), ep.choices[-1], ep.outcome, ep.end)


# (observations, truth, first guess); each incident is corrected when the guess is wrong
INCIDENTS = [  # (observations, truth, first guess[, what the correction says after a wrong guess])
    (
        ["spool directory full on the print servers", "jobs stuck in the spool queue"],
        "spool",
        "driver",
        "the jobs were stuck in the spool queue",
    ),
    (["print jobs stuck, spool partition at 100%", "spool cleanup cron missing"], "spool", "spool"),
    (
        ["garbled output after the driver update", "driver version changed on the print servers"],
        "driver",
        "spool",
        "the driver update garbled the output",
    ),
    (["new driver package rolled out, pages print garbled", "driver checksum differs"], "driver", "driver"),
    (["spool queue growing, jobs stuck for hours"], "spool", "spool"),
]


def play_incidents(memory, incidents=INCIDENTS, *, principal=None, start=T0) -> None:
    """Plays incidents through the facade like an agent loop (recall → decide → outcome → correction → retry)."""
    clock = start
    for observations, truth, guess, *said in incidents:
        for text in observations:
            clock += timedelta(minutes=2)
            memory.observe(
                text, timestamp=clock, situation="support", metadata={"service": "print"}, principal=principal
            )
        tries = [guess] if guess == truth else [guess, truth]
        for choice in tries:
            context = memory.recall(principal=principal)
            clock += timedelta(minutes=3)
            memory.decide(
                f"Decision: {choice} — best match",
                choice=choice,
                confidence=0.6,
                retrieved=context.item_ids(),
                relied_on=context.item_ids()[:1],
                timestamp=clock,
                situation="support",
                metadata={"service": "print"},
                principal=principal,
            )
            clock += timedelta(minutes=5)
            ok = choice == truth
            memory.outcome(
                "Verified: the problem is gone" if ok else "The problem persists",
                status="success" if ok else "failure",
                timestamp=clock,
                situation="support",
                metadata={"service": "print"},
                principal=principal,
            )
            if not ok:
                clock += timedelta(minutes=2)
                memory.correct(
                    f"Not {choice}: {said[0] if said else f'it was the {truth}'}",
                    timestamp=clock,
                    situation="support",
                    metadata={"service": "print"},
                    principal=principal,
                )
        clock += timedelta(days=1)


def untried_candidates(prompt):
    """The candidate ids a rendered user prompt offers, minus those it lists as already tried."""
    section = prompt.split("Candidate root causes", 1)[1].split("\n", 1)[1].split("\n\n")[0]
    offered = [line[2:].split(":")[0] for line in section.split("\n") if line.startswith("- ")]
    tried = (
        prompt.split("Already tried in this incident and failed: ")[1].split("\n")[0].split(", ")
        if "Already tried" in prompt
        else []
    )
    return [c for c in offered if c not in tried]


def copy_store(source: Path, folder: Path) -> Path:
    """A copy of a store file with every file beside it (its anchor and other sidecars) in `folder`; the copy's path."""
    for file in Path(source).parent.iterdir():
        shutil.copyfile(file, Path(folder) / file.name)
    return Path(folder) / Path(source).name
