"""The heuristic reasoner: prior from world knowledge, outcome-aware evidence, text evidence."""

from dataclasses import replace

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agent.heuristic import HeuristicReasoner
from agent.reasoner import CauseInfo, Evidence, Problem
from memory.text import split_negation, stems

POOL = CauseInfo(
    "pool_exhaustion",
    "A client connection pool is exhausted; requests wait for a connection",
    ("timeout acquiring connection", "pool exhausted"),
)
DEPLOY = CauseInfo(
    "bad_release", "A release shipped a wrong configuration value", ("right after deploy", "new version")
)
REASONER = HeuristicReasoner()


def _problem(*observations, tried=(), feedback=()):
    return Problem(
        observations=observations,
        candidates=(POOL, DEPLOY),
        situation="incident",
        service="svc",
        attempt=1 + len(tried),
        tried=tried,
        feedback=feedback,
    )


def test_prior_follows_signals():
    assert (
        REASONER.decide(_problem("logs: pool exhausted, timeout acquiring connection"), []).choice == "pool_exhaustion"
    )
    assert REASONER.decide(_problem("errors began right after deploy of the new version"), []).choice == "bad_release"


def test_closest_precedent_overrides_surface_similarity():
    problem = _problem("threads wait for a connection after the rollout")
    assert REASONER.decide(problem, []).choice == "pool_exhaustion"
    lesson = Evidence(
        id="ep",
        source="episode",
        text="same symptoms after a rollout",
        relevance=0.9,
        outcome="FAILURE",
        choices=("pool_exhaustion",),
        resolved_as="bad_release",
    )
    routine = Evidence(
        id="old", source="episode", text="pool incident", relevance=0.2, outcome="SUCCESS", choices=("pool_exhaustion",)
    )
    decision = REASONER.decide(problem, [lesson, routine])
    assert decision.choice == "bad_release" and decision.relied_on == ("ep",)
    # the same lesson far away does not outweigh the runbook
    far = Evidence(**{**lesson.__dict__, "relevance": 0.1})
    assert REASONER.decide(problem, [far, routine]).choice == "pool_exhaustion"


def test_agreeing_precedents_add_up_and_a_lone_close_one_counts():
    problem = _problem("threads wait for a connection after the rollout")
    one = [Evidence(id="a", source="episode", text="x", relevance=0.35, outcome="SUCCESS", choices=("bad_release",))]
    three = one + [
        Evidence(id=i, source="episode", text="x", relevance=0.35, outcome="SUCCESS", choices=("bad_release",))
        for i in ("b", "c")
    ]
    assert (
        REASONER.decide(problem, three).parts["bad_release"]["memory"]
        > REASONER.decide(problem, one).parts["bad_release"]["memory"]
        > 0
    )
    close = [Evidence(id="a", source="episode", text="x", relevance=0.95, outcome="SUCCESS", choices=("bad_release",))]
    assert REASONER.decide(problem, close).choice == "bad_release"


def test_reliability_recorded_at_the_site_sets_the_weights():
    problem = _problem("threads wait for a connection after the rollout")
    fact = Evidence(
        id="f@1",
        source="fact",
        text="when rollout → bad_release",
        relevance=1.0,
        conclusion="bad_release",
        confidence=0.6,
    )
    trusted = replace(problem, record={"facts|lesson": (9, 0), "prior|lesson": (1, 8)})
    doubted = replace(problem, record={"facts|lesson": (0, 9), "prior|lesson": (9, 0)})
    assert REASONER.decide(trusted, [fact]).choice == "bad_release"
    assert REASONER.decide(doubted, [fact]).choice == "pool_exhaustion"
    assert REASONER.decide(trusted, [fact]).favoured == {
        "prior|lesson": "pool_exhaustion",
        "facts|lesson": "bad_release",
    }


def test_items_of_a_kind_the_record_mutes_are_not_reported_as_relied_on():
    problem = _problem("errors began right after deploy of the new version")
    precedent = Evidence(
        id="ep", source="episode", text="after a deploy", relevance=0.9, outcome="SUCCESS", choices=("bad_release",)
    )
    heard = REASONER.decide(replace(problem, record={"memory": (9, 0)}), [precedent])
    muted = REASONER.decide(replace(problem, record={"memory": (0, 9)}), [precedent])  # right 2 of 12: weight 0
    assert heard.choice == muted.choice == "bad_release"
    assert heard.relied_on == ("ep",) and heard.parts["bad_release"]["memory"] > 0
    assert muted.relied_on == () and muted.parts["bad_release"]["memory"] == 0


