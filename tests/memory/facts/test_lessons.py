"""Lessons: learned from one correction, applied on a full affirmed match, confirmed, narrowed, revised, retired."""

from __future__ import annotations

from datetime import timedelta
from hashlib import sha256

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.episodes import Outcome
from memory.facts import (
    ACTIVE,
    LESSON,
    EpisodeEvidence,
    FactVersion,
    Wording,
    affirmed_lines,
    learn_lesson,
    lesson_applies,
    update_lesson,
)
from memory.facts.lessons import LessonIncident, describe_lesson, lesson_wording, rejected_choices
from memory.retrieval.incidents import closeness
from memory.retrieval.ranking import applicable_facts
from memory.text import _line_terms, affirmed_clauses, normalize_term, observed_terms, term_wording, terms
from tests.builders import T0

LESSON_SYMPTOMS = (
    "checkout: queue depth above 900 reported by 40 hosts",
    "The batch relay was redeployed shortly before",
)


def incident(
    symptoms=LESSON_SYMPTOMS,
    corrections=("Review: it was not the queue; it was the ledger lock, set off by the batch relay",),
    failed=("queue_backlog",),
    resolution="ledger_lock",
    episode="ep-1",
    minutes=0,
):
    return LessonIncident(
        episode,
        "team",
        tuple(symptoms),
        tuple(corrections),
        tuple(failed),
        resolution,
        "checkout",
        T0 + timedelta(minutes=minutes),
    )


def test_a_correction_teaches_the_detail_it_points_at():
    lesson = learn_lesson(incident(), rarity={})
    assert lesson is not None and lesson.kind == LESSON and lesson.status == ACTIVE
    assert lesson.condition == ("batch", "relay") and lesson.conclusion == "ledger_lock"
    assert rejected_choices(lesson) == ("queue_backlog",)
    assert 0.6 < lesson.confidence < 0.7  # one correction: a low confidence
    assert learn_lesson(incident(corrections=()), rarity={}) is None  # no correction, no lesson
    assert learn_lesson(incident(failed=()), rarity={}) is None  # right first time: nothing to learn


def test_words_for_a_look_are_advice_not_a_telling_detail():
    seen = incident(
        symptoms=(
            "checkout: queue depth above 900 reported by 40 hosts",
            "While checking the racks we found the batch relay breaker tripped",
        ),
        corrections=(
            "Not the queue: the batch relay breaker had tripped. When the queue grows, "
            "check the relay before the queue",
        ),
    )
    lesson = learn_lesson(seen, rarity={})
    assert lesson is not None and lesson.condition == ("batch", "breaker", "relay", "tripp")
    assert "check" not in lesson.condition


def test_one_shared_word_is_not_a_telling_detail():
    """ "The cold washes left it dirty" shares only "wash" with the symptoms: a coincidence of words, no lesson."""
    assert learn_lesson(incident(corrections=("it was the ledger lock, see the queue",)), rarity={}) is None
    assert learn_lesson(
        incident(corrections=("it was the ledger lock, see the queue depth",)), rarity={}
    ).condition == ("depth", "queue")


def test_the_answer_s_own_name_is_not_a_telling_detail():
    """A correction naming the component at fault shares its name with the line reporting that component's
    own metric: "when the petInfo table shows up, it is the petInfo table" restates the answer."""
    named = incident(
        symptoms=(
            "PetSite latency anomalous",
            "petInfo DynamoDB table: latency 2.1x its normal level (28 ms vs 13 ms)",
        ),
        corrections=("The root cause was the petInfo DynamoDB table (petinfo_dynamodb_table)",),
        resolution="petinfo_dynamodb_table",
    )
    assert learn_lesson(named, rarity={}) is None
    # what the correction says beyond the name still teaches a lesson
    told = named._replace(
        symptoms=(*named.symptoms, "petInfo DynamoDB table throttled writes after the capacity cut"),
        corrections=("The root cause was the petInfo DynamoDB table: throttled writes after the capacity cut",),
    )
    lesson = learn_lesson(told, rarity={})
    assert lesson is not None and len(set(lesson.condition) - {"petinfo", "dynamodb", "table"}) >= 2, lesson
    # the name alone with one more shared word is still no telling detail
    one_more = named._replace(corrections=("The root cause was the petInfo DynamoDB table, its latency",))
    assert learn_lesson(one_more, rarity={}) is None


