"""Writes long synthetic schema-1 scenarios for scale tests and statistics.

    python -m simulator.generate --rounds 1000 --seed 3 --out /tmp/long.yaml

Rounds are drawn from the root-cause families in ``simulator.families`` with varied
wording (templates x services x numbers). The scenario mixes:

- plain rounds: surface symptoms plus distinguishing tells of the true family
  (kind ``learn`` the first time a family is the truth, ``recall`` afterwards);
- red herrings (every 5th round, 3rd position): surface symptoms of another family
  plus one tell of the true family;
- caused_by chains (kind ``caused``): an incident caused by an earlier round's fix,
  drawn from ``CONSEQUENCES``; the earlier round is one whose service no later round has
  (the hint names that service, so it names one change);
- drift: a context cue accompanies family A in the first half (kind ``drift_setup``)
  and family B in the second half (kind ``drift``) — the description names the rounds;
- interludes, retries (max_attempts 1-3) and corrections.

The same arguments always give the same YAML text.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from memory.outputs import output_problem, write_atomic
from simulator import families as fam
from simulator.lessons import generate_lessons
from simulator.scenario_parts import START, interludes

CUE_EVERY, CUE_OFFSET = 8, 3  # rounds i with i % 8 == 3 carry the drift cue
CAUSED_EVERY, CAUSED_OFFSET = 11, 7  # rounds i with i % 11 == 7 are caused by an earlier fix
HERRING_EVERY, HERRING_OFFSET = 5, 2  # rounds i with i % 5 == 2 are red herrings


def values(rng: np.random.Generator) -> dict[str, object]:
    """Fresh fill-ins for one round's templates."""
    pick = lambda seq: seq[int(rng.integers(len(seq)))]  # noqa: E731
    major, minor = int(rng.integers(1, 9)), int(rng.integers(0, 30))
    small = pick([10, 16, 20, 32, 50])
    return {
        "svc": pick(fam.SERVICES),
        "dep": pick(fam.DEPENDENCIES),
        "ext": pick(fam.EXTERNALS),
        "host": f"ip-10-{int(rng.integers(0, 255))}-{int(rng.integers(0, 255))}-{int(rng.integers(1, 255))}",
        "other": pick(fam.NEIGHBOURS),
        "region": pick(fam.REGIONS),
        "ver": f"v{major}.{minor + 1}.0",
        "oldver": f"v{major}.{minor}.{int(rng.integers(0, 9))}",
        "cfgkey": pick(fam.CONFIG_KEYS),
        "keyset": pick(fam.KEYSETS),
        "alert": pick(fam.ALERTS),
        "pct": int(rng.integers(3, 41)),
        "pct2": int(rng.integers(12, 95)),
        "ms": int(rng.integers(800, 9000)),
        "ms_lo": int(rng.integers(80, 400)),
        "n": int(rng.integers(120, 9000)),
        "small": small,
        "n_pool": small * int(rng.integers(2, 5)),
        "mins": int(rng.integers(2, 16)),
        "hours": int(rng.integers(2, 13)),
        "gb": int(rng.integers(20, 400)),
    }


@dataclass
class _Draft:
    """The scenario being drawn: fixed choices and the rounds so far."""

    ids: list[str]  # root-cause family ids
    cue: str  # the drift cue sentence
    drift_a: str  # the cause the cue points to before the drift point
    drift_b: str  # the cause it points to after
    drift_point: int  # round index where the drift happens
    rounds: list[dict] = field(default_factory=list)  # drawn rounds
    truths: list[str] = field(default_factory=list)  # their true causes
    seen: set[str] = field(default_factory=set)  # causes drawn so far
    setup_ids: list[str] = field(default_factory=list)  # drift-setup round ids
    drift_ids: list[str] = field(default_factory=list)  # drift round ids


