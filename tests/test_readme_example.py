"""The README's example of the `EpisodicMemory` facade, executed verbatim."""

from pathlib import Path

from memory.episodes import Outcome

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example() -> str:
    """The python block of the README's "Using the memory in an agent" section."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Using the memory in an agent"):]
    return section[section.index("```python") + len("```python"):section.index("```", section.index("```python") + 9)]



def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(readme_example(), "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    episodes = namespace["episodes"]
    assert len(episodes) == 6  # four incidents, two of them retried after a correction
    assert [e.outcome for e in episodes].count(Outcome.FAILURE) == 2
    assert "→ pool, not database confidence" in out and "→ release, not pool confidence" in out and "6 episodes" in out
    assert (tmp_path / "agent-memory.db").exists()
