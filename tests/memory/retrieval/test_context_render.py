"""`Context.render`: past incidents as units (symptoms, attempts with outcomes, corrections, final fix), cut
only between items, within the budget."""

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.episodes import Outcome
from memory.retrieval import Context, IncidentNote, RecalledEpisode, ScoreParts
from tests.builders import episode

SCORE = ScoreParts(relevance=0.6, recency=0.8, situation=1.0, outcome=1.0, graph=0.0, total=0.7)
SYMPTOMS = ("queue depth 40k and growing", "consumers idle")


def _recalled(ep, total=0.7):
    return RecalledEpisode(ep, ScoreParts(**{**SCORE.__dict__, "total": total}), f"why {ep.id}")


def _context(*recalled, show_outcomes=True):
    return Context(
        query="q",
        principal="p",
        situation="ops",
        episodes=tuple(recalled),
        facts=(),
        chains=(),
        show_outcomes=show_outcomes,
    )


FAILED = episode(
    "first",
    Outcome.FAILURE,
    "prefetch_limit",
    hours=1,
    corrections=("It was the broker quota",),
    summary="queue depth 40k and growing → Decision: prefetch_limit → Lag unchanged after the change",
    observations=SYMPTOMS,
)
FIXED = episode(
    "retry",
    Outcome.SUCCESS,
    "broker_quota",
    hours=2,
    summary="Decision: broker_quota → Quota raised; queue drained in ten minutes",
)
OTHER = episode(
    "other",
    Outcome.SUCCESS,
    "disk",
    hours=5,
    summary="disk full → Decision: disk → Freed 40 GB",
    observations=("disk full",),
)
NOTES = {
    "first": IncidentNote("\n".join(SYMPTOMS), SYMPTOMS, "broker_quota"),
    "retry": IncidentNote("\n".join(SYMPTOMS), SYMPTOMS, "broker_quota"),
}


def test_the_attempts_at_one_problem_render_as_one_incident_in_time_order():
    # the retry ranks first, the failed attempt last: they still come together, oldest first
    text = _context(_recalled(FIXED, 0.9), _recalled(OTHER, 0.8), _recalled(FAILED, 0.5)).render(notes=NOTES)
    assert text.split("\n\n")[0] == "\n".join(
        [
            "Past incident 1: 2026-03-02 ops, svc (2 attempts, final fix: broker_quota)",
            "  Symptom: queue depth 40k and growing",
            "  Symptom: consumers idle",
            "  Attempt [first] 2026-03-02 10:00: tried prefetch_limit, outcome FAILURE",
            "    Result: Lag unchanged after the change",
            "    Correction: It was the broker quota",
            "  Attempt [retry] 2026-03-02 11:00: tried broker_quota, outcome SUCCESS",
            "    Result: Quota raised; queue drained in ten minutes",
            "  Why recalled: why retry",
        ]
    )
    assert text.split("\n\n")[1].startswith("Past incident 2: 2026-03-02 ops, svc (final fix: disk)")


def test_an_incident_memory_hands_over_whole_shows_every_attempt_and_cites_the_recalled_one():
    whole = {"retry": IncidentNote("k", SYMPTOMS, "broker_quota", episodes=(FAILED, FIXED))}
    text = _context(_recalled(FIXED)).render(notes=whole)
    assert "  Attempt 2026-03-02 10:00: tried prefetch_limit, outcome FAILURE" in text  # not recalled: no id
    assert "    Correction: It was the broker quota" in text
    assert "  Attempt [retry] 2026-03-02 11:00: tried broker_quota, outcome SUCCESS" in text
    assert text.startswith("Past incident 1: 2026-03-02 ops, svc (2 attempts, final fix: broker_quota)")


def test_without_notes_each_episode_is_its_own_incident_and_hidden_outcomes_stay_hidden():
    text = _context(_recalled(FAILED), _recalled(FIXED), show_outcomes=False).render()
    assert text.count("Past incident") == 2 and "outcome" not in text and "final fix" not in text
    assert "  Symptom: consumers idle" in text  # the episode's own observations


def test_an_incident_that_does_not_fit_keeps_whole_attempts_and_never_only_its_head():
    context = _context(_recalled(FAILED), _recalled(FIXED))
    whole = context.render(notes=NOTES)
    cut = whole.index("  Attempt [retry]")
    assert context.render(cut, notes=NOTES) == whole[: cut - 1]  # the first attempt, whole
    assert context.render(whole.index("    Result: Lag"), notes=NOTES) == ""  # head alone is not shown


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=900))
def test_render_never_exceeds_the_budget_and_cuts_only_between_items(budget):
    text = _context(_recalled(FIXED), _recalled(OTHER), _recalled(FAILED)).render(budget, notes=NOTES)
    assert len(text) <= budget
    full = _context(_recalled(FIXED), _recalled(OTHER), _recalled(FAILED)).render(notes=NOTES)
    for line in text.split("\n"):
        assert line in full.split("\n")  # no line is cut short


def test_the_episodic_agent_keys_incidents_by_the_problem_each_episode_worked_on():
    from agent.agents import incident_notes
    from agent.reasoner import Evidence

    evidence = [
        Evidence("first", "episode", "t", 0.5, outcome="FAILURE", observations=SYMPTOMS),
        Evidence("retry", "episode", "t", 0.5, outcome="SUCCESS", observations=SYMPTOMS, resolved_as="broker_quota"),
        Evidence("lonely", "episode", "t", 0.5),
        Evidence("f@1", "fact", "when x → y", 0.5),
    ]
    notes = incident_notes(evidence)
    assert set(notes) == {"first", "retry", "lonely"} and notes["first"].key == notes["retry"].key
    assert notes["lonely"].key == "lonely" and notes["retry"].final_fix == "broker_quota"
