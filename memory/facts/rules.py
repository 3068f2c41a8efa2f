"""Fact rules: versioned heuristics generalized from episodes with confirmed outcomes.

A fact says "when these terms appear in the observations, the answer is this choice".
Everything here is a pure function of plain data: the caller passes `EpisodeEvidence` (one per
closed episode that tested a choice) and gets `FactVersion` values back.

Rules (all thresholds live in `FactConfig`):

- **Labels.** A SUCCESS episode confirms its last choice; a FAILURE episode refutes it.
  Other outcomes, and episodes without a structured choice, are not evidence.
- **Extraction** (no LLM, separate and conquer): for a conclusion ``c`` with at least
  ``min_coverage`` confirming episodes that no active fact about ``c`` matches yet, terms are
  ranked by smoothed log-odds of appearing in episodes confirming ``c`` versus episodes
  labelled otherwise (confirming another choice, or refuting ``c``).
  The condition grows greedily (at most ``max_terms`` terms, conjunctive) while that raises
  the precision of the condition for ``c`` and keeps coverage ≥ ``min_coverage``.
- **Usefulness** (measured on past episodes, stored in the record): among labelled
  episodes whose observations contain every condition term, ``precision`` = share that
  confirm the conclusion, ``coverage`` = how many confirm it, ``lift`` = precision over the
  conclusion's base rate among all labelled episodes. A fact must reach
  ``min_precision``, ``min_coverage`` and ``min_lift``; vague facts are rejected.
- **Confidence** is the posterior mean of Beta(α0 + |support|, β0 + |contradict|), where
  support and contradict are *sets* of episode ids, so an episode never counts twice.
  An episode supports a fact when it confirms the conclusion and its observations match
  the condition (or its decision cited the fact); it contradicts when it confirms another
  choice or refutes the conclusion under the same test.
- **Revision.** When confidence falls below ``revise_below`` (or the condition stops
  passing the usefulness check on the evidence so far), the fact is revised into a
  new version: either *drift* (the last ``drift_window`` matching labelled episodes all
  confirm another choice, so the conclusion changes and only evidence from then on
  counts) or *specialization* (add the term that best separates support from
  contradiction). The candidate with the higher confidence that passes the usefulness
  check wins; when none passes, a ``retired`` version records why. Old versions are
  never changed: ``fact_history`` answers how a belief changed and on what evidence.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import NamedTuple

import numpy as np

from memory.episodes import Outcome
from memory.facts.evidence import EpisodeEvidence, EvidenceLog
from memory.facts.versions import ACTIVE, LESSON, RETIRED, FactStatus, FactVersion, Usefulness, describe, new_fact_id
from memory.text import normalize_term


@dataclass(frozen=True)
class FactConfig:
    """Thresholds of extraction, usefulness, confidence and revision."""

    prior_support: float = 1.0  # α0 of the Beta prior
    prior_contradict: float = 1.0  # β0 of the Beta prior
    revise_below: float = 0.6  # confidence under which a fact is revised
    min_precision: float = 0.75  # usefulness: precision of the condition for the conclusion
    min_coverage: int = 2  # usefulness: episodes confirming the conclusion under the condition
    min_lift: float = 1.2  # usefulness: precision over the conclusion's base rate
    max_terms: int = 3  # most terms in a condition
    min_term_share: float = 0.5  # a condition term appears in at least this share of supporting episodes
    drift_window: int = 2  # recent matching episodes that must agree on another answer to call drift


DEFAULT_FACTS = FactConfig()


def confidence(support: int, contradict: int, config: FactConfig = DEFAULT_FACTS) -> float:
    """Posterior mean of Beta(α0 + support, β0 + contradict)."""
    a = config.prior_support + support
    return a / (a + config.prior_contradict + contradict)


# -- measuring ---------------------------------------------------------------------------


def matches(condition: Iterable[str], ev: EpisodeEvidence) -> bool:
    """Whether every condition term is in the episode's observations."""
    return set(condition) <= ev.terms


