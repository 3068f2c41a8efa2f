"""The indexed fact rules give what a scan over every episode gives, and induction keeps its rules.

`measure` and `assess` are checked against plain scans (their definitions in the
`memory.facts.rules` docstring); the library answers from `EvidenceLog` indexes instead.
Induction is checked through the index queries it is built on (each against a scan) and
through the properties its docstring states, not against a second copy of the greedy loop.
"""

from collections import Counter
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.episodes import Outcome
from memory.facts import DEFAULT_FACTS, EvidenceLog, FactConfig, extract_facts, update_fact
from memory.facts.evidence import TERM_COUNT_MEMO
from memory.facts.rules import assess, induce_condition, measure
from tests.builders import T0, at
from tests.builders import evidence as evidence_item

TERMS = ["queue", "backlog", "heartbeat", "schema", "checksum", "disk", "latency", "pool", "deploy", "cert"]
CHOICES = ["alpha", "beta", "gamma"]


def label(ev, conclusion):
    if ev.outcome is Outcome.SUCCESS:
        return ev.choice == conclusion
    return False if ev.choice == conclusion else None


def matches(condition, ev):
    return set(condition) <= ev.terms


def reference_measure(condition, conclusion, evidence, since=None, config=DEFAULT_FACTS):
    labelled = [(ev, lab) for ev in evidence if (lab := label(ev, conclusion)) is not None]
    positives = sum(1 for _, lab in labelled if lab)
    base = positives / len(labelled) if labelled else 0.0
    hit = [lab for ev, lab in labelled if matches(condition, ev) and (since is None or ev.at >= since)]
    precision = sum(hit) / len(hit) if hit else 0.0
    lift = precision / base if base else 0.0
    return sum(hit), len(hit), round(precision, 6), round(base, 6), round(lift, 6)


def reference_assess(fact_id, condition, conclusion, evidence, since=None):
    support, contradict = set(), set()
    for ev in evidence:
        if since is not None and ev.at < since:
            continue
        if not (matches(condition, ev) or fact_id in ev.cited):
            continue
        lab = label(ev, conclusion)
        if lab is True:
            support.add(ev.episode_id)
        elif lab is False:
            contradict.add(ev.episode_id)
    return tuple(sorted(support)), tuple(sorted(contradict))


evidence_items = st.builds(
    lambda i, words, choice, outcome, hours, cited, principal: evidence_item(
        i, "", choice, outcome, principal=principal, cited=cited, words=words, hours=hours
    ),
    st.integers(0, 60),
    st.sets(st.sampled_from(TERMS), max_size=5),
    st.sampled_from(CHOICES),
    st.sampled_from([Outcome.SUCCESS, Outcome.SUCCESS, Outcome.FAILURE, Outcome.UNKNOWN]),
    st.integers(0, 200),
    st.sets(st.sampled_from(["fact-a", "fact-b"]), max_size=1),
    st.sampled_from(["p", "p", "q"]),
)
histories = st.lists(evidence_items, max_size=40)  # repeated episode ids on purpose: hand-made lists may have them
conditions = st.lists(st.sampled_from(TERMS), max_size=3)
# A start condition is a fact's condition: distinct terms (a repeated term would count towards max_terms twice).
starts = st.lists(st.sampled_from(TERMS), max_size=3, unique=True)
moments = st.one_of(st.none(), st.integers(0, 200).map(lambda h: at(hours=h)))


@settings(max_examples=150, deadline=None)
@given(histories, conditions, st.sampled_from(CHOICES), moments)
def test_measure_and_assess_equal_the_scans(evidence, condition, conclusion, since):
    got = measure(condition, conclusion, evidence, since=since)
    assert tuple(got[:5]) == reference_measure(condition, conclusion, evidence, since)
    for given_as in (evidence, EvidenceLog(evidence)):
        found = assess("fact-a", condition, conclusion, given_as, since=since)
        assert (found.support, found.contradict) == reference_assess("fact-a", condition, conclusion, evidence, since)


def precision(condition, conclusion, evidence):
    """Share of the labelled episodes matching `condition` that confirm `conclusion` (None: no match)."""
    labels = [lab for ev in evidence if matches(condition, ev) and (lab := label(ev, conclusion)) is not None]
    return sum(labels) / len(labels) if labels else None


@settings(max_examples=150, deadline=None)
@given(histories, st.sampled_from(CHOICES), starts, st.integers(1, 3))
def test_induced_condition_keeps_the_rules_of_the_docstring(evidence, conclusion, start, max_terms):
    config = FactConfig(max_terms=max(max_terms, len(start)))
    got = induce_condition(conclusion, evidence, config, start=start)
    assert got == tuple(sorted(set(got))) and set(start) <= set(got) and len(got) <= config.max_terms
    assert induce_condition(conclusion, evidence, config, start=got) == got  # the result is where the search stops
    # the greedy steps, one term at a time: a longer search only goes on from a shorter one
    steps = [tuple(sorted(set(start)))] + [
        induce_condition(conclusion, evidence, FactConfig(max_terms=k), start=start)
        for k in range(len(start) + 1, config.max_terms + 1)
    ]
    assert steps[-1] == got
    confirming = [ev for ev in evidence if label(ev, conclusion) is True]
    need = max(config.min_coverage, config.min_term_share * len(confirming))
    for before, after in zip(steps, steps[1:]):
        added = set(after) - set(before)
        assert set(before) <= set(after) and len(added) <= 1
        if not added:
            assert after == got  # once the search stops, it stays stopped
            continue
        (term,) = added
        assert sum(term in ev.terms for ev in confirming) >= need  # common among the confirmations
        assert sum(matches(after, ev) for ev in confirming) >= config.min_coverage  # keeps coverage
        if before:  # a term is added only to exclude counter-examples, and only when it raises precision
            assert any(matches(before, ev) and label(ev, conclusion) is False for ev in evidence)
            assert precision(after, conclusion, evidence) > precision(before, conclusion, evidence)


