"""Library code leaves the process's settings alone: no environment variable is written, and BLAS's
thread pool (which every thread of the process shares) is limited only when a recall's configuration
asks for it (`RetrieverConfig.blas_threads`, for single-threaded hosts)."""

from __future__ import annotations

import ast
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import threadpoolctl

from memory.errors import EncoderUnavailable
from memory.retrieval import DEFAULT, Bounds, RetrieverConfig
from memory.retrieval import bounds as bounds_module
from memory.timeline import SentenceTransformerEncoder
from tests.memory.retrieval.test_retriever import build, synthetic_texts

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("memory",)
ENV_WRITES = {"setdefault", "update", "pop", "popitem", "clear", "__setitem__", "__delitem__"}
THREAD_LIMITS = {"threadpool_limits", "limit"}  # threadpoolctl's function, and ThreadpoolController.limit
LIMITING = {"memory/retrieval/bounds.py": "blas_threads"}  # the one function that may limit, when asked


def _library() -> list[Path]:
    return sorted(p for top in LIBRARY for p in (ROOT / top).rglob("*.py"))


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _environment_writes(tree: ast.Module) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if (node.func.attr in ENV_WRITES and _is_environ(node.func.value)) or node.func.attr in (
                "putenv",
                "unsetenv",
            ):
                lines.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            if any(isinstance(t, ast.Subscript) and _is_environ(t.value) for t in targets):
                lines.append(node.lineno)
    return lines


def test_no_library_code_writes_the_environment() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in _library()
        for line in _environment_writes(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert found == []


def _thread_limits(tree: ast.Module) -> list[tuple[str, int]]:
    """(enclosing function, line) of every call that limits a thread pool."""
    found = []
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, ast.Call):
                    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                    if name in THREAD_LIMITS:
                        found.append((function.name, node.lineno))
    return found


def test_only_the_optional_blas_limit_touches_thread_pools() -> None:
    users = {p.relative_to(ROOT).as_posix() for p in _library() if "threadpoolctl" in p.read_text(encoding="utf-8")}
    assert users <= set(LIMITING)
    for path, function in LIMITING.items():
        calls = _thread_limits(ast.parse((ROOT / path).read_text(encoding="utf-8")))
        assert calls and {name for name, _ in calls} == {function}


def _blas() -> list[int]:
    return [pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"]


@pytest.fixture
def first_passes(monkeypatch):
    """The BLAS threads seen while each first pass over the bounds runs (`Bounds.split` of a query)."""
    seen: list[list[int]] = []
    split = Bounds.split

    def spy(self, vectors):
        if np.ndim(vectors) == 1:  # a query (rows being added are 2-d)
            seen.append(_blas())
        return split(self, vectors)

    monkeypatch.setattr(Bounds, "split", spy)
    return seen


def test_a_default_recall_leaves_blas_threads_alone(first_passes) -> None:
    assert DEFAULT.blas_threads is None and RetrieverConfig().blas_threads is None
    before = threadpoolctl.threadpool_info()
    retriever = build(300, config=replace(DEFAULT, prune_from=1))  # every recall reads the bounds
    for text, _ in synthetic_texts(5, seed=1):
        retriever.recall(text, principal="p0", situation="ops", k=3)
    assert first_passes and all(threads == _blas() for threads in first_passes)
    assert threadpoolctl.threadpool_info() == before


def test_the_limit_applies_only_when_asked(first_passes) -> None:
    outside = _blas()
    if not outside:
        pytest.skip("no BLAS library loaded")
    bounds = Bounds(np.random.default_rng(0).standard_normal((64, 32)))
    bounds.extend(np.random.default_rng(1).standard_normal((64, 32)))
    query = np.ones(32) / np.sqrt(32)
    unlimited, limited = bounds.probe(query), bounds.probe(query, threads=1)
    assert first_passes == [outside, [1] * len(outside)]
    assert _blas() == outside
    assert np.array_equal(unlimited.low, limited.low) and np.array_equal(unlimited.high, limited.high)
    with bounds_module.blas_threads(bounds_module.PARALLEL_PASS_BYTES + 1, threads=1):  # a large pass: all
        assert _blas() == outside


def test_the_sentence_transformer_encoder_leaves_the_environment_alone(tmp_path) -> None:
    before = dict(os.environ)
    with pytest.raises(EncoderUnavailable):
        SentenceTransformerEncoder(tmp_path / "no-such-model")
    assert dict(os.environ) == before
