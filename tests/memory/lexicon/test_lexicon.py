"""The lexicon: every word the layers read is data with its provenance, and no layer keeps a word list."""

from __future__ import annotations

import ast
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory.episodes import Outcome, classify_text, detect_outcome
from memory.episodes.model import Episode
from memory.graph.causes import referring
from memory.graph.changes import change_kind, stopgap_sentences
from memory.lexicon import DEFAULT_LEXICON, LexiconError, load_lexicon
from memory.text import all_clear, split_negation
from tests.builders import entries_from

MEMORY = Path(__file__).resolve().parents[3] / "memory"
# Modules whose alternations are formats, not the vocabulary the layers read text with.
NOT_VOCABULARY = {
    "timeline/redaction.py": "secret formats: provider key prefixes, the labels of card numbers and ids",
}
PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z' -]*")  # a word or phrase, no regex syntax


def _alternations(pattern: str) -> list[list[str]]:
    """The alternatives of every alternation in a pattern: the whole pattern's and each group's.

    A group right after a word character or a quantified class (``[\\w-]+(?:ed|en|ing)``) is a
    suffix of a stem, not a list of words; it is left out.
    """
    found: list[list[str]] = []
    stack: list[tuple[int, bool]] = []  # (start of the group's body, whether it is a suffix)
    bodies: list[tuple[str, bool]] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":  # a character class: skip to its end
            i = pattern.index("]", i + 2 if pattern[i + 1 : i + 2] == "]" else i + 1) + 1
            continue
        if c == "(":
            body = i + 1
            if pattern.startswith("?", body):
                body = pattern.index(">", body) + 1 if pattern.startswith("?P<", body) else body + 2
            escaped = i > 1 and pattern[i - 2] == "\\"
            suffix = (i > 0 and pattern[i - 1].isalnum() and not escaped) or pattern[i - 2 : i] in ("]+", "]*")
            stack.append((body, suffix))
        elif c == ")" and stack:
            start, suffix = stack.pop()
            bodies.append((pattern[start:i], suffix))
        i += 1
    bodies.append((pattern, False))
    for body, suffix in bodies:
        if not suffix:
            found.append(_top_level(body))
    return found


def _top_level(body: str) -> list[str]:
    parts, depth, current, i = [], 0, "", 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            current += body[i : i + 2]
            i += 2
            continue
        depth += c == "("
        depth -= c == ")"
        if c == "|" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += c
        i += 1
    return [*parts, current]


def _word_lists(pattern: str) -> list[list[str]]:
    """Alternations of three or more plain words in `pattern`."""
    return [
        words
        for alts in _alternations(pattern)
        if len(words := [a.strip() for a in alts if PLAIN_WORD.fullmatch(a.strip())]) >= 3
    ]


def _literal(node: ast.expr) -> str | None:
    """The text of a string literal, an f-string's literal parts, or a concatenation of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "\x00" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left), _literal(node.right)
        return None if left is None or right is None else left + right
    return None


def _compiled_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, pattern text) of every `re.compile`, `re.search`, ... given a literal pattern, and of every
    other string literal written like a pattern (with ``(?:`` or ``\\b``; docstrings left out)."""
    out = []
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}  # and literals read
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.func.attr in {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "split"}
            and node.args
            and (text := _literal(node.args[0])) is not None
        ):
            out.append((node.lineno, text))
            docstrings |= {id(part) for part in ast.walk(node.args[0])}  # read already, as one pattern
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and ("(?:" in node.value or "\\b" in node.value)
        ):
            out.append((node.lineno, node.value))
    return out


def test_the_scan_finds_a_word_list() -> None:
    tree = ast.parse(
        'import re\nX = re.compile(r"\\b(?:fixed|resolved|back to normal)\\b")\n'
        'Y = re.compile(rf"\\b(?:{lx}|pool)\\s+[\\w-]+(?:ed|en|ing)\\b")\n'
        'KINDS = {"version": r"version|release|rollback|tags?(?:-\\d+)?"}\n'
    )
    found: dict[int, list] = {}
    for line, text in _compiled_literals(tree):
        found.setdefault(line, []).extend(_word_lists(text))
    assert found == {2: [["fixed", "resolved", "back to normal"]], 3: [], 4: [["version", "release", "rollback"]]}


def test_no_layer_keeps_a_word_list_of_its_own() -> None:
    offending = []
    for path in sorted(MEMORY.rglob("*.py")):
        if "lexicon" in path.relative_to(MEMORY).parts or path.relative_to(MEMORY).as_posix() in NOT_VOCABULARY:
            continue
        for line, text in _compiled_literals(ast.parse(path.read_text(encoding="utf-8"))):
            for words in _word_lists(text):
                offending.append(f"{path.relative_to(MEMORY.parent)}:{line}: {'|'.join(words)}")
    assert not offending, "word lists belong in memory/lexicon:\n" + "\n".join(offending)


