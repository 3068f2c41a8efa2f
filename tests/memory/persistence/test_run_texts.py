"""Problem texts of an opened store come from its state runs, which keep them compressed and decode one run's
at a time (`memory.persistence.lazy.RunTexts`): read in any order, they are the texts an exact open computes."""

import random

from memory import EpisodicMemory
from memory.persistence import Persistence
from memory.persistence import runs as snapshot
from tests.memory.persistence.test_open_snapshot import opened


def test_problem_texts_read_in_any_order_from_several_runs_are_the_exact_ones(tmp_path, played):
    path = played(tmp_path / "m.sqlite", 60)
    exact = Persistence(use_runs=False, open_run_min=10**9)
    with EpisodicMemory(path, principal="p0", persistence=exact) as memory:
        expected = {i: memory.state.problems[i].text for ids in memory.state.order.values() for i in ids}
        evidence = list(memory.state.evidence.get("p0"))
    with opened(path) as memory:
        state = memory.state
        runs = {id(run) for i in expected if isinstance(run := state.problems.source(i), snapshot.Run)}
        assert len(runs) > 2
        ids = list(expected)
        random.Random(7).shuffle(ids)  # rows of one run, then of another, then of the first again
        assert {i: state.problem_text(i) for i in ids} == expected
        assert list(state.evidence.get("p0")) == evidence  # texts read in storing order
        assert all(state.problems[i].text == expected[i] for i in reversed(ids))
