"""A lesson's growing evidence is read by its fast paths exactly as by its plain definitions.

A lesson's support grows with the memory, and the episodes a new lesson's condition matches do
too, so `update_lesson` keeps sorted ids by binary search and `learn_lesson` first counts its
history in the evidence log's columns (`EvidenceLog.resolved_counts`). Each is checked here
against the definition it replaces: a set sorted again, a loop over every matching episode.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.episodes import Outcome
from memory.facts import EpisodeEvidence, EvidenceLog, learn_lesson, update_lesson
from tests.builders import T0

TERMS = ["relay", "batch", "ledger", "lock", "queue", "depth", "redeploy"]
CHOICES = ["ledger_lock", "queue_backlog", "disk_full"]
OUTCOMES = [Outcome.SUCCESS, Outcome.FAILURE, Outcome.PARTIAL]

items = st.lists(
    st.tuples(
        st.frozensets(st.sampled_from(TERMS)),  # terms
        st.frozensets(st.sampled_from(TERMS)),  # affirmed (not always within the terms)
        st.sampled_from(CHOICES),
        st.sampled_from(OUTCOMES),
    ),
    max_size=40,
)


def _log(drawn) -> EvidenceLog:
    return EvidenceLog(
        EpisodeEvidence(f"ep-{i:03d}", "team", seen, choice, outcome, T0 + timedelta(hours=i), affirmed=affirmed)
        for i, (seen, affirmed, choice, outcome) in enumerate(drawn)
    )


def _plain_counts(log, condition, choice, excluding):
    resolved = [
        ev
        for ev in log
        if ev.outcome is Outcome.SUCCESS
        and ev.episode_id != excluding
        and set(condition) <= ev.terms
        and set(condition) <= ev.affirmed
    ]
    return sum(ev.choice == choice for ev in resolved), sum(ev.choice != choice for ev in resolved)


@settings(max_examples=30, deadline=None)
@given(items, st.frozensets(st.sampled_from(TERMS), max_size=3), st.sampled_from(CHOICES), st.integers(0, 45))
def test_resolved_counts_are_the_counts_of_a_scan(drawn, condition, choice, excluded):
    log = _log(drawn)
    excluding = f"ep-{excluded:03d}"
    assert log.resolved_counts(condition, choice, excluding=excluding) == _plain_counts(
        log, condition, choice, excluding
    )


def test_a_log_holding_an_episode_twice_gives_no_counts():
    relay = frozenset({"relay"})
    once = EpisodeEvidence("ep-1", "team", relay, "ledger_lock", Outcome.SUCCESS, T0, affirmed=relay)
    assert EvidenceLog([once]).resolved_counts(["relay"], "ledger_lock", excluding="x") == (1, 0)
    assert EvidenceLog([once, once]).resolved_counts(["relay"], "ledger_lock", excluding="x") is None


INCIDENT_SYMPTOMS = ("checkout: queue depth above 900", "The batch relay was redeployed shortly before")


def _incident(
    episode="ep-new", resolution="ledger_lock", corrections=("it was the ledger lock, set off by the batch relay",)
):
    from memory.facts.lessons import LessonIncident

    return LessonIncident(
        episode,
        "team",
        INCIDENT_SYMPTOMS,
        corrections,
        ("queue_backlog",),
        resolution,
        "checkout",
        T0 + timedelta(days=9),
    )


@settings(max_examples=30, deadline=None)
@given(items)
def test_a_lesson_counted_in_columns_is_the_lesson_read_one_by_one(drawn):
    log = _log(drawn)
    history = lambda condition: (log[p] for p in log.matching(condition))  # noqa: E731
    counted = lambda condition, choice: log.resolved_counts(condition, choice, excluding="ep-new")  # noqa: E731
    read = learn_lesson(_incident(), {}, history)
    assert learn_lesson(_incident(), {}, history, tally=counted) == read


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.text("0123456789abcdef", min_size=1, max_size=4), max_size=30), st.text("0123456789abcdef", max_size=4)
)
def test_a_confirmation_adds_its_episode_to_the_sorted_support(support, episode):
    lesson = learn_lesson(_incident(episode="ep-first"), {})
    assert lesson is not None
    ids = tuple(sorted(set(support)))
    grown = replace(lesson, support=ids)
    again = _incident(episode=episode, corrections=())
    confirmed = update_lesson(grown, again, lambda: [])
    if episode in ids:  # an episode counts once: nothing new
        assert confirmed is None
    else:
        assert confirmed is not None and confirmed.support == tuple(sorted({*ids, episode}))
