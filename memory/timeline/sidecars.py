"""Files kept beside a store file (``<store>-anchor``, ``<store>-vectors``), opened without following links.

A sidecar that is a symbolic link would let whoever planted it have the store write into the
link's target (another user's file, a file of the store's owner): the anchor's slots would
overwrite its first kilobyte, vector rows would be appended to it. So every open of a sidecar
passes ``O_NOFOLLOW`` (where the platform has it; elsewhere a link is looked for first), and
a link, dangling or not, is refused with a `StoreError` naming it. The store also refuses to
open while one of its sidecars is a link, so a planted link is found before anything is
written. No sidecar is replaced by renaming a temporary file onto it; a rename replaces a
link itself, never its target, should one ever be.
"""

from __future__ import annotations

import os

from memory.errors import StoreError

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # 0 where the platform cannot refuse links at open
SUFFIXES = ("-anchor", "-vectors")  # the sidecars of a store file


def link_message(path: str) -> str:
    """What a refused link is told as."""
    return f"{path} is a symbolic link; refusing to write through it (remove the link, or move the store)"


def refuse_link(path: str) -> None:
    """Raise `StoreError` when `path` is a symbolic link (dangling or not)."""
    if os.path.islink(path):
        raise StoreError(link_message(path))


def refuse_links(store_path: str) -> None:
    """Raise `StoreError` when a sidecar of the store file `store_path` is a symbolic link."""
    for suffix in SUFFIXES:
        refuse_link(f"{store_path}{suffix}")


def open_sidecar(path: str, flags: int, mode: int = 0o644) -> int:
    """`os.open` of a sidecar that never follows a link at `path`; a file descriptor.

    Raises:
        StoreError: `path` is a symbolic link.
        OSError: any other failure to open.
    """
    if not NOFOLLOW:
        refuse_link(path)
    try:
        return os.open(path, flags | NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as exc:  # ELOOP on Linux, EMLINK on some BSDs: asking is portable
        if os.path.islink(path):
            raise StoreError(link_message(path)) from exc
        raise
