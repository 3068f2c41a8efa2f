"""A process killed in the middle of writing derived records: after a reopen, the derived state still
equals `rebuild()` from the timeline (property test over scripts of observe, decide, outcome, correct and
flush calls, killed at the k-th derived-record write)."""

import tempfile
from datetime import timedelta
from pathlib import Path
from unittest import mock

from hypothesis import example, given, settings
from hypothesis import strategies as st

from memory import EpisodicMemory
from memory.timeline import HashingEncoder
from memory.timeline.store import SQLiteStore
from tests.builders import T0

OBSERVATIONS = (
    "orders p99 at 3 s, pool wait timeouts",
    "disk full on db-2",
    "certificate expired on the api gateway",
    "queue depth 40k on payments",
    "dns lookups failing in eu-west",
)
CHOICES = ("pool", "disk", "cert", "queue", "dns")
CORRECTIONS = (
    "it was the pool",
    "not the disk, it was dns",
    "the certificate had expired",
    "queue consumers were down",
    "the resolver was overloaded",
)


class Killed(BaseException):
    """The process dies here (not an Exception: no handler in the write path catches it)."""


def killed_at(write: int):
    """Within it, `SQLiteStore.add_records` raises `Killed` at its `write`-th call (1-based)."""
    original, calls = SQLiteStore.add_records, [0]

    def add_records(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == write:
            raise Killed(f"killed at derived write {write}")
        return original(self, *args, **kwargs)

    return mock.patch.object(SQLiteStore, "add_records", add_records)


def apply(memory, step, minutes):
    action, pick, principal = step
    fields = {"timestamp": T0 + timedelta(minutes=minutes), "situation": "incident", "principal": principal}
    if action == "observe":
        memory.observe(OBSERVATIONS[pick], metadata={"service": f"svc-{principal}"}, **fields)
    elif action == "decide":
        memory.decide(f"Decision: {CHOICES[pick]}", choice=CHOICES[pick], **fields)
    elif action == "outcome":
        memory.outcome(
            "fixed, checked" if pick % 2 else "still failing", status=("failure", "success")[pick % 2], **fields
        )
    elif action == "correct":
        memory.correct(CORRECTIONS[pick], **fields)
    else:
        memory.flush()


steps = st.lists(
    st.tuples(
        st.sampled_from(("observe", "decide", "outcome", "correct", "flush")),
        st.integers(0, len(CHOICES) - 1),
        st.sampled_from(("a", "b")),
    ),
    min_size=3,
    max_size=25,
)
gaps = st.lists(st.sampled_from((1, 2, 30, 200)), min_size=25, max_size=25)


@settings(max_examples=40, deadline=None)
@given(script=steps, gaps=gaps, write=st.integers(1, 40))
# killed after a flush stored its point, before it stored the episodes it closed (one principal; two, the
# second episode's write): the reopened memory must close them at the point
@example(script=[("observe", 0, "a"), ("flush", 0, "a"), ("observe", 1, "a")], gaps=[1] * 25, write=2)
@example(
    script=[("observe", 0, "a"), ("decide", 0, "b"), ("flush", 0, "a"), ("outcome", 1, "b")], gaps=[1] * 25, write=3
)
def test_a_reopened_memory_equals_rebuild_wherever_the_last_process_was_killed(script, gaps, write):
    clock = [sum(gaps[: i + 1]) for i in range(len(script))]
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "m.db")
        done = 0
        try:
            with killed_at(write), EpisodicMemory(path, encoder=HashingEncoder(dim=64)) as memory:
                for step, minutes in zip(script, clock):
                    apply(memory, step, minutes)
                    done += 1
        except Killed:
            pass
        with EpisodicMemory(path, encoder=HashingEncoder(dim=64)) as memory:
            for step, minutes in zip(script[done + 1 :], clock[done + 1 :]):  # the killed call is not repeated
                apply(memory, step, minutes)
            memory.flush()
            assert memory.projection() == memory.rebuild()
