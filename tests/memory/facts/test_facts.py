"""Fact rules on hand-made evidence: extraction, usefulness, confidence, revision and drift."""

import sys
from datetime import timedelta

import pytest

from memory.episodes import Outcome
from memory.facts import (
    ACTIVE,
    EpisodeEvidence,
    FactConfig,
    FactVersion,
    current_facts,
    evidence_from,
    extract_facts,
    history,
    propose_fact,
    terms,
    update_fact,
)
from memory.facts.rules import confidence, measure
from tests.builders import T0, episode
from tests.builders import evidence as ev

ALPHA = "alpha_cause"
BETA = "beta_cause"


def history_a() -> list[EpisodeEvidence]:
    return [
        ev(1, "queue backlog growing, worker heartbeat missing", BETA, False),
        ev(2, "queue backlog growing, worker heartbeat missing", ALPHA, True),
        ev(3, "backlog on the ingest queue, heartbeat gaps on workers", ALPHA, True),
        ev(4, "checksum mismatch after the schema rollout", BETA, True),
        ev(5, "schema rollout then checksum errors in the importer", BETA, True),
        ev(6, "disk latency spikes on the storage nodes", "gamma_cause", True),
    ]


def extracted() -> dict[str, FactVersion]:
    return {f.conclusion: f for f in extract_facts(history_a(), [], principal="p", at=T0)}


def test_terms_are_normalized_content_words():
    assert terms("The Workers were BLOCKED waiting on 3 queues") == {"worker", "block", "wait", "queue"}


def test_confidence_is_the_beta_posterior_mean():
    assert confidence(0, 0) == pytest.approx(0.5)
    assert confidence(3, 1) == pytest.approx(4 / 6)
    assert confidence(2, 0, FactConfig(prior_support=2, prior_contradict=1)) == pytest.approx(4 / 5)


def test_extraction_finds_discriminating_conditions_with_measured_usefulness():
    facts = extracted()
    alpha = facts[ALPHA]
    assert set(alpha.condition) <= {"backlog", "heartbeat", "queue", "worker"} and alpha.condition
    assert alpha.support == ("e02", "e03") and alpha.contradict == ()
    assert alpha.usefulness.passed and alpha.usefulness.precision == 1.0 and alpha.usefulness.coverage == 2
    assert alpha.usefulness.lift == pytest.approx(1.0 / alpha.usefulness.base_rate)
    assert facts[BETA].support == ("e04", "e05")
    assert "gamma_cause" not in facts  # a single confirmation is too little coverage
    assert alpha.version == 1 and alpha.supersedes is None and alpha.status == ACTIVE
    assert alpha.text == f"when {' + '.join(alpha.condition)} → {ALPHA}"


def test_vague_condition_is_rejected_by_the_usefulness_check():
    evidence = history_a()
    # "growing" only appears with one confirmation; "backlog" alone works
    assert propose_fact(["growing"], ALPHA, evidence, principal="p", at=T0) is None
    # a condition every episode would match cannot discriminate: lift 1
    everywhere = [
        ev(i, f"service alarm {text}", c, ok)
        for i, (text, c, ok) in enumerate([("a", ALPHA, True), ("b", ALPHA, True), ("c", ALPHA, True)])
    ]
    assert measure(["alarm"], ALPHA, everywhere).lift == pytest.approx(1.0)
    assert propose_fact(["alarm"], ALPHA, everywhere, principal="p", at=T0) is None
    accepted = propose_fact(["Backlog"], ALPHA, evidence, principal="p", at=T0)
    assert accepted is not None and accepted.condition == ("backlog",)


def test_confidence_rises_with_support_and_falls_with_contradiction():
    fact = extracted()[ALPHA]
    more = history_a() + [ev(7, "backlog on the billing queue, heartbeat late", ALPHA, True)]
    up = update_fact(fact, more, at=T0)
    assert up is not None and up.confidence > fact.confidence and "e07" in up.support
    worse = more + [ev(8, "queue backlog and heartbeat alarms again", ALPHA, False)]
    down = update_fact(up, worse, at=T0)
    assert down is not None and down.confidence < up.confidence and down.contradict == ("e08",)
    assert down.version == 3 and down.supersedes == 2