def test_a_lesson_applies_only_where_its_detail_is_affirmed():
    lesson = learn_lesson(incident(), rarity={})
    assert lesson_applies(lesson, affirmed_lines(["Someone says the batch relay restarted an hour ago"]))
    for ruled_out in (
        "The batch relay has not been touched in weeks",
        "Nothing changed on the batch relay",
        "The batch relay is steady, no restarts for days",
        "the relay restarted; batch sizes normal",
    ):
        assert not lesson_applies(lesson, affirmed_lines([ruled_out])), ruled_out
    assert affirmed_clauses("disk at 95%, no lock waits") == "disk at 95%"


def test_a_detail_earlier_incidents_showed_with_other_causes_makes_no_lesson():
    seen = [
        EpisodeEvidence(
            f"old-{i}",
            "team",
            terms("batch relay busy"),
            "queue_backlog",
            Outcome.SUCCESS,
            T0,
            affirmed=terms("batch relay busy"),
        )
        for i in range(2)
    ]
    assert learn_lesson(incident(), rarity={}, history=lambda condition: seen) is None
    one = seen[:1] + [
        EpisodeEvidence(
            "old-2", "team", terms("batch relay"), "ledger_lock", Outcome.SUCCESS, T0, affirmed=terms("batch relay")
        )
    ]
    lesson = learn_lesson(incident(), rarity={}, history=lambda condition: one)
    assert lesson is not None and lesson.support == ("ep-1", "old-2") and lesson.contradict == ("old-0",)


def test_confirmed_then_narrowed_then_revised_with_history():
    lesson = learn_lesson(incident(), rarity={})
    again = ("payments: queue depth high", "A restart of the batch relay shows up right before the alerts")
    confirmed = update_lesson(lesson, incident(again, (), (), "ledger_lock", "ep-2", 60), lambda: 1 / 0)
    assert confirmed.version == 2 and confirmed.confidence > lesson.confidence and "ep-2" in confirmed.support
    odd = ("search: queue depth high", "The batch relay was bounced during the canary drill")
    asked = []
    narrowed = update_lesson(
        confirmed,
        incident(odd, (), (), "queue_backlog", "ep-3", 120),
        lambda: asked.append(1) or [terms(" ".join(LESSON_SYMPTOMS)), terms(" ".join(again))],
    )
    assert asked == [1]  # the supporting incidents are read only to narrow (a confirmation did not ask for them)
    assert narrowed.status == ACTIVE and {"canary", "drill"} <= set(narrowed.unless)
    assert not lesson_applies(narrowed, affirmed_lines(odd)) and lesson_applies(narrowed, affirmed_lines(again))
    drift = incident(
        again,
        ("This time it really was the queue; the batch relay was fixed and is no longer the trigger",),
        ("ledger_lock",),
        "queue_backlog",
        "ep-4",
        180,
    )
    revised = update_lesson(narrowed, drift, [])
    assert revised.conclusion == "queue_backlog" and rejected_choices(revised) == ("ledger_lock",)
    assert revised.support == ("ep-4",) and revised.since == drift.at and revised.reason.startswith("revised")
    assert update_lesson(revised, drift, []) is None  # an incident counts once


def test_a_lesson_reads_in_the_observations_words_through_every_version():
    """The condition matches on normalized terms ("tripp", "shar"); its text says what the incident said."""
    seen = incident(
        symptoms=(
            "checkout: queue depth above 900 reported by 40 hosts",
            "The shared Batch Relay breaker TRIPPED at 02:10",
        ),
        corrections=("Not the queue: the shared batch relay breaker had tripped",),
    )
    lesson = learn_lesson(seen, rarity={})
    assert lesson.condition == ("batch", "breaker", "relay", "shar")  # "tripp" is one term too many (four at most)
    assert lesson.wording == Wording(("Batch", "breaker", "Relay", "shared"))
    assert (
        lesson.text == "when an observation affirms Batch + breaker + Relay + shared → ledger_lock, not queue_backlog"
    )
    assert FactVersion.from_record(lesson.to_record()) == lesson
    again = ("payments: queue depth high", "the shared batch relay breaker opened again")
    confirmed = update_lesson(lesson, incident(again, (), (), "ledger_lock", "ep-2", 60), lambda: [])
    assert confirmed.version == 2 and confirmed.wording == lesson.wording and confirmed.text == lesson.text
    odd = ("search: queue depth high", "The shared batch relay breaker tripped during the Canary Drills")
    narrowed = update_lesson(
        confirmed,
        incident(odd, (), (), "queue_backlog", "ep-3", 120),
        lambda: [terms(" ".join(seen.symptoms)), terms(" ".join(again))],
    )
    assert narrowed.unless == ("canary", "drill") and narrowed.wording == Wording(
        lesson.wording.condition, ("Canary", "Drills")
    )
    assert narrowed.text.startswith(
        "when an observation affirms Batch + breaker + Relay + shared (unless it also "
        "says Canary or Drills) → ledger_lock"
    )
    assert FactVersion.from_record(narrowed.to_record()) == narrowed
    assert narrowed.condition_words == lesson.wording.condition  # the exceptions' words are not the condition's
    why = applicable_facts(terms(again[1]), [narrowed], "team", min_match=0.5, limit=3, lines=affirmed_lines(again))[
        0
    ].why
    assert why.startswith("an observation affirms Batch, breaker, Relay, shared (a lesson)")
    old = {k: v for k, v in lesson.to_record().items() if k != "wording"}  # a record written before the wording
    assert FactVersion.from_record(old).wording == Wording() and FactVersion.from_record(old).text == lesson.text
    assert (
        describe_lesson(lesson.condition, "ledger_lock", ["queue_backlog"], ["drill"])
        == "when an observation affirms batch + breaker + relay + shar (unless it also says drill) → ledger_lock, "
        "not queue_backlog"
    )


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_the_wording_of_a_text_has_exactly_its_terms_each_as_written(text):
    wording = term_wording(text)
    assert set(wording) == terms(text)
    assert all(word in text and normalize_term(word) == term for term, word in wording.items())


