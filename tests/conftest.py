import os
import sys
from pathlib import Path

# The suite runs on two workers (pytest-xdist, see pyproject.toml); a BLAS pool per worker on
# top of that oversubscribes the cores and made the suite half again as slow. Set before numpy
# loads, and inherited by the processes tests start.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