def test_unlabelled_text_votes_by_what_it_mentions():
    problem = _problem("requests time out")
    near = Evidence(id="c1", source="chunk", text="A release shipped a wrong configuration value", relevance=0.9)
    far = Evidence(id="c2", source="chunk", text="the client pool is exhausted", relevance=0.2)
    assert REASONER.decide(problem, [near, far]).choice == "bad_release"
    # the same texts as labelled failures vote the other way
    failed = [
        Evidence(
            id="e1", source="episode", text="rolled back", relevance=0.9, outcome="FAILURE", choices=("bad_release",)
        ),
        Evidence(
            id="e2", source="episode", text="pool", relevance=0.2, outcome="FAILURE", choices=("pool_exhaustion",)
        ),
    ]
    assert REASONER.decide(problem, failed).choice == "pool_exhaustion"


def test_an_unlabelled_run_of_events_is_read_by_its_outcome():
    # "Decision X … no change … it was Y" in one window: against X, for Y; no label, no scenario words.
    window = (
        "users report slow pages\nDecision: pool_exhaustion — raised the pool\n"
        "No change after an hour\nIt was the release from this morning, not the pool"
    )
    votes = REASONER.sequence_votes(window, (POOL, DEPLOY))
    assert votes["pool_exhaustion"] < 0 < votes["bad_release"]
    worked = "Decision: bad_release — rolled back\nErrors gone within minutes"
    assert REASONER.sequence_votes(worked, (POOL, DEPLOY)) == {"bad_release": 1.0}
    assert REASONER.sequence_votes("Decision: bad_release — rolled back", (POOL, DEPLOY)) == {}  # no outcome, no vote
    assert REASONER.sequence_votes("pool exhausted again", (POOL, DEPLOY)) is None  # no decision: read by mentions
    problem = _problem("pool exhausted, timeout acquiring connection")
    near = Evidence(id="w1", source="chunk", text=window, relevance=0.9)
    far = Evidence(id="w2", source="chunk", text="Decision: bad_release — x\nstill failing", relevance=0.2)
    decision = REASONER.decide(problem, [near, far])
    assert decision.parts["pool_exhaustion"]["memory"] < decision.parts["bad_release"]["memory"]
    assert decision.parts["pool_exhaustion"]["memory"] < 0
    assert sum(v for k, v in decision.parts["bad_release"].items() if k != "total") == __import__("pytest").approx(
        decision.parts["bad_release"]["total"], abs=1e-5
    )


def test_facts_vote_with_confidence():
    problem = _problem("requests time out")
    fact = Evidence(
        id="f@1",
        source="fact",
        text="when rollout → bad_release",
        relevance=1.0,
        conclusion="bad_release",
        confidence=0.9,
    )
    assert REASONER.decide(problem, [fact]).choice == "bad_release"


def test_tried_choices_are_excluded_and_feedback_counts():
    problem = _problem("pool exhausted", tried=("pool_exhaustion",))
    assert REASONER.decide(problem, []).choice == "bad_release"
    corrected = _problem("requests time out", feedback=("It was the new version, not the pool",))
    assert REASONER.decide(corrected, []).choice == "bad_release"


def test_negation_split_and_stems():
    assert split_negation("It was the release, not the pool") == ("It was the release", "the pool")
    assert split_negation("Postgres idle, no lock waits, errors at 7%") == ("errors at 7%", "Postgres idle lock waits")
    assert "exhaus" in stems("Exhausted") and "exhaus" in stems("exhaustion") and "the" not in stems("the pool")


def test_a_negation_stops_where_the_next_statement_starts():
    """A correction that denies one thing and then states another must not deny both."""
    assert split_negation("the exchanger gave no cooling and the milk arrived warm") == (
        "the exchanger gave the milk arrived warm",
        "cooling",
    )
    assert split_negation("no errors and no warnings, so the disk filled") == ("so the disk filled", "errors warnings")
    assert split_negation("it was not the pool because the release broke it") == (
        "it was the release broke it",
        "the pool",
    )
    assert split_negation("latency not so bad") == ("latency", "so bad")  # the conjunction must follow a denied word
    assert split_negation("the plates did nothing and warm milk went in") == ("the plates did warm milk went in", "")


