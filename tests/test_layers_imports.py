"""The layers import one way, checked on the source (`ast`, every import: at module level, inside a
function, under ``if TYPE_CHECKING``).

- Each module of `memory` sits on a floor (`FLOORS`, from the data flow the `memory` package's
  docstring draws) and imports only from its own floor or lower ones.
- No import cycle among the modules of `LIBRARY`, counting imports inside functions (an import
  moved into a function to dodge a cycle is still a cycle); type-checking-only imports never run
  and are left out.
- Inside `memory`, a module names the module it imports (`from memory.pipeline import ...`), never
  the package face (`from memory import pipeline`), which imports the facade and everything.
- `agent/` reads the memory through its face only: ``import memory`` / ``from memory import X``
  (X a name `memory/__init__.py` exports, not a submodule).

The ``KNOWN_*`` sets list what is still wrong in code whose move is under way. They only shrink:
an entry that no longer occurs fails the test until it is removed here.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("memory", "agent", "baseline", "eval", "simulator", "scenarios")
FACE = "memory"  # the package face: `memory/__init__.py`

# Lowest first. A name stands for the module and, unless a longer name claims them, everything under it.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("memory.errors", "memory.text", "memory.lexicon", "memory.outputs"),  # errors, words, safe output paths
    ("memory.timeline", "memory.window"),  # [1] entries and stores; the short-term window over them
    ("memory.episodes",),  # [2] segmenter and outcomes
    ("memory.graph",),  # [3] edge records, rules, queries, the chain cache
    ("memory.facts",),  # [4] versioned facts
    ("memory.reinforcer", "memory.retention"),  # rules over episodes, edges and facts
    # the recall index is part of the derived state (episode vectors, their bounds, the weights it stores)
    ("memory.retrieval.index", "memory.retrieval.bounds", "memory.retrieval.config"),
    ("memory.state",),  # the derived state
    ("memory.pipeline", "memory.calibration"),  # what reads and changes the state
    ("memory.persistence",),  # the state rebuilt from stored records and runs
    ("memory.retrieval",),  # query → Context
    ("memory.agent_memory",),  # the facade
    (FACE, "memory.__main__", "memory.cli", "memory.mcp"),  # the package face and the programs on top of it
)

# Imports that run up a floor, in files whose owners are moving them: "importing file -> imported module".
KNOWN_UPWARD: set[str] = set()  # none left
# Import cycles (strongly connected modules, sorted, joined with " <-> "): none left.
KNOWN_CYCLES: set[str] = set()
# Imports of the package face from inside it: "importing file -> what it names".
KNOWN_FACE_IMPORTS: set[str] = set()
# agent/ imports of memory below its face: none left, agent/ reads the memory through `memory` alone.
KNOWN_AGENT_IMPORTS: set[str] = set()


class Import(NamedTuple):
    source: str  # importing module
    path: str  # its file, relative to the repository
    target: str  # imported module (the longest module of the repository the name resolves to)
    names: tuple[str, ...]  # the names a `from` import takes ("" for a plain import)
    via_face: bool  # `from memory import ...` / `import memory`
    type_only: bool  # under `if TYPE_CHECKING:` (never runs)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for top in LIBRARY for p in sorted((ROOT / top).rglob("*.py"))}


MODULES = _modules()


def _resolve(name: str) -> str:
    """The longest module of the repository `name` is or lies in ("" when none)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _type_only_nodes(tree: ast.Module) -> set[int]:
    hidden = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and any(
            isinstance(n, ast.Name)
            and n.id == "TYPE_CHECKING"
            or isinstance(n, ast.Attribute)
            and n.attr == "TYPE_CHECKING"
            for n in ast.walk(node.test)
        ):
            hidden.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return hidden


def _imports_of(module: str, path: Path, root: Path = ROOT) -> Iterator[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    hidden = _type_only_nodes(tree)
    rel = path.relative_to(root).as_posix()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name)
                if target:
                    yield Import(module, rel, target, ("",), alias.name == FACE, id(node) in hidden)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            if not _resolve(base):
                continue
            for alias in node.names:  # `from package import submodule` imports the submodule
                full = f"{base}.{alias.name}"
                target = full if full in MODULES else _resolve(base)
                yield Import(module, rel, target, (alias.name,), base == FACE, id(node) in hidden)


@functools.cache
def all_imports() -> tuple[Import, ...]:
    """Every import of the library, parsed once, when a test first asks (not while the suite collects)."""
    return tuple(imp for module, path in MODULES.items() for imp in _imports_of(module, path))


