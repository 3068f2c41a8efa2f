"""The README's example of the `EpisodicMemory` facade, executed verbatim."""

from memory.episodes import Outcome

README_EXAMPLE = '''
from datetime import datetime, timedelta, timezone
from memory import EpisodicMemory

incidents = [  # (what the agent sees, its first guess, the real cause)
    (["checkout 5xx at 7%", "connection pool exhausted in the logs; database idle"], "database", "pool"),
    (["inventory 503s during the sale", "redis client pool exhausted; redis idle"], "pool", "pool"),
    (["errors two minutes after the 2.14 release", "a config change shipped in the release"], "pool", "release"),
    (["500s right after the 5.2 release", "new config key read at startup"], "release", "release"),
]
clock = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)

with EpisodicMemory("agent-memory.db", principal="team-a") as memory:
    for observations, guess, truth in incidents:
        clock += timedelta(days=1)
        for text in observations:
            memory.observe(text, timestamp=clock, situation="incident", metadata={"service": "shop"})
        choice = guess
        while True:
            context = memory.recall()          # past episodes with outcomes, facts, causal chains
            prompt = context.render(max_chars=2000)   # what an LLM would read
            clock += timedelta(minutes=5)
            memory.decide(f"Decision: {choice}", choice=choice, retrieved=context.item_ids(), timestamp=clock,
                          situation="incident", metadata={"service": "shop"})
            clock += timedelta(minutes=5)
            if choice == truth:
                memory.outcome("errors gone", status="success", timestamp=clock, situation="incident")
                break
            memory.outcome("no change", status="failure", timestamp=clock, situation="incident")
            memory.correct(f"It was the {truth}, not the {choice}", timestamp=clock + timedelta(minutes=1),
                           situation="incident")
            choice = truth
    memory.flush()                                 # close the last episode

    for fact in memory.facts():                    # generalized, versioned heuristics
        print(fact.id, fact.text, f"confidence {fact.confidence:.2f}")
    print(memory.recall("pool exhausted after a traffic spike").render(max_chars=600))

with EpisodicMemory("agent-memory.db", principal="team-a") as memory:   # a new process sees the same memory
    episodes = memory.episodes()
    print(len(episodes), "episodes;", [e.outcome.value for e in episodes])
'''


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(README_EXAMPLE, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    episodes = namespace["episodes"]
    assert len(episodes) == 6  # four incidents, two of them retried after a correction
    assert [e.outcome for e in episodes].count(Outcome.FAILURE) == 2
    assert "→ pool confidence" in out and "→ release confidence" in out and "6 episodes" in out
    assert (tmp_path / "agent-memory.db").exists()
