"""Which earlier change caused a new incident: competing hypotheses with calibrated weights.

Every change that stayed in place within the window (`memory.graph.changes.made_change`, the
last attempt of each earlier incident) is a hypothesis; so is "no earlier change" (the null,
score 0). A hypothesis' score is a sum of log-odds contributions (`CauseWeights`):

- ``prior``: a given earlier change rarely causes a given incident;
- ``named``: an observation sentence that refers to a past change names the change's service
  (``named_plain`` when the naming sentence refers to no change); the failing service's own
  name is never evidence for a change made on it;
- ``reference``: the observations refer to a past change or incident at all (every hypothesis);
- ``described``: the words a reference uses for the past change or incident ("the last *egress*
  incident", "the *base-image* change") are words of that incident or change;
- ``value``: a referring sentence quotes a number or version the change set ("since the controller
  change the defrost ends at 18.5 C" for a fix that set the defrost to 18.5 C): what the referred
  change left behind identifies it more surely than the noun the reference calls it by;
- ``same_subject``: the change was made on the failing service itself and a reference names
  no other changed service ("the last cache fix"); ``named_own`` when the reference's own words
  name that service ("the change made for the X incident");
- ``overlap``: the IDF-weighted terms the observations share with what the change did (its
  actions and fix), counted more in referring sentences, where terms of the incident the
  change resolved count half; a later fix that undoes something (`Patterns.undo`) is read too;
- ``denied``: a sentence denies the change's service ("X was not touched", "the X change was not
  involved"); ``retracted`` when a correction the incident received says so (the site's verdict
  after the fact outweighs what the symptoms suggested);
- ``acted_here``: the change is an explicit action recorded on the failing service itself a
  few hours before (no words needed: the memory saw the change being made);
- ``attempts``: every extra attempt of the earlier incident left one more change behind;
- ``learned``: the share of earlier changes resolving the same choice that the memory already
  linked as causes (what past changes led to), for a hypothesis the text already supports
  (named, described or on the same service): it tells apart changes the text names alike;
- ``led_to``: once the incident is resolved, the share of the incidents already linked to changes
  resolving the same choice that were resolved the same way (what such changes led to), for a
  hypothesis the text already supports: a fix of one kind tends to leave the same kind of
  trouble behind;
- ``provisional``: the change left a stopgap in place (`memory.graph.changes.stopgap_terms`: the
  sentences of its fix that say so, "fitted the loan pump until a replacement arrives", "the
  right valve is on back-order", "for now") and the observations share two or more of that sentence's
  terms, per unit of their IDF weight (at most one): what was meant to be temporary and stayed is a
  standing suspect, referred to or not;
- ``age``: older changes are less likely, per day.

An observation's sentence that reports a look which found nothing wrong (`memory.text.all_clear`:
"the pump was replaced on Monday and checked this morning: flow and pressure normal") is not
read: it refers to a change only to clear it.

Scores become probabilities by a softmax over the hypotheses and the null (`rank_causes`);
`best_cause` links the most probable when the probability that some change caused the
incident reaches ``link_at`` and the best holds at least ``lead_at`` of it. The weights were
set by hand and checked on the generator's train families (`python -m simulator.generate
--lessons --families train`), never on the shipped scenarios or the test families; every rule
reads generic English. No generated family leaves a stopgap in place, so ``provisional`` (set
equal to ``described``) was checked on the development files (`scenarios/dev/`) instead.

The words of every rule are groups of the `Lexicon` the scorer is given (default: the shipped
`DEFAULT_LEXICON`); `memory.graph.references` reads the sentences with them (`Patterns`, compiled
once per lexicon by `patterns`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from memory.episodes import Episode
from memory.graph.changes import (
    TermWeights,
    change_terms,
    entity_terms,
    incident_terms,
    is_value,
    name_terms,
    stopgap_terms,
)
from memory.graph.references import exonerated, names_subject, not_referring, patterns, referring
from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.text import mentions, read_as_found, split_negation, split_sentences

STOPGAP_SHARED = 2  # terms an incident must share with a stopgap (one shared word is a coincidence)


@dataclass(frozen=True)
class CauseWeights:
    """Log-odds contributions of the evidence for one hypothesis (see the module docstring)."""

    prior: float = -4.0  # a given earlier change, before any evidence
    named: float = 5.5  # a sentence referring to a past change names its service
    named_plain: float = 2.0  # a sentence without such a reference names its service
    reference: float = 1.5  # the observations refer to a past change or incident
    same_subject: float = 1.5  # a change on the failing service itself, with a reference naming no other
    named_own: float = 4.0  # the same, when the reference's words name the service ("the X incident")
    described: float = 3.0  # per unit of IDF-weighted words describing the referred change that match it
    value: float = 3.0  # per unit (at most one) of IDF-weighted numbers a referring sentence shares with the change
    overlap_referring: float = 3.0  # per unit of IDF-weighted shared terms, in referring sentences
    overlap_other: float = 1.5  # per unit of IDF-weighted shared terms, in the other observations
    overlap_cap: float = 1.5  # at most this many units of overlap count, per kind of sentence
    denied: float = -3.0  # a sentence denies the change's service or terms ("X has not been touched")
    retracted: float = -8.0  # a correction the incident received denies it
    attempts: float = 0.5  # per extra attempt at the earlier incident
    acted_here: float = 4.5  # an explicit action (a recorded change) on the failing service within ``acted_within_s``
    acted_within_s: float = 12 * 3600.0  # how recent that action must be
    learned: float = 3.0  # times the share of same-choice changes already linked as causes
    led_to: float = 3.0  # times the share of their linked incidents resolved as this one was
    provisional: float = 3.0  # per unit (at most one) of IDF-weighted terms shared with a stopgap
    age_per_day: float = -0.15  # per day between the change and the incident
    link_at: float = 0.5  # probability that some earlier change caused the incident, to link the best one
    lead_at: float = 0.4  # share of that probability the best hypothesis must hold


DEFAULT_CAUSE_WEIGHTS = CauseWeights()


class Hypothesis(NamedTuple):
    """One earlier change as the cause of an incident."""

    episode_id: str  # the episode that made the change
    probability: float  # softmax over the hypotheses and the null
    score: float  # summed log-odds
    factors: tuple[tuple[str, float], ...]  # the contributions that are not zero, strongest first
    shared: tuple[str, ...]  # terms the observations share with the change


class Candidate(NamedTuple):
    """A change that stayed in place, with what the scorer reads about it."""

    episode: Episode  # the last attempt of the earlier incident (the change that stayed)
    attempts: int  # attempts the earlier incident took
    corrected: tuple[Episode, ...]  # its earlier attempts (their corrections describe the change)


def rank_causes(
    observations: Sequence[str],
    subject: str | None,
    at: datetime,
    candidates: Sequence[Candidate],
    *,
    terms: TermWeights,
    corrections: Sequence[str] = (),
    fixes: Sequence[str] = (),
    learned: Callable[[Episode], float] = lambda ep: 0.0,
    led_to: Callable[[Episode], float] = lambda ep: 0.0,
    weights: CauseWeights = DEFAULT_CAUSE_WEIGHTS,
    lexicon: Lexicon = DEFAULT_LEXICON,
    most: int | None = None,
) -> list[Hypothesis]:
    """Every candidate change as the cause of an incident (the `most` most probable: None for all), most
    probable first (pure).

    Args:
        observations: what the incident showed.
        corrections: the corrections it received (read like observations; a denial there is a retraction).
        fixes: what its own fixes did; one that undoes something (`Patterns.undo`) is read for shared terms.
        subject: the failing service (its name is never evidence).
        at: when the incident started.
        candidates: earlier changes that stayed in place.
        terms: term weights over the principal's recent episodes.
        learned: share of changes like this one already linked as causes (0 when unknown).
        led_to: share of the incidents linked to changes like this one that were resolved as this
            one was (0 while the incident is not resolved).
        weights: the log-odds contributions.
        lexicon: the words the rules read.
        most: the most hypotheses returned (their probabilities are still over every candidate).
    """
    read = _read(observations, subject, candidates, corrections, fixes, lexicon)
    scored = []
    for c in candidates:
        factors = _factors(c, subject, at, read, terms, (learned, led_to), weights, lexicon)
        scored.append((c.episode.id, sum(v for _, v, _ in factors), factors))
    return _hypotheses(scored, most)


class _Mentions:
    """Whether referring sentences, or any sentence, name a service (each name looked up once)."""

    def __init__(self, refs: Sequence[str], sentences: Sequence[str]) -> None:
        self.refs, self.sentences = refs, sentences
        self.found: dict[str, tuple[bool, bool]] = {}

    def __call__(self, name: str) -> tuple[bool, bool]:
        if name not in self.found:
            self.found[name] = (
                any(mentions(s, name) for s in self.refs),
                any(mentions(s, name) for s in self.sentences),
            )
        return self.found[name]


class _Reading(NamedTuple):
    """What an incident's sentences say, read once for every candidate (`rank_causes`)."""

    named_in: _Mentions  # whether the referring sentences, or any, name a service
    refs: list[str]  # the referring sentences, their denied parts left out
    # whether the references name another service (and not the failing one), and whether they name the failing one
    named_refs: tuple[bool, bool]
    # the observations' terms: describing a referred change, in referring sentences, elsewhere, and the
    # referring sentences' numbers
    said: tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str]]
    denials: tuple[frozenset[str], frozenset[str]]  # terms denied by any sentence, and by the corrections


