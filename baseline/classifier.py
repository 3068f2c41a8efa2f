"""The learning classifier peer: what a practitioner without an episodic memory would build.

It keeps no episodes, facts or graph. After each round it learns one labelled example, the
round's observations → the cause that finally fixed it, with an online text classifier, and
on a new round it hands the shared `Reasoner` the classifier's prediction as one evidence
item of source ``"fact"`` (conclusion: the predicted cause; confidence: its probability
among the round's untried candidates). The reasoner weighs that item like any fact, by the
site record of how often the facts kind's favourite was the final answer (`Problem.record`),
so it learns to trust or distrust the classifier exactly as it does the episodic memory.
When the round names a standard method (`Problem.runbook`), its favourite is an input of the
model beside the words, as a practitioner's model would take the tool's answer. (Measured
and left out: Complement NB, and the pick at full confidence; each made it worse than no
memory on the development files, 65–72% against 73%.)

A round's label comes only from the feedback every agent sees, read the way the memory reads
it: the outcome of the last attempt (`memory.episodes.detect_outcome`: a structured check,
a correction, or generic English cues); when the round ended unsolved, the one untried
candidate left, or else the candidate the corrections speak for most
(`HeuristicReasoner.mentions`); with neither, the round teaches nothing. A round is learned
only once the next one starts, so the live round never trains the model it is decided with.

Before it has learned any round, and whenever its classes (the scenario's causes) do not cover
a round's candidates or it has learned none of them, it hands over nothing (no evidence and no
record): the reasoner then decides from the runbook alone, as `no_memory`. A candidate no round
has taught yet still gets its share ("unlike anything seen"), so a recurrence can be recognized
before every cause has occurred. The record of each kind's hits is kept here (`tally`), as
`memory.calibration.TrackRecord` keeps it for the episodic memory, which it reads from the
memory's stored decisions and episodes, none of which this agent has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from agent.agents import DEFAULT_BUDGET, Budget, NoMemoryAgent, Turn
from agent.heuristic import HeuristicReasoner
from agent.reasoner import CauseInfo, Evidence, Problem, Reasoner, RecordEntry
from memory.episodes import Outcome, detect_outcome

if TYPE_CHECKING:
    from sklearn.naive_bayes import MultinomialNB

FEATURES = 2**16  # hashed feature columns (NB keeps a dense class × feature table; collisions are rare at this size)
METHOD_FEATURES = 2**10  # hashed columns for the standard method's favourite
SMOOTHING = 1.0  # additive (Laplace) smoothing, scikit-learn's default: one example moves the odds only a little


class Prediction(NamedTuple):
    """The classifier's answer for one problem."""

    cause: str  # the most probable candidate
    probability: float  # its probability among the candidates asked about
    rounds: int  # rounds the classifier has learned from


