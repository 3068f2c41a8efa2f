"""The graph's records: `EdgeType` (the typed relations) and `Edge` (one typed, weighted, evidenced link).

Values only (no graph machinery and no import of the episodes layer), so that facts, the
reinforcer, retrieval and persistence can read and store edges without the rules.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any


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
        return {
            "source": self.source,
            "target": self.target,
            "type": self.type.value,
            "weight": round(float(self.weight), 6),
            "evidence": self.evidence,
        }

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Edge:
        """Inverse of `to_record`."""
        return cls(
            source=data["source"],
            target=data["target"],
            type=EdgeType(data["type"]),
            weight=float(data["weight"]),
            evidence=data["evidence"],
        )