def test_normal_as_a_yardstick_reports_no_normal_state():
    # "normal" after a determiner or comparing word measures against normal: the clause is a symptom
    for line in (
        "amazon.com remote endpoint: latency p95 3.7× its normal level (254 ms vs 69 ms)",
        "PetSite availability is anomalous: 93.4% against a normal 100.0%",
        "the press took longer than normal to hold pressure",
        "queue depth above normal",
    ):
        assert split_negation(line)[1] == "", line
    # a report of the normal state still denies what it reports on
    assert split_negation("pressure normal, pump running") == ("pump running", "pressure normal")
    assert split_negation("traffic back to normal")[0] == ""


def test_normally_reports_a_normal_state_unless_it_gives_the_usual_value():
    """ "Fans spinning normally" reports the fans fine; "47 min (normally under 2)" measures against the usual value
    and is a symptom, and so is what is expected of a thing ("a belt that normally lasts a year")."""
    assert split_negation("fans spinning normally, belt squealing") == ("belt squealing", "fans spinning normally")
    for line in (
        "queue wait 47 min (normally under 2)",
        "suction -0.5 kPa, normally around -4.1 kPa",
        "filter dP 11 mbar, normally 16-17",
        "3,870 small blocks, compared with about 40 normally",
        "belt worn through on a set that normally lasts a year",
        "tank normally runs about 1400 and reads 2600",
        "feed water at 58 C; it's normally held above 85 C",
    ):
        assert split_negation(line)[1] == "", line


def test_a_bare_verdict_reports_the_clause_before_it():
    """ "..., as expected" or "..., all normal" gives a verdict on what the sentence just said; a trend word
    ("unchanged") or a value ("normal is 12") does not."""
    assert split_negation("the tank was full and the probe read 66 C, as expected")[0] == ""
    assert split_negation("gearbox inspected and oil sampled, all normal")[0] == ""
    assert split_negation("oven 3 hotter than its display, in spec")[0] == ""
    assert split_negation("dryness 0.96, unchanged") == ("dryness 0.96", "unchanged")
    assert split_negation("coolant flow 6.1 m3/h, normal is 12")[0] == "coolant flow 6.1 m3/h"
    assert split_negation("valve stuck, as expected\npump running")[0] == "pump running"


def test_a_report_whose_status_is_normal_denies_what_it_reports_on():
    """ "X checked: running, pressure normal" says X is fine: X's words must not count as a
    symptom (a lesson about X would fire on its own all-clear). A status without a normal-state
    word leaves the label a symptom."""
    from memory.text import affirmed_clauses

    line = "Borehole pump checked: running, pressure normal, the pre-cooler output 15 C"
    assert split_negation(line) == ("running the pre-cooler output 15 C", "Borehole pump checked pressure normal")
    assert "pump" not in affirmed_clauses(line)
    assert split_negation("Redis: 9% CPU, 180 connected clients") == ("Redis 9% CPU 180 connected clients", "")
    # one line's report does not reach the next line
    assert split_negation("pump: normal\nvalve stuck") == ("valve stuck", "pump normal")


def test_a_look_that_found_nothing_wrong_is_an_all_clear_not_a_symptom():
    """ "Softener checked: salt level full" reports the softener fine though no word of it is a
    normal-state word; the sentence that names the look is set apart, the rest of the line is read."""
    from memory.text import affirmed_clauses, all_clear, read_as_found

    assert all_clear("Softener checked: salt level full, the hardness test on the outlet reads zero") != ""
    assert "softener" not in affirmed_clauses("Softener checked: salt level full, the hardness test reads zero").lower()
    line = "Load 3 came out wet: droplets on the wraps. We checked the drain first"
    assert all_clear(line) == "We checked the drain first"
    assert read_as_found(line).strip() == "Load 3 came out wet: droplets on the wraps."
    assert "wet" in affirmed_clauses(line) and "drain" not in affirmed_clauses(line)
    # a look that found something wrong reports a symptom; a denied fault word does not make it one
    assert all_clear("Checked the pump: tripped on overload") == ""
    assert all_clear("Inspected the strainer: blocked solid") == ""
    assert all_clear("Checked the logs: no errors since noon") != ""
    # the words of a look inside a name are not a look, and neither is an order to look
    assert all_clear("queue payments.confirm depth 31k") == ""
    assert all_clear("Sheets grey again. Softener checked. Dosing pump leaking") == "Softener checked."
    assert all_clear("check the pump before the dosing") == ""
    # what a thing does is no look at it, and a contrast after a look reports what it found wrong
    assert all_clear("a dict with a 'ttl' field that is checked but never evicted") == ""
    assert all_clear("Pump checked, but the valve to the plates was left shut") == ""