class CauseClassifier:
    """Observations → root cause, learned one round at a time.

    Multinomial naive Bayes over hashed word 1–2-grams (l2-normalized, no sign flipping), plus
    one unit-weight column for the standard method's favourite, rather
    than a logistic `SGDClassifier`: a site yields one example per round, tens in all, and NB's
    `partial_fit` is exact (the same model as a batch fit on every round so far, in any order)
    with no learning rate, epochs or random state, so it is deterministic and learns from a
    single example per cause, where a logistic model takes one gradient step per round and stays
    undertrained. Uniform class priors (`fit_prior=False`): the runbook is the reasoner's prior,
    the classifier says only what the observations looked like before.

    Args:
        features: hashed feature columns.
        smoothing: NB's additive smoothing.
    """

    def __init__(self, *, features: int = FEATURES, smoothing: float = SMOOTHING) -> None:
        # scikit-learn loads with the first classifier: a run without this agent does not pay its ~0.5 s import
        from sklearn.feature_extraction.text import HashingVectorizer

        self.vectorizer = HashingVectorizer(ngram_range=(1, 2), alternate_sign=False, norm="l2", n_features=features)
        # the standard method's favourite, one hashed column of unit weight: as much say as the whole text
        self.method_vectorizer = HashingVectorizer(
            analyzer=lambda favourite: [favourite], alternate_sign=False, norm="l2", n_features=METHOD_FEATURES
        )
        self.smoothing = smoothing
        self.model: MultinomialNB | None = None
        self.rows: list[Any] = []  # one sparse row per learned round, kept to rebuild when the classes grow
        self.labels: list[str] = []  # the label of each row

    @property
    def known(self) -> frozenset[str]:
        """The causes it has learned from at least one round."""
        return frozenset(self.labels)

    def covers(self, candidates: Iterable[str]) -> bool:
        """Whether its classes cover the candidates and it has learned at least one of them.

        A declared cause no round has taught yet keeps a proper share (its likelihood is the
        smoothing's alone: "unlike anything seen"); a candidate outside the classes has none, and
        when none of the candidates was ever learned the probabilities are uniform.
        """
        wanted = set(candidates)
        return self.model is not None and wanted <= set(self.model.classes_) and bool(wanted & self.known)

    def row(self, observations: Sequence[str], method: str | None = None) -> Any:
        """The feature row of a problem: its hashed word 1-2-grams, and its method's favourite when given."""
        import scipy.sparse as sp

        text = self.vectorizer.transform([" ".join(observations)])
        favourite = self.method_vectorizer.transform([method or ""])
        return sp.hstack([text, favourite if method else favourite * 0]).tocsr()

    def learn(
        self, observations: Sequence[str], label: str, classes: Iterable[str] = (), method: str | None = None
    ) -> None:
        """Learn one round: its observations (and its method's favourite) and the cause that fixed it;
        `classes` are the other causes it may later be asked about (declared up front, as `partial_fit` requires)."""
        import scipy.sparse as sp
        from sklearn.naive_bayes import MultinomialNB

        row = self.row(observations, method)
        self.rows.append(row)
        self.labels.append(label)
        wanted = sorted(set(classes) | set(self.labels))
        if self.model is not None and list(self.model.classes_) == wanted:
            self.model.partial_fit(row, [label])
            return
        self.model = MultinomialNB(alpha=self.smoothing, fit_prior=False)  # a new class: rebuilt from every row
        self.model.partial_fit(sp.vstack(self.rows), self.labels, classes=wanted)

    def predict(
        self, observations: Sequence[str], candidates: Sequence[str], method: str | None = None
    ) -> Prediction | None:
        """The most probable of `candidates` and its probability among them (None unless `covers` them)."""
        if self.model is None or not candidates or not self.covers(candidates):
            return None
        proba = self.model.predict_proba(self.row(observations, method))[0]
        column = {cause: index for index, cause in enumerate(self.model.classes_)}
        shares = {cause: float(proba[column[cause]]) for cause in candidates}
        total = sum(shares.values()) or 1.0
        best = max(candidates, key=lambda cause: (shares[cause], -candidates.index(cause)))
        return Prediction(best, round(shares[best] / total, 4), len(self.labels))


class Said(NamedTuple):
    """One stream item of a round as the outcome reader takes it (kind, text, metadata)."""

    kind: str  # "decision", "outcome" or "correction"
    text: str  # what was said
    metadata: Mapping[str, Any]  # structured extras (an outcome's check status)


@dataclass
class Attempt:
    """One decision of a round and the feedback that followed it."""

    choice: str  # the candidate chosen
    number: int  # 1-based attempt number
    favoured: Mapping[str, str]  # evidence kind → the candidate it favoured (the reasoner's `Decision.favoured`)
    feedback: list[Said] = field(default_factory=list)  # outcome and correction events after it


@dataclass
class PlayedRound:
    """What the agent saw of one round: the example it learns once the round is over."""

    observations: tuple[str, ...]  # the round's observations at its first attempt
    candidates: tuple[CauseInfo, ...]  # the causes it could be
    attempts: list[Attempt] = field(default_factory=list)  # its decisions, in order
    method: str | None = None  # the favourite of the standard method the round names, if any


def round_label(played: PlayedRound, reader: HeuristicReasoner) -> str | None:
    """The cause that finally fixed a round, from its feedback alone (None when it cannot be told).

    The last attempt worked (`detect_outcome` over the decision and what followed it): its choice.
    Otherwise every choice failed; when one candidate is left it is the answer, else the one the
    corrections speak for most, strictly (`HeuristicReasoner.mentions`).
    """
    if not played.attempts:
        return None
    last = played.attempts[-1]
    said = [Said("decision", last.choice, {}), *last.feedback]
    if detect_outcome(said).outcome is Outcome.SUCCESS:  # type: ignore[arg-type]  # read like entries: kind, text, metadata
        return last.choice
    tried = {attempt.choice for attempt in played.attempts}
    left = [cause.id for cause in played.candidates if cause.id not in tried]
    if len(left) == 1:
        return left[0]
    votes = dict.fromkeys(left, 0.0)
    for attempt in played.attempts:
        for item in attempt.feedback:
            if item.kind == "correction":
                for cause, vote in reader.mentions(item.text, played.candidates).items():
                    if cause in votes:
                        votes[cause] += vote
    ranked = sorted(votes.values(), reverse=True)
    if not ranked or not any(ranked) or (len(ranked) > 1 and ranked[0] == ranked[1]):
        return None
    return max(votes, key=lambda cause: votes[cause])


