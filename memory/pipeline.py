"""The learning pipeline: what one closed episode teaches, as a function of the memory's state.

The write path, used alike by the `EpisodicMemory` facade, the benchmark's store builder
and the layer evaluation::

    problem = problem_of(state, episode, entries)         # what the episode worked on
    state.index_episode(episode, problem, cited_facts(entries))
    changes = close_episode(state, episode, entries)      # the rules: reads the state, changes nothing
    ...persist changes...                                 # the facade (only it touches the store)
    state.apply(changes)

`close_episode` applies, in order:

1. the graph rules (`memory.graph.infer_edges`) against the principal's recent episodes:
   RETRY_OF, LEARNED_FROM, CAUSED_BY, LED_TO, CONTINUATION, CONTRADICTED;
2. reinforcement (`memory.reinforcer.reinforce`) of what the episode's decisions relied
   on, over the graph as it will be with the edges of step 1;
3. fact learning: the reinforced fact versions, then — when the episode tested a choice
   with a verdict and was not reinforced before — extraction of new facts from the
   principal's evidence (`memory.facts.extract_facts`) and the optional proposer hook;
4. lessons (`memory.facts.lessons`): when the episode resolves an incident, the active
   lessons that apply to its symptoms are confirmed, narrowed or revised, and a corrected
   incident whose first attempts failed teaches a new lesson.

The rules read text with the state's lexicon (`MemoryState.lexicon`, the facade's `lexicon`).
Nothing here reads the disk or the clock; the same state and episode give the same changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from memory.episodes import Episode, Outcome
from memory.facts import (
    ACTIVE,
    DEFAULT_FACTS,
    LESSON,
    EvidenceLog,
    FactConfig,
    FactVersion,
    LessonIncident,
    ProposalHook,
    affirmed_lines,
    extract_facts,
    learn_lesson,
    propose_fact,
    rarity,
    update_lesson,
)
from memory.facts.lessons import common_terms
from memory.graph import Edge, attempt_chain, cause_links, infer_edges
from memory.reinforcer import DecisionNote, Reinforcement, reinforce
from memory.retrieval.index import episode_vector
from memory.state import EpisodeProblem, MemoryState
from memory.timeline import Entry, EntryParts, Kind


@dataclass(frozen=True)
class Learning:
    """How closing an episode learns facts."""

    facts: FactConfig = DEFAULT_FACTS  # fact thresholds (confidence prior, revision, usefulness)
    proposer: ProposalHook | None = None  # optional hook proposing (condition, conclusion) pairs, e.g. an LLM
    extract: bool = False  # induce rule facts from co-occurring terms on each close (off: lessons teach instead)
    lessons: bool = True  # learn lessons from corrected incidents


DEFAULT_LEARNING = Learning()


class Changes(NamedTuple):
    """What closing one episode adds to the memory (all of it new, in storing order)."""

    episode_id: str  # the closed episode
    edges: tuple[Edge, ...]  # the graph rules' new edges, then reinforcement's
    facts: tuple[FactVersion, ...]  # reinforced, revised or retired versions, then newly extracted facts
    marks: tuple[str, ...]  # reinforcement marks (empty when the episode was reinforced before)
    reinforcement: Reinforcement  # the reinforcer's full result


def cited_facts(entries: Iterable[Entry | EntryParts]) -> list[str]:
    """Fact ids that the decisions among `entries` retrieved or relied on, in order."""
    ids: list[str] = []
    for e in entries:
        if e.kind is Kind.DECISION:
            note = DecisionNote.from_metadata(e.id, e.metadata)
            ids.extend(i for i in note.retrieved + note.relied_on if i.startswith("fact-"))
    return ids


def decision_notes(entries: Iterable[Entry | EntryParts]) -> list[DecisionNote]:
    """What each decision among `entries` says about the memory it used, in order."""
    return [DecisionNote.from_metadata(e.id, e.metadata) for e in entries if e.kind is Kind.DECISION]


def retried_episode(state: MemoryState, episode: Episode) -> Episode | None:
    """The attempt that opened the incident an episode without observations continues (when known)."""
    chain = attempt_chain(episode, state.prior(episode), state.graph_config)
    opener = chain[-1] if chain else None
    if opener is None or opener.id not in state.problems or not state.problems[opener.id].text:
        return None
    return opener


def problem_text(state: MemoryState, episode: Episode, entries: Sequence[Entry | EntryParts]) -> str:
    """The text of `problem_of` alone, without its vector: for a caller that keeps no vectors (the bench's
    builder, whose stores recompute them from the entries when opened)."""
    observed = [e.text for e in entries if e.kind is Kind.OBSERVATION]
    if observed:
        return "\n".join(observed)
    earlier = retried_episode(state, episode) if episode.choices else None
    return state.problems[earlier.id].text if earlier is not None else ""


def problem_of(state: MemoryState, episode: Episode, entries: Sequence[Entry | EntryParts]) -> EpisodeProblem:
    """What an episode worked on: its own observations, else those of the attempt it retries.

    The vector is the observations' mean direction, moved away from the corrections'
    (`memory.retrieval.episode_vector`); an episode with neither falls back to all its entries.
    """
    observed = [e for e in entries if e.kind is Kind.OBSERVATION]
    corrections = [e for e in entries if e.kind is Kind.CORRECTION]
    others = np.stack([e.embedding for e in corrections]) if corrections else None
    if observed:
        return EpisodeProblem(
            "\n".join(e.text for e in observed), episode_vector(np.stack([e.embedding for e in observed]), others)
        )
    earlier = retried_episode(state, episode) if episode.choices else None
    if earlier is not None:
        base = state.problems[earlier.id]
        return EpisodeProblem(base.text, episode_vector(base.vector[None, :], others))
    return EpisodeProblem("", episode_vector(np.stack([e.embedding for e in entries])))


def close_episode(
    state: MemoryState,
    episode: Episode,
    entries: Sequence[Entry | EntryParts],
    *,
    learning: Learning = DEFAULT_LEARNING,
) -> Changes:
    """The edges, fact versions and marks one closed (and indexed) episode implies."""
    who = episode.principal
    prior = state.prior(episode)
    caused = _CauseLinks(lambda: cause_links(state.graph, [ep.id for ep in prior], state.episodes_lookup))
    linked = state.new_edges(
        infer_edges(episode, prior, config=state.graph_config, caused=caused, lexicon=state.lexicon)
    )
    evidence = state.evidence.get(who, EvidenceLog())
    current = state.facts_of(who)
    result = reinforce(
        episode,
        decision_notes(entries),
        lookup=state.episodes_lookup,
        graph=state.graph,
        pending=linked,
        facts=current,
        evidence=evidence,
        applied=state.marks.__contains__,
        config=learning.facts,
    )
    reinforced = [e for e in state.new_edges(result.edges) if e.id not in {x.id for x in linked}]
    versions = list(result.facts)
    if result.marks and learning.extract and evidence.find(episode.id) is not None:
        versions += _new_facts(state, episode, evidence, versions, learning)
    if result.marks and learning.lessons:
        versions += _lessons(state, episode, evidence, versions, learning)
    return Changes(episode.id, tuple(linked + reinforced), tuple(versions), result.marks, result)


class _CauseLinks(Mapping[str, tuple[str, ...]]):
    """`memory.graph.cause_links` of the closing episode's window, found on first use: the graph rules ask only
    when an incident's text points to an earlier change (the graph does not change before they answer)."""

    def __init__(self, find: Callable[[], dict[str, tuple[str, ...]]]) -> None:
        self._find = find
        self._found: dict[str, tuple[str, ...]] | None = None

    def _links(self) -> dict[str, tuple[str, ...]]:
        if self._found is None:
            self._found = self._find()
        return self._found

    def __getitem__(self, episode_id: str) -> tuple[str, ...]:
        return self._links()[episode_id]

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._links()

    def __iter__(self) -> Iterator[str]:
        return iter(self._links())

    def __len__(self) -> int:
        return len(self._links())


