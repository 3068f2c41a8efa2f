"""The debugging environment: plays a scenario as a seeded stream of events.

Gymnasium-style contract (without the dependency)::

    env = DebugEnv(scenarios.load("pool-vs-deploy"))
    prompt, info = env.reset(seed=7)
    while prompt is not None:
        result = env.step(choose(prompt))      # a candidate root-cause id
        prompt = result.prompt

Each prompt carries the stream events that are new since the previous prompt: on a
round's first attempt, the interlude blocks placed before it and the round's
observations; on a retry, the previous attempt's outcome signal and correction (these
were also returned in that step's ``events``; every event has a unique ``index``).

Rules:

- A choice that is not among the prompt's candidates counts as a wrong attempt
  (``info["valid_choice"]`` is False); it is never an exception.
- After a wrong attempt the round's ``correction`` (if any) follows the outcome signal as
  a user correction. A round without a correction reveals nothing beyond the failure
  signal, even after its last attempt.
- The seed varies only: timing jitter, which gap between rounds each interlude falls
  in, the order of observations within a round, whether an outcome signal also carries
  a structured check status, and the wording of generic outcome texts. Truths never
  depend on it. Random draws are made per round (and per attempt within it), so agents
  taking different numbers of attempts still see the same later rounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from scenarios import Round, Scenario
from simulator import outcomes
from simulator.events import Event, Prompt, StepResult
from simulator.truth import (
    FAILURE,
    SUCCESS,
    UNKNOWN,
    AttemptRecord,
    GroundTruth,
    TrueEpisode,
    relations,
)

DEFAULT_START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)  # when neither start nor at
DEFAULT_GAP = timedelta(days=1)  # between rounds with neither after nor at
STRUCTURED_PROBABILITY = 0.5  # share of outcome signals carrying a check status


@dataclass(frozen=True)
class _AttemptDraw:
    """Seeded timing and presentation of one attempt."""

    outcome_delay: int  # seconds from the decision to the outcome signal
    correction_delay: int  # seconds from the outcome signal to the correction
    structured: bool  # whether the outcome carries a structured check status
    variant: int  # which generic phrasing to use when the round gives none


class DebugEnv:
    """Plays one scenario; owns its ``numpy.random.Generator``."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario  # the scenario being played
        self._rng: np.random.Generator | None = None
        self._stream: list[Event] = []
        self._finished = True

    # -- public API ---------------------------------------------------------------

    @property
    def events(self) -> tuple[Event, ...]:
        """Every event emitted since the last reset, in stream order."""
        return tuple(self._stream)

    def reset(self, *, seed: int | None = None) -> tuple[Prompt, dict[str, Any]]:
        """Starts the scenario from its first round.

        Args:
            seed: seeds the generator; None keeps the current generator (or draws fresh
                entropy on the first reset).

        Returns:
            The first prompt and an info dict (scenario name, sha256, rounds).
        """
        rng = self._rng if seed is None and self._rng is not None else np.random.default_rng(seed)
        self._rng = rng
        rounds = self.scenario.rounds
        self._round_rngs = rng.spawn(len(rounds))
        self._nominal = nominal_times(self.scenario)
        self._gaps = self._place_interludes(rng)
        self._stream = []
        self._episodes: list[dict[str, Any]] = []
        self._attempts: list[AttemptRecord] = []
        self._finished = False
        self._round_index = 0
        prompt = self._open_round()
        info = {"scenario": self.scenario.name, "sha256": self.scenario.sha256, "rounds": len(rounds)}
        return prompt, info

    def step(self, root_cause: str) -> StepResult:
        """Plays one attempt with the chosen root-cause id.

        Raises:
            RuntimeError: the environment was not reset, or the scenario is finished.
        """
        if self._finished:
            raise RuntimeError("the scenario is finished (or was never started); call reset() first")
        rnd = self.scenario.rounds[self._round_index]
        draw = self._attempt_draw()
        valid = root_cause in rnd.candidates
        correct = valid and root_cause == rnd.truth
        outcome_time = self._decision_time + timedelta(seconds=draw.outcome_delay)
        new = [self._outcome_event(rnd, correct, draw, outcome_time)]
        corrected = not correct and rnd.correction is not None
        if corrected:
            when = outcome_time + timedelta(seconds=draw.correction_delay)
            new.append(self._emit(when, rnd.situation, "user", "correction", rnd.correction, {"service": rnd.service}))
        episode = self._episodes[-1]
        episode["indices"].extend(e.index for e in new)
        episode["outcome"] = SUCCESS if correct else FAILURE
        self._attempts[-1] = AttemptRecord(
            position=len(self._episodes) - 1,
            round_id=rnd.id,
            attempt=self._attempt,
            correct=correct,
            corrected=corrected,
        )
        info = {
            "round_id": rnd.id,
            "kind": rnd.kind,
            "attempt": self._attempt,
            "truth": rnd.truth,
            "choice": root_cause,
            "valid_choice": valid,
            "solved": correct,
        }
        round_done = correct or self._attempt >= rnd.max_attempts
        prompt: Prompt | None
        if not round_done:
            self._attempt += 1
            prompt = self._prompt(rnd, tuple(new))
            self._begin_attempt(rnd, [])
        else:
            self._round_index += 1
            self._finished = self._round_index >= len(self.scenario.rounds)
            prompt = None if self._finished else self._open_round()
        return StepResult(
            prompt=prompt,
            events=tuple(new),
            correct=correct,
            reward=1.0 if correct else 0.0,
            round_done=round_done,
            terminated=self._finished,
            truncated=False,
            info=info,
        )

    def ground_truth(self) -> GroundTruth:
        """True episodes and relations of everything played so far (evaluation only)."""
        episodes = tuple(
            TrueEpisode(
                event_indices=tuple(ep["indices"]),
                kind=ep["kind"],
                round_id=ep["round_id"],
                attempt=ep["attempt"],
                outcome=ep["outcome"],
                situation=ep["situation"],
                service=ep["service"],
            )
            for ep in self._episodes
        )
        caused = {r.id: r.caused_by for r in self.scenario.rounds if r.caused_by}
        return GroundTruth(episodes=episodes, relations=relations(self._attempts, caused))

    # -- planning -----------------------------------------------------------------

    def _place_interludes(self, rng: np.random.Generator) -> dict[int, list[tuple[float, int]]]:
        """Assigns each interlude to a gap (the round it precedes) and a position in it, drawn from `rng`."""
        n = len(self.scenario.rounds)
        gaps: dict[int, list[tuple[float, int]]] = {}
        for k in range(len(self.scenario.interludes)):
            before = int(rng.integers(1, n)) if n > 1 else 0
            fraction = float(rng.uniform(0.1, 0.9))
            gaps.setdefault(before, []).append((fraction, k))
        for blocks in gaps.values():
            blocks.sort()
        return gaps

    def _attempt_draw(self) -> _AttemptDraw:
        rng = self._round_rngs[self._round_index]
        return _AttemptDraw(
            outcome_delay=int(rng.integers(120, 601)),
            correction_delay=int(rng.integers(60, 301)),
            structured=bool(rng.random() < STRUCTURED_PROBABILITY),
            variant=int(rng.integers(0, 1 << 16)),
        )

    # -- playing ------------------------------------------------------------------

    def _open_round(self) -> Prompt:
        """Emits the interludes before the current round and its observations."""
        i = self._round_index
        rnd = self.scenario.rounds[i]
        rng = self._round_rngs[i]
        nominal = self._nominal[i]
        spread = 300 if i == 0 else min(900, (nominal - self._nominal[i - 1]).total_seconds() / 10)
        start = nominal + timedelta(seconds=int(rng.integers(0, int(max(spread, 0)) + 1)))
        cursor = self._stream[-1].timestamp if self._stream else None
        new: list[Event] = []
        for fraction, k in self._gaps.get(i, []):
            block = self._interlude_block(k, fraction, cursor, start, rng)
            new.extend(block)
            cursor = block[-1].timestamp
        if cursor is not None and start <= cursor:
            start = cursor + timedelta(seconds=int(rng.integers(60, 601)))
        order = rng.permutation(len(rnd.observations))
        spacing = rng.integers(15, 241, size=len(rnd.observations))
        obs: list[Event] = []
        when = start
        for j, o in enumerate(order):
            if j:
                when += timedelta(seconds=int(spacing[j]))
            obs.append(
                self._emit(
                    when,
                    rnd.situation,
                    "environment",
                    "observation",
                    rnd.observations[int(o)],
                    {"service": rnd.service},
                )
            )
        self._attempt = 1
        self._begin_attempt(rnd, obs)
        return self._prompt(rnd, tuple(new + obs))

    def _interlude_block(self, k, fraction, lo, hi, rng) -> list[Event]:
        """Emits interlude k somewhere between lo (exclusive) and hi."""
        interlude = self.scenario.interludes[k]
        lo = lo if lo is not None else hi - timedelta(days=1)
        window = max((hi - lo).total_seconds(), 0.0)
        when = lo + timedelta(seconds=max(1, int(window * fraction)))
        block = []
        for j, text in enumerate(interlude.events):
            if j:
                when += timedelta(seconds=int(rng.integers(60, 901)))
            block.append(self._emit(when, interlude.situation, "user", "note", text, {}))
        self._episodes.append(
            {
                "indices": [e.index for e in block],
                "kind": "interlude",
                "round_id": None,
                "attempt": None,
                "outcome": UNKNOWN,
                "situation": interlude.situation,
                "service": None,
            }
        )
        return block

    def _begin_attempt(self, rnd: Round, events: list[Event]) -> None:
        self._episodes.append(
            {
                "indices": [e.index for e in events],
                "kind": "attempt",
                "round_id": rnd.id,
                "attempt": self._attempt,
                "outcome": UNKNOWN,
                "situation": rnd.situation,
                "service": rnd.service,
            }
        )
        self._attempts.append(
            AttemptRecord(
                position=len(self._episodes) - 1,
                round_id=rnd.id,
                attempt=self._attempt,
                correct=None,
                corrected=False,
            )
        )

    def _prompt(self, rnd: Round, events: tuple[Event, ...]) -> Prompt:
        rng = self._round_rngs[self._round_index]
        self._decision_time = self._stream[-1].timestamp + timedelta(seconds=int(rng.integers(30, 301)))
        causes = self.scenario.root_causes
        return Prompt(
            round_id=rnd.id,
            kind=rnd.kind,
            service=rnd.service,
            situation=rnd.situation,
            candidates=rnd.candidates,
            root_causes={c: causes[c] for c in rnd.candidates},
            attempt=self._attempt,
            events=events,
            decision_time=self._decision_time,
            catalogue=tuple(causes[c] for c in sorted(causes)),
            runbook=rnd.runbook,
        )

    def _outcome_event(self, rnd: Round, correct: bool, draw: _AttemptDraw, when: datetime) -> Event:
        authored = rnd.on_success if correct else rnd.on_failure
        text = authored or outcomes.generic(correct, draw.variant)
        meta: dict[str, Any] = {"service": rnd.service}
        if draw.structured:
            meta["check"] = outcomes.check(correct)
        return self._emit(when, rnd.situation, "environment", "outcome", text, meta)

    def _emit(self, when, situation, role, kind, text, metadata) -> Event:
        if self._stream and when <= self._stream[-1].timestamp:
            when = self._stream[-1].timestamp + timedelta(seconds=1)
        event = Event(
            timestamp=when,
            situation=situation,
            role=role,
            kind=kind,
            text=text,
            metadata=metadata,
            index=len(self._stream),
        )
        self._stream.append(event)
        return event


def nominal_times(scenario: Scenario) -> list[datetime]:
    """Each round's time before jitter: `at`, else previous + `after` (or a day)."""
    clock = scenario.start or DEFAULT_START
    times = []
    for i, rnd in enumerate(scenario.rounds):
        if rnd.at is not None:
            clock = rnd.at
        elif rnd.after is not None:
            clock = clock + rnd.after
        elif i:
            clock = clock + DEFAULT_GAP
        times.append(clock)
    return times