def measure(
    condition: Sequence[str],
    conclusion: str,
    evidence: Sequence[EpisodeEvidence],
    config: FactConfig = DEFAULT_FACTS,
    *,
    since: datetime | None = None,
) -> Usefulness:
    """Precision, coverage and lift of ``condition → conclusion`` on past episodes.

    The base rate is taken over all labelled episodes; with `since`, only matching
    episodes from then on count towards precision and coverage (after a drift).
    """
    log = EvidenceLog.of(evidence)
    labelled = log.labelled_count(conclusion)
    base = len(log.confirming(conclusion)) / labelled if labelled else 0.0
    true, false = log.labels_among(log.matching_positions(condition), conclusion, since=since)
    coverage, matched = len(true), len(true) + len(false)
    precision = coverage / matched if matched else 0.0
    lift = precision / base if base else 0.0
    passed = (
        coverage >= config.min_coverage
        and precision >= config.min_precision
        and lift >= config.min_lift
        and bool(condition)
    )
    return Usefulness(coverage, matched, round(precision, 6), round(base, 6), round(lift, 6), passed)


def _log_odds(p: int, n_pos: int, n: int, n_neg: int) -> float:
    """Smoothed log-odds ratio of a term: in p of n_pos positives versus n of n_neg negatives."""
    return math.log((p + 0.5) / (n_pos - p + 0.5)) - math.log((n + 0.5) / (n_neg - n + 0.5))


def induce_condition(
    conclusion: str,
    evidence: Sequence[EpisodeEvidence],
    config: FactConfig = DEFAULT_FACTS,
    *,
    start: Sequence[str] = (),
) -> tuple[str, ...]:
    """Greedy conjunctive condition for a conclusion (see the module docstring).

    Args:
        conclusion: the choice to explain.
        evidence: labelled past episodes.
        start: terms the condition must keep (used when specializing a fact).
    """
    log = EvidenceLog.of(evidence)
    return _induce(log, log.confirming(conclusion), log.against(conclusion), config, start)


def _induce(
    log: EvidenceLog, pos: set[int], neg: set[int], config: FactConfig, start: Sequence[str] = ()
) -> tuple[str, ...]:
    """`induce_condition` over positions of `log`: `pos` confirm the conclusion, `neg` are labelled otherwise.

    Term counts among the covered positives come from their terms; among the covered
    negatives they come from the posting sets, and only for terms that could be chosen,
    so a step costs the size of the positives, not of the whole history.
    """
    condition = list(start)
    need = max(config.min_coverage, config.min_term_share * len(pos))
    while len(condition) < config.max_terms:
        covered = log.matching(condition) if condition else None
        covered_pos = pos if covered is None else pos & covered
        covered_neg = neg if covered is None else neg & covered
        if condition and not covered_neg:
            break
        in_pos = log.term_counts(covered_pos)
        eligible = [t for t, n in in_pos.items() if n >= need and t not in condition]
        in_neg = log.count_with_terms(covered_neg, eligible)
        ranked = sorted(
            eligible, key=lambda t: (-_log_odds(in_pos[t], len(covered_pos), in_neg[t], len(covered_neg)), t)
        )
        if not ranked:
            break
        best = ranked[0]
        before = len(covered_pos) / (len(covered_pos) + len(covered_neg)) if condition else -1.0
        coverage = in_pos[best]
        if coverage / (coverage + in_neg[best]) <= before or coverage < config.min_coverage:
            break
        condition.append(best)
    return tuple(sorted(set(condition)))


# -- the lifecycle -----------------------------------------------------------------------


class Assessment(NamedTuple):
    """Support and contradiction of a condition/conclusion over evidence."""

    support: tuple[str, ...]  # episode ids that confirm it (sorted, unique)
    contradict: tuple[str, ...]  # episode ids that go against it (sorted, unique)
    confidence: float  # Beta posterior mean


def assess(
    fact_id: str,
    condition: Sequence[str],
    conclusion: str,
    evidence: Sequence[EpisodeEvidence],
    config: FactConfig = DEFAULT_FACTS,
    *,
    since: datetime | None = None,
) -> Assessment:
    """Count each relevant episode once: matched by the condition, or citing the fact."""
    log = EvidenceLog.of(evidence)
    cited = np.fromiter(log.citing(fact_id), dtype=np.int64)
    matched = log.matching_positions(condition)  # a position both matched and citing counts once: ids go into sets
    true, false = log.labels_among(np.concatenate((matched, cited)) if len(cited) else matched, conclusion, since=since)
    support, contradict = set(log.episode_ids_at(true)), set(log.episode_ids_at(false))
    return Assessment(
        tuple(sorted(support)), tuple(sorted(contradict)), confidence(len(support), len(contradict), config)
    )