def _new_facts(
    state: MemoryState, episode: Episode, evidence: EvidenceLog, revised: Sequence[FactVersion], learning: Learning
) -> list[FactVersion]:
    """Facts extracted (and proposed) from a principal's evidence after its latest close."""
    who = episode.principal
    latest = {f.fact_id: f for f in state.current.values() if f.principal == who}
    latest.update((v.fact_id, v) for v in revised)
    current = list(latest.values())
    made = extract_facts(evidence, current, principal=who, at=episode.end, config=learning.facts)
    if learning.proposer is not None:
        taken = {f.fact_id for f in current + made}
        for condition, conclusion in learning.proposer(evidence):
            fact = propose_fact(
                condition,
                conclusion,
                evidence,
                principal=who,
                at=episode.end,
                config=learning.facts,
                reason="proposed by the proposer hook",
            )
            if fact is not None and fact.fact_id not in taken:
                made.append(fact)
                taken.add(fact.fact_id)
    return made


def resolved_incident(state: MemoryState, episode: Episode) -> LessonIncident | None:
    """The incident a closing episode belongs to, with its earlier attempts; None when it decided nothing.

    ``resolution`` is the episode's choice when it succeeded, else None (the incident is not resolved yet).
    """
    if not episode.choices:
        return None
    earlier = attempt_chain(episode, state.prior(episode), state.graph_config) if not episode.observations else []
    attempts = [*reversed(earlier), episode]
    opener = next((e for e in attempts if e.observations), None)
    symptoms = opener.observations if opener is not None else ()
    answer = episode.choices[-1] if episode.outcome is Outcome.SUCCESS else None
    failed = [
        e.choices[-1] for e in attempts if e.choices and e.choices[-1] != answer and e.outcome is not Outcome.SUCCESS
    ]
    return LessonIncident(
        episode.id,
        episode.principal,
        tuple(symptoms),
        tuple(text for e in attempts for text in e.corrections),
        tuple(dict.fromkeys(failed)),
        answer,
        (opener or episode).subject,
        episode.end,
    )


