"""The indexed fact rules give exactly what a scan over every episode gives.

The reference functions below are the rules written as plain scans (the definitions in
the `memory.facts.rules` docstring); the library answers from `EvidenceLog` indexes instead.
"""

from collections import Counter
from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.episodes import Outcome
from memory.facts import DEFAULT_FACTS, EpisodeEvidence, EvidenceLog, FactConfig, extract_facts, update_fact
from memory.facts.evidence import TERM_COUNT_MEMO
from memory.facts.rules import assess, induce_condition, measure

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
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


def reference_induce(conclusion, evidence, config=DEFAULT_FACTS, start=()):
    import math

    def log_odds(p, n_pos, n, n_neg):
        return math.log((p + 0.5) / (n_pos - p + 0.5)) - math.log((n + 0.5) / (n_neg - n + 0.5))

    condition = list(start)
    pos = [ev for ev in evidence if label(ev, conclusion) is True]
    neg = [ev for ev in evidence if label(ev, conclusion) is False]
    need = max(config.min_coverage, config.min_term_share * len(pos))
    while len(condition) < config.max_terms:
        covered_pos = [ev for ev in pos if matches(condition, ev)]
        covered_neg = [ev for ev in neg if matches(condition, ev)]
        if condition and not covered_neg:
            break
        in_pos = Counter(t for ev in covered_pos for t in ev.terms if t not in condition)
        in_neg = Counter(t for ev in covered_neg for t in ev.terms if t not in condition)
        ranked = sorted((t for t, p in in_pos.items() if p >= need),
                        key=lambda t: (-log_odds(in_pos[t], len(covered_pos), in_neg[t], len(covered_neg)), t))
        if not ranked:
            break
        best = ranked[0]
        before = len(covered_pos) / (len(covered_pos) + len(covered_neg)) if condition else -1.0
        coverage = in_pos[best]
        if coverage / (coverage + in_neg[best]) <= before or coverage < config.min_coverage:
            break
        condition.append(best)
    return tuple(sorted(set(condition)))


evidence_items = st.builds(
    lambda i, words, choice, outcome, hours, cited, principal: EpisodeEvidence(
        f"e{i:03d}", principal, frozenset(words), choice, outcome, T0 + timedelta(hours=hours), frozenset(cited)),
    st.integers(0, 60), st.sets(st.sampled_from(TERMS), max_size=5), st.sampled_from(CHOICES),
    st.sampled_from([Outcome.SUCCESS, Outcome.SUCCESS, Outcome.FAILURE, Outcome.UNKNOWN]),
    st.integers(0, 200), st.sets(st.sampled_from(["fact-a", "fact-b"]), max_size=1), st.sampled_from(["p", "p", "q"]))
histories = st.lists(evidence_items, max_size=40)  # repeated episode ids on purpose: hand-made lists may have them
conditions = st.lists(st.sampled_from(TERMS), max_size=3)
moments = st.one_of(st.none(), st.integers(0, 200).map(lambda h: T0 + timedelta(hours=h)))


@settings(max_examples=300, deadline=None)
@given(histories, conditions, st.sampled_from(CHOICES), moments)
def test_measure_and_assess_equal_the_scans(evidence, condition, conclusion, since):
    got = measure(condition, conclusion, evidence, since=since)
    assert tuple(got[:5]) == reference_measure(condition, conclusion, evidence, since)
    for given_as in (evidence, EvidenceLog(evidence)):
        found = assess("fact-a", condition, conclusion, given_as, since=since)
        assert (found.support, found.contradict) == reference_assess("fact-a", condition, conclusion, evidence, since)


@settings(max_examples=300, deadline=None)
@given(histories, st.sampled_from(CHOICES), conditions, st.integers(1, 3))
def test_induced_condition_equals_the_scan(evidence, conclusion, start, max_terms):
    config = FactConfig(max_terms=max(max_terms, len(set(start))))
    assert induce_condition(conclusion, evidence, config, start=start) == reference_induce(conclusion, evidence, config, start)


@settings(max_examples=200, deadline=None)
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
    assert grown.matching([]) == set(range(len(evidence)))
    first = {}
    for ev in evidence:
        first.setdefault(ev.episode_id, ev)
    assert all(grown.find(i) is ev for i, ev in first.items()) and grown.find("missing") is None


def scan_extract(evidence, current, principal, at, config=DEFAULT_FACTS):
    """extract_facts as the docstring states it, with the reference scans."""
    evidence = [ev for ev in evidence if ev.principal == principal]
    active = [f for f in current if f.principal == principal and f.status == "active"]
    out = []
    for conclusion in sorted({ev.choice for ev in evidence if ev.outcome is Outcome.SUCCESS}):
        rules = [f.condition for f in active if f.conclusion == conclusion]
        uncovered = {ev.episode_id for ev in evidence if label(ev, conclusion) is True
                     and not any(matches(rule, ev) for rule in rules)}
        if len(uncovered) < config.min_coverage:
            continue
        focus = [ev for ev in evidence if ev.episode_id in uncovered or label(ev, conclusion) is False]
        out.append((conclusion, reference_induce(conclusion, focus, config)))
    return out


@settings(max_examples=200, deadline=None)
@given(histories)
def test_extraction_and_updates_follow_the_scans(evidence):
    made = extract_facts(evidence, [], principal="p", at=T0)
    induced = dict(scan_extract(evidence, [], "p", T0))
    for fact in made:  # each extracted fact is the scan's condition, measured like the scan measures
        assert induced[fact.conclusion] == fact.condition
        own = [ev for ev in evidence if ev.principal == "p"]
        assert tuple(fact.usefulness[:5]) == reference_measure(fact.condition, fact.conclusion, own)
        assert (fact.support, fact.contradict) == reference_assess(fact.fact_id, fact.condition, fact.conclusion, own)
        again = extract_facts(evidence, made, principal="p", at=T0)
        assert all(f.conclusion != fact.conclusion or f.condition != fact.condition for f in again)
        assert update_fact(fact, evidence, at=T0) == update_fact(fact, EvidenceLog(evidence), at=T0)


@settings(max_examples=150, deadline=None)
@given(histories, st.sampled_from(CHOICES))
def test_induction_on_a_growing_log_reuses_term_counts_and_still_equals_the_scan(evidence, conclusion):
    log = EvidenceLog()
    for end, ev in enumerate(evidence, start=1):
        log.append(ev)
        assert induce_condition(conclusion, log) == reference_induce(conclusion, evidence[:end], DEFAULT_FACTS, ())
        for positions in (set(range(end)), log.confirming(conclusion), log.against(conclusion), set()):
            assert log.term_counts(positions) == Counter(t for p in positions for t in evidence[p].terms)
    assert len(log._term_counts) <= TERM_COUNT_MEMO