def test_a_term_whose_word_lower_casing_made_has_no_wording_and_the_terms_stand():
    text = "the \u212aelvin probe drifted"  # KELVIN SIGN lower-cases to an ASCII k: terms see "kelvin"
    assert "kelvin" in terms(text) and "kelvin" not in term_wording(text)
    assert lesson_wording(("kelvin", "probe"), [text]) == ()
    assert lesson_wording(("kelvin", "probe"), [text], known={"kelvin": "Kelvin"}) == ("Kelvin", "probe")


def test_a_failed_try_whose_correction_names_the_detail_retires_the_lesson():
    lesson = learn_lesson(incident(), rarity={})
    unsolved = incident(
        ("orders: queue depth high", "the batch relay was redeployed"),
        ("The batch relay got repaired; not the ledger lock anymore",),
        ("ledger_lock",),
        None,
        "ep-5",
        60,
    )
    retired = update_lesson(lesson, unsolved, [])
    assert retired.status == "retired" and retired.contradict == ("ep-5",)
    plain = unsolved._replace(corrections=(), episode_id="ep-6")
    assert update_lesson(lesson, plain, []).status == ACTIVE  # a failure alone only counts against it


def test_closeness_is_negation_aware_and_weighs_telling_terms():
    even = lambda term: 1.0  # noqa: E731
    now = ["queue depth high", "the batch relay was redeployed"]
    assert closeness(now, ["queue depth high", "batch relay redeployed"], even) > closeness(
        now, ["queue depth high", "the batch relay has not been redeployed"], even
    )
    telling = lambda term: 5.0 if term in ("batch", "relay") else 1.0  # noqa: E731
    assert closeness(now, ["batch relay redeployed"], telling) > closeness(now, ["queue depth high"], telling)


@pytest.mark.xfail(
    strict=True,
    reason=(
        "not met on the marker-free lesson generator (c136b10), whose recurrences share no phrase of more than two "
        "words with their lesson: 4 of 12 recurrences here; 50.0 % of 160 on four 100-round test-family files "
        "(docs/experiments.md). It held at >= 0.8 only while every recurrence repeated its lesson's marker phrase"
    ),
)
def test_a_taught_lesson_is_applied_to_reworded_recurrences_on_unseen_families():
    import scenarios
    from agent.agents import EpisodicAgent
    from agent.heuristic import HeuristicReasoner
    from eval.runner import play
    from memory.agent_memory import EpisodicMemory
    from simulator.generate import to_yaml
    from simulator.lessons import generate_lessons

    scenario = scenarios.loads(to_yaml(generate_lessons(40, seed=7, families="test")))
    with EpisodicMemory() as memory:
        rounds = play(scenario, 0, EpisodicAgent(HeuristicReasoner(), memory)).rounds
        lessons = [f for f in memory.facts("agent") if f.kind == LESSON]
    recurrences = [r.first_correct for r in rounds if r.kind == "lesson_recur"]
    controls = [r.first_correct for r in rounds if r.kind in ("plain", "red_herring", "caused")]
    assert len(recurrences) >= 10 and sum(recurrences) / len(recurrences) >= 0.8  # the runbook gets 0 of them
    assert sum(controls) / len(controls) >= 0.9  # lessons are not applied where they do not hold
    assert lessons and all(rejected_choices(f) for f in lessons)


