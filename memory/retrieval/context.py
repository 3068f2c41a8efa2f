"""What recall hands the reasoner: a `Context` of scored episodes, applicable facts and causal
chains, and its rendering as a prompt block."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from memory.episodes import Episode, Outcome
from memory.facts import FactVersion
from memory.graph import ChangeLink
from memory.retrieval.incidents import Incident


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
class RecalledIncident:
    """One unit of past experience in a `Context`, weighed for the current problem."""

    incident: Incident  # symptoms, attempts with outcomes and corrections, final fix
    recalled: RecalledEpisode  # its best-matching recalled episode: the id a reader cites
    episodes: tuple[Episode, ...]  # every episode of the unit, oldest first
    closeness: float  # in [0, 1]: how close its symptoms are to the current observations
    credit: float  # in (0, 1]: its weight as a precedent after the decisions that recalled it
    sequence: int  # 1 + the place of its latest episode in the principal's closing order
    why: str  # closeness, credit and the recall score, in words
    telling: float = 0.0  # for an exception (first answers failed, another fixed it): `incidents.telling`
    telling_terms: tuple[str, ...] = ()  # the shared terms that told it apart, most telling first

    @property
    def id(self) -> str:
        """The id a reader cites (the recalled episode's)."""
        return self.recalled.episode.id

    @property
    def outcome(self) -> str:
        """SUCCESS when something fixed it, else the last attempt's outcome."""
        return Outcome.SUCCESS.value if self.incident.resolution else self.incident.attempts[-1].outcome


@dataclass(frozen=True)
class RecalledChange:
    """A recent change the current observations implicate, with its place in the closing order."""

    change: ChangeLink  # the change, its probability, chain and what such changes led to
    sequence: int  # 1 + the place of its episode in the principal's closing order (0 when unknown)


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
    incidents: tuple[RecalledIncident, ...] = ()  # the recalled episodes as units (`memory.retrieval.units`)
    changes: tuple[RecalledChange, ...] = ()  # recent changes the query implicates, most probable first
    notes: Mapping[str, IncidentNote] = field(default_factory=dict)  # recalled episode id → its whole incident

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
            "query": self.query,
            "principal": self.principal,
            "situation": self.situation,
            "show_outcomes": self.show_outcomes,
            "episodes": [_episode_dict(rank, r, self.show_outcomes) for rank, r in enumerate(self.episodes, start=1)],
            "facts": [_fact_dict(rank, r) for rank, r in enumerate(self.facts, start=1)],
            "chains": list(self.chains),
            "incidents": [
                _incident_dict(rank, u, self.show_outcomes) for rank, u in enumerate(self.incidents, start=1)
            ],
            "changes": [
                {
                    "id": c.change.episode_id,
                    "probability": c.change.probability,
                    "chain": c.change.chain,
                    "resolved": c.change.resolved,
                    "led_to": list(c.change.led_to),
                    "why": c.change.why,
                }
                for c in self.changes
            ],
        }

    def to_json(self, **dumps: Any) -> str:
        """`to_dict` as a JSON string (keyword arguments go to `json.dumps`)."""
        return json.dumps(self.to_dict(), **{"ensure_ascii": False, **dumps})

    def render(self, max_chars: int = 4000, *, notes: Mapping[str, IncidentNote] | None = None) -> str:
        """A prompt block of at most `max_chars` characters: facts, past incidents, implicated changes, chains.

        Recalled episodes are shown as incidents: the episodes of one problem together, in
        time order, under the problem's symptoms and final fix, each attempt with its choice,
        outcome, result and corrections. `notes` says which problem each episode worked
        on (episodes with the same `IncidentNote.key` are one incident; by default the notes
        the memory attached, `memory.retrieval.units`); an episode it does not name is an
        incident of its own. The block is cut only between items (a fact, an
        attempt, a chain), never inside one, and an incident never loses its first attempt.
        """
        blocks: list[list[str]] = []
        if self.facts:
            blocks.append(
                ["Heuristics learned from past outcomes:"]
                + [
                    f"- [{r.fact.id}] {r.fact.text} (confidence {r.fact.confidence:.2f}, version {r.fact.version}, "
                    f"support {len(r.fact.support)}, contradict {len(r.fact.contradict)})"
                    for r in self.facts
                ]
            )
        notes = self.notes if notes is None else notes
        for n, unit in enumerate(incident_units(self.episodes, notes), start=1):
            blocks.append(_incident_block(n, unit, notes.get(unit[0].episode.id), self.show_outcomes))
        if self.changes:
            blocks.append(
                ["Recent changes the observations implicate:"]
                + [
                    f"- [{c.change.episode_id}] {c.change.chain} (probability {c.change.probability:.2f})"
                    for c in self.changes
                ]
            )
        if self.chains:
            blocks.append(["Causal chains:"] + [f"- {c}" for c in self.chains])
        return _fit_items(blocks, max_chars)


