"""A round's own runbook ranking (imported datasets): loaded, carried to the reasoner, and read as the prior."""

import pytest

import scenarios
from agent.heuristic import HeuristicReasoner
from agent.prompt import user_prompt
from agent.reasoner import CauseInfo, Evidence, Problem
from scenarios import ScenarioError
from simulator.env import DebugEnv

DOC = """
schema: 1
name: ranked
root_causes:
  alpha: {description: the alpha component fails, signals: [alpha errors]}
  beta: {description: the beta component fails, signals: [beta errors]}
  gamma: {description: the gamma component fails, signals: [gamma errors]}
rounds:
  - id: r1
    kind: plain
    service: web
    observations: [alpha errors everywhere]
    truth: gamma
    runbook: %s
"""

CAUSES = tuple(CauseInfo(cid, f"the {cid} component fails", (f"{cid} errors",)) for cid in ("alpha", "beta", "gamma"))


def test_runbook_loads_and_reaches_the_prompt():
    scenario = scenarios.loads(DOC % "[gamma, beta]")
    assert scenario.rounds[0].runbook == ("gamma", "beta")
    prompt, _ = DebugEnv(scenario).reset(seed=1)
    assert prompt.runbook == ("gamma", "beta")
    assert scenarios.loads(DOC.replace("    runbook: %s\n", "")).rounds[0].runbook == ()


@pytest.mark.parametrize(
    "value, message",
    [
        ("[delta]", r"rounds\[0\] \(id r1, line 9\)\.runbook\[0\]: 'delta' is not among this round's candidates"),
        ("[gamma, gamma]", r"rounds\[0\] \(id r1, line 9\)\.runbook\[1\]: 'gamma' is ranked twice"),
        ("[]", r"rounds\[0\] \(id r1, line 9\)\.runbook: expected a non-empty list of this round's candidate ids"),
        ("gamma", r"rounds\[0\] \(id r1, line 9\)\.runbook: expected a non-empty list"),
    ],
)
def test_bad_runbook_is_located(value, message):
    with pytest.raises(ScenarioError, match=message):
        scenarios.loads(DOC % value)


def test_runbook_ranking_replaces_the_signal_match():
    reasoner = HeuristicReasoner()
    plain = Problem(
        observations=("alpha errors everywhere",), candidates=CAUSES, situation="s", service="web", attempt=1
    )
    assert reasoner.decide(plain, []).choice == "alpha"  # the descriptions' match
    ranked = Problem(**{**plain.__dict__, "runbook": ("gamma", "beta")})
    decision = reasoner.decide(ranked, [])
    assert decision.choice == "gamma"
    assert decision.scores["gamma"] > decision.scores["beta"] > decision.scores["alpha"]
    # a second attempt after gamma failed goes to the runbook's second choice
    assert reasoner.decide(Problem(**{**ranked.__dict__, "tried": ("gamma",), "attempt": 2}), []).choice == "beta"


def test_a_precedent_can_overturn_the_runbook():
    ranked = Problem(
        observations=("alpha errors everywhere",),
        candidates=CAUSES,
        situation="s",
        service="web",
        attempt=1,
        runbook=("gamma", "beta", "alpha"),
    )
    lesson = Evidence(
        id="ep",
        source="incident",
        text="same picture",
        relevance=0.95,
        outcome="FAILURE",
        choices=("gamma",),
        resolved_as="alpha",
    )
    assert HeuristicReasoner().decide(ranked, [lesson]).choice == "alpha"


def test_llm_prompt_shows_the_ranking_only_when_given():
    plain = Problem(observations=("x",), candidates=CAUSES, situation="s", service="web", attempt=1)
    assert "standard method" not in user_prompt(plain, "")
    ranked = Problem(**{**plain.__dict__, "runbook": ("beta", "alpha")})
    assert "ranks, most likely first: beta, alpha" in user_prompt(ranked, "")


def test_the_track_record_of_a_named_method_overturns_its_favourite():
    reasoner = HeuristicReasoner()
    ranked = Problem(
        observations=("alpha errors everywhere",),
        candidates=CAUSES,
        situation="s",
        service="web",
        attempt=1,
        runbook=("gamma", "beta", "alpha"),
    )
    assert reasoner.decide(ranked, []).choice == "gamma"
    corrected = Problem(**{**ranked.__dict__, "track": {"gamma": {"alpha": 2}}})
    decision = reasoner.decide(corrected, [])
    assert decision.choice == "alpha" and decision.parts["gamma"]["track"] < 0 < decision.parts["alpha"]["track"]
    assert decision.favoured["track"] == "alpha"
    # a method that was right as often as wrong keeps its favourite
    assert (
        reasoner.decide(Problem(**{**ranked.__dict__, "track": {"gamma": {"gamma": 2, "alpha": 1}}}), []).choice
        == "gamma"
    )
    # a record of another favourite says nothing here, and without a named method there is no track vote
    assert reasoner.decide(Problem(**{**ranked.__dict__, "track": {"beta": {"alpha": 5}}}), []).choice == "gamma"
    plain = Problem(**{**ranked.__dict__, "runbook": (), "track": {"alpha": {"beta": 5}}})
    assert reasoner.decide(plain, []).parts["beta"]["track"] == 0


def test_llm_prompt_shows_the_method_s_record_on_its_favourite():
    ranked = Problem(
        observations=("x",),
        candidates=CAUSES,
        situation="s",
        service="web",
        attempt=1,
        runbook=("beta", "alpha"),
        track={"beta": {"alpha": 2, "beta": 1}, "gamma": {"beta": 1}},
    )
    text = user_prompt(ranked, "")
    assert "the 3 earlier incident(s) where it favoured beta were finally fixed at: alpha (2), beta (1)" in text


TRACKED = """
schema: 1
name: tracked
root_causes:
  balancer: {description: the load balancer in front of the service fails}
  service: {description: the service behind the load balancer fails}
  database: {description: the database fails}
rounds:
  - id: r1
    kind: first
    service: shop
    observations: [checkout pages time out for customers in Lisbon]
    truth: service
    runbook: [balancer, service, database]
    correction: It was the service behind the balancer.
  - id: r2
    kind: recurrence
    service: shop
    after: 2d
    observations: [warehouse scanners report slow stock lookups overnight]
    truth: service
    runbook: [balancer, database, service]
"""


def test_the_episodic_memory_keeps_the_method_s_record(tmp_path):
    import json

    from eval.compare import main

    path = tmp_path / "tracked.yaml"
    path.write_text(TRACKED)
    log = tmp_path / "log.json"
    assert (
        main(
            [
                str(path),
                "--seeds",
                "1",
                "--agents",
                "episodic",
                "no_memory",
                "--json",
                str(log),
                "--quiet",
                "--jobs",
                "1",
            ]
        )
        == 0
    )
    rounds = {
        agent: {r["round"]: r for r in data["rounds"]} for agent, data in json.loads(log.read_text())["agents"].items()
    }
    assert [rounds[a]["r1"]["first_decision"] for a in ("episodic", "no_memory")] == ["balancer", "balancer"]
    # the two incidents share no words: only the method's record carries the lesson over
    assert rounds["no_memory"]["r2"]["first_decision"] == "balancer"
    assert rounds["episodic"]["r2"]["first_decision"] == "service"
    assert rounds["episodic"]["r2"]["candidate_scores"]["service"]["track"] > 0