class _Basis(NamedTuple):
    """What every version of one fact is made from: its id and principal, the evidence, the thresholds, the time."""

    fact_id: str
    principal: str
    evidence: Sequence[EpisodeEvidence]
    config: FactConfig
    at: datetime


def _version(
    prev: FactVersion | None,
    basis: _Basis,
    *,
    condition: Sequence[str],
    conclusion: str,
    reason: str,
    since: datetime | None,
    status: FactStatus = ACTIVE,
    assessed: Assessment | None = None,
    usefulness: Usefulness | None = None,
) -> FactVersion:
    """A fact version; `assessed` and `usefulness`, when the caller has them for the same condition,
    conclusion and `since`, are not computed again."""
    fact_id, principal, evidence, config, at = basis
    if assessed is None:
        assessed = assess(fact_id, condition, conclusion, evidence, config, since=since)
    if usefulness is None:
        usefulness = measure(condition, conclusion, evidence, config, since=since)
    return FactVersion(
        fact_id=fact_id,
        version=prev.version + 1 if prev else 1,
        principal=principal,
        text=describe(condition, conclusion),
        condition=tuple(condition),
        conclusion=conclusion,
        confidence=round(assessed.confidence, 6),
        support=assessed.support,
        contradict=assessed.contradict,
        created_at=at,
        supersedes=prev.version if prev else None,
        status=status,
        reason=reason,
        usefulness=usefulness,
        since=since,
    )


def update_fact(
    fact: FactVersion, evidence: Sequence[EpisodeEvidence], *, at: datetime, config: FactConfig = DEFAULT_FACTS
) -> FactVersion | None:
    """The next version of a fact given all evidence, or None when nothing changed.

    Support and contradiction are recomputed as sets over all evidence (so replaying an
    episode changes nothing). Below ``revise_below`` the fact is revised (drift or
    specialization) or retired; see the module docstring.
    """
    if fact.status != ACTIVE or fact.kind == LESSON:  # lessons follow `memory.facts.lessons`
        return None
    evidence = EvidenceLog.of(evidence, fact.principal)
    now = assess(fact.fact_id, fact.condition, fact.conclusion, evidence, config, since=fact.since)
    if now.support == fact.support and now.contradict == fact.contradict:
        return None
    basis = _Basis(fact.fact_id, fact.principal, evidence, config, at)
    measured = measure(fact.condition, fact.conclusion, evidence, config, since=fact.since)
    if now.confidence >= config.revise_below and measured.passed:
        change = (
            f"reinforced: support {len(fact.support)}→{len(now.support)}, "
            f"contradict {len(fact.contradict)}→{len(now.contradict)}"
        )
        return _same_condition(fact, basis, now, measured, reason=change)
    candidates = [
        c
        for c in (_drift(fact, evidence, basis), _specialize(fact, evidence, basis))
        if c is not None and c.usefulness.passed and c.confidence >= config.revise_below
    ]
    if candidates:
        return max(candidates, key=lambda c: (c.confidence, len(c.support), c.reason))
    why = (
        f"confidence {now.confidence:.2f} below {config.revise_below:.2f}"
        if now.confidence < config.revise_below
        else "the condition no longer discriminates"
    )
    return _same_condition(
        fact, basis, now, measured, reason=f"retired: {why} and no revision passed the usefulness check", status=RETIRED
    )


def _same_condition(
    fact: FactVersion,
    basis: _Basis,
    now: Assessment,
    measured: Usefulness,
    *,
    reason: str,
    status: FactStatus = ACTIVE,
) -> FactVersion:
    """The next version of `fact` with its condition, conclusion and `since` (what `now` and `measured` were
    computed on)."""
    return _version(
        fact,
        basis,
        condition=fact.condition,
        conclusion=fact.conclusion,
        since=fact.since,
        reason=reason,
        status=status,
        assessed=now,
        usefulness=measured,
    )


def _drift(fact: FactVersion, evidence: EvidenceLog, basis: _Basis) -> FactVersion | None:
    config = basis.config
    matched = (evidence[p] for p in evidence.matching(fact.condition))
    recent = sorted(
        (ev for ev in matched if ev.outcome is Outcome.SUCCESS and (fact.since is None or ev.at >= fact.since)),
        key=lambda ev: (ev.at, ev.episode_id),
    )
    window = recent[-config.drift_window :]
    if len(window) < config.drift_window or len({ev.choice for ev in window}) != 1:
        return None
    answer = window[0].choice
    if answer == fact.conclusion:
        return None
    # evidence counts from the first episode of the unbroken run that confirms the new answer
    start = len(recent) - 1
    while start > 0 and recent[start - 1].choice == answer:
        start -= 1
    since = recent[start].at
    return _version(
        fact,
        basis,
        condition=fact.condition,
        conclusion=answer,
        since=since,
        reason=f"drift: conclusion {fact.conclusion} → {answer} after {len(recent) - start} recent confirmations",
    )


