"""Recall weighs terms by a principal's evidence counted by term (`memory.state.TermCounts`) until learning
builds the evidence log: both answer alike, and an opened store's recall builds no log."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.episodes import Outcome
from memory.facts import EvidenceLog
from memory.graph import GraphConfig
from memory.retrieval import EpisodeIndex
from memory.state import EpisodeProblem, MemoryState, TermCounts
from tests.builders import episode
from tests.builders import evidence as evidence_item
from tests.memory.persistence.test_open_snapshot import QUERIES, opened

WORDS = ["queue", "backlog", "heartbeat", "schema", "checksum", "disk", "latency", "pool"]
CHOICES = ["alpha", "beta", "gamma"]
OUTCOMES = [Outcome.SUCCESS, Outcome.SUCCESS, Outcome.FAILURE, Outcome.PARTIAL, Outcome.UNKNOWN]


def answers(record, terms):
    """Everything recall reads of a principal's evidence."""
    return (
        len(record),
        sorted(record.confirmed()),
        {term: (record.frequency(term), record.resolutions_with(term)) for term in terms},
    )


evidence_items = st.builds(
    lambda i, words, choice, outcome: evidence_item(i, "", choice, outcome, words=words),
    st.integers(0, 40),
    st.sets(st.sampled_from(WORDS), max_size=5),
    st.sampled_from(CHOICES),
    st.sampled_from(OUTCOMES),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(evidence_items, max_size=40))
def test_term_counts_answer_as_the_evidence_log_of_the_same_items(items):
    counts = TermCounts()
    for ev in items:
        counts.add(ev)
    assert answers(counts, [*WORDS, "absent"]) == answers(EvidenceLog(items), [*WORDS, "absent"])


def unit(seed):
    vector = np.random.default_rng(seed).normal(size=8).astype(np.float32)
    return vector / np.linalg.norm(vector)


closed = st.lists(
    st.tuples(
        st.lists(st.sampled_from(WORDS), max_size=4), st.sampled_from([None, *CHOICES]), st.sampled_from(OUTCOMES)
    ),
    max_size=30,
)


@settings(max_examples=40, deadline=None)
@given(closed, st.integers(0, 30))
def test_a_state_counts_its_evidence_until_the_log_is_built_and_then_hands_the_log(episodes, asked):
    """Counted at the `asked`-th close, kept current by the closes after it, equal to the log built at the end."""
    state = MemoryState(EpisodeIndex(8), GraphConfig())
    seen = None
    for n, (words, choice, outcome) in enumerate(episodes):
        if n == asked:
            seen = state.term_counts("p")
        ep = episode(f"e{n:02d}", outcome, choice, hours=n)
        state.index_episode(ep, EpisodeProblem(" ".join(words), unit(n)), ())
    counted = state.term_counts("p")
    assert counted is None if not episodes else isinstance(counted, TermCounts)
    assert seen is None or seen is counted  # kept current, not counted again
    assert not dict.__contains__(state.evidence, "p")  # recall's counts built no log
    log = state.evidence.get("p")
    if episodes:
        assert answers(counted, WORDS) == answers(log, WORDS)
        assert state.term_counts("p") is log


def test_an_opened_store_recalls_without_building_an_evidence_log_and_as_with_one(tmp_path, played):
    path = played(tmp_path / "m.sqlite", 60)

    def recalled(memory):
        return [
            [(u.incident.opener, u.closeness, u.telling, u.telling_terms, u.why) for u in memory.recall(q).incidents]
            for q in QUERIES
        ]

    with opened(path) as memory:
        counted = recalled(memory)
        assert not dict.__contains__(memory.state.evidence, "p0")
        assert isinstance(memory.state.term_counts("p0"), TermCounts)
        memory.state.evidence.get("p0")  # as learning builds it
        assert recalled(memory) == counted
        assert any(near for units in counted for _, near, *_ in units)  # weighed by the counts, then by the log


def test_an_opened_store_adds_up_the_counts_its_runs_stored_and_they_equal_counting_every_episode(tmp_path, played):
    path = played(tmp_path / "m.sqlite", 60)
    with opened(path) as memory:
        state = memory.state
        stored = [found for run in state.counted_runs if (found := run.counted("p0")) is not None]
        assert stored and sum(len(ids) for _, ids in stored) > len(state.order["p0"]) // 2  # most come from runs
        recounted = TermCounts()
        for ev in state._evidence_items("p0", shared=None):
            recounted.add(ev)
        assert state.term_counts("p0").to_plain() == recounted.to_plain()


class _StoredPart:
    """A run that stored counts for some episodes (`memory.state.CountedRun`)."""

    def __init__(self, plain, ids):
        self.plain, self.ids = plain, ids

    def counted(self, principal):
        return (self.plain, self.ids) if principal == "p" else None


def _closed_state(n):
    state = MemoryState(EpisodeIndex(8), GraphConfig())
    for i in range(n):
        ep = episode(f"e{i:02d}", Outcome.SUCCESS, "alpha", hours=i)
        state.index_episode(ep, EpisodeProblem(f"queue backlog {i}", unit(i)), ())
    return state


def test_stored_counts_stand_for_the_episodes_they_name_and_the_others_are_counted():
    state = _closed_state(4)
    every = TermCounts()
    for ev in state._evidence_items("p", shared=None):
        every.add(ev)
    part = {"items": 2, "frequency": {"stored": 2}, "confirming": {"alpha": {"stored": 2}}}
    state.counted_runs.append(_StoredPart(part, ["e00", "e01"]))
    counted = state.term_counts("p")
    assert len(counted) == len(every) and counted.frequency("stored") == 2  # e00, e01 taken as stored
    assert counted.frequency("queue") == every.frequency("queue") - 2  # only e02 and e03 read


def test_stored_counts_naming_an_episode_the_state_lacks_are_set_aside():
    state = _closed_state(4)
    every = TermCounts()
    for ev in state._evidence_items("p", shared=None):
        every.add(ev)
    state.counted_runs.append(_StoredPart({"items": 2, "frequency": {"stored": 2}, "confirming": {}}, ["e00", "gone"]))
    assert state.term_counts("p").to_plain() == every.to_plain()
