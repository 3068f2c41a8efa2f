"""Stream orders: shuffled orders keep the calendar, are seeded, and drop links to rounds not yet played."""

from hypothesis import given, settings
from hypothesis import strategies as st

import scenarios
from simulator.env import nominal_times
from simulator.orders import in_orders, shuffled

DOC = """
schema: 1
name: orders
start: 2026-03-01T09:00:00Z
root_causes:
  a: {description: component a fails}
  b: {description: component b fails}
rounds:
""" + "".join(
    f"""  - id: r{i}
    kind: k
    service: web
    after: {i + 1}h
    observations: [symptom {i}]
    truth: {"a" if i % 2 else "b"}
{"    caused_by: r0" + chr(10) if i == 3 else ""}"""
    for i in range(6)
)

SCENARIO = scenarios.loads(DOC)


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=0, max_value=10_000))
def test_a_shuffle_is_a_permutation_on_the_same_calendar(seed):
    played = shuffled(SCENARIO, seed)
    assert sorted(r.id for r in played.rounds) == sorted(r.id for r in SCENARIO.rounds)
    assert nominal_times(played) == nominal_times(SCENARIO)
    assert played.name == f"orders@shuffled-{seed}"
    ids = [r.id for r in played.rounds]
    for r in played.rounds:  # a caused_by link survives only when its round was played before
        if r.caused_by is not None:
            assert ids.index(r.caused_by) < ids.index(r.id)
    assert shuffled(SCENARIO, seed) == played


def test_orders_requested():
    assert in_orders(SCENARIO, ("time",), 3) == [SCENARIO]
    both = in_orders(SCENARIO, ("time", "shuffled"), 3)
    assert [s.name for s in both] == ["orders", "orders@shuffled-0", "orders@shuffled-1", "orders@shuffled-2"]
    assert len({tuple(r.id for r in s.rounds) for s in both}) == 4  # three different permutations here


def test_link_to_a_later_round_is_dropped():
    seeds = [
        seed
        for seed in range(50)
        if [r.id for r in shuffled(SCENARIO, seed).rounds].index("r3")
        < [r.id for r in shuffled(SCENARIO, seed).rounds].index("r0")
    ]
    assert seeds, "some shuffle plays r3 before r0"
    assert shuffled(SCENARIO, seeds[0]).round("r3").caused_by is None