def method_favourite(problem: Problem) -> str | None:
    """The favourite of the standard method the round names, if any (a practitioner's model takes the
    tool's answer as an input too)."""
    return problem.runbook[0] if problem.runbook else None


class ClassifierAgent(NoMemoryAgent):
    """No episodic memory: an online classifier learned from each finished round's feedback.

    Args:
        reasoner: the shared reasoner.
        budget: the shared budget.
        classifier: the learner (a fresh `CauseClassifier` by default).
        name: agent name in reports.
    """

    name = "classifier"

    def __init__(
        self,
        reasoner: Reasoner,
        budget: Budget = DEFAULT_BUDGET,
        *,
        classifier: CauseClassifier | None = None,
        name: str = "classifier",
    ) -> None:
        super().__init__(reasoner, budget)
        self.name = name
        self.classifier = classifier or CauseClassifier()
        self.reader = HeuristicReasoner()  # reads corrections; the decision is always the shared reasoner's
        self.tally: dict[str, tuple[int, int]] = {}  # evidence kind → (hits, misses) of first-attempt favourites
        self._playing: PlayedRound | None = None
        self._playing_id: str | None = None
        self._classes: set[str] = set()  # every cause the scenario names (the classes declared to the model)
        self._speaks = False  # whether the classifier covers the candidates of the decision being made

    @property
    def learned(self) -> int:
        """Rounds the classifier has learned from."""
        return len(self.classifier.labels)

    def decide(self, prompt: Any) -> Turn:
        if prompt.attempt == 1 or prompt.round_id != self._playing_id:
            self._finish_round()  # the previous round is over: only now is it learned
            self._playing_id = prompt.round_id
        self._classes.update(cause.id for cause in getattr(prompt, "catalogue", ()))
        self._classes.update(prompt.candidates)
        self._speaks = self.classifier.covers(prompt.candidates)
        return super().decide(prompt)

    def _finish_round(self) -> None:
        """Learn the round that just ended, and count each evidence kind's first-attempt favourite against it."""
        played, self._playing = self._playing, None
        label = round_label(played, self.reader) if played is not None else None
        if played is None or label is None:
            return
        first = played.attempts[0]
        if first.number == 1:
            for kind, choice in first.favoured.items():
                hits, misses = self.tally.get(kind, (0, 0))
                self.tally[kind] = (hits + 1, misses) if choice == label else (hits, misses + 1)
        self.classifier.learn(played.observations, label, self._classes, played.method)

    def _record(self, text, *, kind, role, timestamp, situation, metadata, source=None, live=False):
        playing = self._playing
        if playing is not None and kind == "decision":
            playing.attempts.append(
                Attempt(
                    str(metadata.get("choice", "")), int(metadata.get("attempt", 0)), dict(metadata.get("favoured", {}))
                )
            )
        elif playing is not None and playing.attempts and kind in ("outcome", "correction"):
            playing.attempts[-1].feedback.append(Said(kind, text, dict(metadata)))
        return None

    def _record_of(self) -> dict[str, RecordEntry]:
        # Falling back hands over nothing, record included: the decision is then no_memory's.
        return dict(self.tally) if self._speaks else {}

    def _recall(self, problem: Problem) -> tuple[list[Evidence], str]:
        if self._playing is None:
            self._playing = PlayedRound(problem.observations, problem.candidates, method=method_favourite(problem))
        if not self._speaks:
            return [], ""
        ids = [cause.id for cause in problem.candidates]
        untried = [cause for cause in ids if cause not in problem.tried] or ids
        found = self.classifier.predict(problem.observations, untried, method_favourite(problem))
        if found is None:
            return [], ""
        text = f"classifier over {found.rounds} past rounds: {found.probability:.2f} for {found.cause}"
        item = Evidence(
            id=f"classifier@{found.rounds}",
            source="fact",
            text=text,
            relevance=1.0,
            conclusion=found.cause,
            confidence=found.probability,
            why="naive Bayes over word 1-2-grams of past rounds' observations",
        )
        return [item], f"Learned from past rounds:\n- {text}"
