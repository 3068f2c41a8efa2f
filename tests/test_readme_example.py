"""The examples of the `EpisodicMemory` facade in the README and on the memory page, executed verbatim."""

from pathlib import Path

from memory.episodes import Outcome

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGE = ROOT / "docs" / "memory.md"


def _python_block(text: str) -> str:
    start = text.index("```python") + len("```python")
    return text[start : text.index("```", start)]


def readme_example() -> str:
    """The python block of the memory page ("Using the memory in an agent"): the full loop."""
    return _python_block(PAGE.read_text(encoding="utf-8"))


def ten_lines() -> str:
    """The python block of the README's "The memory in ten lines"."""
    text = README.read_text(encoding="utf-8")
    return _python_block(text[text.index("## The memory in ten lines") :])


def test_the_readme_s_ten_lines_show_the_failed_attempt_and_its_correction(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(ten_lines(), "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "Symptom: checkout 5xx at 7%; connection pool exhausted, database idle" in out
    assert "tried database, outcome FAILURE" in out and "Result: errors persist after restarting the database" in out
    assert "Correction: Not the database: the connection pool was exhausted" in out


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(readme_example(), "docs/memory.md", "exec"), namespace)
    out = capsys.readouterr().out
    episodes = namespace["episodes"]
    assert len(episodes) == 6  # four incidents, two of them retried after a correction
    assert [e.outcome for e in episodes].count(Outcome.FAILURE) == 2
    assert "→ pool, not database confidence" in out and "→ release, not pool confidence" in out and "6 episodes" in out
    assert (tmp_path / "agent-memory.db").exists()
