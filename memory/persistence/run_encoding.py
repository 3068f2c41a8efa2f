"""Writing a state run (`memory.persistence.runs` describes what a run holds and how it is read).

`encode_run` lays a range of derived records out as named sections (little-endian arrays and
UTF-8 JSON documents) with a string table; `run_id` names the stored snapshot.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from memory.episodes import Episode
from memory.graph.edges import EdgeType
from memory.persistence.runs import EDGE_TYPES, EPOCH, FORMAT, OUTCOMES, PACKED, body_digest


def encode_run(
    *,
    after: int,
    upto: int,
    first: tuple[str, str],
    last: tuple[str, str],
    config: str,
    dim: int,
    episodes: Sequence[Episode],
    problems: Sequence[tuple[str, np.ndarray]],
    cites: Mapping[str, list[str]],
    edges: Sequence[tuple[str, dict[str, Any]]],
    facts: Sequence[dict[str, Any]],
    marks: Sequence[tuple[str, str]],
    projections: Mapping[str, tuple[str, np.ndarray, np.ndarray]],
    sidecar: Mapping[str, tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] | None = None,
    term_counts: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[dict[str, Any], bytes]:
    """Meta and body of a run (format 4 with `sidecar`, else format 1).

    Args:
        after, upto: the records range the run stands for.
        first, last: (kind, id) of the records at ``after + 1`` and ``upto``.
        config: `config_digest` of the graph rules the problems were computed under.
        dim: vector length.
        episodes: the episode records of the range, in storing order.
        problems: (text, unit vector) of each of them.
        cites: fact ids cited by those of them that cite any.
        edges: (record id, record body) of the edge records, in storing order.
        facts: fact version record bodies, in storing order.
        marks: (mark id, episode id) of the reinforcement marks, in storing order.
        projections: principal → (basis digest, projections, residual norms) of its episodes' rows (in order).
        sidecar: principal → (first byte, float counts and palette sizes (`VectorFile.append`),
            `sparse_rows.row_digests`, `sparse_rows.row_checksums`) of its episodes' vectors, written to the
            store's vectors sidecar beforehand; without it the vectors are kept in the body (and the documents
            are not compressed).
        term_counts: principal → `memory.state.TermCounts.to_plain` of its episodes (a first recall adds them up).
    """
    out = _Sections(packed=sidecar is not None)
    rows = _episode_columns(out, episodes)
    _problem_sections(out, rows, problems, cites, dim, sidecar)
    _link_sections(out, episodes, edges, facts, marks)
    bases = _projection_sections(out, projections, term_counts)
    out.document("strings", list(out.strings))
    layout, body = out.pack()
    meta = {
        "format": 1 if sidecar is None else FORMAT,
        **{"after": after, "upto": upto, "first": list(first), "last": list(last)},  # the records range
        "config": config,
        "dim": dim,
        "episodes": len(episodes),
        "rows": {p: len(r) for p, r in rows.items()},
        "bases": bases,
        "sections": layout,
        "size": len(body),
        "digest": body_digest(body),
    }
    if sidecar is not None:
        meta["vectors"] = {p: int(first) for p, (first, *_) in sidecar.items()}
    return meta, body


class _Sections:
    """A run body being written: named sections (arrays or JSON documents) and a string table."""

    def __init__(self, *, packed: bool) -> None:
        self.packed = packed  # JSON documents compressed (format 3)
        self.sections: list[tuple[str, bytes, str | None, list[int] | None]] = []
        self.strings: dict[str | None, int] = {}

    def code(self, value: str | None) -> int:
        """The string table code of `value` (added on first use)."""
        return self.strings.setdefault(value, len(self.strings))

    def array(self, name: str, values: Any, dtype: str) -> None:
        a = np.ascontiguousarray(values, dtype=dtype)
        self.sections.append((name, a.tobytes(), dtype, list(a.shape)))

    def document(self, name: str, value: Any) -> None:
        data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if self.packed:
            self.sections.append((name, zlib.compress(data, 6), PACKED, None))
        else:
            self.sections.append((name, data, None, None))

    def pack(self) -> tuple[dict[str, list[Any]], bytes]:
        """The layout (name → offset, size, dtype, shape) and the concatenated body."""
        layout, chunks, offset = {}, [], 0
        for name, data, dtype, shape in self.sections:
            layout[name] = [offset, len(data), dtype, shape]
            chunks.append(data)
            offset += len(data)
        return layout, b"".join(chunks)


def _episode_columns(out: _Sections, episodes: Sequence[Episode]) -> dict[str, list[int]]:
    """The episodes as columns; returns each principal's rows."""
    code = out.code
    out.document("ids", [ep.id for ep in episodes])
    out.array("principal", [code(ep.principal) for ep in episodes], "<i4")
    out.array("situation", [code(ep.situation) for ep in episodes], "<i4")
    out.array("subject", [code(ep.subject) for ep in episodes], "<i4")
    out.array("seqs", np.array([(ep.first_seq, ep.last_seq) for ep in episodes]).reshape(-1, 2), "<i8")
    out.array("ends", [ep.end.timestamp() for ep in episodes], "<f8")
    out.array("end_us", [_microseconds(ep.end) for ep in episodes], "<i8")
    out.array("choice", [code(ep.choices[-1]) if ep.choices else -1 for ep in episodes], "<i4")
    out.array("outcome", [OUTCOMES.index(ep.outcome) for ep in episodes], "<i1")
    out.array("corrected", [bool(ep.corrections) for ep in episodes], "u1")
    rows: dict[str, list[int]] = {}
    for n, ep in enumerate(episodes):
        rows.setdefault(ep.principal, []).append(n)
    return rows


