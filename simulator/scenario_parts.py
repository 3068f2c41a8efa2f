"""What both scenario writers (`simulator.generate`, `simulator.lessons`) put in a scenario alike:
its start time and the interludes between rounds, drawn from `simulator.families`."""

from __future__ import annotations

import numpy as np

from simulator import families as fam

START = "2026-01-05T09:00:00Z"


def interludes(rng: np.random.Generator, count: int) -> list[dict]:
    """`count` interludes (a situation and one or two of its event texts on a drawn service), drawn from `rng`."""
    situations = list(fam.INTERLUDES)
    out = []
    for _ in range(count):
        situation = situations[int(rng.integers(len(situations)))]
        texts = fam.INTERLUDES[situation]
        n = int(rng.integers(1, 3))
        svc = fam.SERVICES[int(rng.integers(len(fam.SERVICES)))]
        picks = rng.choice(len(texts), size=min(n, len(texts)), replace=False)
        out.append({"situation": situation, "events": [texts[int(k)].format(svc=svc) for k in picks]})
    return out