def generate(rounds: int, seed: int, name: str | None = None) -> dict:
    """Builds a schema-1 scenario document (plain data, ready for YAML)."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    rng = np.random.default_rng(seed)
    ids = list(fam.FAMILIES)
    cue = _pick(rng, fam.CUES).format(**values(rng))
    drift_a, drift_b = (ids[int(k)] for k in rng.choice(len(ids), size=2, replace=False))
    draft = _Draft(ids, cue, drift_a, drift_b, rounds // 2)
    for i in range(rounds):
        _draw_round(rng, draft, i)
    return {
        "schema": 1,
        "name": name or f"generated-{rounds}-s{seed}",
        "title": f"Generated scenario: {rounds} rounds from {len(ids)} root-cause families (seed {seed})",
        "description": _description(cue, drift_a, drift_b, draft.setup_ids, draft.drift_ids),
        "start": START,
        "root_causes": {
            k: {"description": f["description"], "signals": list(f["signals"])} for k, f in fam.FAMILIES.items()
        },
        "interludes": interludes(rng, max(1, rounds // 6)),
        "rounds": draft.rounds,
    }


def _pick(rng: np.random.Generator, seq: Any) -> Any:
    return seq[int(rng.integers(len(seq)))]


def _draw_round(rng: np.random.Generator, draft: _Draft, i: int) -> None:
    """Draw round `i` (its kind follows from `i`) and add it to the draft."""
    v = values(rng)
    rid = f"r{i + 1}"
    caused_by = None
    needed: list[str] = []
    ids = draft.ids
    if i % CUE_EVERY == CUE_OFFSET:
        before = i < draft.drift_point
        truth = draft.drift_a if before else draft.drift_b
        kind = "drift_setup" if before else "drift"
        (draft.setup_ids if before else draft.drift_ids).append(rid)
        obs = [draft.cue, _fill(_pick(rng, fam.FAMILIES[draft.drift_a]["surface"]), v)]
        if not before:
            obs.append(_fill(_pick(rng, fam.FAMILIES[draft.drift_b]["tells"]), v))
        needed = [draft.drift_a, draft.drift_b]
    elif i % CAUSED_EVERY == CAUSED_OFFSET and i >= 3:
        # the hint names the earlier round's service: only a round whose service had no later round
        # qualifies, or the hint would name two changes
        window = [
            j
            for j in range(i - 1, i - min(6, i) - 1, -1)
            if all(r["service"] != draft.rounds[j]["service"] for r in draft.rounds[j + 1 :])
        ]
        j = _pick(rng, window)
        earlier = draft.rounds[j]
        truth = _pick(rng, fam.CONSEQUENCES[draft.truths[j]])
        kind, caused_by = "caused", earlier["id"]
        hint = _pick(rng, fam.CAUSED_HINTS).format(
            hours=v["hours"],
            prev_svc=earlier["service"],
            prev_fix=earlier["on_success"][0].lower() + earlier["on_success"][1:],
        )
        v["svc"] = earlier["service"]
        obs = [hint] + _symptoms(rng, truth, v, tells=1)
        needed = [draft.truths[j]] if draft.truths[j] != truth else []
    elif i % HERRING_EVERY == HERRING_OFFSET:
        truth = _pick(rng, ids)
        herring = _pick(rng, [x for x in ids if x != truth])
        kind = "red_herring"
        surface = fam.FAMILIES[herring]["surface"]
        picks = rng.choice(len(surface), size=2, replace=False)
        obs = [_fill(surface[int(k)], v) for k in picks]
        obs.append(_fill(_pick(rng, fam.FAMILIES[truth]["tells"]), v))
        needed = [herring]
    else:
        truth = _pick(rng, ids)
        kind = "recall" if truth in draft.seen else "learn"
        obs = _symptoms(rng, truth, v, tells=int(rng.integers(1, 3)))
    if rng.random() < 0.3:
        obs.append(_fill(_pick(rng, fam.NOISE), v))
    draft.seen.add(truth)
    draft.truths.append(truth)
    draft.rounds.append(_round(rng, rid, kind, v, obs, truth, needed, ids, caused_by, first=not i))


def to_yaml(doc: dict) -> str:
    """Serializes a scenario document deterministically."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # same text, 5x faster
    return yaml.dump(doc, Dumper=dumper, sort_keys=False, allow_unicode=True, width=1000)