def _read(
    observations: Sequence[str],
    subject: str | None,
    candidates: Sequence[Candidate],
    corrections: Sequence[str],
    fixes: Sequence[str],
    lexicon: Lexicon,
) -> _Reading:
    """The incident's observations and corrections read for references, terms and denials."""
    p = patterns(lexicon)
    corrected = [s for text in corrections for s in split_sentences(text) if s.strip()]
    # a look that found nothing wrong ("the pump was replaced on Monday and checked: flow normal") reports
    # what is fine: it implicates no change, so it is not read (`all_clear`)
    sentences = [
        s for text in observations for s in split_sentences(read_as_found(text, lexicon)) if s.strip()
    ] + corrected
    refs = [s for s in sentences if referring(s, lexicon)]
    own = name_terms(subject)
    matches = [(s, m) for s in refs for pattern in (p.past_reference, p.work_reference) for m in pattern.finditer(s)]
    # "since the X was replaced": what remains of a dated reference describes the change
    dated = [p.change_word.sub(" ", m.group(0)) for s in refs for m in p.causal_cue.finditer(s)]
    described = frozenset().union(*(entity_terms(m.group(1)) for _, m in matches), *map(entity_terms, dated)) - own
    own_described = any(names_subject(s, m, subject, lexicon) for s, m in matches)
    ref_terms = frozenset().union(*(entity_terms(s) for s in refs)) - own if refs else frozenset()
    undoing = [f for f in fixes if p.undo.search(f)]
    other_terms = (
        frozenset().union(*(entity_terms(s) for s in [*sentences, *undoing] if s not in refs)) - own - ref_terms
    )
    split = {s: exonerated(s, lexicon) or split_negation(s, lexicon) for s in sentences}
    affirmed = {s: split[s][0] for s in sentences}
    denied = [split[s][1] for s in sentences]
    denied_terms = frozenset().union(*(entity_terms(d) for d in denied if d)) - own if any(denied) else frozenset()
    retracted = frozenset().union(*(entity_terms(split[s][1]) for s in corrected)) - own
    others = {c.episode.subject for c in candidates if c.episode.subject and c.episode.subject != subject}
    refs_name_other = any(mentions(affirmed[s], name) for s in refs for name in others)
    return _Reading(
        _Mentions([affirmed[s] for s in refs], [affirmed[s] for s in sentences]),
        [affirmed[s] for s in refs],
        (refs_name_other and not own_described, own_described),
        (described, ref_terms, other_terms, frozenset(filter(is_value, ref_terms))),
        (denied_terms, retracted),
    )


