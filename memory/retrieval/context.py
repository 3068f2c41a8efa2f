"""What recall hands the reasoner: a `Context` of scored episodes, applicable facts and causal
chains, and its rendering as a prompt block."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from memory.episodes import Episode
from memory.facts import FactVersion


@dataclass(frozen=True)
class ScoreParts:
    """Why an episode scored what it did: each part in [0, 1] and the weighted total."""

    relevance: float  # cosine similarity to the query
    recency: float  # exponential decay with age
    situation: float  # 1 when the situation matches
    outcome: float  # value of its outcome label and corrections
    graph: float  # personalized-PageRank proximity to the most relevant episodes
    total: float  # weighted sum used for ranking


@dataclass(frozen=True)
class RecalledEpisode:
    """An episode in a Context, with its score parts and reasons."""

    episode: Episode  # the episode itself (outcome, decisions, corrections)
    score: ScoreParts  # score parts
    why: str  # the parts that made it rank, in words
    chain: str | None = None  # causal chain narrative through this episode, if any


@dataclass(frozen=True)
class RecalledFact:
    """A fact version that applies to the query."""

    fact: FactVersion  # the current version
    match: float  # share of its condition terms found in the query
    score: float  # match × confidence
    why: str  # matched terms and confidence, in words


@dataclass(frozen=True)
class Context:
    """What memory hands the reasoner for one decision."""

    query: str  # the query text
    principal: str  # tenant recalled for
    situation: str | None  # situation recalled for
    episodes: tuple[RecalledEpisode, ...]  # best first
    facts: tuple[RecalledFact, ...]  # best first
    chains: tuple[str, ...]  # distinct causal narratives of the episodes
    show_outcomes: bool = True  # whether render shows outcome labels

    def item_ids(self) -> list[str]:
        """Ids of the recalled episodes and fact versions (for decision metadata)."""
        return [r.episode.id for r in self.episodes] + [r.fact.id for r in self.facts]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data for programs: every item with its provenance, score parts and reasons.

        An episode's provenance is its principal, situation, subject, time span and the
        timeline entries it references (``entry_ids``, ``first_seq``..``last_seq``); a fact's is
        the episodes that support and contradict it. Outcomes are left out when the context
        hides them (``show_outcomes`` false), as `render` does.
        """
        return {
            "query": self.query, "principal": self.principal, "situation": self.situation,
            "show_outcomes": self.show_outcomes,
            "episodes": [_episode_dict(rank, r, self.show_outcomes) for rank, r in enumerate(self.episodes, start=1)],
            "facts": [_fact_dict(rank, r) for rank, r in enumerate(self.facts, start=1)],
            "chains": list(self.chains),
        }

    def to_json(self, **dumps: Any) -> str:
        """`to_dict` as a JSON string (keyword arguments go to `json.dumps`)."""
        return json.dumps(self.to_dict(), **{"ensure_ascii": False, **dumps})

    def render(self, max_chars: int = 4000) -> str:
        """A prompt block of at most `max_chars` characters: facts, episodes, chains."""
        blocks: list[str] = []
        if self.facts:
            lines = ["Heuristics learned from past outcomes:"]
            for r in self.facts:
                f = r.fact
                lines.append(f"- [{f.id}] {f.text} (confidence {f.confidence:.2f}, version {f.version}, "
                             f"support {len(f.support)}, contradict {len(f.contradict)})")
            blocks.append("\n".join(lines))
        for n, r in enumerate(self.episodes, start=1):
            ep = r.episode
            head = f"Past episode {n} [{ep.id}] {ep.start:%Y-%m-%d} {ep.situation}"
            head += f", {ep.subject}" if ep.subject else ""
            head += f": outcome {ep.outcome.value}" if self.show_outcomes else ""
            lines = [head, f"  Summary: {ep.summary}"]
            if ep.choices:
                lines.append(f"  Choice: {' then '.join(ep.choices)}")
            else:
                lines += [f"  Decision: {_unprefixed(d, 'decision')}" for d in ep.decisions]
            lines += [f"  Correction: {_unprefixed(c, 'correction')}" for c in ep.corrections]
            lines.append(f"  Why recalled: {r.why}")
            blocks.append("\n".join(lines))
        if self.chains:
            blocks.append("\n".join(["Causal chains:"] + [f"- {c}" for c in self.chains]))
        return _fit_items(blocks, max_chars)


def _fit_items(blocks: list[str], max_chars: int) -> str:
    """The blocks that fit in `max_chars`, cut only between items (lines starting a new item).

    A block that does not fit whole keeps its leading lines up to the last item boundary
    that fits; later blocks are still tried, so one long episode does not crowd out the rest.
    """
    out = ""
    for block in blocks:
        sep = "\n\n" if out else ""
        if len(out) + len(sep) + len(block) <= max_chars:
            out += sep + block
            continue
        lines, kept = block.split("\n"), []
        for line in lines:
            candidate = "\n".join(kept + [line])
            if len(out) + len(sep) + len(candidate) > max_chars:
                break
            kept.append(line)
        while kept and (kept[-1].startswith("  ") or len(kept) == 1):  # never half an item, never a bare heading
            kept.pop()
        if kept and not block.startswith("Past episode"):
            out += sep + "\n".join(kept)
    return out


def _unprefixed(text: str, label: str) -> str:
    """Text without a leading "<label>:" the author may already have written."""
    head, sep, rest = text.partition(":")
    return rest.strip() if sep and head.strip().lower() == label else text


def _episode_dict(rank: int, r: RecalledEpisode, show_outcomes: bool) -> dict[str, Any]:
    ep = r.episode
    data: dict[str, Any] = {
        "rank": rank, "type": "episode", "id": ep.id, "summary": ep.summary,
        "provenance": {"principal": ep.principal, "situation": ep.situation, "subject": ep.subject,
                       "start": ep.start.isoformat(), "end": ep.end.isoformat(), "first_seq": ep.first_seq,
                       "last_seq": ep.last_seq, "entry_ids": list(ep.entry_ids)},
        "choices": list(ep.choices), "decisions": list(ep.decisions), "corrections": list(ep.corrections),
        "score": asdict(r.score), "why": r.why, "chain": r.chain,
    }
    if show_outcomes:
        data["outcome"] = ep.outcome.value
        data["outcome_evidence"] = ep.outcome_evidence
    return data


def _fact_dict(rank: int, r: RecalledFact) -> dict[str, Any]:
    f = r.fact
    return {
        "rank": rank, "type": "fact", "id": f.id, "fact_id": f.fact_id, "version": f.version, "text": f.text,
        "condition": list(f.condition), "conclusion": f.conclusion, "confidence": f.confidence, "status": f.status,
        "reason": f.reason, "created_at": f.created_at.isoformat(),
        "provenance": {"principal": f.principal, "support": list(f.support), "contradict": list(f.contradict),
                       "supersedes": f.supersedes},
        "match": r.match, "score": r.score, "why": r.why,
    }
