"""Atomic file writes: parent folders created, a temp file moved into place; and the check made before a run."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


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

    Checked before a run rather than after it: the nearest existing folder must take a new file
    (tried, since permission bits do not bind root and a read-only mount ignores them), and an
    existing target must be a regular file (a FIFO would block its reader) or, for `folder`, a folder.
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