def _incidents(memory, plan, *, situation="s", candidates=()):
    """Record one incident per (favoured, tries): each attempt a decision with its favourites (and the n-th
    incident's candidate count, `candidates[n]`, where given), its outcome and, when it failed, a correction
    naming the last try."""
    clock = T0
    for n, (favoured, tries) in enumerate(plan):
        offered = {"candidates": candidates[n]} if n < len(candidates) else {}
        clock += timedelta(days=1)
        memory.observe("queue depth high", timestamp=clock, situation=situation)
        for attempt, choice in enumerate(tries, start=1):
            clock += timedelta(minutes=5)
            memory.decide(
                f"Decision: {choice}",
                choice=choice,
                timestamp=clock,
                situation=situation,
                metadata={"attempt": attempt, "favoured": favoured, **offered},
            )
            ok = choice == tries[-1]
            memory.outcome(
                "gone" if ok else "no change",
                status="success" if ok else "failure",
                timestamp=clock + timedelta(minutes=1),
                situation=situation,
            )
            if not ok:
                memory.correct(f"it was {tries[-1]}", timestamp=clock + timedelta(minutes=2), situation=situation)
    memory.flush()


def test_the_evidence_record_counts_first_attempt_favourites_against_the_final_fix():
    from memory.agent_memory import EpisodicMemory
    from memory.calibration import TrackRecord

    with EpisodicMemory() as memory:
        record = TrackRecord(memory, "default")
        _incidents(memory, [({"prior": "a", "facts|lesson": "b"}, ["a", "b"]), ({"prior": "c"}, ["c"])])
        memory.store.entry_parts = None  # the count reads decisions' metadata only: no text, no vector
        # (hits, misses, hits chance would have scored where the candidate count is known, how many those were)
        assert record.update() == {"prior": (1, 1, 0.0, 0), "facts|lesson": (1, 0, 0.0, 0)}
        assert record.update() == {"prior": (1, 1, 0.0, 0), "facts|lesson": (1, 0, 0.0, 0)}  # each episode once


def test_the_record_keeps_what_chance_would_have_scored_among_the_candidates_offered():
    from memory.agent_memory import EpisodicMemory
    from memory.calibration import TrackRecord

    with EpisodicMemory() as memory:
        record = TrackRecord(memory, "default")
        _incidents(
            memory, [({"prior": "a"}, ["a"]), ({"prior": "c"}, ["d"]), ({"prior": "e"}, ["e"])], candidates=[4, 2]
        )
        # three first attempts counted, two of them with their candidate count: chance scores 1/4 + 1/2 of them
        assert record.update() == {"prior": (2, 1, 0.75, 2)}


def test_an_opened_store_counts_its_evidence_record_from_its_runs_without_reading_an_episode(tmp_path, monkeypatch):
    from memory.agent_memory import EpisodicMemory
    from memory.calibration import TrackRecord
    from memory.persistence import Persistence
    from memory.persistence import runs as snapshot
    from memory.timeline import RecordKind

    plan = [({"prior": ("a", "c")[n % 2], "memory": "b"}, [["a", "b"], ["c"], ["b", "c"]][n % 3]) for n in range(14)]
    small = Persistence(run_episodes=8, open_run_min=2)
    with EpisodicMemory(tmp_path / "m.sqlite", persistence=small) as live:
        _incidents(live, plan)
        expected = TrackRecord(live, "default").update()
    assert sum(hits + misses for hits, misses, *_ in expected.values()) == 28  # two kinds, one first attempt each
    with EpisodicMemory(tmp_path / "m.sqlite", persistence=small):
        pass  # runs cover every episode from here on
    with EpisodicMemory(tmp_path / "m.sqlite", persistence=small) as reopened:
        assert reopened.stored.covered == reopened.store.last_record()
        read, decoded = [], []
        original = reopened.store.record
        reopened.store.record = lambda kind, i: read.append(kind) or original(kind, i)
        document = snapshot.Run._document
        monkeypatch.setattr(snapshot.Run, "_document", lambda run, name: decoded.append(name) or document(run, name))
        assert TrackRecord(reopened, "default").update() == expected
        assert RecordKind.EPISODE.value not in read and RecordKind.EPISODE not in read
        assert "texts" not in decoded  # verdicts only: the problem texts stay packed


