"""Stream orders: a scenario's rounds in the data's order or in a seeded shuffled order.

Self-improving memories are known to gain in one order and lose in others, so a learning
claim is checked in the data's order *and* in shuffled ones. A shuffled order keeps the
scenario's calendar: the k-th round played takes the k-th round's time slot, so time still
runs forward and gaps keep their lengths; only which incident happens when changes. A
`caused_by` link that would point to a later round after shuffling is dropped (the fix it
names has not happened yet).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scenarios import Scenario
from simulator.env import nominal_times

TIME_ORDER = "time"  # the rounds as the file lists them (the data's own order)
SHUFFLED = "shuffled"  # seeded permutations of the rounds
ORDERS = (TIME_ORDER, SHUFFLED)


def order_name(order: str, seed: int | None = None) -> str:
    """The label of an order in names and logs: ``time`` or ``shuffled-<seed>``."""
    return TIME_ORDER if order == TIME_ORDER else f"{SHUFFLED}-{seed}"


def shuffled(scenario: Scenario, seed: int) -> Scenario:
    """The scenario with its rounds in a seeded random order, named ``<name>@shuffled-<seed>``.

    The k-th round played takes the original k-th round's time (its `at`), so the calendar and
    the gaps between rounds are the file's; `caused_by` links to rounds now played later are
    dropped. The same seed always gives the same order.
    """
    times = nominal_times(scenario)
    permutation = np.random.default_rng(seed).permutation(len(scenario.rounds))
    played: set[str] = set()
    rounds = []
    for slot, index in enumerate(permutation):
        original = scenario.rounds[int(index)]
        cause = original.caused_by if original.caused_by in played else None
        rounds.append(replace(original, at=times[slot], after=None, caused_by=cause))
        played.add(original.id)
    return replace(scenario, name=f"{scenario.name}@{order_name(SHUFFLED, seed)}", rounds=tuple(rounds))


def in_orders(scenario: Scenario, orders: tuple[str, ...], order_seeds: int) -> list[Scenario]:
    """The scenario in each requested order: as given for ``time``, `order_seeds` shuffles (seeds 0..N-1) for
    ``shuffled``."""
    played = []
    for order in orders:
        if order == TIME_ORDER:
            played.append(scenario)
        else:
            played.extend(shuffled(scenario, seed) for seed in range(order_seeds))
    return played
