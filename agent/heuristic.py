"""The heuristic reasoner: a deterministic, documented stand-in for an LLM.

It knows nothing but what the scenario says about each candidate (description and
signals) and what the memory hands it. For every candidate ``c`` it computes

    score(c) = prior(c) + MEMORY_WEIGHT * memory(c) + FEEDBACK_WEIGHT * feedback(c)

* ``prior(c)``: how well the round's observations match ``c``'s world knowledge: the mean
  of the best three signal coverages (share of a signal's word stems found in one
  observation) plus the cosine between the observations and ``c``'s description+signals.
* ``memory(c)``: contrastive case evidence. Each precedent (a past episode, or a chunk of
  text) votes for or against causes; its vote counts by how much *closer* it is to the
  current problem than the retrieved precedents are on average (``relevance − mean``), and
  votes are averaged per cause. A lone precedent therefore leaves the decision to the prior,
  and near-identical past situations outweigh loosely related ones. Outcome-aware when the
  item is labelled: a problem resolved as ``c`` votes for ``c``; a failed attempt with no
  known resolution votes against its choice, and its corrections vote for the cause they
  name and against the one they reject. Facts add ``FACT_WEIGHT · confidence · match`` for
  their conclusion. An unlabelled run of events (a flat-RAG window, one event per line) is
  read in order: a decision followed by an outcome that did not work counts against the
  decided cause, one that worked for it, and the line after a failure is read as a
  correction (`sequence_votes`); text with no decision votes for the causes it mentions,
  read the way a correction is read (negated clauses count against).
* ``feedback(c)``: the corrections already received in this round, read the same way.

Choices already tried and failed in this round are excluded while others remain. Ties go
to the candidate listed first. Nothing here depends on any particular scenario's words:
the only vocabulary is generic English (stop words, negation cues), all of it in
`memory.text`.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Sequence

import numpy as np

from agent.reasoner import CauseInfo, Decision, Evidence, Problem
from memory.episodes import Outcome, classify_text
from memory.text import split_negation, stems
from memory.timeline import Encoder, HashingEncoder

MEMORY_WEIGHT = 1.0  # how much relative closeness to a precedent weighs against the prior
FEEDBACK_WEIGHT = 3.0  # corrections in the current round are direct evidence
FACT_WEIGHT = 0.5  # weight of a fact vote (times its confidence and match)
CORRECTION_SHARE = 0.5  # weight of a correction's text relative to the item's resolution
SOFTMAX_TEMPERATURE = 0.25  # turns score margins into a confidence


class HeuristicReasoner:
    """Deterministic reasoner; see the module docstring for the scoring rule.

    Args:
        encoder: used for the description cosine; the same encoder the memories use.
    """

    name = "heuristic"

    def __init__(self, encoder: Encoder | None = None) -> None:
        self.encoder = encoder or HashingEncoder()
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
        observed = [stems(split_negation(text)[0]) for text in observations]
        coverages = []
        for signal in cause.signals:
            wanted = stems(signal)
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
        affirmed, rejected = split_negation(text)
        votes: dict[str, float] = {}
        for part, sign in ((affirmed, 1.0), (rejected, -1.0)):
            if not part.strip():
                continue
            for cause_id, strength in self._association(part, tuple(candidates)).items():
                votes[cause_id] = votes.get(cause_id, 0.0) + sign * strength
        return votes

    def _association(self, text: str, candidates: tuple[CauseInfo, ...]) -> dict[str, float]:
        lowered = text.lower()
        present = stems(text)
        vocab = {c.id: stems(c.description + " " + " ".join(c.signals) + " " + c.id) for c in candidates}
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
        prior = {c.id: self.prior(problem.observations, c) for c in candidates}
        memory: dict[str, float] = defaultdict(float)
        contributions: dict[str, dict[str, float]] = defaultdict(dict)
        cases = [item for item in evidence if item.source != "fact"]
        closeness = [max(0.0, min(1.0, item.relevance)) for item in cases]
        for cause_id, item_id, share in precedent_evidence(
                [(item, self._item_votes(item, candidates)) for item in cases], closeness):
            if cause_id in prior:
                memory[cause_id] += share
                contributions[cause_id][item_id] = contributions[cause_id].get(item_id, 0.0) + share
        facts: dict[str, float] = defaultdict(float)
        for item in evidence:
            if item.source == "fact" and item.conclusion in prior:
                vote = FACT_WEIGHT * (item.confidence or 0.0) * max(0.0, min(1.0, item.relevance))
                memory[item.conclusion] += vote
                facts[item.conclusion] += vote
                contributions[item.conclusion][item.id] = vote
        feedback: dict[str, float] = defaultdict(float)
        for text in problem.feedback:
            for cause_id, vote in self.mentions(text, candidates).items():
                feedback[cause_id] += vote
        scores = {cid: prior[cid] + MEMORY_WEIGHT * memory[cid] + FEEDBACK_WEIGHT * feedback[cid] for cid in ids}
        allowed = [cid for cid in ids if cid not in problem.tried] or ids
        choice = max(allowed, key=lambda cid: (scores[cid], -ids.index(cid)))
        exps = {cid: math.exp((scores[cid] - scores[choice]) / SOFTMAX_TEMPERATURE) for cid in allowed}
        confidence = exps[choice] / sum(exps.values())
        relied = tuple(sorted((i for i, v in contributions[choice].items() if v > 0),
                              key=lambda i: -contributions[choice][i]))
        rationale = (f"{choice}: prior {prior[choice]:.2f}, memory {memory[choice]:+.2f} "
                     f"from {len(relied)} item(s), feedback {feedback[choice]:+.2f}")
        parts = {cid: {"prior": round(prior[cid], 6), "memory": round(MEMORY_WEIGHT * (memory[cid] - facts[cid]), 6),
                       "facts": round(MEMORY_WEIGHT * facts[cid], 6),
                       "feedback": round(FEEDBACK_WEIGHT * feedback[cid], 6), "total": round(scores[cid], 6)}
                 for cid in ids}
        return Decision(choice=choice, confidence=round(confidence, 4), rationale=rationale, relied_on=relied,
                        scores={cid: round(value, 6) for cid, value in scores.items()}, parts=parts)

    def _item_votes(self, item: Evidence, candidates: Sequence[CauseInfo]) -> dict[str, float]:
        """What one precedent says about each candidate, in [−1, 1] (before weighting)."""
        votes: dict[str, float] = defaultdict(float)
        if item.outcome is not None:
            answer = item.resolved_as
            if answer is None and item.outcome == "SUCCESS" and item.choices:
                answer = item.choices[-1]
            if answer:
                votes[answer] += 1.0
                return votes
            if item.outcome == "FAILURE" and item.choices:
                votes[item.choices[-1]] -= 1.0
            for text in item.corrections:
                for cause_id, vote in self.mentions(text, candidates).items():
                    votes[cause_id] += CORRECTION_SHARE * vote
            return votes
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
        pending, state, found = None, "", False
        for line in (part.strip() for part in text.split("\n")):
            if not line:
                continue
            named = _decided(line, ids)
            if named is not None:
                pending, state, found = named, "await", True
            elif state == "await":
                verdict = classify_text(line).outcome
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


def precedent_evidence(votes: Sequence[tuple[Evidence, dict[str, float]]],
                       closeness: Sequence[float]) -> list[tuple[str, str, float]]:
    """Contrastive case evidence: (cause, item id, share) triples.

    A precedent speaks for a cause only as far as it is *closer* to the current problem than
    the precedents are on average: ``share = vote · (relevance − mean relevance)``, averaged
    per cause over the items voting on it. With a bag-of-n-grams encoder every incident
    looks roughly as similar as every other, so absolute similarity says little; relative
    closeness does. A lone precedent has no contrast and leaves the decision to the prior.
    """
    voting = [(item, item_votes, close) for (item, item_votes), close in zip(votes, closeness) if item_votes]
    if len(voting) < 2:
        return []
    baseline = sum(close for _, _, close in voting) / len(voting)
    per_cause: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for item, item_votes, close in voting:
        closeness_gap = close - baseline
        for cause_id, vote in item_votes.items():
            if vote:
                per_cause[cause_id].append((item.id, vote * closeness_gap))
    result = []
    for cause_id, shares in per_cause.items():
        for item_id, share in shares:
            result.append((cause_id, item_id, share / len(shares)))
    return result
