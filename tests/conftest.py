import os
import shutil
import sys
from pathlib import Path

import pytest

# The suite runs on two workers (pytest-xdist, see pyproject.toml); a BLAS pool per worker on
# top of that oversubscribes the cores and made the suite half again as slow. Set before numpy
# loads, and inherited by the processes tests start.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


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
        from tests.test_open_snapshot import opened
        from tests.test_retriever_bounds import play

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