def test_a_precedent_whose_telling_detail_was_checked_clear_does_not_vote():
    """Last time the fix was the softener; this round reports the softener checked and fine, so that
    precedent says nothing about it (the round's own signals decide)."""
    hard = CauseInfo("hard_water", "Hard water binds the detergent", ("grey linen", "scale on drums"))
    dose = CauseInfo("underdosing", "The detergent pump delivers too little", ("grey linen", "dosing pump leaking"))
    precedent = Evidence(
        id="r3",
        source="incident",
        text="grey linen",
        relevance=0.9,
        outcome="SUCCESS",
        choices=("underdosing", "hard_water"),
        resolved_as="hard_water",
        corrections=("Not the dosing: the salt softener ran out of salt and stopped softening",),
        observations=("linen grey",),
        telling=1.0,  # the memory found the round showing what told it apart
    )

    def problem(*observations):
        return Problem(
            observations=observations, candidates=(hard, dose), situation="incident", service="tunnel", attempt=1
        )

    unchecked = problem("Sheets from tunnel 2 are grey again", "Dosing pump tube worn")
    checked = problem(
        "Sheets from tunnel 2 are grey again",
        "Dosing pump tube worn",
        "Softener checked: salt level full, hardness reads zero",
    )
    assert REASONER.decide(unchecked, [precedent]).parts["hard_water"]["memory"] > 0
    assert REASONER.decide(checked, [precedent]).parts["hard_water"]["memory"] == 0
    assert REASONER.decide(checked, [precedent]).choice == "underdosing"
    # one shared word is a coincidence, not the telling detail
    salt_only = problem("Sheets from tunnel 2 are grey again", "Dosing pump tube worn", "Salt store checked: tidy")
    assert REASONER.decide(salt_only, [precedent]).parts["hard_water"]["memory"] > 0


def test_an_all_clear_counts_against_the_cause_whose_words_it_names():
    plain = REASONER.decide(_problem("requests wait for a connection"), [])
    cleared = REASONER.decide(
        _problem("requests wait for a connection", "Verified the release: same version, right deploy of the config"), []
    )
    assert plain.parts["bad_release"]["feedback"] == 0
    assert cleared.parts["bad_release"]["feedback"] < 0 and cleared.parts["pool_exhaustion"]["feedback"] == 0


def test_a_correction_that_names_the_cause_after_a_denial_votes_for_it():
    problem = _problem("requests time out", feedback=("The pool was not full and the release broke the config",))
    assert REASONER.mentions(problem.feedback[0], problem.candidates)["bad_release"] > 0


def test_deterministic():
    problem = _problem("pool exhausted right after deploy")
    assert REASONER.decide(problem, []) == REASONER.decide(problem, [])


def test_when_the_record_zeroes_every_weight_the_runbook_still_breaks_the_tie():
    """One miss of the runbook among two candidates leaves its reliability at chance (weight 0)."""
    problem = replace(
        _problem("errors began right after deploy of the new version"),
        record={"prior": (0, 1), "memory": (0, 1), "facts": (0, 1), "graph": (0, 1)},
    )
    decision = REASONER.decide(problem, [])
    assert decision.scores["pool_exhaustion"] == decision.scores["bad_release"] == 0
    assert decision.choice == "bad_release"  # listed second: the runbook's favourite, not the list order


_CUES = ["not", "no", "never", "without", "nothing", "none", "nobody"]
_JOINS = ["and", "so", "because", "until", "then"]


@given(
    st.lists(st.sampled_from(["pump", "milk", "warm", "tank", "cooling", "fault", *_CUES, *_JOINS]), max_size=14),
    st.sampled_from([" ", ", ", "; "]),
)
def test_splitting_by_negation_keeps_every_word_on_one_side(words, sep):
    """Whatever the order of cues and conjunctions, each content word is affirmed or denied, never lost."""
    text = sep.join(words)
    affirmed, denied = split_negation(text)
    kept = affirmed.replace(",", " ").split() + denied.replace(",", " ").split()
    content = [w for w in words if w not in _CUES and w not in _JOINS]
    assert sorted(w for w in kept if w not in _CUES and w not in _JOINS) == sorted(content)


