"""Reinforcement: what a closed episode's outcome does to the episodes and facts it relied on."""

import networkx as nx

from memory.episodes import Episode, Outcome
from memory.facts import FactVersion, Usefulness
from memory.graph import Edge, EdgeType, add_edges, add_episode, resolution
from memory.reinforcer import DecisionNote, mark_id, reinforce
from tests.builders import T0, episode, evidence_of

FACT = FactVersion(
    fact_id="fact-x",
    version=1,
    principal="p",
    text="when spool → alpha",
    condition=("spool",),
    conclusion="alpha",
    confidence=0.75,
    support=("old1", "old2"),
    contradict=(),
    created_at=T0,
    supersedes=None,
    status="active",
    reason="extracted",
    usefulness=Usefulness(2, 2, 1.0, 0.5, 2.0, True),
)


def world():
    past_ok = episode("old1", Outcome.SUCCESS, "alpha", hours=0)
    past_ok2 = episode("old2", Outcome.SUCCESS, "alpha", hours=1)
    corrected = episode("corr", Outcome.FAILURE, "alpha", hours=2, corrections=("not alpha: it was beta",))
    retry = episode("corr-retry", Outcome.SUCCESS, "beta", hours=3)
    episodes = {e.id: e for e in (past_ok, past_ok2, corrected, retry)}
    G = nx.MultiDiGraph()
    for e in episodes.values():
        add_episode(G, e)
    add_edges(G, [Edge("corr-retry", "corr", EdgeType.RETRY_OF, 0.9, "rule")])
    evidence = [
        evidence_of(past_ok, "spool full"),
        evidence_of(past_ok2, "spool full again"),
        evidence_of(corrected, "printer jam"),
        evidence_of(retry, "printer jam"),
    ]
    return episodes, G, evidence


def apply(new: Episode, notes, episodes, G, evidence, marks=frozenset(), facts=(FACT,)):
    episodes = {**episodes, new.id: new}
    add_episode(G, new)
    return reinforce(
        new, notes, lookup=episodes.get, graph=G, facts=list(facts), evidence=evidence, applied=lambda m: m in marks
    )


def test_resolution_follows_retries_to_the_answer():
    episodes, G, _ = world()
    assert resolution(G, "old1", episodes.get) == "alpha"
    assert resolution(G, "corr", episodes.get) == "beta"
    assert resolution(G, "nobody", episodes.get) is None


def test_a_pending_retry_resolves_like_a_stored_one():
    """The closing episode's own edges are not in the graph yet: passed as pending, they count the same."""
    episodes, G, _ = world()
    late = episode("late", Outcome.SUCCESS, "gamma", hours=4)
    failed = episode("failed", Outcome.FAILURE, "alpha", hours=3, corrections=("not alpha: gamma",))
    episodes = {**episodes, late.id: late, failed.id: failed}
    add_episode(G, late)
    add_episode(G, failed)
    retry = Edge("late", "failed", EdgeType.RETRY_OF, 0.9, "rule")
    assert resolution(G, "failed", episodes.get) is None
    assert resolution(G, "failed", episodes.get, pending=[retry]) == "gamma"
    note = DecisionNote("d1", "gamma", retrieved=("failed",))
    stored = reinforce(
        late, [note], lookup=episodes.get, graph=G, pending=[retry], facts=[], evidence=[], applied=lambda m: False
    )
    assert {(e.source, e.target, e.type) for e in stored.edges} == {
        ("failed", "late", EdgeType.LED_TO),  # the recalled failure was resolved as gamma (through the pending retry)
        ("late", "failed", EdgeType.LEARNED_FROM),
    }  # the pending retry after a correction succeeded


