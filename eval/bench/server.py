"""The server store beside SQLite: append and recall figures of `PostgresStore` and `SQLiteStore`.

Both stores get the same work, measured the same way: durable single `Timeline.append`
calls, `Timeline.append_many` batches, and warm `EpisodicMemory.recall` on a store of
seeded incidents (built once as a SQLite file by `corpus.build_store`, then copied to the
server: the timeline by export and import, the derived records in their order).

The server is the one `--server URL` names (its role must be allowed to create databases:
the bench makes its own and drops them), or a throwaway one started
from the system's PostgreSQL binaries in a temporary folder (`LocalServer`, as the tests
do). Without psycopg, binaries or a reachable server the section is skipped and says why.
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rich.table import Table

from eval.bench import measure
from eval.bench.corpus import build_store, log_lines, query_texts
from eval.bench.plan import Plan
from eval.bench.results import metric, summarize, summarize_rate
from memory.errors import EpisodicMemoryError
from memory.timeline import HashingEncoder, SQLiteStore, Timeline, open_store

RECALL_EPISODES = 1000  # episodes of the store both recall figures are measured on


class LocalServer:
    """A private PostgreSQL server: trust authentication, no TCP port, its socket and data in one folder."""

    def __init__(self, bindir: Path, user: str | None, *, fsync: bool = False) -> None:
        self.bindir = bindir
        self.user = user  # the system user that runs the server (None: the current one)
        self.fsync = fsync  # False (tests): commits are not flushed to disk, for speed
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
        self._run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync")
        self._run(
            "pg_ctl",
            "-D",
            str(data),
            "-l",
            str(self.root / "log"),
            "-w",
            "-o",
            f"-k {self.root} -c listen_addresses='' -c fsync={'on' if self.fsync else 'off'} -c max_connections=40",
            "start",
        )

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


class Server:
    """Where the server figures are measured: new databases on one server, dropped afterwards."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url  # a database of the server whose role may create databases
        self.made: list[str] = []

    def database(self) -> str:
        """The URL of a new, empty database."""
        import psycopg

        name = f"memory_bench_{os.getpid()}_{len(self.made)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        self.made.append(name)
        return urlunsplit(urlsplit(self.admin_url)._replace(path=f"/{name}"))

    def drop(self) -> None:
        """Drop the databases made here."""
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            for name in self.made:
                conn.execute(f"DROP DATABASE IF EXISTS {name}")


