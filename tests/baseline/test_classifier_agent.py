"""The learning classifier peer: runbook until it has learned, then its prediction as one fact, learned
only from finished rounds' feedback."""

import scenarios
from agent.heuristic import HeuristicReasoner
from agent.reasoner import CauseInfo
from baseline.classifier import Attempt, ClassifierAgent, PlayedRound, Said, round_label
from eval.presets import PRESETS, build_agent
from eval.runner import play
from memory.timeline import HashingEncoder
from simulator.env import DebugEnv

ENCODER = HashingEncoder()

SCENARIO = scenarios.loads("""
schema: 1
name: disk-or-memory
root_causes:
  disk_full:
    description: A volume ran out of space, so writes fail
    signals: [no space left on device, disk usage 100%]
  memory_leak:
    description: A process keeps growing its heap until it is killed
    signals: [out of memory, heap growing, OOM killed]
rounds:
  - id: r1
    kind: learn
    service: api
    observations:
      - "api pods OOM killed every 40 minutes; heap growing steadily after each restart"
    truth: memory_leak
    on_success: "Fixed the cache that never evicted; heap flat since"
  - id: r2
    kind: learn
    service: batch
    max_attempts: 2
    observations:
      - "batch pods OOM killed during the nightly export"
      - "heap dump written to /var/dumps before each restart; log rotation cron stopped last week"
    truth: disk_full
    on_failure: "Still failing after the heap limit was raised"
    correction: "Not memory: the heap dumps and unrotated logs filled /var, no space left for the export"
  - id: r3
    kind: recur
    service: batch
    observations:
      - "batch pods OOM killed during the nightly export"
      - "heap dump written to /var/dumps before each restart; log rotation cron stopped last week"
    truth: disk_full
""")


def _agent(name: str = "classifier"):
    return build_agent(PRESETS[name], HeuristicReasoner(ENCODER), ENCODER)


def _turns(agent, seed: int = 1) -> list:
    """(round id, attempt, turn, rounds learned when deciding) for every decision of a playthrough."""
    env = DebugEnv(SCENARIO)
    prompt, _ = env.reset(seed=seed)
    found = []
    while prompt is not None:
        turn = agent.decide(prompt)
        found.append((prompt.round_id, prompt.attempt, turn, agent.learned))
        step = env.step(turn.decision.choice)
        agent.observe(step.events)
        prompt = step.prompt
    return found


def test_the_preset_builds_the_classifier_agent():
    agent = _agent()
    assert isinstance(agent, ClassifierAgent) and agent.name == "classifier"


def test_with_no_history_it_decides_exactly_as_no_memory():
    mine, theirs = play(SCENARIO, 1, _agent()), play(SCENARIO, 1, _agent("no_memory"))
    first, baseline = mine.rounds[0], theirs.rounds[0]
    assert first.retrieved == 0
    assert (first.decisions, first.candidate_scores, first.rationale) == (
        baseline.decisions,
        baseline.candidate_scores,
        baseline.rationale,
    )


def test_a_recurrence_after_a_corrected_round_is_favoured_for_the_cause_that_fixed_it():
    turns = {(round_id, attempt): turn for round_id, attempt, turn, _ in _turns(_agent())}
    assert turns[("r2", 1)].decision.choice == "memory_leak"  # the runbook misreads the OOM kills
    (item,) = turns[("r3", 1)].evidence
    assert (item.source, item.conclusion) == ("fact", "disk_full")
    assert item.confidence > 0.5 and "2 past rounds" in item.text


def test_the_live_round_is_learned_only_once_the_next_round_starts():
    learned = {(round_id, attempt): count for round_id, attempt, _, count in _turns(_agent())}
    assert {key: count for key, count in learned.items() if key[0] != "r3"} == {
        ("r1", 1): 0,
        ("r2", 1): 1,
        ("r2", 2): 1,
    }
    assert learned[("r3", 1)] == 2


def test_two_playthroughs_give_identical_decisions_and_evidence():
    first, second = _turns(_agent()), _turns(_agent())
    assert [(r, a, t.decision, t.evidence) for r, a, t, _ in first] == [
        (r, a, t.decision, t.evidence) for r, a, t, _ in second
    ]


CAUSES = tuple(
    CauseInfo(cid, description, ())
    for cid, description in (
        ("disk_full", "a volume ran out of space"),
        ("memory_leak", "a heap keeps growing"),
        ("bad_release", "a release shipped a wrong setting"),
    )
)


def test_an_unsolved_round_is_labelled_by_what_its_correction_names():
    failed = Said("outcome", "Still failing after the change", {})
    corrected = Said("correction", "Not memory: the volume ran out of space", {})
    played = PlayedRound(("pods restarting",), CAUSES, [Attempt("memory_leak", 1, {}, [failed, corrected])])
    assert round_label(played, HeuristicReasoner(ENCODER)) == "disk_full"
    silent = PlayedRound(("pods restarting",), CAUSES, [Attempt("memory_leak", 1, {}, [failed])])
    assert round_label(silent, HeuristicReasoner(ENCODER)) is None  # two causes left and nothing names one


def test_the_standard_method_s_favourite_is_an_input():
    from baseline.classifier import CauseClassifier

    model = CauseClassifier()
    classes = ("balancer", "service", "database")
    for _ in range(2):  # the same words; what tells the answers apart is the method's favourite
        model.learn(("checkout pages slow",), "service", classes, method="balancer")
        model.learn(("checkout pages slow",), "database", classes, method="service")
    assert model.predict(("checkout pages slow",), list(classes), method="balancer").cause == "service"
    assert model.predict(("checkout pages slow",), list(classes), method="service").cause == "database"
