"""Lesson scenarios: what makes learning measurable (``python -m simulator.generate --lessons``).

A *lesson* is a site-specific fact the runbook does not know: a root cause T whose symptoms
are the runbook signals of another cause M, told apart only by a site-specific component
(the marker). It is taught once, by a correction after the runbook's wrong call, and then
recurs on other services in other words. Each block of ten rounds holds, in order:

    0 lesson (first time: kind ``lesson``; later ``lesson_recur``)   5 lesson_recur
    1 plain                                                          6 caused (by round 0's fix)
    2 lesson_recur                                                   7 lesson_recur
    3 plain                                                          8 plain
    4 red_herring (M's signals, the marker ruled out: truth M)       9 lesson_recur

Three lessons rotate over the blocks. From two thirds of the way on, the first lesson
*drifts*: its marker was repaired, the same symptoms are M again (kind ``drift``), and a
correction says so. Plain rounds carry the truth's own runbook signals; caused rounds carry
a causal hint from `lesson_pools.CHAIN_HINTS`, which names the service of the block's first
round: no round before it in the block is on that service, so the hint names one change.
Every sentence is drawn from the paraphrase pools of `simulator.lesson_pools`;
`lesson_overlap` measures the mean stem-Jaccard between a lesson and its recurrences.

Families: ``train``, ``test`` or ``all`` (`families.TRAIN_FAMILIES`, `TEST_FAMILIES`): the
scenario's root causes, lessons and fillers come only from the chosen split.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memory.text import stems
from simulator import families as fam
from simulator import lesson_pools as pools
from simulator.scenario_parts import START, interludes

BLOCK = (
    "lesson",
    "plain",
    "lesson_recur",
    "plain",
    "red_herring",
    "lesson_recur",
    "caused",
    "lesson_recur",
    "plain",
    "lesson_recur",
)
LESSONS = 3  # lessons rotating over the blocks
CAUSED = BLOCK.index("caused")  # the slot of a block's caused round
SPLITS = {"train": fam.TRAIN_FAMILIES, "test": fam.TEST_FAMILIES, "all": tuple(fam.FAMILIES)}


def _pick(rng: np.random.Generator, seq: Any) -> Any:
    return seq[int(rng.integers(len(seq)))]


def _lower(text: str) -> str:
    return text[0].lower() + text[1:]


class _Lessons:
    """The scenario being drawn."""

    def __init__(self, rng: np.random.Generator, ids: tuple[str, ...], rounds: int) -> None:
        self.rng, self.ids, self.total = rng, ids, rounds
        markers = rng.choice(len(pools.MARKERS), size=LESSONS, replace=False)
        self.lessons: list[dict[str, Any]] = []  # t (the cause taught), m (its mimic), marker, taught, last_svc
        for k in range(LESSONS):
            t, m = (ids[int(i)] for i in rng.choice(len(ids), size=2, replace=False))
            self.lessons.append(
                {"t": t, "m": m, "marker": pools.MARKERS[int(markers[k])], "taught": False, "last_svc": None}
            )
        self.rounds: list[dict] = []
        self.lesson_of: dict[str, int] = {}  # lesson and recurrence round id → lesson index

    def fill(self, svc: str) -> dict[str, Any]:
        rng = self.rng
        return {
            "svc": svc,
            "n": int(rng.integers(3, 400)),
            "pct": int(rng.integers(4, 60)),
            "when": _pick(rng, pools.WHEN),
            "who": _pick(rng, pools.WHO),
            "hours": int(rng.integers(2, 30)),
        }

    def signals(self, cause: str, v: dict[str, Any], count: int) -> list[str]:
        """`count` runbook signals of `cause`, each in a different frame."""
        signals = fam.FAMILIES[cause]["signals"]
        picks = self.rng.choice(len(signals), size=min(count, len(signals)), replace=False)
        frames = self.rng.choice(len(pools.SIGNAL_FRAMES), size=len(picks), replace=False)
        return [pools.SIGNAL_FRAMES[int(f)].format(**v, signal=signals[int(s)]) for s, f in zip(picks, frames)]

    def service(self, avoid: str | None, i: int) -> str:
        """A service for round `i` other than `avoid`. Until a block's caused round, not the service
        of the block's first round either: the causal hint names that service, so no other change
        on it may come in between (the hint would name two changes)."""
        cause = self.rounds[i - i % len(BLOCK)]["service"] if 0 < i % len(BLOCK) <= CAUSED else None
        return _pick(self.rng, [s for s in fam.SERVICES if s not in (avoid, cause)])

    def draw(self, i: int) -> None:
        """Round `i`: its kind follows from its place in the block."""
        slot = BLOCK[i % len(BLOCK)]
        lesson = self.lessons[(i // len(BLOCK)) % LESSONS]
        drifted = lesson is self.lessons[0] and i >= 2 * self.total // 3
        if slot in ("lesson", "lesson_recur"):
            self._lesson_round(i, lesson, drifted)
        elif slot == "red_herring":
            svc = self.service(lesson["last_svc"], i)
            v = self.fill(svc)
            obs = self.signals(lesson["m"], v, 2) + [
                _pick(self.rng, pools.MARKER_ABSENT_FRAMES).format(**v, marker=lesson["marker"]).capitalize()
            ]
            self._add(i, "red_herring", svc, obs, lesson["m"], [lesson["t"]], None, None)
        elif slot == "caused" and self.rounds:
            earlier = self.rounds[i - i % len(BLOCK)]
            options = [c for c in fam.CONSEQUENCES[earlier["truth"]] if c in self.ids] or [
                c for c in self.ids if c != earlier["truth"]
            ]
            truth = _pick(self.rng, options)
            svc = self.service(None, i)
            v = {**self.fill(svc), "prev_svc": earlier["service"]}
            obs = [_pick(self.rng, pools.CHAIN_HINTS).format(**v)] + self.signals(truth, v, 2)
            self._add(i, "caused", svc, obs, truth, [earlier["truth"]], None, earlier["id"])
        else:
            truth = _pick(self.rng, self.ids)
            svc = self.service(None, i)
            self._add(i, "plain", svc, self.signals(truth, self.fill(svc), 2), truth, [], None, None)

    def _lesson_round(self, i: int, lesson: dict[str, Any], drifted: bool) -> None:
        self.lesson_of[f"r{i + 1}"] = self.lessons.index(lesson)
        svc = self.service(lesson["last_svc"], i)
        lesson["last_svc"] = svc
        v = self.fill(svc)
        obs = self.signals(lesson["m"], v, 2)
        obs.append(_pick(self.rng, pools.MARKER_FRAMES).format(**v, marker=lesson["marker"]))
        obs = [o[0].upper() + o[1:] for o in obs]
        obs = [obs[int(k)] for k in self.rng.permutation(len(obs))]
        words = {
            "marker": lesson["marker"],
            "t_desc": _lower(fam.FAMILIES[lesson["t"]]["description"]),
            "m_desc": _lower(fam.FAMILIES[lesson["m"]]["description"]),
        }
        if drifted:
            correction = _pick(self.rng, pools.DRIFT_CORRECTIONS).format(**words)
            self._add(i, "drift", svc, obs, lesson["m"], [lesson["t"]], correction, None)
            return
        kind = "lesson_recur" if lesson["taught"] else "lesson"
        lesson["taught"] = True
        correction = _pick(self.rng, pools.LESSON_CORRECTIONS).format(**words)
        self._add(i, kind, svc, obs, lesson["t"], [lesson["m"]], correction, None)

    def _add(self, i, kind, svc, obs, truth, needed, correction, caused_by) -> None:
        rng = self.rng
        others = [c for c in self.ids if c != truth and c not in needed]
        extra = [others[int(k)] for k in rng.choice(len(others), size=min(len(others), 1), replace=False)]
        candidates = list(dict.fromkeys([truth, *needed, *extra]))
        candidates = [candidates[int(k)] for k in rng.permutation(len(candidates))]
        out: dict[str, Any] = {"id": f"r{i + 1}", "kind": kind, "service": svc}
        if i:
            out["after"] = _pick(rng, fam.GAPS)
        out.update(
            observations=obs,
            candidates=candidates,
            truth=truth,
            max_attempts=2,
            on_success=_pick(rng, pools.FIXES).format(svc=svc),
        )
        if correction:
            out["correction"] = correction
        if caused_by:
            out["caused_by"] = caused_by
        self.rounds.append(out)


def generate_lessons(rounds: int, seed: int, families: str = "test", name: str | None = None) -> dict:
    """A lesson scenario document (plain data, ready for YAML)."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    if families not in SPLITS:
        raise ValueError(f"families must be one of {', '.join(SPLITS)}")
    rng = np.random.default_rng(seed)
    ids = SPLITS[families]
    draft = _Lessons(rng, ids, rounds)
    for i in range(rounds):
        draft.draw(i)
    overlap = lesson_overlap(draft.rounds, draft.lesson_of)
    lessons = "; ".join(f"{x['t']} looks like {x['m']}, told apart by {x['marker']}" for x in draft.lessons)
    return {
        "schema": 1,
        "name": name or f"lessons-{families}-{rounds}-s{seed}",
        "title": f"Lesson scenario: {rounds} rounds, {families} families (seed {seed})",
        "description": (
            f"Site-specific lessons ({lessons}); the first one drifts back to its runbook cause "
            f"from round {2 * rounds // 3 + 1}. Mean stem-Jaccard between a lesson and its "
            f"recurrences: {overlap:.3f}."
        ),
        "start": START,
        "root_causes": {
            k: {"description": fam.FAMILIES[k]["description"], "signals": list(fam.FAMILIES[k]["signals"])} for k in ids
        },
        "interludes": interludes(rng, max(1, rounds // 6)),
        "rounds": draft.rounds,
    }


def lesson_overlap(rounds: list[dict], lesson_of: dict[str, int]) -> float:
    """Mean stem-Jaccard between each lesson's teaching round and each of its recurrences."""
    taught: dict[int, frozenset[str]] = {}
    values = []
    for r in rounds:
        if r["id"] not in lesson_of:
            continue
        words = stems(" ".join(r["observations"]))
        k = lesson_of[r["id"]]
        if r["kind"] == "lesson":
            taught[k] = words
        elif r["kind"] == "lesson_recur" and k in taught:
            values.append(len(words & taught[k]) / len(words | taught[k]))
    return sum(values) / len(values) if values else float("nan")
