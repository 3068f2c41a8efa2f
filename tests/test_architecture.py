"""The shape the code promises: small modules, short functions, public surfaces, no process-wide settings."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("memory", "agent", "baseline", "simulator", "eval", "scenarios")
MODULE_LINES = 450  # most lines of a module in memory/
FUNCTION_LINES = 60  # most lines of a function in library code
FACADE_LINES = 300  # most lines of the EpisodicMemory class


def _modules(*tops: str) -> list[Path]:
    return sorted(p for top in tops for p in (ROOT / top).rglob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _package(path: Path) -> str:
    """The package a module belongs to (its folder, relative to the repository)."""
    return path.parent.relative_to(ROOT).as_posix()


def test_memory_modules_stay_small() -> None:
    long = {
        p.relative_to(ROOT).as_posix(): n
        for p in _modules("memory")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MODULE_LINES
    }
    assert long == {}


def test_library_functions_stay_short() -> None:
    long = []
    for path in _modules(*LIBRARY):
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_the_facade_is_thin() -> None:
    tree = _tree(ROOT / "memory" / "agent_memory.py")
    facade = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "EpisodicMemory")
    assert facade.end_lineno - facade.lineno + 1 <= FACADE_LINES


NAMED_TUPLE_API = {"_asdict", "_replace", "_fields", "_make"}  # public, underscored to avoid field clashes


def _own_private_names(tree: ast.Module) -> set[str]:
    """`_names` a module defines for its own classes: `self._x` attributes and `_x` methods."""
    names = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and node.attr.startswith("_")
            and isinstance(node.ctx, ast.Store)
        ):
            names.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            names.update(f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return names


def _private_uses(path: Path) -> list[str]:
    """`_name` attributes of another module's objects read here, and `_name` imports from other packages.

    A class may read the private fields of another instance of itself (`other._items` in
    `__eq__`): names the module itself defines on `self` or as methods are its own.
    """
    tree = _tree(path)
    own = _own_private_names(tree) | NAMED_TUPLE_API
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if node.attr not in own:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if alias.name.startswith("_") and not node.module.replace(".", "/").startswith(_package(path)):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} import {node.module}.{alias.name}")
    return found


def test_no_module_reads_another_modules_private_names() -> None:
    assert [use for path in _modules(*LIBRARY) for use in _private_uses(path)] == []


def test_no_library_code_changes_interpreter_settings() -> None:
    offenders = []
    for path in _modules("memory", "agent", "baseline", "simulator"):
        text = path.read_text(encoding="utf-8")
        for call in ("gc.disable", "gc.freeze", "setswitchinterval", "setrecursionlimit"):
            if call in text:
                offenders.append(f"{path.relative_to(ROOT)}: {call}")
    assert offenders == []


@pytest.mark.parametrize(
    "package",
    [p.parent for p in _modules("memory") if p.name == "__init__.py"],
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_every_memory_package_exports_a_short_documented_surface(package: Path) -> None:
    tree = _tree(package / "__init__.py")
    assert ast.get_docstring(tree), "a package says what it is"
    exported = next(
        (
            n
            for n in tree.body
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)
        ),
        None,
    )
    assert exported is not None, "a package lists its public names"
    names = ast.literal_eval(exported.value)
    assert 0 < len(names) <= 40 and len(set(names)) == len(names)


CROSS_CUTTING = {
    "test_architecture",
    "test_layers_imports",
    "test_docs",
    "test_docs_figures",
    "test_readme_example",
    "test_first_run",
}  # tests of the whole repository: its shape, its docs, its first run


def test_tests_mirror_the_packages() -> None:
    """A test file sits in the folder of the package it tests (tests/memory/graph/ for memory.graph)."""
    tests = ROOT / "tests"
    misplaced = []
    for path in sorted(tests.rglob("test_*.py")):
        folder = path.parent.relative_to(tests)
        if folder == Path("."):
            if path.stem not in CROSS_CUTTING:
                misplaced.append(path.name)
        elif not (ROOT / folder).is_dir() or folder.parts[0] not in LIBRARY:
            misplaced.append(path.relative_to(tests).as_posix())
    assert misplaced == []