def unavailable(url: str | None) -> str:
    """Why no server figures can be measured here ("" when they can)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install '.[postgres]')"
    if url is not None:
        return ""
    return LocalServer.find()[2]


def measure_server(plan: Plan, directory: Path, url: str | None, progress: Callable[[str], None]) -> dict[str, Any]:
    """The server section of the results: both stores' figures, or why they were skipped.

    Args:
        url: ``"off"`` skips the section; a ``postgresql://`` URL names a database on a running
            server whose role may create (and drop) databases; None starts a local server.
    """
    if url == "off":
        return {"skipped": "--server off"}
    reason = unavailable(url)
    if reason:
        return {"skipped": reason}
    import psycopg

    local: LocalServer | None = None
    try:
        if url is None:
            local = _local_server(progress)
            url = local.url()
        server = Server(url)
        try:
            return _measure(server, plan, directory, progress)
        finally:
            server.drop()
    except (OSError, subprocess.SubprocessError, psycopg.Error, EpisodicMemoryError) as exc:
        return {"skipped": f"the server could not be used ({type(exc).__name__}: {str(exc).strip()[:300]})"}
    finally:
        if local is not None:
            local.stop()


def _local_server(progress: Callable[[str], None]) -> LocalServer:
    """A local server started from the system's binaries, durable like SQLite's synchronous FULL (fsync on)."""
    bindir, user, reason = LocalServer.find()
    if bindir is None:  # `unavailable` found them a moment ago
        raise OSError(reason)
    local = LocalServer(bindir, user, fsync=True)
    progress("starting a local PostgreSQL server from the system's binaries (fsync on)")
    local.start()
    return local


def _measure(server: Server, plan: Plan, directory: Path, progress: Callable[[str], None]) -> dict[str, Any]:
    """`plan.durable` single appends, up to 5 batches of `plan.batch_size`, `plan.queries` recalls on a store
    of up to `RECALL_EPISODES` episodes (the largest of `plan.sizes` when smaller), per store."""
    appends, batches, batch_size, seed = plan.durable, min(plan.batches, 5), plan.batch_size, plan.seed
    episodes, queries = min(RECALL_EPISODES, max(plan.sizes)), plan.queries
    figures: dict[str, Any] = {"appends": appends, "batch_size": batch_size, "episodes": episodes}
    progress(f"server store: {appends} single appends and {batches} × {batch_size} batch appends per store")
    for kind in ("sqlite", "postgresql"):
        single, batch = (
            (str(directory / "server-bench-single.sqlite"), str(directory / "server-bench-batch.sqlite"))
            if kind == "sqlite"
            else (server.database(), server.database())
        )
        figures[kind] = {
            "append_ms": _single(single, appends, seed),
            "append_batch_per_s": _batches(batch, batches, batch_size, seed),
        }
    progress(f"server store: a store of {episodes:,} episodes, copied to the server, {queries} recalls each")
    built = build_store(directory / "server-bench-recall.sqlite", episodes, seed=seed)
    copy = server.database()
    _copy(built.path, copy, directory)
    texts = query_texts(queries, seed=seed + 1)
    for kind, target in (("sqlite", str(built.path)), ("postgresql", copy)):
        opening = measure.open_store(target, built.largest, texts[0], 1)
        try:
            times = measure.warm_recalls(opening.memory, texts)
        finally:
            opening.memory.close()
        figures[kind]["recall_ms"] = metric(summarize(times), principal=built.largest)
        figures[kind]["open_ms"] = metric(summarize(opening.total_ms), digits=1)
    figures["what"] = (
        "the same work on both stores: durable Timeline.append (SQLite synchronous FULL; the server "
        "commits per its own settings), Timeline.append_many, EpisodicMemory(target) until its first "
        f"recall, warm recalls on a store of {episodes:,} episodes"
    )
    return figures


def _single(target: str, n: int, seed: int, warmup: int = 20) -> dict[str, Any]:
    """Milliseconds of `n` durable single appends (after `warmup` untimed ones) to a new store."""
    items = log_lines(n + warmup, seed)
    times = []
    with closing(open_store(target)) as store:
        timeline = Timeline(store, HashingEncoder())
        for i, item in enumerate(items):
            start = time.perf_counter()
            timeline.append(**item)
            if i >= warmup:
                times.append(1000 * (time.perf_counter() - start))
    return metric(summarize(times))


def _batches(target: str, batches: int, size: int, seed: int) -> dict[str, Any]:
    """Entries per second of `Timeline.append_many` batches of `size` (one untimed warm-up batch)."""
    items = log_lines((batches + 1) * size, seed)
    seconds = []
    with closing(open_store(target)) as store:
        timeline = Timeline(store, HashingEncoder())
        for b in range(batches + 1):
            start = time.perf_counter()
            timeline.append_many(items[b * size : (b + 1) * size])
            if b:
                seconds.append(time.perf_counter() - start)
    return metric(summarize_rate(seconds, size), digits=1)


def _copy(source: Path, url: str, directory: Path) -> None:
    """Copy a SQLite store to an empty server database: the timeline by export/import, then every derived
    record in storing order (consecutive records of one kind in one transaction)."""
    export = directory / "server-bench.jsonl"
    with SQLiteStore(source, create=False) as sqlite:
        sqlite.export_jsonl(export)
        rows = sqlite.record_rows(0, sqlite.last_record())
    with closing(open_store(url)) as server:
        server.import_jsonl(export)
        for kind, group in _runs_of_kind(rows):
            server.add_records(kind, group)
    export.unlink()


def _runs_of_kind(rows: Sequence[tuple[int, str, str, str | None]]) -> Iterator[tuple[str, list[tuple[str, Any]]]]:
    """Consecutive records of one kind, as (kind, [(id, body)]) in storing order (`rows` with every body read)."""
    for kind, run in itertools.groupby(rows, key=lambda row: row[1]):
        yield kind, [(record_id, json.loads(_read(body))) for _, _, record_id, body in run]


def _read(body: str | None) -> str:
    """A record's body JSON text; `record_rows` reads every body unless it is told which (`bodies=`)."""
    if body is None:
        raise ValueError("a record's body was not read")
    return body


def table(section: dict[str, Any] | None) -> Table | str:
    """The server section as a table (SQLite and PostgreSQL side by side), or the reason it was skipped."""
    if not section:
        return ""
    if "skipped" in section:
        return f"server store (PostgreSQL): skipped — {section['skipped']}"
    out = Table(title=f"server store beside SQLite (recall on {section['episodes']:,} episodes)", title_justify="left")
    for column in ("metric", "SQLite p50", "SQLite p95", "PostgreSQL p50", "PostgreSQL p95"):
        out.add_column(column, justify="left" if column == "metric" else "right")
    for name in ("append_ms", "append_batch_per_s", "open_ms", "recall_ms"):
        cells = [
            _cell(section[kind][name].get(stat), name)
            for kind in ("sqlite", "postgresql")
            for stat in ("median", "p95")
        ]
        out.add_row(name, *cells)
    return out


def _cell(value: float | None, name: str) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if value >= 1000 or name == "append_batch_per_s" else f"{value:,.2f}"