def _hypotheses(
    scored: Sequence[tuple[str, float, list[tuple[str, float, tuple[str, ...]]]]], most: int | None = None
) -> list[Hypothesis]:
    """Scored candidates (id, summed log-odds, contributions) as hypotheses: a softmax over them and the
    null (score 0), most probable first; the first `most` of them (None: all)."""
    top = max(max((s for _, s, _ in scored), default=0.0), 0.0)
    weights = [math.exp(s - top) for _, s, _ in scored]
    norm = math.exp(-top) + sum(weights)
    probability = [weight / norm for weight in weights]
    order = sorted(range(len(scored)), key=lambda n: (-probability[n], scored[n][0]))
    out = []
    for n in order[:most]:  # only those returned get their contributions sorted
        i, s, f = scored[n]
        contributing = [(k, v) for k, v, _ in f if v]
        if len(contributing) > 1:
            contributing.sort(key=_strength)  # strongest first; ties keep their order
        shared = next((x for k, _, x in f if k == "overlap" and x), ())
        out.append(Hypothesis(i, probability[n], s, tuple(contributing), shared))
    return out


def _strength(factor: tuple[str, float]) -> float:
    return -abs(factor[1])


class _Overlaps(NamedTuple):
    """The candidate's terms the observations share (`_overlaps`)."""

    in_words: float  # IDF weight of the words describing a referred change that match it
    shared_words: tuple[str, ...]
    overlap: float  # the ``overlap`` contribution
    shared: tuple[str, ...]  # the terms it counts
    in_values: float  # IDF weight of the referring sentences' numbers the change set
    provisional: float  # the ``provisional`` contribution
    shared_stopgap: tuple[str, ...]


