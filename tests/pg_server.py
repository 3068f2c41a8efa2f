"""A throwaway PostgreSQL server for the tests: initdb + pg_ctl on a Unix socket in a temporary folder.

The same `LocalServer` the benchmark starts (`eval.bench.server`), here with fsync off for
speed. `LocalServer.find` says why none can start here (no server binaries, or root without a
``postgres`` system user to run them as); the tests skip with that reason.
"""

from eval.bench.server import LocalServer

__all__ = ["LocalServer"]