def _lessons(
    state: MemoryState, episode: Episode, evidence: EvidenceLog, revised: Sequence[FactVersion], learning: Learning
) -> list[FactVersion]:
    """Lesson versions one closing episode implies: updates of applicable lessons, then a new lesson."""
    incident = resolved_incident(state, episode)
    if incident is None or not incident.symptoms:
        return []
    latest = {f.fact_id: f for f in state.current.values() if f.principal == episode.principal and f.kind == LESSON}
    latest.update((v.fact_id, v) for v in revised if v.kind == LESSON)
    words = set().union(*affirmed_lines(incident.symptoms, state.lexicon))
    made = []
    for fact in sorted(latest.values(), key=lambda f: f.fact_id):
        if fact.status != ACTIVE or not fact.condition or fact.condition[0] not in words:
            continue  # it cannot apply (`lesson_applies`): `update_lesson` would say nothing
        supporting = lambda fact=fact: [ev.terms for ev in map(evidence.find, fact.support) if ev is not None]  # noqa: E731
        version = update_lesson(fact, incident, supporting, config=learning.facts, lexicon=state.lexicon)
        if version is not None:
            made.append(version)
            latest[fact.fact_id] = version
    taught = any(v.conclusion == incident.resolution and v.status == ACTIVE for v in made)
    if not taught:
        lesson = learn_lesson(
            incident,
            rarity(words, evidence.frequency, len(evidence)),
            lambda condition: (evidence[p] for p in evidence.matching(condition)),
            common=common_terms(words, evidence.frequency, len(evidence)),
            config=learning.facts,
            lexicon=state.lexicon,
            tally=lambda condition, choice: evidence.resolved_counts(condition, choice, excluding=episode.id),
        )
        if lesson is not None and lesson.fact_id not in latest:
            made.append(lesson)
    return made


def apply(state: MemoryState, changes: Changes) -> None:
    """Add what `close_episode` decided to the state (after the caller stored it)."""
    state.add_edges(changes.edges)
    state.add_versions(changes.facts)
    for mark in changes.marks:
        state.marks.add(mark)
