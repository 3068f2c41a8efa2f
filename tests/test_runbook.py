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


@pytest.mark.parametrize("value, message", [
    ("[delta]", r"rounds\[0\]\.runbook\[0\]: 'delta' is not among this round's candidates"),
    ("[gamma, gamma]", r"rounds\[0\]\.runbook\[1\]: 'gamma' is ranked twice"),
    ("[]", r"rounds\[0\]\.runbook: expected a non-empty list of this round's candidate ids"),
    ("gamma", r"rounds\[0\]\.runbook: expected a non-empty list"),
])
def test_bad_runbook_is_located(value, message):
    with pytest.raises(ScenarioError, match=message):
        scenarios.loads(DOC % value)


def test_runbook_ranking_replaces_the_signal_match():
    reasoner = HeuristicReasoner()
    plain = Problem(observations=("alpha errors everywhere",), candidates=CAUSES, situation="s", service="web", attempt=1)
    assert reasoner.decide(plain, []).choice == "alpha"  # the descriptions' match
    ranked = Problem(**{**plain.__dict__, "runbook": ("gamma", "beta")})
    decision = reasoner.decide(ranked, [])
    assert decision.choice == "gamma"
    assert decision.scores["gamma"] > decision.scores["beta"] > decision.scores["alpha"]
    # a second attempt after gamma failed goes to the runbook's second choice
    assert reasoner.decide(Problem(**{**ranked.__dict__, "tried": ("gamma",), "attempt": 2}), []).choice == "beta"


def test_a_precedent_can_overturn_the_runbook():
    ranked = Problem(observations=("alpha errors everywhere",), candidates=CAUSES, situation="s", service="web",
                     attempt=1, runbook=("gamma", "beta", "alpha"))
    lesson = Evidence(id="ep", source="incident", text="same picture", relevance=0.95, outcome="FAILURE",
                      choices=("gamma",), resolved_as="alpha")
    assert HeuristicReasoner().decide(ranked, [lesson]).choice == "alpha"


def test_llm_prompt_shows_the_ranking_only_when_given():
    plain = Problem(observations=("x",), candidates=CAUSES, situation="s", service="web", attempt=1)
    assert "standard method" not in user_prompt(plain, "")
    ranked = Problem(**{**plain.__dict__, "runbook": ("beta", "alpha")})
    assert "ranks, most likely first: beta, alpha" in user_prompt(ranked, "")