def floor_of(module: str) -> int:
    """The floor of a memory module: that of the longest declared name it is or lies under."""
    best, found = "", None
    for level, names in enumerate(FLOORS):
        for name in names:
            claims = module == name or (name != FACE and module.startswith(name + "."))
            if claims and len(name) > len(best):
                best, found = name, level
    assert found is not None, f"{module} sits on no floor: add it to FLOORS"
    return found


def _memory(module: str) -> bool:
    return module == FACE or module.startswith(FACE + ".")


def _shrinking(found: set[str], known: set[str]) -> None:
    assert found - known == set(), "new violations"
    assert known - found == set(), "fixed: remove these from the KNOWN set"


def test_every_memory_module_sits_on_a_floor_and_every_floor_name_exists() -> None:
    for module in MODULES:
        if _memory(module):
            floor_of(module)
    declared = {name for names in FLOORS for name in names}
    assert {name for name in declared if name not in MODULES} == set()


def test_no_memory_module_imports_from_a_higher_floor() -> None:
    upward = {
        f"{imp.path} -> {imp.target}"
        for imp in all_imports()
        if _memory(imp.source) and _memory(imp.target) and floor_of(imp.target) > floor_of(imp.source)
    }
    _shrinking(upward, KNOWN_UPWARD)


def import_graph() -> nx.DiGraph:
    """Modules of `LIBRARY` and the imports that run (in functions too; not type-checking-only ones)."""
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    graph.add_edges_from(
        (imp.source, imp.target) for imp in all_imports() if not imp.type_only and imp.source != imp.target
    )
    return graph


def test_no_import_cycles() -> None:
    cycles = {
        " <-> ".join(sorted(group)) for group in nx.strongly_connected_components(import_graph()) if len(group) > 1
    }
    _shrinking(cycles, KNOWN_CYCLES)


def test_memory_modules_name_the_module_they_import_not_the_package_face() -> None:
    through_face = {
        f"{imp.path} -> {imp.target if imp.target != FACE else 'memory.' + imp.names[0]}"
        for imp in all_imports()
        if imp.via_face and _memory(imp.source) and imp.source != FACE
    }
    _shrinking(through_face, KNOWN_FACE_IMPORTS)


def test_agent_reads_the_memory_through_its_face() -> None:
    below = {
        f"{imp.path} -> {imp.target}"
        for imp in all_imports()
        if imp.source.startswith("agent.") or imp.source == "agent"
        if _memory(imp.target) and imp.target != FACE
    }
    _shrinking(below, KNOWN_AGENT_IMPORTS)


def test_edges_live_only_with_the_graph() -> None:
    """`Edge`/`EdgeType` are the graph layer's records: the episodes layer no longer answers for them."""
    import memory.episodes
    import memory.graph

    assert not hasattr(memory.episodes, "Edge") and not hasattr(memory.episodes, "EdgeType")
    assert memory.graph.Edge.__module__ == "memory.graph.edges"


def test_the_checks_see_what_they_check() -> None:
    """The scan finds the imports the checks rely on (an import inside a function included)."""
    by_source: dict[str, set[str]] = defaultdict(set)
    for imp in all_imports():
        by_source[imp.source].add(imp.target)
    assert "memory.pipeline" in by_source["memory.persistence.loader"]
    assert "memory.retrieval.units" in by_source["memory.retrieval"]  # `from package import submodule`
    assert floor_of("memory.timeline.store") < floor_of("memory.episodes.segmenter") < floor_of("memory.graph.rules")
    assert floor_of("memory.retrieval.index") < floor_of("memory.state") < floor_of("memory.retrieval.ranking")
    assert floor_of("memory") == floor_of("memory.__main__") == len(FLOORS) - 1


def test_an_import_inside_a_function_counts(tmp_path) -> None:
    """A module that imports upwards only inside a function is still seen importing upwards."""
    hidden = tmp_path / "memory" / "episodes" / "lazy.py"
    hidden.parent.mkdir(parents=True)
    hidden.write_text("def late():\n    from memory.graph import edges\n    return edges\n", encoding="utf-8")
    found = list(_imports_of("memory.episodes.lazy", hidden, root=tmp_path))
    assert [(imp.target, imp.type_only) for imp in found] == [("memory.graph.edges", False)]
    assert floor_of(found[0].source) < floor_of(found[0].target)