@dataclass(frozen=True)
class IncidentNote:
    """What memory knows of the problem an episode worked on, beyond the episode itself."""

    key: str  # the same for every attempt at one problem (e.g. the problem's observations)
    symptoms: tuple[str, ...] = ()  # what was observed when the problem started
    final_fix: str | None = None  # the choice that finally resolved the problem, when known
    episodes: tuple[Episode, ...] = ()  # every episode of the problem, oldest first, when memory knows them


def incident_units(
    episodes: Sequence[RecalledEpisode], notes: Mapping[str, IncidentNote]
) -> list[list[RecalledEpisode]]:
    """Recalled episodes grouped by problem: incidents in order of their best-ranked episode,
    the episodes of each in time order."""
    units: dict[str, list[RecalledEpisode]] = {}
    for r in episodes:
        note = notes.get(r.episode.id)
        units.setdefault(note.key if note is not None and note.key else r.episode.id, []).append(r)
    return [sorted(unit, key=lambda r: (r.episode.start, r.episode.first_seq, r.episode.id)) for unit in units.values()]


SYMPTOM_LINES = 4  # observations shown for an incident's symptoms (whole lines only)


def _incident_block(n: int, unit: list[RecalledEpisode], note: IncidentNote | None, show_outcomes: bool) -> list[str]:
    """An incident as items: its head (when, where, symptoms, final fix), one item per attempt, why recalled.

    With the note's `episodes` (the whole incident) every attempt is shown; the recalled ones
    carry their ids, which are what a reader cites.
    """
    recalled = {r.episode.id for r in unit}
    episodes = list(note.episodes) if note is not None and note.episodes else [r.episode for r in unit]
    first = episodes[0]
    fix = note.final_fix if note is not None else None
    if fix is None:
        fix = next((e.choices[-1] for e in episodes if e.outcome.value == "SUCCESS" and e.choices), None)
    head = f"Past incident {n}: {first.start:%Y-%m-%d} {first.situation}" + (
        f", {first.subject}" if first.subject else ""
    )
    attempts = sum(1 for e in episodes if e.choices or e.decisions)
    facts = [f"{attempts} attempts"] if attempts > 1 else []
    facts += [f"final fix: {fix}"] if fix and show_outcomes else []
    head += f" ({', '.join(facts)})" if facts else ""
    symptoms = (note.symptoms if note is not None and note.symptoms else first.observations)[:SYMPTOM_LINES]
    items = ["\n".join([head] + [f"  Symptom: {text}" for text in symptoms])]
    items += [_attempt(e, show_outcomes, cited=e.id in recalled) for e in episodes]
    best = max(unit, key=lambda r: r.score.total)
    items.append(f"  Why recalled: {best.why}")
    return items


def _attempt(ep: Episode, show_outcomes: bool, *, cited: bool = True) -> str:
    """One episode of an incident: what was tried and how it ended, what it left, what people corrected."""
    label = "Attempt" if ep.choices or ep.decisions else "Record"
    line = f"  {label}{f' [{ep.id}]' if cited else ''} {ep.start:%Y-%m-%d %H:%M}"
    if ep.choices:
        line += f": tried {' then '.join(ep.choices)}"
    if show_outcomes:
        line += f"{',' if ep.choices else ':'} outcome {ep.outcome.value}"
    lines = [line]
    if not ep.choices:
        lines += [f"    Decision: {_unprefixed(d, 'decision')}" for d in ep.decisions]
    result = _result(ep)
    if result:
        lines.append(f"    {'Result' if ep.choices or ep.decisions else 'Note'}: {result}")
    lines += [f"    Correction: {_unprefixed(c, 'correction')}" for c in ep.corrections]
    return "\n".join(lines)


