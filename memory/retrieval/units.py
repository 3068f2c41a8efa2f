"""Recalled episodes as whole incidents, weighed for the problem at hand.

A recall returns episodes; the episode that ranked is often the attempt that fixed the
problem, while the lesson is in the failed attempt and the correction before it. `IncidentRecall`
turns the recalled episodes into units a reader can act on, and every caller of
`EpisodicMemory.recall` (an agent loop, the MCP server, the harness) gets the same units:

- **incident** (the default): the episodes that worked on one problem (`incidents.incident_of`),
  with the symptoms, every attempt and its outcome, the corrections and the final fix;
- **episode**: each recalled episode on its own, with only its own outcome and corrections.

Each unit carries what weighs it: its **closeness** to the current observations (negation-aware,
each term weighted by how well it told resolutions apart in this memory, `incidents.separation_in`;
service names left out: they say where, not what), its **credit** as a precedent (lower after
decisions it misled, `memory.reinforcer.episode_credit`), its place in the closing order, and,
for an incident whose first answers failed before another fixed it, how much of what the current
observations share with it **told** it apart from those answers across the memory's record
(`incidents.telling`).
Beside the units, the recent **changes** the observations implicate (`changes.changes_for`).

Two rules decide what is a unit at all: an episode holding an entry the caller excludes (the
live problem's own, which the caller already has) is left out with its whole incident, and an
episode of another situation that never reached an outcome (a note, a review) says nothing about
a diagnosis.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

from memory.episodes import Episode, Outcome
from memory.graph import ChangeLink
from memory.reinforcer import episode_credit
from memory.retrieval.changes import ChangeBases, changes_for
from memory.retrieval.context import Context, IncidentNote, RecalledChange, RecalledEpisode, RecalledIncident
from memory.retrieval.incidents import (
    Attempt,
    Incident,
    Weighed,
    closeness,
    incident_of,
    lines_affirmed,
    rarity_in,
    separation_in,
    telling,
)
from memory.state import MemoryState
from memory.text import terms

Unit = Literal["incident", "episode"]
UNITS: tuple[str, ...] = ("incident", "episode")


class IncidentRecall:
    """Builds the units of a recall from a memory's derived state (one per memory: it caches term weights)."""

    def __init__(self, state: MemoryState) -> None:
        self.state = state
        self._weights: dict[str, tuple[int, Callable[[str], float]]] = {}  # principal → (log size, weights)
        self._last_changes: tuple[tuple[Any, ...], list[ChangeLink]] | None = None  # (what was asked, the answer)
        self._change_bases = ChangeBases(state)

    def attach(
        self,
        context: Context,
        *,
        unit: Unit = "incident",
        observations: Sequence[str] = (),
        subject: str | None = None,
        exclude: Collection[str] = (),
        limit: int | None = None,
        at: datetime | None = None,
        changes: int = 3,
    ) -> Context:
        """`context` with its units, the notes that render them whole, and the implicated changes.

        Args:
            unit: "incident" (episodes grouped by problem) or "episode" (one by one).
            observations: the current observation lines (closeness is measured against them).
            subject: the service or subject at hand (its name does not count toward closeness).
            exclude: entry ids whose episodes are left out, with their incidents.
            limit: most units (default: as many as the recalled episodes give).
            at: now, for the changes still in place (None: no changes).
            changes: most changes.
        """
        if unit not in UNITS:
            raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {unit!r}")
        live = set(exclude)
        episodes = tuple(
            r
            for r in context.episodes
            if not live.intersection(r.episode.entry_ids)
            and (r.episode.situation == context.situation or r.episode.outcome is not Outcome.UNKNOWN)
        )
        weigh = self._weigh(context.principal, observations, subject)
        units = (
            self._incidents(episodes, context.principal, live, limit, weigh)
            if unit == "incident"
            else [self._episode_unit(r, context.principal, weigh) for r in episodes[:limit]]
        )
        found = (
            self._changes(observations, context.principal, subject, at, changes)
            if at is not None and changes > 0
            else []
        )
        return replace(
            context,
            episodes=episodes,
            incidents=tuple(units),
            changes=tuple(RecalledChange(c, self.sequence(c.episode_id)) for c in found),
            notes={
                u.id: IncidentNote(
                    key=u.incident.opener,
                    symptoms=u.incident.symptoms,
                    final_fix=u.incident.resolution,
                    episodes=u.episodes,
                )
                for u in units
            }
            if unit == "incident"
            else {},
        )

    def _changes(
        self, observations: Sequence[str], principal: str, subject: str | None, at: datetime, limit: int
    ) -> list[ChangeLink]:
        """`changes.changes_for`, remembered for the last question: asked again before the memory learned anything
        (same episodes, same edges), it has the same answer (a caller sizing its budget asks twice)."""
        asked = (principal, tuple(observations), subject, at, limit, len(self.state.episodes), len(self.state.edge_ids))
        if self._last_changes is None or self._last_changes[0] != asked:
            found = changes_for(
                self.state,
                observations,
                principal=principal,
                subject=subject,
                at=at,
                limit=limit,
                bases=self._change_bases,
            )
            self._last_changes = (asked, found)
        return list(self._last_changes[1])

    def sequence(self, episode_id: str) -> int:
        """1 + the episode's place in its principal's closing order (0 when unknown)."""
        place = self.state.index.place(episode_id)
        return 0 if place is None else place + 1

    def _weigh(
        self, principal: str, observations: Sequence[str], subject: str | None
    ) -> Callable[[Incident, str], Weighed]:
        """closeness × credit of a unit: (closeness, credit, why) from its symptoms, subject and cited episode."""
        log = self.state.term_counts(principal)  # the evidence log once learning built it, else its counts
        size = len(log) if log is not None else 0
        cached = self._weights.get(principal)
        if cached is None or cached[0] != size:
            cached = (size, separation_in(log) if log is not None else rarity_in(lambda term: 0, 0))
            self._weights[principal] = cached
        weight, graph = cached[1], self.state.graph_of(principal)
        rarity = rarity_in(log.frequency, size) if log is not None else rarity_in(lambda term: 0, 0)
        now = set().union(*lines_affirmed(tuple(observations), self.state.lexicon)) if observations else set()

        def weigh(incident: Incident, episode_id: str) -> Weighed:
            services = terms(" ".join(name for name in (subject, incident.subject) if name))
            lexicon = self.state.lexicon
            near = round(closeness(observations, incident.symptoms, weight, ignore=services, lexicon=lexicon), 6)
            told, told_by = telling(now, incident, log, rarity, ignore=services, lexicon=lexicon)
            credit = episode_credit(graph, episode_id)
            why = f"closeness {near:.2f} to the observations, credit {credit:.2f} as a precedent"
            if told_by:
                why += f", telling {told:.2f} ({', '.join(told_by[:3])})"
            return Weighed(near, credit, told, told_by, why)

        return weigh

    def _incidents(
        self,
        episodes: Sequence[RecalledEpisode],
        principal: str,
        live: set[str],
        limit: int | None,
        weigh: Callable[[Incident, str], Weighed],
    ) -> list[RecalledIncident]:
        """The recalled episodes grouped into incidents, in order of first appearance; each cites its member
        that matched the query best (among those recalled before the `limit`-th incident)."""
        graph = self.state.graph_of(principal)
        lookup = self._lookup(principal)
        found: dict[str, tuple[Incident, RecalledEpisode, tuple[Episode, ...]]] = {}
        for recalled in episodes:
            incident = incident_of(graph, recalled.episode.id, lookup)
            if incident is None:
                continue
            members = tuple(e for e in map(lookup, incident.episode_ids) if e is not None)
            if any(live.intersection(e.entry_ids) for e in members):
                continue
            best = found.get(incident.opener)
            if best is None or recalled.score.relevance > best[1].score.relevance:
                found[incident.opener] = (incident, recalled, members)
            if limit is not None and len(found) >= limit:
                break
        units = []
        for incident, recalled, members in found.values():
            weighed = weigh(incident, recalled.episode.id)
            units.append(
                RecalledIncident(
                    incident,
                    recalled,
                    members,
                    weighed.closeness,
                    weighed.credit,
                    max(self.sequence(i) for i in incident.episode_ids),
                    f"{weighed.why}; {recalled.why}",
                    weighed.telling,
                    weighed.telling_terms,
                )
            )
        return units

    def _episode_unit(
        self,
        recalled: RecalledEpisode,
        principal: str,
        weigh: Callable[[Incident, str], Weighed],
    ) -> RecalledIncident:
        """One recalled episode as a unit of its own: its problem's observations, its own outcome and fix."""
        episode = recalled.episode
        problem = self.state.problems.get(episode.id)
        symptoms = tuple(problem.text.split("\n")) if problem is not None and problem.text else ()
        fixed = episode.choices[-1] if episode.choices and episode.outcome is Outcome.SUCCESS else None
        incident = Incident(
            opener=episode.id,
            situation=episode.situation,
            subject=episode.subject,
            symptoms=symptoms,
            resolution=fixed,
            attempts=(
                Attempt(
                    episode.id,
                    episode.choices[-1] if episode.choices else None,
                    episode.outcome.value,
                    episode.outcome_evidence,
                    tuple(episode.corrections),
                ),
            ),
        )
        weighed = weigh(incident, episode.id)
        return RecalledIncident(
            incident,
            recalled,
            (episode,),
            weighed.closeness,
            weighed.credit,
            self.sequence(episode.id),
            f"{weighed.why}; {recalled.why}",
            weighed.telling,
            weighed.telling_terms,
        )

    def _lookup(self, principal: str) -> Callable[[str], Episode | None]:
        def lookup(episode_id: str) -> Episode | None:
            episode = self.state.episodes.get(episode_id)
            return episode if episode is not None and episode.principal == principal else None

        return lookup