def test_equally_scored_lessons_come_in_the_same_order_whatever_the_principal_is_called():
    """A replay runs under another principal name; the facts it is shown must keep their order."""

    line = terms("the batch relay was redeployed while the ledger lock queue depth grew")
    orders = []
    for principal in [f"team-run-{n}" for n in range(12)]:
        made = [
            learn_lesson(incident(corrections=(text,)), rarity={})
            for text in (
                "it was the ledger lock, set off by the batch relay",
                "it was the ledger lock, see the queue depth",
            )
        ]
        facts = [
            lesson.__class__(
                **{
                    **lesson.__dict__,
                    "principal": principal,
                    "fact_id": sha256(f"{principal}{lesson.condition}".encode()).hexdigest(),
                }
            )
            for lesson in made
        ]
        found = applicable_facts(line, facts, principal, min_match=0.5, limit=3, lines=[line])
        assert len(found) == 2 and found[0].score == found[1].score
        orders.append([r.fact.condition for r in found])
    assert all(order == orders[0] for order in orders)


def _lessons_after(history: list[str]) -> list[tuple[str, ...]]:
    """Conditions of the lessons a memory holds after resolved `history` lines, then one corrected incident."""
    from memory.agent_memory import EpisodicMemory

    with EpisodicMemory() as memory:
        clock = T0
        for n, line in enumerate(history):
            clock += timedelta(days=1)
            memory.observe(line, timestamp=clock, situation="s")
            memory.decide(
                f"Decision: cause_{n}", choice=f"cause_{n}", timestamp=clock + timedelta(minutes=5), situation="s"
            )
            memory.outcome("gone", status="success", timestamp=clock + timedelta(minutes=6), situation="s")
        clock += timedelta(days=1)
        memory.observe(
            "Drawer failed to open on drawers 2 and 3 of the surgical cabinet", timestamp=clock, situation="s"
        )
        memory.decide(
            "Decision: drawer_fault", choice="drawer_fault", timestamp=clock + timedelta(minutes=5), situation="s"
        )
        memory.outcome("no change", status="failure", timestamp=clock + timedelta(minutes=6), situation="s")
        memory.correct(
            "Not the drawers: the supply switch makes every cabinet drawer fail together",
            timestamp=clock + timedelta(minutes=7),
            situation="s",
        )
        memory.decide("Decision: power", choice="power", timestamp=clock + timedelta(minutes=10), situation="s")
        memory.outcome("gone", status="success", timestamp=clock + timedelta(minutes=11), situation="s")
        memory.flush()
        return [f.condition for f in memory.facts() if f.kind == LESSON]


def test_a_term_most_episodes_affirm_tells_no_incident_apart_and_makes_no_lesson():
    assert _lessons_after([]) == [("cabinet", "fail")]  # nothing seen before: both words may be telling
    everywhere = [
        "The ward cabinet shows a fridge alarm",
        "Count discrepancy on a cabinet pocket",
        "Fingerprint sign-in rejected at the cabinet",
        "Orders missing on the oncology cabinet",
    ]
    assert _lessons_after(everywhere) == []  # every incident here is at a cabinet; "fail" alone is one word
    elsewhere = [
        "Fridge alarm on ward 5",
        "Count discrepancy on a pocket",
        "Fingerprint sign-in rejected",
        "Orders missing for ward 3",
    ]
    assert _lessons_after(elsewhere) == [("cabinet", "fail")]


# pieces of alert text: letters, figures, punctuation, line breaks, negations, a Kelvin sign (it
# lower-cases to "k"), a no-break space and words with figures inside
ALERT_TEXT = st.lists(
    st.sampled_from(
        [
            *"ab kz0159\n,.;:-_%\u00e9\u212a\u00a0",
            "not ",
            "no ",
            " but ",
            "normal",
            "pod7 ",
            "DB: ",
            "K5 ",
            "x86 ",
            "v2.14.0",
            "Timeout ",
        ]
    ),
    max_size=40,
).map("".join)


@given(ALERT_TEXT)
def test_observed_terms_read_line_by_line_equal_the_whole_text(text):
    """Reading each line once per shape (free numbers set to 0) gives the terms of the text itself."""
    assert observed_terms(text) == (terms(text), terms(affirmed_clauses(text)))


def test_lines_that_differ_only_in_figures_are_read_once():
    _line_terms.cache_clear()
    first = observed_terms("pod-7 at 93% memory\nqueue depth 1200, not draining")
    again = observed_terms("pod-7 at 41% memory\nqueue depth 88, not draining")
    assert first == again == (terms("pod memory queue depth draining"), terms("pod memory queue depth"))
    assert _line_terms.cache_info().hits == 2  # both lines of the second text had been read
    assert observed_terms("pod7 memory")[0] == {"pod7", "memory"} != observed_terms("pod8 memory")[0]  # part of a word
