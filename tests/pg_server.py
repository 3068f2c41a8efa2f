"""A throwaway PostgreSQL server for the tests: initdb + pg_ctl on a Unix socket in a temporary folder.

`LocalServer.find` says why none can start here (no server binaries, or root without a
``postgres`` system user to run them as); the tests skip with that reason.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path


class LocalServer:
    """A private server: trust authentication, no TCP port, its socket and data in one folder."""

    def __init__(self, bindir: Path, user: str | None) -> None:
        self.bindir = bindir
        self.user = user  # the system user that runs the server (None: the current one)
        self.root = Path(tempfile.mkdtemp(prefix="memory-pg-"))

    @staticmethod
    def find() -> tuple[Path | None, str | None, str]:
        """(bin folder, user to run it as, reason it cannot run) for this machine."""
        found = shutil.which("initdb") or next(iter(sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))), None)
        if found is None:
            return None, None, "no PostgreSQL server binaries (initdb) on PATH or in /usr/lib/postgresql/*/bin"
        if os.geteuid() != 0:
            return Path(found).parent, None, ""
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return None, None, "running as root and no 'postgres' system user to run the server as"
        return Path(found).parent, "postgres", ""

    def _run(self, *args: str) -> None:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        """Create the cluster and start the server (about a second)."""
        if self.user is not None:
            shutil.chown(self.root, self.user)
        data = self.root / "data"
        self._run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale",
                  "--no-sync")
        self._run("pg_ctl", "-D", str(data), "-l", str(self.root / "log"), "-w", "-o",
                  f"-k {self.root} -c listen_addresses='' -c fsync=off -c max_connections=40", "start")

    def stop(self) -> None:
        """Stop the server and remove its folder."""
        try:
            self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres", user: str = "postgres") -> str:
        """The libpq URL of a database on this server."""
        return f"postgresql://{user}@/{database}?host={self.root}"

    def admin(self, *statements: str) -> None:
        """Run statements as the superuser, each in its own transaction."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)
