"""Episode records: the values layer 2 produces (`Episode`, `Outcome`, `episode_id`).

Kept apart from the algorithms (`memory.episodes.segmenter`) so that facts, the retriever and
the reinforcer can import the values without the machinery. Layer 3's values, `Edge` and
`EdgeType`, live with the graph (`memory.graph.edges`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from datetime import datetime
from enum import Enum
from typing import Any

from memory.timeline import format_timestamp, parse_timestamp


class Outcome(str, Enum):
    """How an episode ended, as detected from the stream (never from ground truth)."""

    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
    PARTIAL = "PARTIAL"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class Episode:
    """One coherent unit of experience; references timeline entries, never copies them."""

    id: str  # SHA-256 of the ordered entry ids (see `episode_id`)
    entry_ids: tuple[str, ...]  # timeline entries, in order
    first_seq: int  # sequence number of the first entry
    last_seq: int  # sequence number of the last entry
    principal: str  # tenant of every entry in the episode
    situation: str  # situation label
    subject: str | None  # service or subject named in entry metadata, when known
    start: datetime  # timestamp of the first entry (UTC)
    end: datetime  # timestamp of the last entry (UTC)
    summary: str  # extractive, deterministic summary
    outcome: Outcome  # detected outcome
    outcome_evidence: str  # what the outcome was detected from (metadata status or text cue)
    decisions: tuple[str, ...] = ()  # texts of decision entries
    choices: tuple[str, ...] = ()  # structured choices from decision metadata ("choice"), in order
    assumptions: tuple[str, ...] = ()  # stated assumptions (decision metadata or "assum…" sentences)
    corrections: tuple[str, ...] = ()  # texts of correction entries
    actions: tuple[str, ...] = ()  # texts of action entries (changes made: deploys, config edits)
    observations: tuple[str, ...] = ()  # texts of observation entries (what was seen), in order
    outcome_text: str = ""  # the last outcome entry's whole text when the summary trims it, else ""

    def to_record(self) -> dict[str, Any]:
        """JSON form for the store (``outcome_text`` only when there is one)."""
        data: dict[str, Any] = {name: getattr(self, name) for name in _FIELDS}  # fields in order, values immutable
        if not self.outcome_text:
            del data["outcome_text"]
        data["start"] = format_timestamp(self.start)
        data["end"] = format_timestamp(self.end)
        data["outcome"] = self.outcome.value
        return data

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Episode:
        """Inverse of `to_record`."""
        fields = dict(data)
        fields["start"] = parse_timestamp(fields["start"])
        fields["end"] = parse_timestamp(fields["end"])
        fields["outcome"] = Outcome(fields["outcome"])
        for key in ("entry_ids", "decisions", "choices", "assumptions", "corrections", "actions", "observations"):
            fields[key] = tuple(fields.get(key, ()))
        return cls(**fields)


_FIELDS = tuple(f.name for f in dataclass_fields(Episode))  # in declaration order: the record's key order


def episode_id(entry_ids: tuple[str, ...]) -> str:
    """Content address of an episode: its entries determine it."""
    return hashlib.sha256("\n".join(entry_ids).encode("ascii")).hexdigest()
