"""Episode and edge records: the values layers 2 and 3 produce.

Kept apart from the algorithms (`memory.episodes.segmenter`, `memory.graph`) so that facts,
the retriever and the reinforcer can import the values without the machinery. Edge and
EdgeType are layer 3's values; they live here until the graph layer becomes a package.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import datetime
from enum import Enum
from typing import Any, Mapping

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
        data = asdict(self)
        if not self.outcome_text:
            del data["outcome_text"]
        data["start"] = format_timestamp(self.start)
        data["end"] = format_timestamp(self.end)
        data["outcome"] = self.outcome.value
        return data

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> "Episode":
        """Inverse of `to_record`."""
        fields = dict(data)
        fields["start"] = parse_timestamp(fields["start"])
        fields["end"] = parse_timestamp(fields["end"])
        fields["outcome"] = Outcome(fields["outcome"])
        for key in ("entry_ids", "decisions", "choices", "assumptions", "corrections", "actions", "observations"):
            fields[key] = tuple(fields.get(key, ()))
        return cls(**fields)


def episode_id(entry_ids: tuple[str, ...]) -> str:
    """Content address of an episode: its entries determine it."""
    return hashlib.sha256("\n".join(entry_ids).encode("ascii")).hexdigest()


class EdgeType(str, Enum):
    """Typed relations between episodes (source → target)."""

    CAUSED_BY = "CAUSED_BY"  # source incident was caused by a change made in target
    LED_TO = "LED_TO"  # source (earlier) led to target (later): retrieved-and-used, or step to next step
    RETRY_OF = "RETRY_OF"  # source is a new attempt at the problem target failed at
    LEARNED_FROM = "LEARNED_FROM"  # source applied the lesson (correction) of target
    CONTINUATION = "CONTINUATION"  # source continues target's activity after an interruption
    CONTRADICTED = "CONTRADICTED"  # source's outcome contradicts what target pointed to


@dataclass(frozen=True)
class Edge:
    """A typed, weighted, evidenced relation. A changed weight is a new record."""

    source: str  # episode id
    target: str  # episode id
    type: EdgeType  # relation
    weight: float  # strength in (0, 1]
    evidence: str  # human-readable reason the rule fired

    @property
    def id(self) -> str:
        """Content address of the edge record."""
        blob = json.dumps(self.to_record(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def to_record(self) -> dict[str, Any]:
        """JSON form for the store."""
        return {"source": self.source, "target": self.target, "type": self.type.value,
                "weight": round(float(self.weight), 6), "evidence": self.evidence}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> "Edge":
        """Inverse of `to_record`."""
        return cls(source=data["source"], target=data["target"], type=EdgeType(data["type"]),
                   weight=float(data["weight"]), evidence=data["evidence"])