def test_every_group_says_where_its_words_came_from() -> None:
    assert len(DEFAULT_LEXICON.groups) >= 60
    for name, group in DEFAULT_LEXICON.groups.items():
        assert group.words, name
        assert len(group.provenance.strip()) >= 20, name
        assert group.source.endswith(".yaml"), name


def test_the_shipped_lexicon_is_package_data() -> None:
    pyproject = (MEMORY.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert '"memory.lexicon" = ["*.yaml"]' in pyproject
    assert {p.name for p in (MEMORY / "lexicon").glob("*.yaml")} == {
        group.source for group in DEFAULT_LEXICON.groups.values()
    }


def test_a_group_without_provenance_or_words_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("negators:\n  provenance: ''\n  words: ['not']\n", encoding="utf-8")
    with pytest.raises(LexiconError, match="no provenance"):
        load_lexicon(tmp_path)
    (tmp_path / "a.yaml").write_text("negators:\n  provenance: general English\n  words: [no]\n", encoding="utf-8")
    with pytest.raises(LexiconError, match="non-empty list of text"):  # YAML's bare no is a boolean
        load_lexicon(tmp_path)
    (tmp_path / "a.yaml").write_text("negators:\n  provenance: x\n  words: ['not']\n", encoding="utf-8")
    (tmp_path / "b.yaml").write_text("negators:\n  provenance: x\n  words: ['not']\n", encoding="utf-8")
    with pytest.raises(LexiconError, match="in both a.yaml and b.yaml"):
        load_lexicon(tmp_path)


def test_a_loaded_copy_reads_like_the_shipped_one() -> None:
    copy = load_lexicon()
    assert copy is not DEFAULT_LEXICON and copy.groups == DEFAULT_LEXICON.groups
    text = "Raised the pool to 80; errors gone, but the queue is still slow"
    assert classify_text(text, copy) == classify_text(text)


def test_an_extra_failure_word_makes_the_classifier_read_an_outcome() -> None:
    entries = entries_from(
        [
            {"at": 0, "kind": "decision", "text": "Decision: restart", "metadata": {"choice": "x"}},
            {"at": 1, "kind": "outcome", "text": "The conveyor is banjaxed again"},
        ]
    )
    assert detect_outcome(entries).outcome == Outcome.SUCCESS  # a report without any cue after a change
    site = DEFAULT_LEXICON.with_words("failure_cues", ["banjaxed"], "a site's own word for broken (test)")
    assert detect_outcome(entries, site).outcome == Outcome.FAILURE
    assert "'banjaxed'" in detect_outcome(entries, site).evidence
    assert "banjaxed" in site.group("failure_cues").words and "banjaxed" not in DEFAULT_LEXICON.words("failure_cues")
    assert "a site's own word" in site.group("failure_cues").provenance


def test_every_layer_reads_the_lexicon_it_is_given() -> None:
    site = (
        DEFAULT_LEXICON.with_words("normal_state", ["hunky-dory"], "test")
        .with_words("look_reports", ["eyeballed"], "test")
        .with_words("change_nouns", ["reflash"], "test")
        .with_words("change_kind_schedule", ["rota"], "test")
        .with_words("stopgap_words", ["jury-rigged"], "test")
    )
    assert split_negation("boiler hunky-dory")[0] == "boiler hunky-dory"
    assert split_negation("boiler hunky-dory", site) == ("", "boiler hunky-dory")
    assert all_clear("Pump eyeballed: all fine") == ""
    assert all_clear("Pump eyeballed: all fine", site) == "Pump eyeballed: all fine"
    assert not referring("trips began after the last reflash")
    assert referring("trips began after the last reflash", site)
    assert change_kind("moved the rota") == "component" and change_kind("moved the rota", site) == "schedule"
    at = datetime(2026, 1, 1, tzinfo=UTC)
    ep = Episode(
        id="e",
        entry_ids=("x",),
        first_seq=0,
        last_seq=0,
        principal="p",
        situation="s",
        subject="pump",
        start=at,
        end=at,
        summary="pump trips → Fitted a jury-rigged bypass",
        outcome=Outcome.SUCCESS,
        outcome_evidence="",
        decisions=("bypass",),
        actions=("Fitted a jury-rigged bypass",),
    )
    assert stopgap_sentences(ep) == ()
    assert set(stopgap_sentences(ep, site)) == {"Fitted a jury-rigged bypass"}