def _problem_sections(
    out: _Sections,
    rows: Mapping[str, list[int]],
    problems: Sequence[tuple[str, np.ndarray]],
    cites: Mapping[str, list[str]],
    dim: int,
    sidecar: Mapping[str, tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] | None,
) -> None:
    """Each principal's vectors (in the body, or with `sidecar` where they are in the sidecar and their checks),
    then the problem texts and the citations."""
    for principal, picked in rows.items():  # one block per principal: copied straight into its partition
        if sidecar is None:
            out.array(f"vectors:{principal}", np.stack([problems[n][1] for n in picked]).reshape(-1, dim), "<f4")
        else:
            _, counts, palettes, digests, checksums = sidecar[principal]
            out.array(f"counts:{principal}", counts, "<u4")
            out.array(f"palettes:{principal}", palettes, "<u2")
            out.array(f"digests:{principal}", digests, "u1")
            out.array(f"checksums:{principal}", checksums, "<u4")
    out.document("texts", [t for t, _ in problems])
    out.document("cites", {i: list(c) for i, c in cites.items()})


def _projection_sections(
    out: _Sections,
    projections: Mapping[str, tuple[str, np.ndarray, np.ndarray]],
    term_counts: Mapping[str, Mapping[str, Any]] | None,
) -> dict[str, str]:
    """Each principal's bound projections and residual norms, and the term counts of its episodes when given;
    principal → the digest of their basis."""
    bases = {}
    for principal, (basis, proj, resid) in projections.items():
        bases[principal] = basis
        out.array(f"proj:{principal}", proj, "<f4")
        out.array(f"resid:{principal}", resid, "<f4")
    if term_counts is not None:
        out.document("term_counts", term_counts)
    return bases


def _link_sections(
    out: _Sections,
    episodes: Sequence[Episode],
    edges: Sequence[tuple[str, dict[str, Any]]],
    facts: Sequence[dict[str, Any]],
    marks: Sequence[tuple[str, str]],
) -> None:
    """Edges, fact versions and reinforcement marks of the range."""
    out.document(
        "edges",
        [
            [body["source"], body["target"], EDGE_TYPES.index(EdgeType(body["type"])), body["evidence"]]
            for _, body in edges
        ],
    )
    out.array("weights", [float(body["weight"]) for _, body in edges], "<f8")
    out.document("edge_ids", [i for i, _ in edges])
    out.document("facts", list(facts))
    out.document("marks", [m for m, _ in marks])
    marked, own = {e for _, e in marks}, {ep.id for ep in episodes}
    out.document("unmarked", [ep.id for ep in episodes if ep.id not in marked])  # learned after the range, or never
    out.document("outside", sorted(marked - own))  # episodes before the range marked in it


def _microseconds(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1)


def run_id(meta: Mapping[str, Any]) -> str:
    """Snapshot id of a run: its range and the digest of its body."""
    return f"{meta['after']}:{meta['upto']}:{meta['digest'][:32]}"