def test_success_links_retrieved_episodes_that_pointed_to_the_same_choice():
    episodes, G, evidence = world()
    new = episode("new", Outcome.SUCCESS, "alpha", hours=5)
    note = DecisionNote("d1", "alpha", retrieved=("old1", "old2", "corr", "fact-x@1"), relied_on=("old1",))
    result = apply(new, [note], episodes, G, evidence + [evidence_of(new, "spool full")])
    led = {(e.source, e.target): e.weight for e in result.edges if e.type is EdgeType.LED_TO}
    assert led == {("old1", "new"): 1.0, ("old2", "new"): 0.5}  # relied on weighs more; corr pointed to beta
    assert result.supported_facts == ("fact-x",) and result.contradicted_facts == ()
    assert result.facts[0].version == 2 and "new" in result.facts[0].support
    assert result.marks == (mark_id("new", "d1"),)


def test_failure_contradicts_what_pointed_the_wrong_way_and_lowers_the_fact():
    episodes, G, evidence = world()
    new = episode("bad", Outcome.FAILURE, "alpha", hours=5)
    note = DecisionNote("d1", "alpha", retrieved=("old1", "fact-x@1"), relied_on=("fact-x@1",))
    result = apply(new, [note], episodes, G, evidence + [evidence_of(new, "unrelated words")])
    assert [(e.source, e.target, e.type) for e in result.edges] == [("bad", "old1", EdgeType.CONTRADICTED)]
    assert result.contradicted_facts == ("fact-x",)
    assert result.facts[0].contradict == ("bad",) and result.facts[0].confidence < FACT.confidence


def test_lesson_of_a_corrected_episode_applied_elsewhere_and_the_retry_learned_from():
    episodes, G, evidence = world()
    new = episode("new", Outcome.SUCCESS, "beta", hours=6)
    note = DecisionNote("d1", "beta", retrieved=("corr",), relied_on=("corr",))
    result = apply(new, [note], episodes, G, evidence + [evidence_of(new, "x")])
    assert [(e.source, e.target, e.type) for e in result.edges] == [("corr", "new", EdgeType.LED_TO)]
    assert "corrected" in result.edges[0].evidence
    # a retry after a correction that succeeded, without the graph rule's edge: LEARNED_FROM
    retry = episode("again", Outcome.SUCCESS, "beta", hours=7)
    failed = episode("failed", Outcome.FAILURE, "alpha", hours=6, corrections=("no",))
    episodes["failed"] = failed
    add_episode(G, failed)
    add_episode(G, retry)
    add_edges(G, [Edge("again", "failed", EdgeType.RETRY_OF, 0.9, "rule")])
    result = apply(retry, [DecisionNote("d2", "beta")], episodes, G, evidence)
    assert [(e.source, e.target, e.type) for e in result.edges] == [("again", "failed", EdgeType.LEARNED_FROM)]


def test_applying_the_same_outcome_twice_changes_nothing():
    episodes, G, evidence = world()
    new = episode("new", Outcome.SUCCESS, "alpha", hours=5)
    notes = [DecisionNote("d1", "alpha", retrieved=("old1", "fact-x@1"))]
    ev = evidence + [evidence_of(new, "spool full")]
    first = apply(new, notes, episodes, G, ev)
    assert first.changed
    add_edges(G, first.edges)
    again = apply(new, notes, episodes, G, ev, marks=frozenset(first.marks), facts=first.facts)
    assert not again.changed and again.edges == () and again.facts == ()
    # even without the marks, content addressing makes the replay a no-op: same edges, no new version
    replay = apply(new, notes, episodes, G, ev, facts=first.facts)
    assert {e.id for e in replay.edges} == {e.id for e in first.edges} and replay.facts == ()


def test_other_principals_are_ignored():
    episodes, G, evidence = world()
    stranger = episode("stranger", Outcome.SUCCESS, "alpha", hours=1, principal="q")
    episodes["stranger"] = stranger
    new = episode("new", Outcome.SUCCESS, "alpha", hours=5)
    result = apply(new, [DecisionNote("d1", "alpha", retrieved=("stranger",))], episodes, G, evidence)
    assert result.edges == ()
