"""The files command lines write: checked before any work is done, then written whole or not at all.

`output_problem` is asked about every output path of every command line (``python -m memory
export``, ``memory.graph --out``, ``eval.compare``, ``eval.report``, ``eval.tracks``,
``eval.graph``, ``eval.bench``, ``scenarios.importers``) before it reads or plays anything.
It refuses three things, and only these:

- an existing SQLite database (the 16-byte header ``SQLite format 3\\0``): a memory store, or
  anyone's database;
- a sidecar of an existing SQLite database: its path plus ``-wal``, ``-shm``, ``-journal``,
  ``-anchor`` or ``-vectors``, whether or not that sidecar exists yet;
- the command's own input: the same file once symlinks are resolved (``os.path.samefile``).

Anything else, a previous JSON log, CSV, HTML page, YAML scenario, Markdown page or figure, is
an earlier output and is replaced atomically (`write_atomic`). A PostgreSQL store is a URL, not
a path: nothing on disk to protect.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable
from pathlib import Path

SQLITE_HEADER = b"SQLite format 3\x00"
SIDECARS = ("-wal", "-shm", "-journal", "-anchor", "-vectors")  # files SQLite and the store keep beside one
FIGURES = ("*.png", "*.svg")  # what a folder output (--plots DIR) replaces inside it
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)

Sources = Iterable[tuple[str, "str | Path | None"]]  # (what it is, its path) of each input a command reads


def output_problem(flag: str, path: str | Path, *, sources: Sources = (), folder: bool = False) -> str:
    """The one-line error for writing `path` as `flag`'s output (a folder of figures when `folder`); "" when it may.

    Args:
        flag: how the command line named the output (``--csv``), or "" for a positional path.
        path: the output path as given.
        sources: (description, path) of each file the command reads, e.g.
            ``("the store being exported", "runs/memory.sqlite")``; None and URLs are skipped.
        folder: `path` is a folder whose ``*.png`` and ``*.svg`` files are replaced.
    """
    named = f"{flag} {path}" if flag else str(path)
    target = Path(path)
    for what, source in sources:
        if source and "://" not in str(source) and _same_file(target, Path(source)):
            return f"{named} is {what}: refusing to overwrite it"
    for file in _replaced(target, folder):
        reason = _holds_a_store(file)
        if reason:
            where = named if file == target else f"{named}: {file}"
            return f"{where} {reason}: refusing to overwrite it"
    reason = unwritable(target, folder=folder)
    return f"{named}: {reason}" if reason else ""


def _replaced(target: Path, folder: bool) -> list[Path]:
    """The existing files writing `target` may replace (for a folder: its figures; else the path itself)."""
    if folder and target.is_dir():
        return sorted(file for pattern in FIGURES for file in target.glob(pattern))
    return [target]


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): the same path once resolved
        return a.resolve() == b.resolve()


def _holds_a_store(path: Path) -> str:
    """Why replacing `path` would destroy a database ("" when it would not)."""
    if _is_sqlite(path):
        return "is an SQLite database (a memory store?)"
    for suffix in SIDECARS:
        base = Path(str(path)[: -len(suffix)])
        if str(path).endswith(suffix) and _is_sqlite(base):
            return f"is the {suffix} file of the SQLite database {base}"
    return ""


def _is_sqlite(path: Path) -> bool:
    """Whether `path` is a regular file that starts with the SQLite header (a FIFO is never opened)."""
    if not path.is_file():
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:  # unreadable: not ours to judge, and `unwritable` says whether it can be replaced
        return False


def _create_temp(folder: Path, name: str) -> tuple[int, Path]:
    """A new hidden file beside `name` in `folder`, opened for writing; its mode is 0666 less the umask
    (``tempfile.mkstemp`` would make it 0600, and a log or figure is an ordinary file)."""
    for _ in range(100):
        temp = folder / f".{name}-{secrets.token_hex(4)}.tmp"
        try:
            return os.open(temp, _NEW_FILE, 0o666), temp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {name} in {folder}")


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write `data` to `path` whole or not at all (a crash never leaves a torn file); the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = _create_temp(target.parent, target.name)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return target


def unwritable(path: str | Path, *, folder: bool = False) -> str:
    """Why `write_atomic` could not write `path` (a folder of outputs when `folder`); "" when it could.

    The nearest existing folder must take a new file (tried, since permission bits do not bind
    root and a read-only mount ignores them), and an existing target must be a regular file (a
    FIFO would block its reader) or, for `folder`, a folder.
    """
    target = Path(path)
    if os.path.exists(target):
        if folder and not target.is_dir():
            return "is a file; expected a folder"
        if not folder and target.is_dir():
            return "is a directory; expected a file path"
        if not folder and not target.is_file():
            return "not a regular file (a FIFO, socket or device); expected a file path"
    existing = target if folder else target.parent
    while not os.path.exists(existing):
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a directory"
    try:
        handle, temp = _create_temp(existing, "write-check")
    except OSError as exc:
        return f"cannot create files in {existing} ({exc.strerror or exc})"
    os.close(handle)
    temp.unlink(missing_ok=True)
    return ""
