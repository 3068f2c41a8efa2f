"""Lesson scenarios: what makes learning measurable (``python -m simulator.generate --lessons``).

A *lesson* is a site-specific fact the runbook does not know: a root cause T whose symptoms
are the runbook signals of another cause M, told apart only by a site-specific component
that was active or changed shortly before (restarted, redeployed, its job ran...). It is
taught once, by a correction after the runbook's wrong call, and then recurs on other
services, told by someone else. Each block of ten rounds holds, in order:

    0 lesson (first time: kind ``lesson``; later ``lesson_recur``)   5 lesson_recur
    1 plain                                                          6 caused (by round 0's fix)
    2 lesson_recur                                                   7 lesson_recur
    3 plain                                                          8 plain
    4 red_herring (M's signals, the component normal: truth M)       9 lesson_recur

Three lessons rotate over the blocks, each on its own component of `lesson_pools.COMPONENTS`
(a system name such as ``authshim`` and five descriptions of the same thing). The lesson
round names the component by one description and its system name; a recurrence names it by
the system name, another description, or both, says it changed in another sentence, and
tells M's symptoms with other signals, paraphrases or surface symptoms than the lesson's: no
run of more than `MAX_SHARED` words (stop words alone and the system name not counted, see
`longest_shared_phrase`) is common to a recurrence and its lesson's observations. Red
herrings name the lesson's component only as checked and normal; about a third of plain
rounds carry such a line about one of the lesson components too, so a component's mention
alone tells nothing, only what it did.

From two thirds of the way on, the first lesson *drifts*: its component was repaired, the
same symptoms are M again (kind ``drift``), and a correction says so. Plain rounds carry the
truth's own runbook signals; caused rounds carry a causal hint from `lesson_pools.CHAIN_HINTS`,
which names the service of the block's first round: no round before it in the block is on that
service, so the hint names one change. Every sentence is drawn from the pools of
`simulator.lesson_pools`; the description reports the longest phrase a recurrence or drift
round shares with its lesson and `lesson_overlap`, the mean stem-Jaccard between a lesson and
its recurrences.

Families: ``train``, ``test`` or ``all`` (`families.TRAIN_FAMILIES`, `TEST_FAMILIES`): the
scenario's root causes, lessons and fillers come only from the chosen split.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
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
MAX_SHARED = 2  # the longest phrase (in words) a recurrence may share with its lesson's observations
PLAIN_MENTION = 1 / 3  # share of plain rounds that mention a lesson component as normal
# M's symptoms in a lesson: one runbook signal word for word and one paraphrase of a signal (in
# M's words, not its phrases); in a recurrence or drift round: two other signals word for word
# and at most one paraphrase or surface symptom. Either way M's runbook terms carry the round.
LESSON_SIGNALS, RECUR_SIGNALS = 1, 2
_TRIES = 200  # wordings drawn for a lesson round before the closest to its constraints is kept

# English function words: a run of shared words made only of these is not a shared phrase.
STOP_WORDS = frozenset(
    """a an the and or but nor of in on at to for from by with as into onto over under about after
    before since until than then so is are was were be been being it its this that these those
    there here has have had do does did not no s""".split()
)


def _pick(rng: np.random.Generator, seq: Any) -> Any:
    return seq[int(rng.integers(len(seq)))]


def _lower(text: str) -> str:
    return text[0].lower() + text[1:]


# Names typed as they are, even at the start of a sentence: systems, services, hosts.
_NAMES = (*(c["name"] for c in pools.COMPONENTS), *fam.SERVICES, *fam.DEPENDENCIES, *fam.EXTERNALS, "ip-")


def _sentence(text: str) -> str:
    """`text` with a capital first letter, unless it begins with a name (typed as is)."""
    return text if text.startswith(_NAMES) else text[0].upper() + text[1:]


def _runbook_words(cause: str) -> frozenset[str]:
    """Word stems of a cause's runbook entry (its description and signals)."""
    return stems(" ".join([fam.FAMILIES[cause]["description"], *fam.FAMILIES[cause]["signals"]]))


