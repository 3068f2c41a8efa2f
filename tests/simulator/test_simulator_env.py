"""DebugEnv: determinism per shipped scenario, stream invariants, retries, ground truth."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC

import pytest

import scenarios
from simulator import DebugEnv
from simulator.truth import CAUSED_BY, LEARNED_FROM, RETRY_OF

TINY = """\
schema: 1
name: tiny
start: 2026-02-02T09:00:00Z
root_causes:
  a: {description: first cause}
  b: {description: second cause}
  c: {description: third cause}
interludes:
  - {situation: planning, events: [plan one, plan two]}
rounds:
  - {id: r1, kind: learn, service: api, observations: [o1, o2], truth: b, max_attempts: 3,
     correction: it was b}
  - {id: r2, kind: recall, service: db, after: 2h, observations: [o3], truth: c, max_attempts: 2,
     on_success: fixed it, on_failure: still broken}
  - {id: r3, kind: caused, service: api, at: 2026-02-04T12:00:00Z, observations: [o4], truth: a,
     caused_by: r1, candidates: [a, c]}
"""


def in_order(prompt):
    """A fixed policy that tries candidates in order, so retries happen."""
    return prompt.candidates[(prompt.attempt - 1) % len(prompt.candidates)]


def play(scenario, seed, policy=in_order):
    env = DebugEnv(scenario)
    prompt, _ = env.reset(seed=seed)
    prompts, results = [], []
    while prompt is not None:
        prompts.append(prompt)
        result = env.step(policy(prompt))
        results.append(result)
        prompt = result.prompt
    return env, prompts, results


@pytest.mark.parametrize("name", scenarios.shipped())
def test_same_seed_same_stream_different_seed_same_truths(name):
    s = scenarios.load(name)
    env1, prompts1, results1 = play(s, seed=11)
    env2, prompts2, results2 = play(s, seed=11)
    env3, _, results3 = play(s, seed=12)
    assert env1.events == env2.events and prompts1 == prompts2 and results1 == results2
    assert env1.events != env3.events
    truths = [(r.info["round_id"], r.info["truth"]) for r in results1]
    assert truths == [(r.info["round_id"], r.info["truth"]) for r in results3]

    # Only order and timing vary: each seed shows the same observation texts per round.
    def texts(env):
        return Counter((e.situation, e.kind, e.text) for e in env.events if e.kind != "outcome")

    assert texts(env1) == texts(env3)


@pytest.mark.parametrize("name", scenarios.shipped())
def test_stream_invariants(name):
    s = scenarios.load(name)
    env, prompts, results = play(s, seed=3)
    events = env.events
    assert [e.index for e in events] == list(range(len(events)))
    stamps = [e.timestamp for e in events]
    assert all(t.tzinfo is not None and t.utcoffset().total_seconds() == 0 for t in stamps)
    assert stamps == sorted(stamps)
    hidden = {r.truth for r in s.rounds} | {r.id for r in s.rounds} | {r.kind for r in s.rounds}
    for e in events:
        json.dumps(e.metadata)
        assert not hidden & set(_leaves(e.metadata)), e
        assert not any(t in e.text for t in s.root_causes), e
        assert e.role in ("environment", "user", "system") and e.kind in (
            "observation",
            "outcome",
            "correction",
            "note",
        )
    for prompt, result in zip(prompts, results):
        assert all(e.timestamp < prompt.decision_time for e in prompt.events)
        assert result.events[0].kind == "outcome" and result.events[0].timestamp > prompt.decision_time
        assert set(prompt.root_causes) == set(prompt.candidates)
    assert results[-1].terminated and not any(r.terminated for r in results[:-1])
    assert sum(r.round_done for r in results) == len(s.rounds)


def _leaves(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    else:
        yield value


def test_retry_prompt_repeats_outcome_and_correction():
    env, prompts, results = play(scenarios.loads(TINY), seed=0)
    first, retry = prompts[0], prompts[1]
    assert (first.round_id, first.attempt, retry.round_id, retry.attempt) == ("r1", 1, "r1", 2)
    assert not results[0].correct and not results[0].round_done
    assert [e.kind for e in results[0].events] == ["outcome", "correction"]
    assert results[0].events[1].text == "it was b" and results[0].events[1].role == "user"
    assert retry.events == results[0].events
    assert results[1].correct and results[1].reward == 1.0 and results[1].round_done


def test_round_texts_interludes_and_exhausted_round():
    env, prompts, results = play(scenarios.loads(TINY), seed=0)
    notes = [e for e in env.events if e.kind == "note"]
    assert [e.text for e in notes] == ["plan one", "plan two"]
    assert {e.situation for e in notes} == {"planning"}
    r2 = [r for r in results if r.info["round_id"] == "r2"]
    assert [x.events[0].text for x in r2] == ["still broken", "still broken"]
    assert r2[-1].round_done and not r2[-1].correct
    assert all(len(x.events) == 1 for x in r2)  # no correction text: nothing more revealed
    r3 = prompts[-1]
    assert r3.decision_time.astimezone(UTC).date().isoformat() == "2026-02-04"


def test_invalid_choice_counts_as_wrong_attempt():
    env = DebugEnv(scenarios.loads(TINY))
    prompt, _ = env.reset(seed=1)
    result = env.step("not_a_cause")
    assert not result.correct and result.reward == 0.0 and not result.info["valid_choice"]
    assert result.prompt.attempt == 2


def test_stepping_a_finished_or_unstarted_env_raises():
    env = DebugEnv(scenarios.loads(TINY))
    with pytest.raises(RuntimeError, match="call reset"):
        env.step("a")
    env, _, _ = play(scenarios.loads(TINY), seed=0)
    with pytest.raises(RuntimeError, match="finished"):
        env.step("a")


def test_outcome_signals_are_sometimes_structured():
    s = scenarios.load("ci-failures")
    kinds = Counter()
    for seed in range(3):
        env, _, _ = play(s, seed)
        for e in env.events:
            if e.kind == "outcome":
                kinds["check" in e.metadata] += 1
                if "check" in e.metadata:
                    assert e.metadata["check"]["status"] in ("success", "failure")
    assert kinds[True] and kinds[False]


def test_later_rounds_do_not_depend_on_earlier_choices():
    s = scenarios.load("pool-vs-deploy")
    env_a, _, _ = play(s, seed=5)
    env_b, _, _ = play(s, seed=5, policy=lambda p: p.candidates[-1])
    last = s.rounds[-1]

    def last_round_obs(env):
        return [e.text for e in env.events if e.kind == "observation" and e.metadata["service"] == last.service]

    assert last_round_obs(env_a) == last_round_obs(env_b)


def test_ground_truth_partitions_stream_and_counts_boundaries():
    env, prompts, results = play(scenarios.loads(TINY), seed=2)
    gt = env.ground_truth()
    indices = sorted(i for ep in gt.episodes for i in ep.event_indices)
    assert indices == list(range(len(env.events)))
    attempts = [ep for ep in gt.episodes if ep.kind == "attempt"]
    interludes = [ep for ep in gt.episodes if ep.kind == "interlude"]
    assert len(attempts) == len(results) and len(interludes) == 1
    assert len(gt.boundaries) == len(results) + 1
    assert [ep.outcome for ep in attempts] == ["SUCCESS" if r.correct else "FAILURE" for r in results]
    pos = {(ep.round_id, ep.attempt): k for k, ep in enumerate(gt.episodes)}
    assert set((r.type, r.source, r.target) for r in gt.relations) == {
        (RETRY_OF, pos["r1", 2], pos["r1", 1]),
        (LEARNED_FROM, pos["r1", 2], pos["r1", 1]),
        (RETRY_OF, pos["r2", 2], pos["r2", 1]),
        (CAUSED_BY, pos["r3", 1], pos["r1", 2]),
    }


@pytest.mark.parametrize("name", scenarios.shipped())
def test_ground_truth_of_shipped_scenarios(name):
    s = scenarios.load(name)
    env, prompts, results = play(s, seed=4)
    gt = env.ground_truth()
    blocks = sum(1 for ep in gt.episodes if ep.kind == "interlude")
    assert blocks == len(s.interludes)
    assert len(gt.boundaries) == len(results) + blocks
    assert {r.type for r in gt.relations} == {RETRY_OF, LEARNED_FROM, CAUSED_BY}
    for rel in gt.relations:
        src, dst = gt.episodes[rel.source], gt.episodes[rel.target]
        assert rel.source > rel.target and src.kind == dst.kind == "attempt"
        if rel.type == CAUSED_BY:
            assert s.round(src.round_id).caused_by == dst.round_id and src.attempt == 1
        else:
            assert src.round_id == dst.round_id
            assert src.outcome == "SUCCESS" or rel.type == RETRY_OF