def _specialize(fact: FactVersion, evidence: Sequence[EpisodeEvidence], basis: _Basis) -> FactVersion | None:
    config = basis.config
    scoped = evidence if fact.since is None else [ev for ev in evidence if ev.at >= fact.since]
    extended = induce_condition(
        fact.conclusion, scoped, replace(config, max_terms=len(fact.condition) + 1), start=fact.condition
    )
    if len(extended) <= len(fact.condition):
        return None
    added = sorted(set(extended) - set(fact.condition))
    return _version(
        fact,
        basis,
        condition=extended,
        conclusion=fact.conclusion,
        since=fact.since,
        reason=f"specialized: added {', '.join(added)} to exclude contradicting episodes",
    )


def extract_facts(
    evidence: Sequence[EpisodeEvidence],
    current: Sequence[FactVersion],
    *,
    principal: str,
    at: datetime,
    config: FactConfig = DEFAULT_FACTS,
    conclusions: Iterable[str] | None = None,
) -> list[FactVersion]:
    """New facts for confirmations that no active fact of the principal covers yet.

    Separate and conquer: for each conclusion, the episodes confirming it that no active
    fact with that conclusion matches are explained by a new condition (against every
    episode labelled otherwise); the result must pass `propose_fact`'s checks.

    Args:
        conclusions: only these (e.g. the one a closing episode just confirmed); all by default.
    """
    log = EvidenceLog.of(evidence, principal)
    active = [f for f in current if f.principal == principal and f.status == ACTIVE]
    taken = {f.fact_id for f in current}
    made: list[FactVersion] = []
    confirmed = log.confirmed()
    for conclusion in sorted(confirmed if conclusions is None else confirmed & set(conclusions)):
        rules = [f.condition for f in active if f.conclusion == conclusion]
        uncovered = set(log.confirming(conclusion))
        for rule in rules:
            uncovered -= log.matching(rule)
        ids = {log[p].episode_id for p in uncovered}
        if len(ids) < config.min_coverage:
            continue
        # the episodes to explain: every position of an uncovered episode (ids are unique in
        # a memory's evidence; a hand-made list may repeat one) and every counter-example
        focus = log.positions_of(ids)
        condition = _induce(log, focus & log.confirming(conclusion), log.against(conclusion), config)
        if not condition or condition in rules:
            continue
        fact = propose_fact(
            condition,
            conclusion,
            log,
            principal=principal,
            at=at,
            config=config,
            reason="extracted: shared by episodes confirming the conclusion, rare elsewhere",
        )
        if fact is not None and fact.fact_id not in taken:  # a retired identical fact stays retired
            made.append(fact)
    return made


def propose_fact(
    condition: Sequence[str],
    conclusion: str,
    evidence: Sequence[EpisodeEvidence],
    *,
    principal: str,
    at: datetime,
    config: FactConfig = DEFAULT_FACTS,
    reason: str = "proposed",
) -> FactVersion | None:
    """Validate a proposed ``condition → conclusion`` (e.g. from an LLM); the fact, or None when vague.

    Condition words are normalized like observations. The proposal must pass the same
    usefulness check as extracted facts and reach ``revise_below`` confidence.
    """
    condition = tuple(sorted({normalize_term(w) for w in condition if w}))
    evidence = EvidenceLog.of(evidence, principal)
    if not condition or not measure(condition, conclusion, evidence, config).passed:
        return None
    origin = min((evidence[p].episode_id for p in evidence.matching(condition)), default="")
    fact = _version(
        None,
        _Basis(new_fact_id(principal, conclusion, condition, origin), principal, evidence, config, at),
        condition=condition,
        conclusion=conclusion,
        reason=reason,
        since=None,
    )
    return fact if fact.confidence >= config.revise_below else None


ProposalHook = Callable[[Sequence[EpisodeEvidence]], Iterable[tuple[Sequence[str], str]]]
"""Signature of an optional proposer (e.g. an LLM): evidence → proposed (condition, conclusion) pairs."""