def _overlaps(c: Candidate, read: _Reading, terms: TermWeights, w: CauseWeights, lexicon: Lexicon) -> _Overlaps:
    """What the observations share with what the candidate change did, with the incident it resolved,
    and with a stopgap it left in place."""
    described, ref_terms, other_terms, ref_values = read.said
    changed, about, stopgap = _candidate_terms(c, lexicon)
    if ref_terms or described:
        in_words, shared_words = terms.overlap(described, about)
        in_refs, shared_refs = terms.overlap(ref_terms, changed)
        in_incident, _ = terms.overlap(ref_terms - changed, about)
        in_refs += 0.5 * in_incident
        in_values, _ = terms.overlap(ref_values, changed)
    else:  # no sentence refers to a past change (the usual case): nothing is shared in one
        in_words, shared_words, in_refs, shared_refs, in_values = 0, (), 0.0, (), 0
    in_rest, shared_rest = terms.overlap(other_terms, changed)
    overlap = w.overlap_referring * min(in_refs, w.overlap_cap) + w.overlap_other * min(in_rest, w.overlap_cap)
    in_stopgap, shared_stopgap = terms.overlap(ref_terms | other_terms, stopgap) if stopgap else (0.0, ())
    provisional = w.provisional * min(in_stopgap, 1.0) if len(shared_stopgap) >= STOPGAP_SHARED else 0.0
    return _Overlaps(in_words, shared_words, overlap, shared_refs + shared_rest, in_values, provisional, shared_stopgap)


class _CandidateTerms(NamedTuple):
    """What a candidate change's own texts give `_overlaps` (the same for every incident it is weighed for)."""

    changed: frozenset[str]  # what the change did (`change_terms`)
    about: frozenset[str]  # those and the terms of the incident it resolved (`incident_terms`)
    stopgap: frozenset[str]  # what it left in place only for now (`stopgap_terms`)


_CANDIDATE_TERMS: dict[tuple[str, tuple[str, ...], Lexicon], tuple[Candidate, _CandidateTerms]] = {}
_CANDIDATE_TERMS_MAX = 4096  # a principal's recent changes are weighed again for every new incident


def forget_candidate_terms() -> None:
    """Drop the remembered `_CandidateTerms` (they hold the changes' episodes, text included: an erasure)."""
    _CANDIDATE_TERMS.clear()