def _state(log):
    """What a log holds, orders included."""
    return (
        [(t, list(p)) for t, p in log._postings.items()],
        [(t, list(c.items())) for t, c in log._resolutions.items()],
        log._citing,
        log._confirming,
        log._refuting,
        log._successes,
        log._where,
        bytes(log._choice_at),
        bytes(log._succeeded),
        bytes(log._ended_us),
        log._codes,
    )


@settings(max_examples=120, deadline=None)
@given(histories, st.lists(st.integers(0, 40), max_size=3))
def test_extending_by_shared_term_sets_leaves_the_state_appends_leave(evidence, cuts):
    """Items sharing one term set object (as an opened store's log gets them) added in chunks: the same
    postings, counts and orders as one append at a time."""
    shared = {}
    evidence = [replace(ev, terms=shared.setdefault(ev.terms, ev.terms)) for ev in evidence]
    one_by_one, chunked = EvidenceLog(), EvidenceLog()
    for ev in evidence:
        one_by_one.append(ev)
    for start, end in zip([0, *sorted(cuts)], [*sorted(cuts), len(evidence)]):
        chunked.extend(evidence[start:end])
    assert _state(chunked) == _state(one_by_one) and chunked == evidence


@settings(max_examples=120, deadline=None)
@given(histories)
def test_a_log_grown_by_appends_answers_like_one_built_at_once(evidence):
    grown = EvidenceLog()
    for ev in evidence:
        grown.append(ev)
    whole = EvidenceLog(evidence)
    assert grown == whole == evidence
    for conclusion in CHOICES:
        assert grown.confirming(conclusion) == {i for i, ev in enumerate(evidence) if label(ev, conclusion) is True}
        assert grown.against(conclusion) == {i for i, ev in enumerate(evidence) if label(ev, conclusion) is False}
    for term in TERMS:
        assert grown.matching([term]) == {i for i, ev in enumerate(evidence) if term in ev.terms}
        confirmed = Counter(ev.choice for ev in evidence if ev.outcome is Outcome.SUCCESS and term in ev.terms)
        assert grown.resolutions_with(term) == whole.resolutions_with(term) == dict(confirmed)
    assert grown.matching([]) == set(range(len(evidence)))
    everyone = np.arange(len(evidence))
    for conclusion, since in zip(CHOICES, [None] + sorted({ev.at for ev in evidence})[: len(CHOICES)]):
        true, false = grown.labels_among(everyone, conclusion, since=since)  # the columns, against the scan
        kept = [i for i, ev in enumerate(evidence) if since is None or ev.at >= since]
        assert true.tolist() == [i for i in kept if label(evidence[i], conclusion) is True]
        assert false.tolist() == [i for i in kept if label(evidence[i], conclusion) is False]
    for pair in zip(TERMS, TERMS[1:] + TERMS[:1]):  # postings intersected
        assert grown.matching(pair) == {i for i, ev in enumerate(evidence) if set(pair) <= ev.terms}
    first = {}
    for ev in evidence:
        first.setdefault(ev.episode_id, ev)
    assert all(grown.find(i) is ev for i, ev in first.items()) and grown.find("missing") is None


@settings(max_examples=120, deadline=None)
@given(histories)
def test_extraction_and_updates_follow_the_scans(evidence):
    made = extract_facts(evidence, [], principal="p", at=T0)
    own = [ev for ev in evidence if ev.principal == "p"]
    for fact in made:  # with no facts yet, each explains all its confirmations; measured like the scan measures
        assert fact.principal == "p" and fact.usefulness.passed
        assert fact.condition == induce_condition(fact.conclusion, own)
        assert tuple(fact.usefulness[:5]) == reference_measure(fact.condition, fact.conclusion, own)
        assert (fact.support, fact.contradict) == reference_assess(fact.fact_id, fact.condition, fact.conclusion, own)
        again = extract_facts(evidence, made, principal="p", at=T0)
        assert all(f.conclusion != fact.conclusion or f.condition != fact.condition for f in again)
        assert update_fact(fact, evidence, at=T0) == update_fact(fact, EvidenceLog(evidence), at=T0)


@settings(max_examples=150, deadline=None)
@given(histories, st.sampled_from(CHOICES))
def test_induction_on_a_growing_log_reuses_term_counts_and_answers_like_a_fresh_log(evidence, conclusion):
    log = EvidenceLog()
    for end, ev in enumerate(evidence, start=1):
        log.append(ev)
        assert induce_condition(conclusion, log) == induce_condition(conclusion, list(evidence[:end]))
        for positions in (set(range(end)), log.confirming(conclusion), log.against(conclusion), set()):
            assert log.term_counts(positions) == Counter(t for p in positions for t in evidence[p].terms)
            for term in TERMS[:3]:
                assert log.with_terms(positions, term) == {p for p in positions if term in evidence[p].terms}
            assert log.count_with_terms(positions, TERMS) == {
                term: sum(term in evidence[p].terms for p in positions) for term in TERMS
            }
    assert len(log._term_counts) <= TERM_COUNT_MEMO