def _fill(template: str, v: dict) -> str:
    return template.format(**v)


def _symptoms(rng, truth: str, v: dict, *, tells: int) -> list[str]:
    f = fam.FAMILIES[truth]
    surface = _fill(f["surface"][int(rng.integers(len(f["surface"])))], v)
    picks = rng.choice(len(f["tells"]), size=min(tells, len(f["tells"])), replace=False)
    return [surface] + [_fill(f["tells"][int(k)], v) for k in picks]


def _round(rng, rid, kind, v, obs, truth, needed, ids, caused_by, *, first) -> dict:
    size = int(rng.integers(2, 5))
    pool = [x for x in ids if x != truth and x not in needed]
    extra = [pool[int(k)] for k in rng.choice(len(pool), size=len(pool), replace=False)]
    candidates = list(dict.fromkeys([truth] + needed + extra))[: max(size, 1 + len(needed))]
    candidates = [candidates[int(k)] for k in rng.permutation(len(candidates))]
    family = fam.FAMILIES[truth]
    out: dict = {"id": rid, "kind": kind, "service": v["svc"]}
    if not first:
        out["after"] = fam.GAPS[int(rng.integers(len(fam.GAPS)))]
    out["observations"] = obs
    out["candidates"] = candidates
    out["truth"] = truth
    out["max_attempts"] = [1, 2, 2, 2, 3][int(rng.integers(5))]
    out["on_success"] = _fill(family["fix"], v)
    if rng.random() < 0.75:
        out["correction"] = _fill(family["correction"], v)
    if caused_by:
        out["caused_by"] = caused_by
    return out


def _description(cue, a, b, setup_ids, drift_ids) -> str:
    text = "Synthetic rounds for scale tests and statistics."
    if setup_ids:
        text += f" Drift: rounds whose observations say '{cue}' are {a} in rounds {', '.join(setup_ids)}"
        text += f"; from then on the same cue comes with {b} (rounds {', '.join(drift_ids) or 'none'})."
    return text


def main(argv: list[str] | None = None) -> int:
    """Writes a generated scenario to --out or stdout; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m simulator.generate",
        description="Generate a synthetic schema-1 scenario from root-cause families.",
        epilog="examples:\n  python -m simulator.generate --rounds 1000 --seed 3 --out /tmp/long.yaml\n"
        "  python -m simulator.generate --lessons --families test --rounds 200 --seed 11 --out lessons.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, required=True, help="number of rounds (>= 1)")
    parser.add_argument(
        "--lessons",
        action="store_true",
        help="write a lesson scenario (site-specific lessons, red herrings, drift, causal chains, "
        "paraphrased wording; see simulator.lessons)",
    )
    parser.add_argument(
        "--families",
        choices=("train", "test", "all"),
        default=None,
        help="with --lessons: root-cause families to draw from (default test)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--name", default=None, help="scenario name (default generated-N-sS)")
    parser.add_argument("--out", type=Path, default=None, help="output file (default stdout)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.name is not None and not re.fullmatch(r"[a-z0-9-]+", args.name):
        parser.error("--name must match [a-z0-9-]+")
    if args.families is not None and not args.lessons:
        parser.error("--families needs --lessons")
    refused = output_problem("--out", args.out) if args.out else ""
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    if args.lessons:
        doc = generate_lessons(args.rounds, args.seed, args.families or "test", args.name)
        print(doc["description"].rsplit(". ", 1)[-1], file=sys.stderr)  # the lesson/recurrence word overlap
        text = to_yaml(doc)
    else:
        text = to_yaml(generate(args.rounds, args.seed, args.name))
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        write_atomic(args.out, text)
    except OSError as exc:
        print(f"{args.out}: cannot write: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