def _candidate_terms(c: Candidate, lexicon: Lexicon) -> _CandidateTerms:
    """`_CandidateTerms` of a candidate, remembered for the recent ones (checked equal, not only by id)."""
    key = (c.episode.id, tuple(ep.id for ep in c.corrected), lexicon)
    held = _CANDIDATE_TERMS.get(key)
    if held is not None and (held[0] is c or held[0] == c):
        return held[1]
    ep = c.episode
    changed = change_terms(ep, c.corrected)
    about = incident_terms(ep, c.corrected, keep=lambda observation: not_referring(observation, lexicon)) | changed
    found = _CandidateTerms(changed, about, stopgap_terms(ep, lexicon))
    if len(_CANDIDATE_TERMS) >= _CANDIDATE_TERMS_MAX:
        del _CANDIDATE_TERMS[next(iter(_CANDIDATE_TERMS))]
    _CANDIDATE_TERMS[key] = (c, found)
    return found


def _factors(
    c: Candidate,
    subject: str | None,
    at: datetime,
    read: _Reading,
    terms: TermWeights,
    record: tuple[Callable[[Episode], float], Callable[[Episode], float]],
    w: CauseWeights,
    lexicon: Lexicon,
) -> list[tuple[str, float, tuple[str, ...]]]:
    """The log-odds contributions for one candidate: (name, value, shared terms).

    `read` holds what the incident's sentences say (`_Reading`); `record`: the learned share and
    the led-to share (`rank_causes`).
    """
    learned, led_to = record
    denied_terms, retracted_terms = read.denials
    refs_name_other, own_phrase = read.named_refs
    ep = c.episode
    other = ep.subject if ep.subject and ep.subject != subject else None  # the change's service, not the failing one
    named = 0.0
    if other is not None:
        in_refs, anywhere = read.named_in(other)
        named = w.named if in_refs else w.named_plain if anywhere else 0.0
    same = 0.0
    if read.refs and ep.subject == subject and subject and not refs_name_other:
        same = w.named_own if own_phrase else w.same_subject
    shared = _overlaps(c, read, terms, w, lexicon)
    name = name_terms(other) if other is not None else frozenset()
    denied = w.retracted if name and name <= retracted_terms else w.denied if name and name <= denied_terms else 0.0
    days = max(0.0, (at - ep.end).total_seconds() / 86400.0)
    supported = bool(named or same or shared.in_words)  # the record only tells apart changes the text points to
    acted = (
        w.acted_here if ep.actions and ep.subject == subject and subject and days * 86400.0 <= w.acted_within_s else 0.0
    )
    return [
        ("prior", w.prior, ()),
        ("named", named, ()),
        ("reference", w.reference if read.refs else 0.0, ()),
        ("described", w.described * min(shared.in_words, 1.0), shared.shared_words),
        ("value", w.value * min(shared.in_values, 1.0), ()),
        ("same subject", same, ()),
        ("overlap", shared.overlap, shared.shared),
        ("denied", denied, ()),
        ("acted here", acted, ()),
        ("provisional", shared.provisional, shared.shared_stopgap),
        ("attempts", w.attempts * max(0, c.attempts - 1), ()),
        ("learned", w.learned * learned(ep) if supported else 0.0, ()),
        ("led to", w.led_to * led_to(ep) if supported else 0.0, ()),
        ("age", w.age_per_day * days, ()),
    ]


def explain(h: Hypothesis, limit: int = 4) -> str:
    """One line: probability, the main contributions and the shared terms."""
    parts = ", ".join(f"{name} {value:+.1f}" for name, value in h.factors[:limit] if name != "prior")
    shared = f"; shared terms: {', '.join(h.shared[:5])}" if h.shared else ""
    return f"p={h.probability:.2f} ({parts}){shared}"


def best_cause(ranked: Sequence[Hypothesis], weights: CauseWeights = DEFAULT_CAUSE_WEIGHTS) -> Hypothesis | None:
    """The hypothesis to link: the most probable, when some change is likely the cause (``link_at``)
    and the best holds at least ``lead_at`` of that probability; else None."""
    if not ranked:
        return None
    some = sum(h.probability for h in ranked)
    return ranked[0] if some >= weights.link_at and ranked[0].probability >= weights.lead_at * some else None
