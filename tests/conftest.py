import gc
import os
import shutil
import sys
import tempfile
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

# The suite runs on two workers (pytest-xdist, see pyproject.toml); a BLAS pool per worker on
# top of that oversubscribes the cores and made the suite half again as slow. Set before numpy
# loads, and inherited by the processes tests start.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@cache
def optional_dependencies() -> dict[str, list[str]]:
    """pyproject.toml's [project.optional-dependencies]: extra -> its requirements."""
    with open(ROOT / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["project"]["optional-dependencies"]


@cache
def missing_from(extra: str) -> list[str]:
    """The distributions of the optional `extra` that are not installed."""
    missing = []
    for requirement in optional_dependencies()[extra]:
        name = Requirement(requirement).name
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    return missing


# The store tests write and flush small files by the thousand (every commit flushes the WAL and the anchor): on
# this project's 2-core reference machine those flushes to disk cost the suite about 14 s of 93. Temporary
# folders go to memory (tmpfs) where the machine has it, unless --basetemp says where; every test still sees
# a fresh folder, and the process kills the crash tests make behave the same there.
_MEMORY_FOLDER = "/dev/shm"


def _in_memory_basetemp(config) -> None:
    if config.option.basetemp or hasattr(config, "workerinput") or not os.access(_MEMORY_FOLDER, os.W_OK):
        return  # chosen by the caller; an xdist worker (it gets its folder from the controller); no tmpfs
    config.option.basetemp = tempfile.mkdtemp(prefix="memory-tests-", dir=_MEMORY_FOLDER)
    config._memory_basetemp = config.option.basetemp


def pytest_unconfigure(config):
    if folder := getattr(config, "_memory_basetemp", None):
        shutil.rmtree(folder, ignore_errors=True)  # memory, not disk: nothing is left behind


def pytest_configure(config):
    _in_memory_basetemp(config)
    config.addinivalue_line(
        "markers",
        "extra(name): needs the optional extra `name` of pyproject.toml; "
        "skips, naming it, when one of its packages is not installed",
    )


def pytest_collection_modifyitems(config, items):
    # A skip mark, not a skip raised at setup: the summary then names each test, not this file.
    for item in items:
        for mark in item.iter_markers("extra"):
            (extra,) = mark.args
            if extra not in optional_dependencies():
                raise pytest.UsageError(
                    f"{item.nodeid}: extra({extra!r}) is not an extra of pyproject.toml "
                    f"(known: {', '.join(optional_dependencies())})"
                )
            if missing := missing_from(extra):
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"the {extra} extra is not installed (no "
                        f"{', '.join(missing)}): pip install -e '.[{extra}]'"
                    )
                )


def pytest_collection_finish(session):
    # Everything imported by collection (numpy, scikit-learn, networkx, the project, every test module)
    # lives as long as the worker: moved out of the collector's reach, a full collection no longer walks
    # it. About 5 s of each worker's 6 s of collection pauses went to those walks.
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


@pytest.fixture(scope="session")
def _played_stores(tmp_path_factory):
    return {}, tmp_path_factory


@pytest.fixture
def played(_played_stores):
    """`played(path, n)` leaves at `path` the store `opened(path)` holds after `play(memory, n)` (the
    helpers of test_open_snapshot and test_retriever_bounds): a copy of one played once per worker,
    file for file (the sidecars included), since playing takes about a second."""
    cache, factory = _played_stores

    def copy(path: Path, n: int) -> Path:
        from tests.memory.persistence.test_open_snapshot import opened
        from tests.memory.retrieval.test_retriever_bounds import play

        source = cache.get((n, path.name))
        if source is None:
            source = factory.mktemp(f"played-{n}") / path.name
            with opened(source) as live:
                play(live, n)
            cache[(n, path.name)] = source
        for file in source.parent.iterdir():
            shutil.copyfile(file, path.parent / file.name)
        return path

    return copy