@given(
    st.lists(
        st.sampled_from(
            [
                "softener",
                "checked",
                "verified",
                "salt",
                "full",
                "tripped",
                "no",
                "leak",
                "pump",
                "payments.confirm",
                "the",
            ]
        ),
        max_size=12,
    ),
    st.lists(st.sampled_from([". ", "; ", ": ", ", ", " "]), min_size=12, max_size=12),
)
def test_an_all_clear_is_one_sentence_of_its_line_and_the_rest_is_kept(words, seps):
    """The all-clear part of a line is a run of it that names a look, and nothing else is dropped."""
    from memory.text import all_clear, read_as_found

    line = "".join(word + sep for word, sep in zip(words, seps)).strip()
    cleared = all_clear(line)
    if not cleared:
        assert read_as_found(line) == line
        return
    assert cleared in line and any(w in cleared for w in ("checked", "verified"))
    assert not {"tripped", "leak"} & set(split_negation(cleared)[0].replace(",", " ").split())  # nothing found wrong
    assert sorted((read_as_found(line) + " " + cleared).split()) == sorted(line.split())


def test_the_reasoner_reads_with_the_lexicon_it_is_handed():
    # a site's own word for broken: only a reasoner reading with that site's lexicon counts it as a failure
    from memory import Reader
    from memory.lexicon import DEFAULT_LEXICON

    site = Reader(DEFAULT_LEXICON.with_words("failure_cues", ["banjaxed"], "a site's own word for broken (test)"))
    window = "Decision: bad_release — rolled back\nThe conveyor is banjaxed again"
    assert REASONER.sequence_votes(window, (POOL, DEPLOY)) == {}
    assert HeuristicReasoner(reader=site).sequence_votes(window, (POOL, DEPLOY)) == {"bad_release": -1.0}


# -- a close precedent that overturned the runbook --------------------------------------------------------------------

OUTAGE = CauseInfo(
    "provider_outage", "The card provider is down", ("provider returns 502", "authorisations failing", "gateway error")
)
CERT = CauseInfo("stale_certificate", "A proxy presents an expired client certificate", ("handshake failure",))
LESSON = Evidence(
    id="lesson",
    source="incident",
    text="provider 502s; the proxy kept the old certificate",
    relevance=0.2,
    outcome="SUCCESS",
    choices=("provider_outage", "stale_certificate"),
    resolved_as="stale_certificate",
    corrections=("Not the provider: egress-gw kept presenting the old client cert until haproxy was reloaded",),
    observations=("Authorisations failing with 502 from the provider", "The 502 page comes from egress-gw"),
    sequence=3,
)


def _card_problem(*observations, record=None):
    return Problem(
        observations=observations,
        candidates=(OUTAGE, CERT),
        situation="incident",
        service="payments",
        attempt=1,
        record=record or {},
    )


def test_a_close_precedent_that_overturned_the_runbook_outweighs_it_on_the_first_recurrence():
    """ "Last time these signs, the runbook's answer was wrong; it was Y": one correction is enough to act on."""
    problem = _card_problem("Authorisations failing: the provider returns 502 gateway errors", "egress-gw-02 logs it")
    assert REASONER.decide(problem, []).choice == "provider_outage"  # the runbook alone
    decision = REASONER.decide(problem, [LESSON])
    assert decision.choice == "stale_certificate"
    assert decision.parts["stale_certificate"]["precedent"] > 0 > decision.parts["provider_outage"]["precedent"]
    # a closer precedent the runbook's answer fixed takes the precedent's word back
    routine = replace(LESSON, id="routine", relevance=0.25, choices=("provider_outage",), resolved_as="provider_outage")
    assert REASONER.decide(problem, [LESSON, routine]).parts["stale_certificate"]["precedent"] == 0


def test_a_round_that_only_looks_like_the_precedent_does_not_hear_it():
    """The mimic's symptoms alone (nothing of what told the precedent apart) leave the runbook in charge."""
    problem = _card_problem("Authorisations failing: the provider returns 502 gateway errors", "Status page red")
    decision = REASONER.decide(problem, [LESSON])
    assert decision.parts["stale_certificate"]["precedent"] == 0 and decision.choice == "provider_outage"


def test_a_round_that_rules_out_the_telling_detail_does_not_hear_the_precedent():
    ruled = _card_problem(
        "Authorisations failing: the provider returns 502 gateway errors", "egress-gw looks healthy, reloaded at 07:00"
    )
    decision = REASONER.decide(ruled, [LESSON])
    assert decision.parts["stale_certificate"]["precedent"] == 0 and decision.choice == "provider_outage"
    assert decision.parts["stale_certificate"]["memory"] == 0  # nor does it vote as a precedent at all


