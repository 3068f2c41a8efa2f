"""What told an exception apart: the share of what the round shares with it that the record ties to its fix."""

from datetime import UTC, datetime

from memory.episodes import Outcome
from memory.facts import affirmed_lines
from memory.facts.evidence import EpisodeEvidence, EvidenceLog
from memory.retrieval.incidents import Attempt, Incident, telling
from memory.text import terms

AT = datetime(2026, 3, 1, tzinfo=UTC)
EVEN = lambda term: 1.0  # noqa: E731  every term weighs the same


def _now(lines):
    """The terms the current observation lines affirm (what `telling` is handed)."""
    return set().union(*affirmed_lines(lines))


def _fixed(episode_id, text, choice):
    found = terms(text)
    return EpisodeEvidence(episode_id, "p", found, choice, Outcome.SUCCESS, AT, affirmed=found)


def _incident(symptoms, *attempts):
    steps = tuple(Attempt(f"e{n}", choice, outcome, "", ()) for n, (choice, outcome) in enumerate(attempts))
    fixed = [choice for choice, outcome in attempts if outcome == "SUCCESS"]
    return Incident("e0", "incident", "svc", tuple(symptoms), steps, fixed[0] if fixed else None)


# the lesson: it looked like a full disk (tried, failed); the shim restarting was the tell
LESSON = _incident(["volume full on billing", "authshim restarted"], ("disk_full", "FAILURE"), ("noisy", "SUCCESS"))
LOG = EvidenceLog(
    [
        _fixed("a", "volume full on billing authshim restarted", "noisy"),  # the lesson's fix
        _fixed("b", "volume full on search", "disk_full"),  # an ordinary full disk
    ]
)


def test_the_detail_only_the_exception_had_tells_it_apart_and_the_mimic_s_symptoms_do_not():
    share, told = telling(_now(["volume full on orders", "authshim restarted again"]), LESSON, LOG, EVEN)
    assert set(told) == {"authshim", "restart"} and share == 0.5  # of volume, full, authshim, restart
    assert telling(_now(["volume full on orders"]), LESSON, LOG, EVEN) == (0.0, ())
    # mentioned only as normal: not shared, so it tells nothing
    assert telling(_now(["volume full on orders", "authshim steady, not restarted"]), LESSON, LOG, EVEN) == (0.0, ())


def test_a_detail_the_record_ties_to_the_failed_answer_as_often_tells_nothing():
    log = EvidenceLog([*LOG, _fixed("c", "authshim restarted, volume full", "disk_full")])
    share, told = telling(_now(["volume full on orders", "authshim restarted again"]), LESSON, log, EVEN)
    assert share == 0.0 and told == ()


def test_only_an_exception_is_told_apart():
    plain = _incident(["volume full on search"], ("disk_full", "SUCCESS"))
    assert telling(_now(["volume full on orders"]), plain, LOG, EVEN) == (0.0, ())
    unresolved = _incident(["volume full"], ("disk_full", "FAILURE"))
    assert telling(_now(["volume full"]), unresolved, LOG, EVEN) == (0.0, ())
    assert telling(_now(["volume full", "authshim restarted"]), LESSON, None, EVEN) == (0.0, ())


def test_a_recall_hands_over_how_far_an_exception_was_told_apart():
    from datetime import timedelta

    from memory import EpisodicMemory

    with EpisodicMemory() as memory:
        clock = AT

        def incident(observations, tries, correction=""):
            nonlocal clock
            clock += timedelta(days=1)
            for text in observations:
                memory.observe(text, timestamp=clock, situation="incident", metadata={"service": "svc"})
            for choice in tries:
                clock += timedelta(minutes=5)
                memory.decide(f"Decision: {choice}", choice=choice, timestamp=clock, situation="incident")
                ok = choice == tries[-1]
                status = "success" if ok else "failure"
                memory.outcome("gone" if ok else "no change", status=status, timestamp=clock, situation="incident")
                if not ok:
                    memory.correct(correction, timestamp=clock + timedelta(minutes=1), situation="incident")

        incident(["volume full on search"], ["disk_full"])
        incident(["volume full on billing", "authshim restarted"], ["disk_full", "noisy"], "not the disk: authshim")
        memory.flush()
        recalled = memory.recall(["volume full on orders", "authshim restarted"], situation="incident")
        units = {u.incident.resolution: u for u in recalled.incidents}
        assert units["noisy"].telling > 0 and "authshim" in units["noisy"].telling_terms
        assert units["disk_full"].telling == 0.0  # fixed at the first try: no exception
        assert "telling" in recalled.to_dict()["incidents"][0]