_SERVICE_WORDS = stems(" ".join(fam.SERVICES))  # words of service names: a round names its service


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def longest_shared_phrase(
    lesson_text: str | Sequence[str], recurrence_text: str | Sequence[str], allowed: Iterable[str] = ()
) -> int:
    """The longest run of consecutive words (lowercased, split on non-word characters) the two
    texts share, in words. Runs made only of `STOP_WORDS` do not count; the words of an
    `allowed` phrase (a component's system name) where it occurs are shared for free (they add
    nothing to a run's length). A sequence of texts (observations) is read line by line: no
    run crosses from one line into the next."""
    phrases = [w for w in (_words(a) for a in allowed) if w]

    def lines(text: str | Sequence[str]) -> list[list[tuple[str, bool]]]:
        out = []
        for line in [text] if isinstance(text, str) else text:
            words = _words(line)
            free = [False] * len(words)
            for phrase in phrases:
                for k in range(len(words) - len(phrase) + 1):
                    if words[k : k + len(phrase)] == phrase:
                        free[k : k + len(phrase)] = [True] * len(phrase)
            out.append(list(zip(words, free)))
        return out

    best = 0
    for a in lines(lesson_text):
        for b in lines(recurrence_text):
            prev: dict[int, tuple[int, bool]] = {}  # run ending at b[j]: (its length, has a content word)
            for word, free_a in a:
                cur = {}
                for j, (other, free_b) in enumerate(b):
                    if word != other:
                        continue
                    length, content = prev.get(j - 1, (0, False))
                    free = free_a or free_b
                    length += 0 if free else 1
                    content = content or (not free and word not in STOP_WORDS)
                    cur[j] = (length, content)
                    if content:
                        best = max(best, length)
                prev = cur
    return best


