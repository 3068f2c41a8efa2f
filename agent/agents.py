"""Agents: one loop, three memories. The only variable between agents is memory.

Every agent records the same stream (the environment's events and its own decisions),
builds the same `Problem`, asks the same `Reasoner` and gets the same context budget.
They differ only in what their memory returns as evidence:

* `EpisodicAgent`: the full memory (episodes with outcomes, facts, causal graph).
* `baseline.FlatRAGAgent`: top-k raw-text windows of consecutive events by cosine (or one
  event per chunk, the weaker variant), built on this loop in `baseline` like the classifier peer.
* `NoMemoryAgent`: nothing (the lower bound).

Fairness rules every agent follows: no agent retrieves the live round's own events (its
observations, decisions, outcomes and corrections: the reasoner gets those directly), and
one `Budget` caps what every agent hands the reasoner, in items (facts count as items) and
in characters (`evidence_chars`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from agent.graph_evidence import change_votes
from agent.reasoner import CauseInfo, Decision, Evidence, Problem, Reasoner, RecordEntry
from memory import Context, Episode, EpisodicMemory, IncidentNote, RecalledIncident, TrackRecord

PRINCIPAL = "agent"  # tenant used by the harness


@dataclass(frozen=True)
class Budget:
    """The context budget every agent gets."""

    items: int = 9  # evidence items handed to the reasoner, facts included
    chars: int = 3000  # characters of evidence text (`evidence_chars`) and of the rendered context


DEFAULT_BUDGET = Budget()
FACT_SLOTS = 3  # of the budget's items, kept for facts by the episodic agent (the retriever's max_facts)


def evidence_chars(item: Evidence) -> int:
    """The characters one evidence item costs: the text a reader gets (and its corrections)."""
    return len(item.text) + sum(len(text) for text in item.corrections)


DISTILLED = ("fact", "change")  # evidence sources that state a conclusion in a line: kept before long texts


def fit_budget(evidence: Sequence[Evidence], budget: Budget) -> list[Evidence]:
    """What of `evidence` fits the budget's items and characters, in the given order.

    Facts and changes (one line each, the memory's distilled conclusions) are taken first, in
    order; then the longest prefix of the other items that still fits. So long incident texts
    cannot crowd out the slots kept for facts (`FACT_SLOTS`).
    """
    chosen: set[int] = set()
    used = 0
    for distilled in (True, False):
        for position, item in enumerate(evidence):
            if (item.source in DISTILLED) != distilled:
                continue
            cost = evidence_chars(item)
            if len(chosen) >= budget.items or (chosen and used + cost > budget.chars):
                break
            chosen.add(position)
            used += cost
    return [item for position, item in enumerate(evidence) if position in chosen]


@dataclass(frozen=True)
class Turn:
    """One decision as the harness logs it: the answer and what the memory offered for it."""

    decision: Decision  # the reasoner's answer
    evidence: tuple[Evidence, ...]  # the items the memory handed to the reasoner
    context: str  # the rendered context block (what an LLM reads)


@dataclass(frozen=True)
class Recorded:
    """What an episodic agent's memory made of a run, for scoring against ground truth."""

    episodes: tuple[Any, ...]  # closed episodes, in closing order
    edges: tuple[Any, ...]  # edges among them
    entry_events: dict[str, int]  # timeline entry id → environment event index


class Agent(Protocol):
    """What the harness drives."""

    name: str  # agent name in reports and logs

    def observe(self, events: Sequence[Any]) -> None:
        """Record environment events (duplicates by event index are ignored)."""
        ...

    def decide(self, prompt: Any) -> Turn:
        """Decide one attempt of the prompt's round, record the decision, and say what it rested on."""
        ...

    def recorded(self) -> Recorded | None:
        """The episodes and edges the agent's memory derived (None for agents without episodes)."""
        ...

    def close(self) -> None:
        """Release resources (flush open episodes, close stores)."""
        ...


class _LoopAgent:
    """The shared loop: event bookkeeping, problem building, decision recording."""

    name = "agent"

    def __init__(self, reasoner: Reasoner, budget: Budget = DEFAULT_BUDGET) -> None:
        self.reasoner = reasoner
        self.budget = budget
        self._seen: set[int] = set()
        self._round: str | None = None
        self._observations: list[str] = []
        self._feedback: list[str] = []
        self._tried: list[str] = []
        self._pending_observations: list[tuple[str, str]] = []  # (situation, text) since the last round began
        self.entry_events: dict[str, int] = {}  # timeline entry id → environment event index

    # -- recording (subclasses store text in their memory) ----------------------------------

    def _record(
        self,
        text: str,
        *,
        kind: str,
        role: str,
        timestamp: datetime,
        situation: str,
        metadata: dict[str, Any],
        source: int | None = None,
        live: bool = False,
    ) -> str | None:
        """Store one entry; `source` is its environment event index, `live` whether it belongs
        to the round being decided (an interlude note before the round does not)."""
        return None

    def _new_round(self) -> None:
        """A new round begins: everything recorded so far may be retrieved from now on."""

    def provenance(self, item_id: str) -> tuple[int, ...]:
        """Environment event indices an evidence item was made from (evaluation only)."""
        return ()

    def _recall(self, problem: Problem) -> tuple[list[Evidence], str]:
        return [], ""

    def _record_of(self) -> dict[str, RecordEntry]:
        """How often each evidence kind was right here, when the memory keeps such a record."""
        return {}

    def _track_of(self) -> dict[str, dict[str, int]]:
        """The runbook's track record here (its favourite → final answers), when the memory keeps one."""
        return {}

    # -- the loop --------------------------------------------------------------------------------

    def observe(self, events: Sequence[Any]) -> None:
        for event in events:
            if event.index in self._seen:
                continue
            self._seen.add(event.index)
            entry_id = self._record(
                event.text,
                kind=event.kind,
                role=event.role,
                timestamp=event.timestamp,
                situation=event.situation,
                metadata=dict(event.metadata),
                source=event.index,
                live=event.kind != "note",
            )
            if entry_id is not None:
                self.entry_events[entry_id] = event.index
            if event.kind == "observation":
                self._pending_observations.append((event.situation, event.text))
            elif event.kind in ("outcome", "correction"):
                self._feedback.append(event.text)

    def decide(self, prompt: Any) -> Turn:
        if prompt.round_id != self._round or prompt.attempt == 1:
            self._round = prompt.round_id
            self._feedback, self._tried = [], []
            self._pending_observations.clear()
            self._new_round()
        self.observe(prompt.events)
        if prompt.attempt == 1:
            self._observations = [
                text for situation, text in self._pending_observations if situation == prompt.situation
            ]
            self._feedback = []
        problem = Problem(
            observations=tuple(self._observations),
            candidates=tuple(
                CauseInfo(cid, prompt.root_causes[cid].description, tuple(prompt.root_causes[cid].signals))
                for cid in prompt.candidates
            ),
            situation=prompt.situation,
            service=prompt.service,
            attempt=prompt.attempt,
            tried=tuple(self._tried),
            feedback=tuple(self._feedback),
            catalogue=tuple(CauseInfo(c.id, c.description, tuple(c.signals)) for c in getattr(prompt, "catalogue", ())),
            runbook=tuple(getattr(prompt, "runbook", ())),
        )
        problem = replace(problem, record=self._record_of(), track=self._track_of())
        evidence, context_text = self._recall(problem)
        evidence = fit_budget(evidence, self.budget)
        decision = self.reasoner.decide(problem, evidence, context_text)
        if decision.invalid:  # no choice was made: nothing tried, nothing for memory to learn from
            return Turn(decision, tuple(evidence), context_text)
        self._tried.append(decision.choice)
        self._record(
            f"Decision: {decision.choice} — {decision.rationale}",
            kind="decision",
            role="agent",
            timestamp=prompt.decision_time,
            situation=prompt.situation,
            metadata={
                "choice": decision.choice,
                "confidence": decision.confidence,
                "service": prompt.service,
                "retrieved": [item.id for item in evidence],
                "relied_on": list(decision.relied_on),
                "attempt": prompt.attempt,
                "candidates": len(prompt.candidates),
                **({"favoured": dict(decision.favoured)} if decision.favoured else {}),
            },
            live=True,
        )
        return Turn(decision, tuple(evidence), context_text)

    def recorded(self) -> Recorded | None:
        return None

    def close(self) -> None:
        pass


class NoMemoryAgent(_LoopAgent):
    """Remembers nothing across rounds: the lower bound."""

    name = "no_memory"


class EpisodicAgent(_LoopAgent):
    """The full episodic memory: episodes with outcomes, facts, causal graph.

    Args:
        reasoner: the shared reasoner.
        memory: an `EpisodicMemory` (the facade), configured with a retriever preset.
        outcome_labels: when False, evidence is handed over as plain text (ablation).
        units: when False, episodes are handed over one by one, each with only its own outcome and
            corrections, instead of as incidents with what finally fixed them (ablation).
        graph_evidence: when False, neither the recent changes the graph implicates nor the credit
            its edges give precedents are used (ablation).
    """

    name = "episodic"

    def __init__(
        self,
        reasoner: Reasoner,
        memory: EpisodicMemory,
        budget: Budget = DEFAULT_BUDGET,
        *,
        name: str = "episodic",
        outcome_labels: bool = True,
        principal: str = PRINCIPAL,
        units: bool = True,
        graph_evidence: bool = True,
    ) -> None:
        super().__init__(reasoner, budget)
        self.memory = memory
        self.name = name
        self.outcome_labels = outcome_labels
        self.units = units
        self.graph_evidence = graph_evidence
        self.principal = principal
        self._live: set[str] = set()  # entry ids of the round being decided
        self._members: dict[str, tuple[str, ...]] = {}  # incident evidence id → its episode ids
        self._track_record = TrackRecord(memory, principal)

    def _record(self, text, *, kind, role, timestamp, situation, metadata, source=None, live=False):
        entry = self.memory.record(
            text,
            kind=kind,
            role=role,
            timestamp=timestamp,
            situation=situation,
            metadata=metadata,
            principal=self.principal,
        )
        if live:
            self._live.add(entry.id)
        return entry.id

    def _new_round(self) -> None:
        self._live = set()

    def provenance(self, item_id: str) -> tuple[int, ...]:
        found = [self.memory.episode(i, principal=self.principal) for i in self._members.get(item_id, (item_id,))]
        return tuple(
            sorted(
                {
                    self.entry_events[e]
                    for episode in found
                    if episode is not None
                    for e in episode.entry_ids
                    if e in self.entry_events
                }
            )
        )

    def _record_of(self) -> dict[str, RecordEntry]:
        return dict(self._track_record.update().items()) if self.outcome_labels else {}

    def _track_of(self) -> dict[str, dict[str, int]]:
        # read after `_record_of`, whose update counted the episodes closed since the last decision
        return (
            {choice: dict(answers) for choice, answers in self._track_record.track.items()}
            if self.outcome_labels
            else {}
        )

    def _ask(self, problem: Problem, *, k: int, incidents: int | None = None) -> Context:
        """The memory's recall for the round's observations, in its situation and service, as this agent's
        principal, leaving the live round's entries out; whole incidents unless units are ablated."""
        return self.memory.recall(
            list(problem.observations),
            k=k,
            incidents=incidents,
            situation=problem.situation,
            principal=self.principal,
            subject=problem.service,
            exclude=self._live,
            unit="incident" if self.outcome_labels and self.units else "episode",
        )

    def _recall(self, problem: Problem) -> tuple[list[Evidence], str]:
        # Changes the graph implicates take items of the budget first; incidents get the rest minus the
        # fact slots. Ask for as many more episodes as the live round may occupy (one per attempt): the
        # memory leaves the live round's own out (`exclude`), with the incidents they belong to.
        changes = self._changes(self._ask(problem, k=0), problem) if self.outcome_labels and self.graph_evidence else []
        slots = max(1, self.budget.items - FACT_SLOTS - len(changes))
        context = self._ask(problem, k=slots + problem.attempt, incidents=slots)
        evidence = [self._unit_item(unit) for unit in context.incidents]
        evidence += changes
        if self.outcome_labels:
            for recalled in context.facts:
                fact = recalled.fact
                evidence.append(
                    Evidence(
                        id=f"{fact.fact_id}@{fact.version}",
                        source="fact",
                        text=fact.text,
                        relevance=max(0.0, min(1.0, float(recalled.match))),
                        conclusion=fact.conclusion,
                        confidence=float(fact.confidence),
                        choices=fact.rejected,
                        why=recalled.why,
                    )
                )
        # The block shows exactly the items handed over, within the same budget.
        kept = {item.id for item in fit_budget(evidence, self.budget)}
        shown = replace(
            context,
            episodes=tuple(r for r in context.episodes if r.episode.id in kept),
            facts=tuple(r for r in context.facts if r.fact.id in kept),
            changes=(),
        )
        return evidence, shown.render(max_chars=self.budget.chars, notes=incident_notes(evidence, self._episodes_of))

    def _episodes_of(self, item_id: str) -> list[Any]:
        """The episodes of the incident an evidence item stands for, oldest first (none for other items)."""
        found = (self.memory.episode(i, principal=self.principal) for i in self._members.get(item_id, ()))
        return [episode for episode in found if episode is not None]

    def _changes(self, context: Context, problem: Problem) -> list[Evidence]:
        """Recent changes the observations implicate, as graph evidence: one item per change, for the
        candidate it speaks for most (`agent.graph_evidence.change_votes`)."""
        items = []
        for recalled in context.changes:
            change = recalled.change
            voted = change_votes([change], problem.candidates)
            if voted.votes:
                best = max(voted.votes, key=lambda cid: (voted.votes[cid], cid))
                items.append(
                    Evidence(
                        id=change.episode_id,
                        source="change",
                        text=voted.reasons[best],
                        relevance=voted.votes[best],
                        conclusion=best,
                        confidence=1.0,
                        why=change.why,
                        sequence=recalled.sequence,
                    )
                )
        return items

    def _unit_item(self, unit: RecalledIncident) -> Evidence:
        """One recalled unit as evidence: a whole incident, an episode on its own, or plain text (ablations).

        Its relevance is its closeness to the observations, times its credit as a precedent when the
        graph is used."""
        episode, incident = unit.recalled.episode, unit.incident
        relevance = unit.closeness * (unit.credit if self.graph_evidence else 1.0)
        if not self.outcome_labels:
            return Evidence(
                id=episode.id,
                source="chunk",
                text=_episode_text(episode),
                relevance=relevance,
                observations=incident.symptoms,
                why=unit.recalled.why,
                sequence=unit.sequence,
            )
        if not self.units:
            return Evidence(
                id=episode.id,
                source="episode",
                text=episode.summary,
                relevance=relevance,
                outcome=episode.outcome.value,
                choices=tuple(episode.choices),
                corrections=tuple(episode.corrections),
                resolved_as=incident.resolution,
                observations=incident.symptoms,
                why=unit.recalled.why,
                sequence=unit.sequence,
            )
        self._members[episode.id] = incident.episode_ids
        return Evidence(
            id=episode.id,
            source="incident",
            text=f"{episode.summary} — {incident.story()}",
            relevance=relevance,
            outcome=unit.outcome,
            choices=tuple(a.choice for a in incident.attempts if a.choice),
            corrections=incident.corrections,
            resolved_as=incident.resolution,
            observations=incident.symptoms,
            why=unit.recalled.why,
            sequence=unit.sequence,
            telling=unit.telling if incident.failed and incident.resolution else None,
        )

    def recorded(self) -> Recorded:
        self.memory.flush()
        return Recorded(
            tuple(self.memory.episodes(self.principal)),
            tuple(self.memory.edges(self.principal)),
            dict(self.entry_events),
        )

    def close(self) -> None:
        self.memory.flush()
        self.memory.close()


def incident_notes(
    evidence: Sequence[Evidence], episodes_of: Callable[[str], Sequence[Any]] = lambda item_id: ()
) -> dict[str, IncidentNote]:
    """Per recalled episode, the problem it worked on, so that a rendered context shows one incident per
    problem; `episodes_of` gives an item's whole incident (its episodes, oldest first) when memory knows it."""
    return {
        item.id: IncidentNote(
            key="\n".join(item.observations) or item.id,
            symptoms=item.observations,
            final_fix=item.resolved_as,
            episodes=tuple(episodes_of(item.id)),
        )
        for item in evidence
        if item.source != "fact"
    }


def _episode_text(episode: Episode) -> str:
    parts = [episode.summary, *episode.decisions, *episode.corrections]
    return " ".join(part for part in parts if part)