def test_the_same_episode_never_counts_twice():
    fact = extracted()[ALPHA]
    dup = history_a() + [ev(7, "queue backlog, heartbeat missing", ALPHA, True)] * 3
    once = update_fact(fact, dup, at=T0)
    assert once.support.count("e07") == 1 and once.confidence == pytest.approx(confidence(3, 0))
    assert update_fact(once, dup, at=T0) is None  # nothing new: no new version
    cited = history_a() + [ev(7, "queue backlog, heartbeat missing", ALPHA, True, cited=[fact.fact_id])]
    assert update_fact(fact, cited, at=T0).support.count("e07") == 1  # matched and cited: still one


def test_revision_creates_a_new_version_and_keeps_the_old_readable():
    facts = extracted()
    beta = facts[BETA]
    cond = " ".join(beta.condition)
    later = history_a() + [ev(10 + i, f"{cond} but the worker pool was starved", ALPHA, True) for i in range(2)]
    versions = [beta]
    evidence = history_a()
    for item in later[len(evidence) :]:
        evidence = evidence + [item]
        new = update_fact(versions[-1], evidence, at=item.at)
        if new is not None:
            versions.append(new)
    last = versions[-1]
    assert last.version > 1 and last.supersedes == last.version - 1
    assert last.reason.startswith("specialized") and last.status == ACTIVE
    assert set(last.condition) > set(beta.condition)  # a term now excludes the contradicting episodes
    assert last.contradict == () and last.usefulness.passed
    old = history(versions, beta.fact_id)[0]
    assert old == beta and old.support == ("e04", "e05") and old.contradict == ()
    assert current_facts(versions) == [last]


def test_drift_changes_the_conclusion_and_counts_evidence_from_then_on():
    fact = extracted()[ALPHA]
    cond = " ".join(fact.condition)
    evidence = history_a() + [ev(20 + i, f"{cond} after the cutover", BETA, True) for i in range(3)]
    revised = update_fact(fact, evidence, at=T0 + timedelta(days=2), config=FactConfig(drift_window=3))
    assert revised.conclusion == BETA and revised.reason.startswith("drift")
    assert revised.since == T0 + timedelta(hours=20)
    assert revised.support == ("e20", "e21", "e22") and revised.contradict == ()


def test_record_round_trip_and_version_id():
    fact = extracted()[ALPHA]
    assert FactVersion.from_record(fact.to_record()) == FactVersion.from_record(fact.to_record())
    back = FactVersion.from_record(fact.to_record())
    assert back.condition == fact.condition and back.usefulness.passed and back.id == f"{fact.fact_id}@1"


def test_a_read_version_names_its_episodes_with_the_shared_id_strings():
    """A fact's support can hold most of a principal's episodes: reading it back must not copy
    every id the graph already holds (the decoded JSON makes a new string per occurrence)."""
    record = extracted()[ALPHA].to_record()
    record["support"] = ["".join(["e", str(n)]) for n in range(3)]  # fresh strings, like a JSON decoder's
    back = FactVersion.from_record(record)
    assert all(i is sys.intern(f"e{n}") for n, i in enumerate(back.support))


def test_evidence_from_episode_needs_a_choice_and_a_verdict():
    assert evidence_from(episode("x", Outcome.SUCCESS), "text") is None
    assert evidence_from(episode("x", Outcome.UNKNOWN, ALPHA), "text") is None
    made = evidence_from(episode("x", Outcome.FAILURE, choices=(BETA, ALPHA)), "queue backlog", cited=["fact-1@2"])
    assert made.choice == ALPHA and made.terms == {"queue", "backlog"} and made.cited == {"fact-1"}


def test_facts_never_cross_principals():
    mixed = history_a() + [ev(30 + i, "queue backlog heartbeat", BETA, True, principal="q") for i in range(5)]
    facts = extract_facts(mixed, [], principal="p", at=T0)
    assert {f.principal for f in facts} == {"p"}
    assert all(not s.startswith("e3") for f in facts for s in f.support)