class _Lessons:
    """The scenario being drawn."""

    def __init__(self, rng: np.random.Generator, ids: tuple[str, ...], rounds: int) -> None:
        self.rng, self.ids, self.total = rng, ids, rounds
        components = rng.choice(len(pools.COMPONENTS), size=LESSONS, replace=False)
        # t (the cause taught), m (its mimic), comp (its component), taught, last_svc (of its last round),
        # home and text (the service and observations of its first round), and once drawn: desc and change
        # (the description and change frame it used), used (the pool entries of its symptoms), correction
        # (the frame of its correction)
        self.lessons: list[dict[str, Any]] = []
        for k in range(LESSONS):
            t, m = (ids[int(i)] for i in rng.choice(len(ids), size=2, replace=False))
            comp = pools.COMPONENTS[int(components[k])]
            self.lessons.append(
                {"t": t, "m": m, "comp": comp, "taught": False, "last_svc": None, "home": None, "text": None}
            )
        self.rounds: list[dict] = []
        self.lesson_of: dict[str, int] = {}  # lesson, recurrence and drift round id → lesson index

    def fill(self, svc: str) -> dict[str, Any]:
        """Fill-ins for one round's sentences (those of `families` templates too)."""
        rng = self.rng
        major, minor = int(rng.integers(1, 9)), int(rng.integers(0, 30))
        return {
            "svc": svc,
            "n": int(rng.integers(3, 400)),
            "pct": int(rng.integers(4, 60)),
            "pct2": int(rng.integers(12, 95)),
            "mins": int(rng.integers(2, 16)),
            "ms": int(rng.integers(800, 9000)),
            "ms_lo": int(rng.integers(80, 400)),
            "small": _pick(rng, [10, 16, 20, 32, 50]),
            "gb": int(rng.integers(20, 400)),
            "days": int(rng.integers(3, 40)),
            "month": _pick(rng, pools.MONTHS),
            "weekday": _pick(rng, pools.WEEKDAYS),
            "when": _pick(rng, pools.WHEN),
            "who": _pick(rng, pools.WHO),
            "actor": _pick(rng, pools.ACTORS),
            "hours": int(rng.integers(2, 30)),
            "dep": _pick(rng, fam.DEPENDENCIES),
            "ext": _pick(rng, fam.EXTERNALS),
            "host": f"ip-10-{int(rng.integers(0, 255))}-{int(rng.integers(0, 255))}-{int(rng.integers(1, 255))}",
            "other": _pick(rng, fam.NEIGHBOURS),
            "region": _pick(rng, fam.REGIONS),
            "ver": f"v{major}.{minor + 1}.0",
            "oldver": f"v{major}.{minor}.{int(rng.integers(0, 9))}",
            "cfgkey": _pick(rng, fam.CONFIG_KEYS),
            "keyset": _pick(rng, fam.KEYSETS),
            "alert": _pick(rng, fam.ALERTS),
        }

    def signals(self, cause: str, v: dict[str, Any], count: int) -> list[str]:
        """`count` runbook signals of `cause`, each in a different frame."""
        signals = fam.FAMILIES[cause]["signals"]
        picks = self.rng.choice(len(signals), size=min(count, len(signals)), replace=False)
        frames = self.rng.choice(len(pools.SIGNAL_FRAMES), size=len(picks), replace=False)
        return [pools.SIGNAL_FRAMES[int(f)].format(**v, signal=signals[int(s)]) for s, f in zip(picks, frames)]

    def service(self, avoid: Collection[str | None], i: int) -> str:
        """A service for round `i` not in `avoid`. Until a block's caused round, not the service
        of the block's first round either: the causal hint names that service, so no other change
        on it may come in between (the hint would name two changes)."""
        cause = self.rounds[i - i % len(BLOCK)]["service"] if 0 < i % len(BLOCK) <= CAUSED else None
        return _pick(self.rng, [s for s in fam.SERVICES if s not in avoid and s != cause])

    def mention(self, comp: dict[str, Any], v: dict[str, Any]) -> str:
        """A line naming `comp` (by its name, a description or both) as checked and normal."""
        frames = pools.NORMAL_FRAMES + comp["normal"]
        return _sentence(_pick(self.rng, frames).format(**v, c=self.reference(comp)))

    def reference(self, comp: dict[str, Any], descriptions: Sequence[int] | None = None) -> str:
        """`comp` by its system name, one of its `descriptions` (default all), or both."""
        rng = self.rng
        desc = comp["descriptions"][int(_pick(rng, descriptions or range(len(comp["descriptions"]))))]
        return _pick(rng, [comp["name"], desc, f"{desc} ({comp['name']})"])

    def draw(self, i: int) -> None:
        """Round `i`: its kind follows from its place in the block."""
        slot = BLOCK[i % len(BLOCK)]
        lesson = self.lessons[(i // len(BLOCK)) % LESSONS]
        drifted = lesson is self.lessons[0] and i >= 2 * self.total // 3
        if slot in ("lesson", "lesson_recur"):
            self._lesson_round(i, lesson, drifted)
        elif slot == "red_herring":
            svc = self.service({lesson["last_svc"]}, i)
            v = self.fill(svc)
            obs = self.signals(lesson["m"], v, 2) + [self.mention(lesson["comp"], v)]
            obs = [obs[int(k)] for k in self.rng.permutation(len(obs))]
            self._add(i, "red_herring", svc, obs, lesson["m"], [lesson["t"]], None, None)
        elif slot == "caused" and self.rounds:
            earlier = self.rounds[i - i % len(BLOCK)]
            options = [c for c in fam.CONSEQUENCES[earlier["truth"]] if c in self.ids] or [
                c for c in self.ids if c != earlier["truth"]
            ]
            truth = _pick(self.rng, options)
            svc = self.service((), i)
            v = {**self.fill(svc), "prev_svc": earlier["service"]}
            obs = [_pick(self.rng, pools.CHAIN_HINTS).format(**v)] + self.signals(truth, v, 2)
            self._add(i, "caused", svc, obs, truth, [earlier["truth"]], None, earlier["id"])
        else:
            truth = _pick(self.rng, self.ids)
            svc = self.service((), i)
            v = self.fill(svc)
            obs = self.signals(truth, v, 2)
            if self.rng.random() < PLAIN_MENTION:
                obs.insert(int(self.rng.integers(len(obs) + 1)), self.mention(_pick(self.rng, self.lessons)["comp"], v))
            self._add(i, "plain", svc, obs, truth, [], None, None)

    def _lesson_round(self, i: int, lesson: dict[str, Any], drifted: bool) -> None:
        self.lesson_of[f"r{i + 1}"] = self.lessons.index(lesson)
        svc = self.service({lesson["last_svc"], lesson["home"]}, i)
        lesson["last_svc"] = svc
        comp = lesson["comp"]
        obs = self._tell(lesson, svc)
        words = {
            "t_desc": _lower(fam.FAMILIES[lesson["t"]]["description"]),
            "m_desc": _lower(fam.FAMILIES[lesson["m"]]["description"]),
        }
        if drifted:
            correction = _pick(self.rng, pools.DRIFT_CORRECTIONS).format(**words, c=self.reference(comp))
            self._add(i, "drift", svc, obs, lesson["m"], [lesson["t"]], _sentence(correction), None)
            return
        kind = "lesson_recur" if lesson["taught"] else "lesson"
        lesson["taught"] = True
        frames = range(len(pools.LESSON_CORRECTIONS))
        if kind == "lesson":
            lesson["correction"] = int(_pick(self.rng, frames))
            frame = lesson["correction"]
        else:  # another frame than the lesson's correction
            frame = int(_pick(self.rng, [f for f in frames if f != lesson["correction"]]))
        correction = pools.LESSON_CORRECTIONS[frame].format(**words, c=self.reference(comp))
        self._add(i, kind, svc, obs, lesson["t"], [lesson["m"]], _sentence(correction), None)

    def _symptoms(
        self, m: str, v: dict[str, Any], used: dict[str, set], exact: int, told: int, *, surfaces: bool
    ) -> tuple[list[str], dict[str, set]]:
        """Lines of M's symptoms: `exact` runbook signals word for word (each in its own frame)
        and `told` paraphrases of a signal (or, with `surfaces`, surface symptoms of M from
        `families`); none of the pool entries in `used`. Returns the lines and the entries taken."""
        rng, family = self.rng, fam.FAMILIES[m]
        signals = [s for s in family["signals"] if s not in used["signals"]]
        frames = [f for f in range(len(pools.SIGNAL_FRAMES)) if f not in used["frames"]]
        picks = rng.choice(len(signals), size=min(exact, len(signals)), replace=False)
        at = rng.choice(len(frames), size=len(picks), replace=False)
        lines = [pools.SIGNAL_FRAMES[frames[int(f)]].format(**v, signal=signals[int(s)]) for s, f in zip(picks, at)]
        took: dict[str, set] = {
            "signals": {signals[int(s)] for s in picks},
            "frames": {frames[int(f)] for f in at},
            "paraphrases": set(),
            "surfaces": set(),
        }
        options = [
            ("paraphrases", p)
            for ps in pools.SIGNAL_PARAPHRASES[m].values()
            for p in ps
            if p not in used["paraphrases"]
        ]
        options += [("surfaces", s) for s in family["surface"] if surfaces and s not in used["surfaces"]]
        for k in rng.choice(len(options), size=min(told, len(options)), replace=False):
            what, text = options[int(k)]
            lines.append(_sentence(text.format(**v)))
            took[what].add(text)
        return lines, took

    def _tell(self, lesson: dict[str, Any], svc: str) -> list[str]:
        """Observations of a lesson round: M's symptoms and the lesson's component active shortly
        before. The first time (the lesson), the component goes by a description and its system
        name, and the pool entries used are recorded; afterwards (recurrence, drift) by the name,
        another description or both, in another change frame, with M's symptoms told by none of
        the lesson's entries. Drawn again until the text shares at most `MAX_SHARED` words in a
        row with the lesson and holds no word stem of T's runbook entry that M's lacks, other than
        those of service names (the runbook must not see T); failing that, the draw closest to both
        is kept."""
        rng, comp = self.rng, lesson["comp"]
        first = lesson["text"] is None
        changes = pools.CHANGE_FRAMES + comp["changes"]
        descs = range(len(comp["descriptions"]))
        foreign = _runbook_words(lesson["t"]) - _runbook_words(lesson["m"]) - _SERVICE_WORDS
        nothing: dict[str, set] = {"signals": set(), "frames": set(), "paraphrases": set(), "surfaces": set()}
        best: tuple[tuple[bool, int, int], list[str], int, int, dict[str, set]] | None = None
        for _ in range(_TRIES):
            v = self.fill(svc)
            if first:
                obs, took = self._symptoms(lesson["m"], v, nothing, LESSON_SIGNALS, 1, surfaces=False)
                desc, change = int(rng.integers(len(descs))), int(rng.integers(len(changes)))
                c = f"{comp['descriptions'][desc]} ({comp['name']})"
            else:
                told = int(rng.integers(2))
                obs, took = self._symptoms(lesson["m"], v, lesson["used"], RECUR_SIGNALS, told, surfaces=True)
                desc = lesson["desc"]
                change = int(_pick(rng, [k for k in range(len(changes)) if k != lesson["change"]]))
                c = self.reference(comp, [d for d in descs if d != lesson["desc"]])
            obs.append(_sentence(changes[change].format(**v, c=c)))
            obs = [obs[int(k)] for k in rng.permutation(len(obs))]
            shared = 0 if first else longest_shared_phrase(lesson["text"], obs, allowed=[comp["name"]])
            leaks = len(stems(" ".join(obs)) & foreign)
            key = (shared > MAX_SHARED, leaks, shared)
            if best is None or key < best[0]:
                best = (key, obs, desc, change, took)
            if key[:2] == (False, 0):
                break
        assert best is not None
        _, obs, desc, change, took = best
        if first:
            lesson.update(home=svc, text=obs, desc=desc, change=change, used=took)
        return obs

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

    def longest_shared(self) -> int | None:
        """The longest phrase any recurrence or drift round shares with its lesson's observations
        (None without one)."""
        values = [
            longest_shared_phrase(lesson["text"], r["observations"], allowed=[lesson["comp"]["name"]])
            for r in self.rounds
            if r["id"] in self.lesson_of
            for lesson in [self.lessons[self.lesson_of[r["id"]]]]
            if r["observations"] is not lesson["text"]
        ]
        return max(values) if values else None


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
    shared = draft.longest_shared()
    phrase = "none" if shared is None else f"{shared} word{'' if shared == 1 else 's'}"
    lessons = "; ".join(
        f"{x['t']} looks like {x['m']}, told apart by activity of {x['comp']['name']}"
        + (f" ({x['comp']['descriptions'][x['desc']]})" if x["text"] else "")
        for x in draft.lessons
    )
    return {
        "schema": 1,
        "name": name or f"lessons-{families}-{rounds}-s{seed}",
        "title": f"Lesson scenario: {rounds} rounds, {families} families (seed {seed})",
        "description": (
            f"Site-specific lessons ({lessons}); the first one drifts back to its runbook cause "
            f"from round {2 * rounds // 3 + 1}. Longest phrase a recurrence shares with its lesson: {phrase}; "
            f"mean stem-Jaccard between a lesson and its recurrences: {overlap:.3f}."
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