def _result(ep: Episode) -> str:
    """The summary's parts that say something the attempt line and corrections do not (the outcome report)."""
    said = [" ".join(text.split()) for text in (*ep.observations, *ep.decisions, *ep.corrections)]
    parts = [p for p in ep.summary.split(" → ") if not any(text.startswith(p.rstrip("…")) for text in said)]
    return " → ".join(parts)


def _fit_items(blocks: list[list[str]], max_chars: int) -> str:
    """The blocks that fit in `max_chars`, each cut only between its items.

    A block is a list of items (a heading or an incident's head, then facts, attempts or
    chains); what does not fit whole keeps its longest prefix of whole items, provided that
    prefix holds more than the first item. Later blocks are still tried, so one long
    incident does not crowd out the rest.
    """
    out = ""
    for items in blocks:
        sep = "\n\n" if out else ""
        kept: list[str] = []
        for item in items:
            if len(out) + len(sep) + len("\n".join(kept + [item])) > max_chars:
                break
            kept.append(item)
        if len(kept) == len(items) or len(kept) > 1:
            out += sep + "\n".join(kept)
    return out


def _unprefixed(text: str, label: str) -> str:
    """Text without a leading "<label>:" the author may already have written."""
    head, sep, rest = text.partition(":")
    return rest.strip() if sep and head.strip().lower() == label else text


def _episode_dict(rank: int, r: RecalledEpisode, show_outcomes: bool) -> dict[str, Any]:
    ep = r.episode
    data: dict[str, Any] = {
        "rank": rank,
        "type": "episode",
        "id": ep.id,
        "summary": ep.summary,
        "provenance": {
            "principal": ep.principal,
            "situation": ep.situation,
            "subject": ep.subject,
            "start": ep.start.isoformat(),
            "end": ep.end.isoformat(),
            "first_seq": ep.first_seq,
            "last_seq": ep.last_seq,
            "entry_ids": list(ep.entry_ids),
        },
        "choices": list(ep.choices),
        "decisions": list(ep.decisions),
        "corrections": list(ep.corrections),
        "score": asdict(r.score),
        "why": r.why,
        "chain": r.chain,
    }
    if show_outcomes:
        data["outcome"] = ep.outcome.value
        data["outcome_evidence"] = ep.outcome_evidence
    return data


def _incident_dict(rank: int, u: RecalledIncident, show_outcomes: bool) -> dict[str, Any]:
    """A unit as data: the episode a reader cites, the symptoms, every attempt, the fix, its weights and why."""
    attempts = [
        {
            "episode": a.episode_id,
            "choice": a.choice,
            "corrections": list(a.corrections),
            **({"outcome": a.outcome, "verdict": a.verdict} if show_outcomes else {}),
        }
        for a in u.incident.attempts
    ]
    data: dict[str, Any] = {
        "rank": rank,
        "id": u.id,
        "opener": u.incident.opener,
        "situation": u.incident.situation,
        "subject": u.incident.subject,
        "symptoms": list(u.incident.symptoms),
        "attempts": attempts,
        "corrections": list(u.incident.corrections),
        "closeness": u.closeness,
        "credit": u.credit,
        "telling": u.telling,
        "telling_terms": list(u.telling_terms),
        "why": u.why,
    }
    if show_outcomes:
        data.update(outcome=u.outcome, final_fix=u.incident.resolution)
    return data


def _fact_dict(rank: int, r: RecalledFact) -> dict[str, Any]:
    f = r.fact
    return {
        "rank": rank,
        "type": "fact",
        "id": f.id,
        "fact_id": f.fact_id,
        "version": f.version,
        "text": f.text,
        "condition": list(f.condition),
        "conclusion": f.conclusion,
        "confidence": f.confidence,
        "status": f.status,
        "reason": f.reason,
        "created_at": f.created_at.isoformat(),
        "provenance": {
            "principal": f.principal,
            "support": list(f.support),
            "contradict": list(f.contradict),
            "supersedes": f.supersedes,
        },
        "match": r.match,
        "score": r.score,
        "why": r.why,
    }
