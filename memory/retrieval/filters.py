"""Recall filters: which of a principal's episodes may be recalled at all.

A filter is applied before scoring, like the principal: an episode it excludes is never
scored, pooled or returned, and graph proximity does not flow through it. ``where`` matches
episode attributes (``service`` — the subject named in entry metadata —, ``situation``,
``outcome``); each value is one accepted value or a list of them. ``since`` and ``until``
bound the episode's end time (inclusive). Facts are generalizations over many episodes and
are not filtered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

import networkx as nx
import numpy as np

from memory.retrieval.index import Partition

# filter key -> episode attribute (graph nodes carry the same names)
FILTER_KEYS = {"service": "subject", "subject": "subject", "situation": "situation", "outcome": "outcome"}


@dataclass(frozen=True)
class RecallFilter:
    """A validated recall filter."""

    where: tuple[tuple[str, frozenset[str]], ...]  # (episode attribute, accepted values)
    since: float | None  # earliest episode end, POSIX seconds
    until: float | None  # latest episode end, POSIX seconds

    @classmethod
    def build(
        cls, where: Mapping[str, Any] | None = None, since: datetime | None = None, until: datetime | None = None
    ) -> RecallFilter | None:
        """The filter these arguments describe, or None when they filter nothing.

        Raises:
            ValueError: an unknown key, an empty value list, a naive datetime, or since after until.
        """
        clauses = []
        for key, value in (where or {}).items():
            if key not in FILTER_KEYS:
                raise ValueError(f"recall filter: unknown key {key!r} (known: {', '.join(FILTER_KEYS)})")
            values = [value] if isinstance(value, (str, Enum)) else list(value)
            if not values:
                raise ValueError(f"recall filter: {key!r} lists no values")
            accepted = frozenset(_plain(v, key) for v in values)
            clauses.append((FILTER_KEYS[key], accepted))
        start, end = _seconds(since, "since"), _seconds(until, "until")
        if since is not None and until is not None and since > until:  # both aware: compared as instants
            raise ValueError(f"recall filter: since {since.isoformat()} is after until {until.isoformat()}")
        if not clauses and start is None and end is None:
            return None
        return cls(tuple(clauses), start, end)

    def mask(self, part: Partition, graph: nx.MultiDiGraph) -> np.ndarray:
        """Which rows of `part` the filter admits (a boolean array)."""
        ok = np.ones(len(part), dtype=bool)
        if self.since is not None:
            ok &= part.ends >= self.since
        if self.until is not None:
            ok &= part.ends <= self.until
        if self.where and ok.any():
            ids = np.empty(len(part), dtype=object)
            for episode_id, row in part.position.items():
                ids[row] = episode_id
            nodes = graph.nodes
            for row in np.flatnonzero(ok).tolist():
                # graph nodes hold the attributes without reading a lazily stored episode
                data = nodes[ids[row]] if ids[row] in nodes else vars(part.episodes[row])
                ok[row] = all(_plain(data.get(attr), attr) in accepted for attr, accepted in self.where)
        return ok


def _plain(value: Any, key: str) -> str:
    text = str(value.value) if isinstance(value, Enum) else ("" if value is None else str(value))
    return text.upper() if key == "outcome" else text


def _seconds(moment: datetime | None, name: str) -> float | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        raise ValueError(f"recall filter: {name} must be timezone-aware (got {moment.isoformat()})")
    return moment.timestamp()
