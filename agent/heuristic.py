"""The heuristic reasoner: a deterministic, documented stand-in for an LLM.

It knows nothing but what the scenario says about each candidate (description and
signals) and what the memory hands it. It fuses independent kinds of evidence the way a
naive-Bayes combination of noisy voters does. For every candidate ``c``::

    score(c) = Σ_kind weight(kind) · vote_kind(c)

* ``prior`` (the runbook): ``vote = p(c) / max p`` where ``p`` is a softmax of how well the
  round's observations match ``c``'s description and signals (the mean of the best three
  signal coverages plus a cosine). A sentence that reports a look which found nothing wrong
  ("softener checked: salt level full", `memory.text.all_clear`) is no signal. When the round
  comes with the site's own standard method's ranking (`Problem.runbook`, e.g. anomaly
  detection plus call-graph traversal on an imported dataset), that ranking is the runbook
  instead: ``vote = 1 / rank`` for the candidates it ranks, 0 for the others.
* ``memory`` (precedents): each past incident (or chunk of text) votes for or against
  causes with a strength equal to its closeness to the current problem (relevance in
  [0, 1]); votes for one cause combine by noisy-OR, so agreeing precedents add up and a
  lone close precedent counts fully; an earlier precedent showing the same picture as a later
  one resolved otherwise counts only for what differs (`superseded`: drift). A labelled
  incident votes for what finally fixed it,
  against each choice that failed, and its corrections are read (``not X``: against X; ``it
  was Y``: for Y). A precedent whose corrections pointed at something the round rules out
  (`contradicted`: two or more terms its corrections affirm are mentioned only denied, in a
  normal state or as found fine, or one that its own observations affirmed too) does not vote:
  the site checked what it taught, and it was not that.
  Unlabelled text is read in order (`sequence_votes`) or for what it mentions.
* ``precedent`` (a correction that overturned the runbook): when the closest labelled precedent
  tried the runbook's current favourite, failed, and was fixed by another candidate, and the
  round shows again something of what told it apart (`telling_detail`) and rules none of it
  out (`contradicted`), it votes for its fix and against the favourite (`overturned_here`):
  "last time these signs, the runbook's answer was wrong; it was Y". One such correction is
  enough to act on the first time the signs recur; its weight is its own record here.
* ``facts``: a fact votes for its conclusion with ``confidence × match``; a lesson also
  votes against the choices it says were wrong. Noisy-OR per cause. A fact whose conclusion
  was already tried and failed in this round is not counted.
* ``feedback``: the corrections already received in this round, read like corrections, and
  the round's own all-clear sentences: each counts against the candidates whose distinctive
  words it names, at ``CORRECTION_SHARE`` (the site looked there and found nothing wrong).
* ``graph``: votes the memory's causal graph attaches to candidates (evidence items of
  source ``change``), noisy-OR per cause.
* ``track``: the track record at this site of a standard method the round names
  (`Problem.runbook`, e.g. an imported dataset's traversal; `Problem.track`): when its
  favourite ``X`` was the favourite of earlier incidents here, ``n`` of them, each answer ``Y``
  that finally fixed ``c_Y`` of those incidents gets ``c_Y / (n + 1)``, and ``X`` gets
  ``−(n − c_X) / (n + 1)``: "the last two times it named the load balancer, it was the service
  behind it" (a Laplace-smoothed share, so one correction is a lead, not a certainty). A
  tool's bias at a site holds whatever the words of the incident; the reasoner's own reading
  of the descriptions has none to learn apart from the words, which precedents and lessons
  already weigh, so without a named method there is no track vote.

``weight(kind) = log(r · (K − 1) / (1 − r))`` is the log-likelihood ratio of a voter that
is right with probability ``r`` among ``K`` candidates (0 when ``r ≤ 1/K``). ``r`` is the
kind's reliability *at this site*: its skill over chance on the memory's own record of how often
the kind's favourite was the answer that finally fixed an incident, put on this decision's
``K`` (`reliability`; ``(hits + 2) / (hits + misses + 3)`` when the recorded decisions had ``K``
candidates too; a Beta(2, 1) prior, 2/3, when there is no record), kept apart for
decisions where a fact applied and where none did (`situation_key`). Feedback in the round
is direct evidence (``r = FEEDBACK_RELIABILITY``). No weight is fitted to any scenario.

Choices already tried and failed in this round are excluded while others remain. Ties go
to the runbook's favourite (when the record has zeroed every kind's weight, the runbook still
reads the observations), then to the candidate listed first. Nothing here depends on any
particular scenario's words: the only vocabulary is generic English (stop words, negation
cues), all of it in `memory.text`.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from agent.reasoner import CauseInfo, Decision, Evidence, Problem
from memory import Encoder, HashingEncoder, Outcome, Reader

KINDS = (
    "prior",
    "memory",
    "precedent",
    "facts",
    "graph",
    "track",
)  # evidence kinds whose reliability the memory records
PRIOR_HITS, PRIOR_MISSES = 2.0, 1.0  # Beta prior of a kind's reliability with no record: 2/3
FEEDBACK_RELIABILITY = 0.95  # a correction received in this round is direct evidence
CORRECTION_SHARE = 0.5  # a past correction's text relative to the incident's own resolution
RUNBOOK_TEMPERATURE = 0.25  # softmax temperature turning signal matches into runbook probabilities
_SHIPPED_READER = Reader()  # the memory's reading with the shipped lexicon: the default of the functions below


def reliability(record: Mapping[str, Sequence[float]], kind: str, candidates: int = 3) -> float:
    """How often a kind of evidence is right at this site in a decision among `candidates` choices.

    Its skill over chance, ``(hits + 2 − C) / (n + 3 − C)`` with ``C`` the hits chance would have scored on
    the recorded decisions (``Σ 1/K``; ``1/candidates`` for those whose count is not recorded) plus
    ``3 / candidates`` for the Beta(2, 1) prior's three, put back on this decision's scale:
    ``1/K + (1 − 1/K) · skill``. With no record it is 2/3; when every recorded decision had as many
    candidates as this one it is the Beta(2, 1) posterior mean ``(hits + 2) / (n + 3)``.
    """
    if candidates < 2:
        return 1.0  # one choice: nothing to be right or wrong about
    hits, misses, *rest = record.get(kind, (0, 0))
    chance_known, known = (rest[0], rest[1]) if len(rest) == 2 else (0.0, 0)
    n = hits + misses
    chance = chance_known + (n - known + PRIOR_HITS + PRIOR_MISSES) / candidates
    pseudo = n + PRIOR_HITS + PRIOR_MISSES
    skill = (hits + PRIOR_HITS - chance) / (pseudo - chance)
    return max(0.0, min(1.0, 1.0 / candidates + (1.0 - 1.0 / candidates) * skill))


def weight(r: float, candidates: int) -> float:
    """Log-likelihood ratio of a voter right with probability `r` among `candidates` choices (≥ 0)."""
    if candidates < 2 or r <= 1.0 / candidates:
        return 0.0
    r = min(r, 0.999)
    return math.log(r * (candidates - 1) / (1.0 - r))


def favourites(votes: Mapping[str, Mapping[str, float]]) -> dict[str, str]:
    """Evidence kind → the one candidate its votes put strictly first (kinds without a preference left out)."""
    found = {}
    for kind, values in votes.items():
        if not values:
            continue
        best = max(values.values())
        leaders = [cid for cid, value in values.items() if value == best]
        if len(leaders) == 1 and best > 0 and (len(values) > 1 and best > min(values.values())):
            found[kind] = leaders[0]
    return found


def superseded(evidence: Sequence[Evidence], reader: Reader = _SHIPPED_READER) -> dict[str, float]:
    """How much of each labelled precedent still stands once later experience is known, in [0, 1].

    When a later precedent resolved as something else shows the same picture (the terms both
    incidents' observations affirm), the earlier one counts only for the part that differs:
    its strength is multiplied by ``1 − overlap`` (stem Jaccard of the affirmed observations).
    What fixed this picture most recently is what the site is like now (drift).
    """
    labelled = [
        (item, reader.stems(reader.affirmed_clauses(" ".join(item.observations))), answer)
        for item in evidence
        if item.sequence and item.observations and (answer := resolution_of(item))
    ]
    standing: dict[str, float] = {}
    for item, words, answer in labelled:
        share = 1.0
        for later, later_words, later_answer in labelled:
            if later.sequence > item.sequence and later_answer != answer and words and later_words:
                share *= 1.0 - len(words & later_words) / len(words | later_words)
        standing[item.id] = share
    return standing


def corrected_terms(item: Evidence, reader: Reader = _SHIPPED_READER) -> frozenset[str]:
    """The terms a precedent's corrections affirm (what they pointed at)."""
    return frozenset().union(*(reader.terms(reader.split_negation(text)[0]) for text in item.corrections))


def contradicted(item: Evidence, ruled: frozenset[str], reader: Reader = _SHIPPED_READER) -> bool:
    """Whether the round rules out what a precedent's corrections pointed at.

    Of the terms the corrections affirm (words for a look aside), two or more are among the round's
    `ruled_out` terms ("checked the softener: salt level full" against "the softener ran out of salt"), or
    one is, and it is the precedent's telling detail, affirmed by its own observations too ("relsign
    returns 503" then, "relsign looks healthy" now). One shared common word is a coincidence ("salt store
    checked: tidy").
    """
    if not item.corrections or not ruled:
        return False
    shared = (corrected_terms(item, reader) - reader.looked_terms()) & ruled
    if len(shared) >= 2:
        return True
    return bool(shared & reader.terms(reader.affirmed_clauses("\n".join(item.observations))))


def resolution_of(item: Evidence) -> str | None:
    """The answer a labelled precedent points to: what finally fixed it, else its successful choice."""
    if item.resolved_as:
        return item.resolved_as
    return item.choices[-1] if item.outcome == "SUCCESS" and item.choices else None


def situation_key(votes: Mapping[str, Mapping[str, float]], overturned: bool = False) -> str:
    """The setting a decision's reliabilities are recorded under: ``"|lesson"`` when a fact applied or the closest
    precedent overturned the runbook's favourite (`overturning`), else ``""``.

    A runbook that is usually right can be reliably wrong exactly where the site taught a
    lesson; recording each kind's hits apart for the two settings keeps one from diluting the other.
    """
    return "|lesson" if overturned or any(value > 0 for value in votes.get("facts", {}).values()) else ""


def track_votes(problem: Problem, runbook: Mapping[str, float]) -> dict[str, float]:
    """The runbook's track record here on its current favourite, as votes (see the module docstring)."""
    if not problem.track or not problem.runbook or not runbook:
        return {}
    ids = [c.id for c in problem.candidates]
    favourite = max(ids, key=lambda cid: (runbook.get(cid, 0.0), -ids.index(cid)))
    answers = problem.track.get(favourite)
    if not answers:
        return {}
    seen = sum(answers.values())
    votes = {cid: count / (seen + 1) for cid, count in answers.items() if cid in ids and cid != favourite}
    votes[favourite] = -(seen - answers.get(favourite, 0)) / (seen + 1)
    return {cid: value for cid, value in votes.items() if value}


def ruled_out(observations: Sequence[str], reader: Reader = _SHIPPED_READER) -> frozenset[str]:
    """Terms the observations mention only as absent, normal or looked at and found fine: in a denied or
    normal-state clause or an all-clear sentence ("relsign looks healthy", "no rebalances since Monday",
    "checked the proxy: reloaded this morning"), and affirmed in no clause of any line."""
    denied: set[str] = set()
    affirmed: set[str] = set()
    for line in observations:
        denied |= reader.terms(reader.split_negation(reader.read_as_found(line))[1]) | reader.terms(
            reader.all_clear(line)
        )
        affirmed |= reader.terms(reader.affirmed_clauses(line))
    return frozenset(denied - affirmed)


def telling_detail(
    problem: Problem, item: Evidence, favourite: str, reader: Reader = _SHIPPED_READER
) -> frozenset[str]:
    """What the round shows again of what told a precedent apart: the terms the round's observations, the
    precedent's observations and its corrections all affirm, less the words for a look and the words of the
    runbook's favourite (its description and signals: the symptoms the two incidents share because they look
    alike). Empty when the round only looks like the precedent."""
    said = corrected_terms(item, reader)
    now = reader.terms(reader.affirmed_clauses("\n".join(problem.observations)))
    then = reader.terms(reader.affirmed_clauses("\n".join(item.observations)))
    mimic = next((c for c in problem.candidates if c.id == favourite), None)
    generic = reader.looked_terms() | (
        reader.terms(f"{mimic.description} {' '.join(mimic.signals)}") if mimic else frozenset()
    )
    return frozenset(now & then & said) - generic


class Overturning(NamedTuple):
    """The closest labelled precedent, when it overturned the runbook's current favourite."""

    nearest: Evidence  # the precedent
    answer: str  # what fixed it
    favourite: str  # the runbook's favourite now, which it tried and which failed there
    rival: float  # relevance of the closest precedent the favourite fixed (0 when none was recalled)


def overturning(problem: Problem, evidence: Sequence[Evidence], runbook: Mapping[str, float]) -> Overturning | None:
    """The closest labelled precedent (highest relevance) when it tried the runbook's current favourite, failed,
    and was fixed by another candidate this round has not tried; else None."""
    ids = [c.id for c in problem.candidates]
    labelled = [
        (item, answer)
        for item in evidence
        if item.source in ("incident", "episode") and item.relevance > 0 and (answer := resolution_of(item))
    ]
    if not labelled or not runbook:
        return None
    nearest, answer = max(labelled, key=lambda pair: (pair[0].relevance, pair[0].sequence))
    favourite = max(ids, key=lambda cid: (runbook.get(cid, 0.0), -ids.index(cid)))
    failed = {choice for choice in nearest.choices if choice != answer}
    if favourite not in failed or answer not in ids or answer in problem.tried:
        return None
    rival = max((item.relevance for item, fixed in labelled if fixed == favourite), default=0.0)
    return Overturning(nearest, answer, favourite, rival)


def told_apart(problem: Problem, item: Evidence, reader: Reader = _SHIPPED_READER) -> float:
    """How far a precedent speaks for this round, in [0, 1]: 1 unless it was an exception (a first answer tried
    and failed, another fixed it). An exception speaks as far as what the round shares with it told it apart
    from the answers that failed there: the memory's measure when it gives one (`Evidence.telling`), else 1
    when the round shows again something its observations and corrections affirmed (`telling_detail`) and 0
    when it does not. A round that only looks like an exception once did learns nothing from it."""
    answer = resolution_of(item)
    failed = [choice for choice in dict.fromkeys(item.choices) if choice != answer]
    if not (answer and failed):
        return 1.0
    if item.telling is not None:
        return max(0.0, min(1.0, item.telling))
    if not item.corrections:
        return 1.0
    return 1.0 if any(telling_detail(problem, item, choice, reader) for choice in failed) else 0.0


def overturned_here(
    found: Overturning | None, standing: Mapping[str, float], speaks: Mapping[str, float]
) -> dict[str, float]:
    """The closest precedent's word against the runbook: "last time these signs, your answer was wrong; it was Y".

    When the closest labelled precedent overturned the runbook's favourite ``X`` (`overturning`) and was
    fixed by ``Y``, ``Y`` gets ``+s`` and ``X`` gets ``−s``. ``s`` is how much closer it is than the closest
    precedent that ``X`` fixed, ``(c − c_X) / c`` (1 when none was recalled), times what of it still stands
    after later experience (`standing`: `superseded`), times how far it speaks for this round (`speaks`: 0
    when the round rules out what its corrections pointed at, `contradicted`; else `told_apart`). Its
    weight is its own reliability at this site, like every kind's.
    """
    if found is None:
        return {}
    nearest = found.nearest
    strength = (nearest.relevance - found.rival) / nearest.relevance
    strength *= standing.get(nearest.id, 1.0) * speaks.get(nearest.id, 0.0)
    return {found.answer: strength, found.favourite: -strength} if strength > 0 else {}


def noisy_or(strengths: Sequence[float]) -> float:
    """Combined strength of independent votes in [0, 1]: 1 − Π(1 − s)."""
    rest = 1.0
    for value in strengths:
        rest *= 1.0 - max(0.0, min(1.0, value))
    return 1.0 - rest


class HeuristicReasoner:
    """Deterministic reasoner; see the module docstring for the scoring rule.

    Args:
        encoder: used for the description cosine; the same encoder the memories use.
        reader: how observation lines are read (negation, all-clear reports, outcome cues); the
            memory's (`EpisodicMemory.lexicon`), as the encoder is.
    """

    name = "heuristic"

    def __init__(self, encoder: Encoder | None = None, reader: Reader | None = None) -> None:
        self.encoder = encoder or HashingEncoder()
        self.reader = reader or Reader()
        self._cause_vectors: dict[tuple[str, str], np.ndarray] = {}

    # -- world knowledge -----------------------------------------------------------------

    def _cause_vector(self, cause: CauseInfo) -> np.ndarray:
        key = (cause.id, cause.description)
        if key not in self._cause_vectors:
            text = cause.description + ". " + ". ".join(cause.signals)
            self._cause_vectors[key] = self.encoder.encode([text])[0]
        return self._cause_vectors[key]

    def signal_score(self, observations: Sequence[str], cause: CauseInfo) -> float:
        """Mean of the best three signal coverages (negated clauses do not count)."""
        read = self.reader
        observed = [read.stems(read.split_negation(read.read_as_found(text))[0]) for text in observations]
        coverages = []
        for signal in cause.signals:
            wanted = read.stems(signal)
            if wanted:
                coverages.append(max((len(wanted & have) / len(wanted) for have in observed), default=0.0))
        best = sorted(coverages, reverse=True)[:3]
        return sum(best) / 3.0

    def prior(self, observations: Sequence[str], cause: CauseInfo) -> float:
        """How well the observations match the cause's description and signals."""
        query = self.encoder.encode([" ".join(observations)])[0]
        return self.signal_score(observations, cause) + float(query @ self._cause_vector(cause))

    def mentions(self, text: str, candidates: Sequence[CauseInfo]) -> dict[str, float]:
        """Which candidates a piece of text speaks for (+) or against (−), in [−1, 1].

        A literal mention of a candidate id counts fully; otherwise the share of the
        candidate's distinctive stems (description and signals, minus stems shared by all
        candidates) present in the text. The part after a negation cue counts against.
        """
        affirmed, rejected = self.reader.split_negation(text)
        votes: dict[str, float] = {}
        for part, sign in ((affirmed, 1.0), (rejected, -1.0)):
            if not part.strip():
                continue
            for cause_id, strength in self._association(part, tuple(candidates)).items():
                votes[cause_id] = votes.get(cause_id, 0.0) + sign * strength
        return votes

    def _association(self, text: str, candidates: tuple[CauseInfo, ...]) -> dict[str, float]:
        lowered = text.lower()
        present = self.reader.stems(text)
        vocab = {c.id: self.reader.stems(c.description + " " + " ".join(c.signals) + " " + c.id) for c in candidates}
        shared = frozenset.intersection(*vocab.values()) if vocab else frozenset()
        result = {}
        for cause in candidates:
            if cause.id.lower() in lowered:
                result[cause.id] = 1.0
                continue
            distinctive = vocab[cause.id] - shared
            if distinctive:
                hits = len(distinctive & present)
                if hits:
                    result[cause.id] = min(1.0, hits / min(len(distinctive), 4))
        return result

    # -- decision --------------------------------------------------------------------------

    def decide(self, problem: Problem, evidence: Sequence[Evidence], context_text: str = "") -> Decision:
        candidates = problem.candidates
        ids = [c.id for c in candidates]
        if problem.runbook:
            ranks = {cid: rank for rank, cid in enumerate(problem.runbook, start=1)}
            prior = {
                cid: math.log(1.0 / ranks[cid]) * RUNBOOK_TEMPERATURE if cid in ranks else -math.inf for cid in ids
            }  # the softmax in `votes` turns these back into 1 / rank (0 unranked)
        else:
            prior = {c.id: self.prior(problem.observations, c) for c in candidates}
        votes, supporters, overturned = self.votes(problem, evidence, prior)
        setting = situation_key(votes, overturned is not None)
        weights = {kind: weight(reliability(problem.record, kind + setting, len(ids)), len(ids)) for kind in KINDS}
        weights["feedback"] = weight(FEEDBACK_RELIABILITY, len(ids))
        parts = {cid: {kind: round(weights[kind] * votes[kind].get(cid, 0.0), 6) for kind in weights} for cid in ids}
        scores = {cid: sum(parts[cid].values()) for cid in ids}
        for cid in ids:
            parts[cid]["total"] = round(scores[cid], 6)
        allowed = [cid for cid in ids if cid not in problem.tried] or ids
        choice = max(allowed, key=lambda cid: (scores[cid], votes["prior"][cid], -ids.index(cid)))
        exps = {cid: math.exp(scores[cid] - scores[choice]) for cid in allowed}
        confidence = exps[choice] / sum(exps.values())
        # an item counts as relied on only when its kind carried weight in this decision
        backing = {key: v for key, v in supporters[choice].items() if v > 0 and weights[key[0]] > 0}
        relied = tuple(item for _, item in sorted(backing, key=lambda key: -backing[key]))
        described = ", ".join(f"{kind} {parts[choice][kind]:+.2f}" for kind in weights if parts[choice][kind])
        rationale = f"{choice}: {described or 'no evidence'}; {len(relied)} memory item(s) relied on"
        return Decision(
            choice=choice,
            confidence=round(confidence, 4),
            rationale=rationale,
            relied_on=relied,
            scores={cid: round(value, 6) for cid, value in scores.items()},
            parts=parts,
            favoured={kind + setting: cid for kind, cid in favourites({k: votes[k] for k in KINDS}).items()},
        )

    def votes(
        self, problem: Problem, evidence: Sequence[Evidence], prior: Mapping[str, float]
    ) -> tuple[dict[str, dict[str, float]], dict[str, dict[tuple[str, str], float]], Overturning | None]:
        """Each kind's vote per candidate (before weighting), per candidate each (kind, evidence item id)'s
        support, and the closest precedent when it overturned the runbook's favourite (`overturning`)."""
        candidates = problem.candidates
        top = max(prior.values())
        runbook = {cid: math.exp((value - top) / RUNBOOK_TEMPERATURE) for cid, value in prior.items()}
        votes: dict[str, dict[str, float]] = {"prior": runbook, "track": track_votes(problem, runbook)}
        supporters: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
        # what the round reports looked at and found fine: a precedent whose corrections pointed there does not hold
        read = self.reader
        ruled = ruled_out(problem.observations, read)
        standing = superseded(evidence, read)  # what of each labelled precedent still stands (drift)
        speaks = {  # how far each precedent speaks for this round
            item.id: 0.0 if contradicted(item, ruled, read) else told_apart(problem, item, read)
            for item in evidence
            if item.source in ("episode", "incident", "chunk")
        }
        for kind, sources in (
            ("memory", ("episode", "incident", "chunk")),
            ("facts", ("fact",)),
            ("graph", ("change",)),
        ):
            pro: dict[str, list[float]] = defaultdict(list)
            con: dict[str, list[float]] = defaultdict(list)
            for item in evidence:
                if item.source not in sources or (kind != "memory" and item.conclusion in problem.tried):
                    continue  # a fact whose conclusion already failed in this round does not hold here
                strength = max(0.0, min(1.0, item.relevance)) * (
                    item.confidence if kind != "memory" and item.confidence is not None else 1.0
                )
                if kind == "memory":
                    strength *= standing.get(item.id, 1.0) * speaks[item.id]
                for cause_id, vote in self._item_votes(item, candidates).items():
                    (pro if vote > 0 else con)[cause_id].append(abs(vote) * strength)
                    supporters[cause_id][(kind, item.id)] = (
                        supporters[cause_id].get((kind, item.id), 0.0) + vote * strength
                    )
            votes[kind] = {cid: noisy_or(pro.get(cid, ())) - noisy_or(con.get(cid, ())) for cid in prior}
        overturned = overturning(problem, evidence, runbook)
        votes["precedent"] = overturned_here(overturned, standing, speaks)
        feedback: dict[str, float] = defaultdict(float)
        for text in problem.feedback:
            for cause_id, vote in self.mentions(text, candidates).items():
                feedback[cause_id] += vote
        for line in problem.observations:
            cleared_text = read.all_clear(line)
            if cleared_text:
                for cause_id, strength in self._association(cleared_text, tuple(candidates)).items():
                    feedback[cause_id] -= CORRECTION_SHARE * strength
        votes["feedback"] = {cid: max(-1.0, min(1.0, value)) for cid, value in feedback.items()}
        return votes, supporters, overturned

    def _item_votes(self, item: Evidence, candidates: Sequence[CauseInfo]) -> dict[str, float]:
        """What one evidence item says about each candidate, in [−1, 1] (before its strength)."""
        votes: dict[str, float] = defaultdict(float)
        ids = {c.id for c in candidates}
        if item.source in ("fact", "change"):
            if item.conclusion:
                votes[item.conclusion] += 1.0
            for rejected in item.choices:  # a lesson's "not X"
                if rejected != item.conclusion:
                    votes[rejected] -= 1.0
            return {cid: v for cid, v in votes.items() if cid in ids}
        if item.outcome is not None:
            answer = item.resolved_as
            if answer is None and item.outcome == "SUCCESS" and item.choices:
                answer = item.choices[-1]
            for choice in dict.fromkeys(item.choices):
                if choice != answer:
                    votes[choice] -= 1.0  # tried there and it did not fix it
            if answer:
                votes[answer] += 1.0
            else:
                for text in item.corrections:
                    for cause_id, vote in self.mentions(text, candidates).items():
                        votes[cause_id] += CORRECTION_SHARE * vote
            return {cid: max(-1.0, min(1.0, v)) for cid, v in votes.items() if v}
        sequence = self.sequence_votes(item.text, candidates)
        if sequence is not None:
            return sequence
        for cause_id, vote in self.mentions(item.text, candidates).items():
            votes[cause_id] += vote
        return votes

    def sequence_votes(self, text: str, candidates: Sequence[CauseInfo]) -> dict[str, float] | None:
        """Read an unlabelled run of events (one per line) the way its outcome says.

        A line whose first clause names a candidate id is a decision; the next line with an
        outcome cue (`memory.episodes.classify_text`: generic English) votes for it when it
        worked and against it when it did not; the one line after a failure is read as a
        correction (`mentions`, at ``CORRECTION_SHARE``). Lines before the first decision
        (observations) are not read. Returns None when no line is a decision.
        """
        ids = [c.id for c in candidates]
        votes: dict[str, float] = defaultdict(float)
        pending, state, found = "", "", False  # pending: the cause of the last decision, read once it is named
        for line in (part.strip() for part in text.split("\n")):
            if not line:
                continue
            named = _decided(line, ids)
            if named is not None:
                pending, state, found = named, "await", True
            elif state == "await":
                verdict = self.reader.outcome(line)
                if verdict in (Outcome.SUCCESS, Outcome.FAILURE):
                    votes[pending] += 1.0 if verdict == Outcome.SUCCESS else -1.0
                    state = "corrected?" if verdict == Outcome.FAILURE else ""
            elif state == "corrected?":
                for cause_id, vote in self.mentions(line, candidates).items():
                    votes[cause_id] += CORRECTION_SHARE * vote
                state = ""
        if not found:
            return None
        return {cause_id: max(-1.0, min(1.0, vote)) for cause_id, vote in votes.items() if vote}


def _decided(line: str, ids: Sequence[str]) -> str | None:
    """The candidate id a decision line names first in its first clause (before a dash or colon after it)."""
    head = re.split(r"\s[—–-]\s", line, maxsplit=1)[0]
    named = [(match.start(), cid) for cid in ids if (match := re.search(rf"(?<![\w-]){re.escape(cid)}(?![\w-])", head))]
    return min(named)[1] if named else None