def test_where_the_precedents_misfired_their_weight_falls():
    problem = _card_problem("Authorisations failing: the provider returns 502 gateway errors", "egress-gw-02 logs it")
    trusted = REASONER.decide(problem, [LESSON]).parts["stale_certificate"]["precedent"]
    misfired = _card_problem(*problem.observations, record={"precedent|lesson": (1, 6)})
    assert 0 == REASONER.decide(misfired, [LESSON]).parts["stale_certificate"]["precedent"] < trusted
    # its favourite is still recorded, so the record can recover
    assert REASONER.decide(misfired, [LESSON]).favoured["precedent|lesson"] == "stale_certificate"


def test_what_a_round_mentions_only_as_ruled_out_or_normal_is_ruled_out():
    from agent.heuristic import ruled_out

    assert {"relsign"} <= ruled_out(["relsign looks healthy: selftest signature in 80 ms"])
    assert {"rebalance", "fanout"} <= ruled_out(["fanout-svc: consumer group stable, no rebalances since Monday"])
    assert "flagrelay" in ruled_out(["The toggle fan-out (flagrelay) ruled out: no reboots, graphs unremarkable"])
    assert "relay" in ruled_out(["Flag relay: backlog at 0, nothing unusual there"])
    # affirmed anywhere in the round: not ruled out
    assert "relsign" not in ruled_out(["relsign looks healthy", "relsign returns 503 on upload"])
    assert ruled_out(["relsign returns 503 on upload"]) == frozenset()


def test_reliability_is_skill_over_chance_among_the_candidates_offered():
    from agent.heuristic import reliability, weight

    # no record: 2/3 whatever the count; a record made among as many candidates: the Beta(2, 1) posterior mean
    assert reliability({}, "prior", 2) == pytest.approx(2 / 3) == reliability({}, "prior", 5)
    assert reliability({"prior": (4, 2, 2.0, 6)}, "prior", 3) == pytest.approx(6 / 9)
    assert reliability({"prior": (4, 2)}, "prior", 3) == pytest.approx(6 / 9)  # a record without counts
    # one miss among three candidates says less against a voter than one miss between two
    among_three = reliability({"prior": (0, 1, 1 / 3, 1)}, "prior", 2)
    between_two = reliability({"prior": (0, 1, 1 / 2, 1)}, "prior", 2)
    assert weight(among_three, 2) > 0 == weight(between_two, 2)


def test_an_exception_speaks_only_as_far_as_the_round_shows_what_told_it_apart():
    problem = _card_problem("Authorisations failing: the provider returns 502 gateway errors", "egress-gw-02 logs it")
    looks_alike = replace(LESSON, telling=0.0)
    told = replace(LESSON, telling=1.0)
    assert REASONER.decide(problem, [looks_alike]).parts["stale_certificate"]["memory"] == 0
    assert REASONER.decide(problem, [looks_alike]).parts["stale_certificate"]["precedent"] == 0
    assert REASONER.decide(problem, [told]).parts["stale_certificate"]["memory"] > 0
    assert REASONER.decide(problem, [told]).choice == "stale_certificate"
    # a precedent fixed at the first try is no exception: it speaks for its fix whatever it shares
    plain = replace(LESSON, choices=("stale_certificate",), corrections=(), telling=None)
    assert REASONER.decide(problem, [plain]).parts["stale_certificate"]["memory"] > 0


def test_where_the_closest_precedent_overturned_the_runbook_the_record_is_kept_apart():
    problem = _card_problem("Authorisations failing: the provider returns 502 gateway errors", "Status page red")
    assert all(kind.endswith("|lesson") for kind in REASONER.decide(problem, [LESSON]).favoured)
    assert not any(kind.endswith("|lesson") for kind in REASONER.decide(problem, []).favoured)


@example(hits=0, misses=50, counts=[1] * 50, candidates=2)  # misses where chance could not miss
@given(
    hits=st.integers(0, 50),
    misses=st.integers(0, 50),
    counts=st.lists(st.integers(1, 6), max_size=100),
    candidates=st.integers(1, 8),
)
def test_reliability_is_a_probability_for_any_record(hits, misses, counts, candidates):
    """Whatever was recorded (decisions with one candidate included) and however many candidates there are now."""
    from agent.heuristic import reliability

    known = counts[: hits + misses]
    record = {"prior": (hits, misses, sum(1 / k for k in known), len(known))}
    assert 0.0 <= reliability(record, "prior", candidates) <= 1.0
