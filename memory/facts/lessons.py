"""Lessons: facts taught by one correction, strengthened by confirmations, narrowed or revised.

A *lesson* is what an engineer writes in a runbook addendum after a wrong call: "when
<symptom> shows up, it was <cause>, not <the cause we first tried>". It is learned from a
single incident whose first attempts failed, that received a correction and that was then
resolved; every rule below is generic English and a pure function of plain data. The words that
tell an affirmed clause from a denied or normal-state one are the `Lexicon`'s a caller passes
(default: the shipped `DEFAULT_LEXICON`).

- **Condition** (`lesson_condition`): the terms that the correction *affirms* and that one
  observation line of the incident *affirms* too (negation-aware: `memory.text.affirmed_clauses`),
  minus the terms the correction denies, the incident's own subject (a service name is
  where it happened, not why), words for when (`memory.text.TIME_WORDS`), words for a look
  (`memory.text.looked_terms`: a correction's "check X first" is advice, an observation's "while
  inspecting Y" a look, neither a symptom) and the terms most
  of the principal's episodes affirm (``common``: in a pharmacy's incidents "cabinet" tells
  none apart; `common_terms`); at least two terms (one shared word is a coincidence: "the cold
  washes left it dirty" and "the wash controller failed" share only *wash*) besides the words
  of the answer's own name (a correction naming the component at fault, "the root cause was the
  petInfo table", shares its name with the line reporting that component's own metric: "when
  the table shows up, it is the table" restates the answer and tells no incident apart). Of the lines, the one whose
  shared terms are rarest in the principal's history wins, so the condition is the telling
  detail the correction pointed at, not a symptom every incident shares.
- **Applies** (`lesson_applies`) only on a full match: every condition term affirmed in one
  observation line, and none of its ``unless`` terms in that line. A negated mention ("X has
  not been touched in weeks") or a normal-state report ("X is steady") does not match.
- **Contrastive**: earlier resolved incidents whose observations affirm the condition count
  from the start (fixed by the conclusion: support; by another cause: contradiction); a
  detail seen as often with other causes separates nothing and makes no lesson.
- **Confidence**: Beta(α0 + confirmations, β0 + contradictions); one correction gives a low
  confidence (2/3 with the default prior) that later confirmations raise.
- **On a failed try** of its conclusion in an incident it matched (not resolved yet): a
  contradiction, and *retired* at once when the correction speaks of the condition itself.
- **On a contradiction** (it matched, the incident was resolved otherwise):
  *revised* when the incident's corrections speak of the condition itself (the site says
  the trigger changed: the new version concludes what fixed it, evidence counting from
  then); otherwise *narrowed* with ``unless`` terms (what the contradicting line says that
  no supporting incident said), else only counted as a contradiction, and *retired* when
  confidence falls below ``revise_below``. Every version is kept, with its reason.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import lru_cache
from typing import NamedTuple, TypedDict, Unpack

from memory.episodes import Outcome
from memory.facts.evidence import EpisodeEvidence
from memory.facts.rules import DEFAULT_FACTS, FactConfig, confidence
from memory.facts.versions import ACTIVE, LESSON, RETIRED, FactStatus, FactVersion, Usefulness, Wording, new_fact_id
from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.text import TIME_WORDS, affirmed_clauses, looked_terms, split_negation, term_wording, terms

MAX_CONDITION_TERMS = 4  # a lesson's condition keeps at most this many terms (the rarest)
MIN_CONDITION_TERMS = 2  # one shared word is a coincidence, not a telling detail
MAX_UNLESS_TERMS = 3  # a narrowing adds at most this many exception terms
COMMON_FROM = 4  # episodes a principal must hold before "most of them affirm it" says anything
NO_WORDING = Wording()  # no words known: a lesson's text shows its terms


class LessonIncident(NamedTuple):
    """What a resolved incident tells the lesson rules (plain data)."""

    episode_id: str  # the episode that closed (resolved) it
    principal: str  # its tenant
    symptoms: tuple[str, ...]  # observation lines of the incident
    corrections: tuple[str, ...]  # corrections received during it
    failed: tuple[str, ...]  # choices tried that did not fix it
    resolution: str | None  # the choice that fixed it (None while it is not resolved)
    subject: str | None  # its service or subject
    at: datetime  # when it closed


def affirmed_lines(symptoms: Sequence[str], lexicon: Lexicon = DEFAULT_LEXICON) -> list[frozenset[str]]:
    """The terms each observation line affirms (negated and normal-state clauses dropped)."""
    return [terms(affirmed_clauses(line, lexicon)) for line in symptoms]


@lru_cache(maxsize=4096)  # every lesson of a principal reads the closing incident's lines
def cached_affirmed_lines(symptoms: tuple[str, ...], lexicon: Lexicon) -> tuple[frozenset[str], ...]:
    return tuple(affirmed_lines(symptoms, lexicon))


def _name_terms(names: Collection[str | None]) -> set[str]:
    return {t for name in names if name for t in terms(name.replace("_", " ").replace("-", " "))}


def lesson_condition(
    incident: LessonIncident,
    rarity: Mapping[str, float],
    common: Collection[str] = (),
    lexicon: Lexicon = DEFAULT_LEXICON,
) -> tuple[str, ...]:
    """The telling detail the correction points at (see the module docstring); () when none.

    Args:
        rarity: term → weight (e.g. inverse document frequency over the principal's incidents);
            unknown terms count as rare.
        common: terms most of the principal's episodes affirm; they tell no incident apart.
        lexicon: the words the corrections and observations are read with.
    """
    said: set[str] = set()
    denied: set[str] = set()
    for text in incident.corrections:
        affirmed, negated = split_negation(text, lexicon)
        said |= terms(affirmed)
        denied |= terms(negated)
    excluded = denied | _name_terms([incident.subject]) | TIME_WORDS | looked_terms() | set(common)
    answer = _name_terms([incident.resolution])
    best: tuple[float, tuple[str, ...]] = (0.0, ())
    top = max(rarity.values(), default=1.0)
    for line in affirmed_lines(incident.symptoms, lexicon):
        shared = sorted((line & said) - excluded, key=lambda t: (-rarity.get(t, top), t))[:MAX_CONDITION_TERMS]
        weight = sum(rarity.get(t, top) for t in shared)
        if len(set(shared) - answer) >= MIN_CONDITION_TERMS and weight > best[0]:
            best = (weight, tuple(sorted(shared)))
    return best[1]


def lesson_applies(fact: FactVersion, lines: Sequence[frozenset[str]]) -> bool:
    """Whether an active lesson's condition is affirmed in full in one line, with no exception term."""
    if fact.status != ACTIVE or not fact.condition:
        return False
    wanted, unless = set(fact.condition), set(fact.unless)
    return any(wanted <= line and not (unless & line) for line in lines)


def lesson_wording(
    terms_shown: Sequence[str],
    texts: Sequence[str],
    known: Mapping[str, str] | None = None,
    lexicon: Lexicon = DEFAULT_LEXICON,
) -> tuple[str, ...]:
    """Each term as the observations first wrote it ("shared" for *shar*): from `known`, else from the
    affirmed clauses of `texts`; () when a term is written nowhere."""
    written = dict(known or {})
    for line in texts:
        for term, word in term_wording(affirmed_clauses(line, lexicon)).items():
            written.setdefault(term, word)
    wording = tuple(written.get(term, "") for term in terms_shown)
    return wording if all(wording) else ()


def _wording(
    condition: Sequence[str], unless: Sequence[str], texts: Sequence[str], known: Mapping[str, str], lexicon: Lexicon
) -> Wording:
    """The words of a lesson's terms (`lesson_wording`): the exceptions' only when the condition's are known too."""
    words = lesson_wording((*condition, *unless), texts, known, lexicon)
    if words:
        return Wording(words[: len(condition)], words[len(condition) :])
    return Wording(lesson_wording(condition, texts, known, lexicon))


def describe_lesson(
    condition: Sequence[str],
    conclusion: str,
    rejected: Sequence[str],
    unless: Sequence[str],
    wording: Wording = NO_WORDING,
) -> str:
    """A lesson as a runbook addendum line, in the observations' words where `wording` gives them."""
    text = f"when an observation affirms {' + '.join(wording.condition or condition)}"
    if unless:
        text += f" (unless it also says {' or '.join(wording.unless or unless)})"
    text += f" → {conclusion}"
    if rejected:
        text += f", not {' or '.join(rejected)}"
    return text


def _usefulness(support: int, contradict: int) -> Usefulness:
    matched = support + contradict
    precision = support / matched if matched else 0.0
    return Usefulness(support, matched, round(precision, 6), 0.0, 0.0, support > contradict)


def _completed(
    draft: FactVersion,
    config: FactConfig,
    texts: Sequence[str] = (),
    known: Mapping[str, str] | None = None,
    lexicon: Lexicon = DEFAULT_LEXICON,
) -> FactVersion:
    """`draft` with what follows from its terms, choices and evidence: its words (`known`, else as `texts` write
    them, read with `lexicon`), its text, confidence and usefulness."""
    wording = _wording(draft.condition, draft.unless, texts, known or {}, lexicon)
    support, contradict = len(draft.support), len(draft.contradict)
    return replace(
        draft,
        wording=wording,
        confidence=round(confidence(support, contradict, config), 6),
        text=describe_lesson(draft.condition, draft.conclusion, draft.rejected, draft.unless, wording),
        usefulness=_usefulness(support, contradict),
    )


class _LessonChanges(TypedDict, total=False):
    """The fields a lesson's next version may change (`_next`)."""

    conclusion: str
    rejected: tuple[str, ...]
    support: tuple[str, ...]
    contradict: tuple[str, ...]
    unless: tuple[str, ...]
    status: FactStatus
    since: datetime | None


def _next(
    fact: FactVersion,
    incident: LessonIncident,
    config: FactConfig,
    *,
    reason: str,
    texts: Sequence[str] = (),
    lexicon: Lexicon = DEFAULT_LEXICON,
    **changes: Unpack[_LessonChanges],
) -> FactVersion:
    """The version after `fact` for `incident`: `fact` with `changes`; its words are `fact`'s, and `texts`' for
    terms new to it."""
    draft = replace(
        fact, version=fact.version + 1, supersedes=fact.version, created_at=incident.at, reason=reason, **changes
    )
    return _completed(draft, config, texts, fact.wording.written(fact.condition, fact.unless), lexicon)


def _ids(episodes: Collection[str]) -> tuple[str, ...]:
    return tuple(sorted(set(episodes)))


def _holds(ids: tuple[str, ...], episode: str) -> bool:
    """Whether a version's sorted, unique ids (`FactVersion.support`, ``contradict``) hold `episode`: a binary
    search, since a lesson's support grows with the memory."""
    at = bisect_left(ids, episode)
    return at < len(ids) and ids[at] == episode


def _adding(ids: tuple[str, ...], episode: str) -> tuple[str, ...]:
    """``_ids({*ids, episode})`` of sorted, unique `ids`, without sorting them again."""
    at = bisect_left(ids, episode)
    return ids if at < len(ids) and ids[at] == episode else (*ids[:at], episode, *ids[at:])


def rejected_choices(fact: FactVersion) -> tuple[str, ...]:
    """The choices a lesson says were wrong where it applies (() for other facts): `FactVersion.rejected`."""
    return fact.rejected


def learn_lesson(
    incident: LessonIncident,
    rarity: Mapping[str, float],
    history: Callable[[Sequence[str]], Iterable[EpisodeEvidence]] = lambda condition: (),
    *,
    common: Collection[str] = (),
    config: FactConfig = DEFAULT_FACTS,
    lexicon: Lexicon = DEFAULT_LEXICON,
    tally: Callable[[Sequence[str], str], tuple[int, int] | None] | None = None,
) -> FactVersion | None:
    """A new lesson from a corrected, resolved incident whose earlier attempts failed; None when it teaches none.

    The condition is checked against the principal's earlier resolved episodes (`history`):
    those whose observations affirm every condition term support the lesson when they were
    fixed by its conclusion and contradict it otherwise (`history(condition)` yields at least
    the episodes whose observations hold every condition term). A detail that earlier incidents show
    with other causes does not separate this cause: when the confidence that results stays
    below ``revise_below``, no lesson is made. The incident's texts are read with `lexicon`.

    `tally(condition, resolution)`, when given, counts what `history` would support and contradict (the
    episodes other than the incident's, `EvidenceLog.resolved_counts`; None when it cannot), so that a
    detail that makes no lesson, the usual case, is rejected without reading its history one by one.
    """
    if not incident.corrections or not incident.failed or incident.resolution is None:
        return None
    condition = lesson_condition(incident, rarity, common, lexicon)
    if not condition:
        return None
    counted = tally(condition, incident.resolution) if tally is not None else None
    if counted is not None and confidence(1 + counted[0], counted[1], config) < config.revise_below:
        return None
    support: set[str] = {incident.episode_id}
    contradict: set[str] = set()
    for ev in history(condition):
        if ev.outcome is Outcome.SUCCESS and ev.episode_id != incident.episode_id and set(condition) <= ev.affirmed:
            (support if ev.choice == incident.resolution else contradict).add(ev.episode_id)
    if confidence(len(support), len(contradict), config) < config.revise_below:
        return None
    quoted = " / ".join(incident.corrections)
    draft = FactVersion(  # text, confidence and usefulness follow from the rest (`_completed`)
        fact_id=new_fact_id(incident.principal, incident.resolution, condition, incident.episode_id),
        version=1,
        principal=incident.principal,
        text="",
        condition=condition,
        conclusion=incident.resolution,
        confidence=0.0,
        support=_ids(support),
        contradict=_ids(contradict),
        created_at=incident.at,
        supersedes=None,
        status=ACTIVE,
        reason=f"learned from the correction: {quoted}",
        usefulness=_usefulness(0, 0),
        kind=LESSON,
        rejected=tuple(incident.failed),
    )
    return _completed(draft, config, incident.symptoms, lexicon=lexicon)


def update_lesson(
    fact: FactVersion,
    incident: LessonIncident,
    supporting_terms: Sequence[frozenset[str]] | Callable[[], Sequence[frozenset[str]]],
    *,
    config: FactConfig = DEFAULT_FACTS,
    lexicon: Lexicon = DEFAULT_LEXICON,
) -> FactVersion | None:
    """The next version of a lesson after a resolved incident, or None when it says nothing about it.

    Args:
        supporting_terms: observation terms of the incidents that support the lesson (for narrowing),
            or a function giving them (called only when the lesson is narrowed: a lesson's support
            grows with the memory, and most incidents say nothing about most lessons).
        lexicon: the words the incident's observations are read with.
    """
    # the cheap test first: a lesson's support grows with the memory, and most incidents do not match it
    lines = cached_affirmed_lines(tuple(incident.symptoms), lexicon)
    episode = incident.episode_id
    if (
        fact.status != ACTIVE
        or not lesson_applies(fact, lines)
        or _holds(fact.support, episode)
        or _holds(fact.contradict, episode)
    ):
        return None
    spoken: set[str] = set().union(*(terms(text) for text in incident.corrections)) if incident.corrections else set()
    if incident.resolution is None:  # not resolved (yet): only a failed try of the conclusion says something
        return _after_failed_try(fact, incident, spoken, config, lexicon)
    if incident.resolution == fact.conclusion:
        return _next(
            fact,
            incident,
            config,
            lexicon=lexicon,
            support=_adding(fact.support, episode),
            reason=f"confirmed by episode {episode}",
        )
    if spoken & set(fact.condition):
        quoted = " / ".join(incident.corrections)
        return _next(
            fact,
            incident,
            config,
            lexicon=lexicon,
            conclusion=incident.resolution,
            rejected=(fact.conclusion,),
            support=(episode,),
            contradict=(),
            since=incident.at,
            reason=f"revised: {fact.conclusion} → {incident.resolution} after the correction: {quoted}",
        )
    return _after_contradiction(fact, incident, lines, supporting_terms, config, lexicon)


def _after_failed_try(
    fact: FactVersion, incident: LessonIncident, spoken: set[str], config: FactConfig, lexicon: Lexicon
) -> FactVersion | None:
    """A lesson after an incident it matched where its conclusion was tried and failed (not resolved yet): a
    contradiction, retired when the correction speaks of the condition; None when the conclusion was not tried."""
    if fact.conclusion not in incident.failed:
        return None
    episode = incident.episode_id
    against = _adding(fact.contradict, episode)
    if spoken & set(fact.condition):
        return _next(
            fact,
            incident,
            config,
            lexicon=lexicon,
            contradict=against,
            status=RETIRED,
            reason=f"retired: {fact.conclusion} failed in episode {episode} and the correction "
            f"speaks of the condition: {' / '.join(incident.corrections)}",
        )
    return _next(
        fact,
        incident,
        config,
        lexicon=lexicon,
        contradict=against,
        reason=f"contradicted: {fact.conclusion} failed in episode {episode}",
    )


def _after_contradiction(
    fact: FactVersion,
    incident: LessonIncident,
    lines: Sequence[frozenset[str]],
    supporting_terms: Sequence[frozenset[str]] | Callable[[], Sequence[frozenset[str]]],
    config: FactConfig,
    lexicon: Lexicon,
) -> FactVersion:
    """A lesson after an incident it matched that was resolved otherwise, its corrections silent on the condition:
    narrowed with what the matching line says that no supporting incident said, else counted as a contradiction
    (and retired below ``revise_below``)."""
    episode = incident.episode_id
    against = _adding(fact.contradict, episode)
    matched = [line for line in lines if set(fact.condition) <= line and not set(fact.unless) & line]
    supporting = supporting_terms() if callable(supporting_terms) else supporting_terms
    seen: set[str] = set().union(*supporting) if supporting else set()
    novel = (
        sorted(set().union(*matched) - seen - set(fact.condition) - _name_terms([incident.subject]))[:MAX_UNLESS_TERMS]
        if matched
        else []
    )
    if novel:
        return _next(
            fact,
            incident,
            config,
            lexicon=lexicon,
            unless=tuple(sorted(set(fact.unless) | set(novel))),
            contradict=against,
            texts=incident.symptoms,
            reason=f"narrowed: not when {' or '.join(novel)} (episode {episode} was {incident.resolution})",
        )
    retire = confidence(len(fact.support), len(against), config) < config.revise_below
    return _next(
        fact,
        incident,
        config,
        lexicon=lexicon,
        contradict=against,
        status=RETIRED if retire else ACTIVE,
        reason=f"contradicted by episode {episode} ({incident.resolution})" + ("; retired" if retire else ""),
    )


def common_terms(words: Collection[str], frequency: Callable[[str], int], documents: int) -> set[str]:
    """The words most of a principal's episodes affirm (none while it holds fewer than ``COMMON_FROM``)."""
    return {word for word in words if 2 * frequency(word) > documents} if documents >= COMMON_FROM else set()


def rarity(words: Collection[str], frequency: Callable[[str], int], documents: int) -> dict[str, float]:
    """Inverse document frequency of each word over a principal's incidents: log((n+1)/(df+1)) + 1."""
    return {word: math.log((documents + 1) / (frequency(word) + 1)) + 1.0 for word in words}
