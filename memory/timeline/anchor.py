"""Anchors: what lets `verify` see a lost tail and tampered derived rows.

Two mechanisms, both written by the store as it commits:

- **Digest chains** over the derived tables. Each ``records`` and ``snapshots`` row gets a
  row in ``digests``: the SHA-256 of the previous digest and the row's content. Changing a
  derived row (with the triggers dropped) breaks its digest; the timeline has its own chain.
- **A sidecar anchor** next to the store file (``<store>-anchor``): the timeline's entry
  count and head id and the head of each digest chain, written after every commit. A store
  holding fewer entries than its anchor, or a different row at the anchored position, lost
  its tail (a deleted ``-wal``, truncated file or deleted rows). The anchor is written after
  the commit, so a crash leaves it behind the store, never ahead of it. It has two slots,
  each with a checksum; the newest valid slot counts, so a torn write loses one update.

Neither protects against someone who can rewrite both the store and its anchor: copy the
anchor (or the head id `verify` prints) somewhere they cannot write to for that.
"""

from __future__ import annotations

import hashlib
import os
from typing import NamedTuple

from memory.errors import StoreError
from memory.timeline.sidecars import open_sidecar

SLOT = 512  # bytes per anchor slot
DERIVED = ("records", "snapshots")  # tables chained in ``digests``
GENESIS = "0" * 64


class Anchor(NamedTuple):
    """What the store held when it last committed."""

    entries: int  # number of timeline entries
    head: str  # id of the last entry (GENESIS when there is none)
    derived: dict[str, tuple[int, str]]  # table -> (seq, digest) of its last chained row (0, GENESIS when none)


def row_digest(prev: str, parts: tuple[object, ...]) -> str:
    """The digest of one derived row after `prev`: SHA-256 over the previous digest and each part."""
    h = hashlib.sha256(prev.encode("ascii"))
    for part in parts:
        data = part if isinstance(part, bytes) else str(part).encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def sidecar(path: str) -> str:
    """The anchor file of a store file."""
    return f"{path}-anchor"


def encode(anchor: Anchor) -> bytes:
    """One slot: ``<sha256 of the rest> <entries> <head> <table> <seq> <digest> …``, padded to `SLOT` bytes."""
    body = " ".join(
        [
            str(anchor.entries),
            anchor.head,
            *(f"{table} {seq} {digest}" for table, (seq, digest) in sorted(anchor.derived.items())),
        ]
    )
    return f"{hashlib.sha256(body.encode()).hexdigest()} {body}\n".encode().ljust(SLOT, b" ")


def decode(slot: bytes) -> Anchor | None:
    """The anchor in one slot, or None when it is empty or torn."""
    try:
        checksum, body = slot.decode("ascii").strip().split(" ", 1)
        if hashlib.sha256(body.encode()).hexdigest() != checksum:
            return None
        entries, head, *rest = body.split(" ")
        derived = {rest[i]: (int(rest[i + 1]), rest[i + 2]) for i in range(0, len(rest), 3)}
        return Anchor(int(entries), head, derived)
    except (UnicodeDecodeError, ValueError, IndexError):
        return None


def generation(anchor: Anchor) -> int:
    """Grows with every commit (entries plus derived rows), so the newest slot is the larger."""
    return anchor.entries + sum(seq for seq, _ in anchor.derived.values())


class Writer:
    """Writes a store's anchors through one open file (no fsync: it guards against lost commits, not power loss)."""

    def __init__(self, path: str) -> None:
        self._path = sidecar(path)
        self._fd: int | None = None

    def write(self, anchor: Anchor) -> None:
        """Write an anchor into the slot its generation picks.

        Raises:
            StoreError: the anchor file is a symbolic link (`memory.timeline.sidecars`).
        """
        if self._fd is None:
            self._fd = open_sidecar(self._path, os.O_WRONLY | os.O_CREAT)
        os.pwrite(self._fd, encode(anchor), SLOT * (generation(anchor) % 2))

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class Read(NamedTuple):
    """The sidecar as `verify` finds it."""

    anchor: Anchor | None  # the newest valid slot, None when the file is missing or unreadable
    note: str  # why there is no anchor, or that a slot is damaged ("" when neither)


def read(path: str) -> Read:
    """The newest valid anchor of a store file."""
    try:
        with os.fdopen(open_sidecar(sidecar(path), os.O_RDONLY), "rb") as handle:
            data = handle.read(2 * SLOT)
    except StoreError:
        return Read(None, f"{sidecar(path)} is a symbolic link: not read")
    except FileNotFoundError:
        return Read(None, "no anchor file (a store written before anchors, or a copy without it)")
    except OSError as exc:
        return Read(None, f"anchor file unreadable ({exc.strerror})")
    stored = [data[:SLOT], data[SLOT : 2 * SLOT]]
    decoded = [decode(slot) for slot in stored]
    slots = [a for a in decoded if a is not None]
    if not slots:
        return Read(None, "anchor file holds no valid slot")
    # A slot never written is empty or zeros; one that fails its checksum was torn by a crash during its
    # write (what the two slots are for) or damaged since: the other slot is used, one update behind.
    torn = [i for i, (slot, a) in enumerate(zip(stored, decoded)) if a is None and slot.strip(b"\0 ")]
    note = (
        f"anchor file: slot {torn[0]} fails its checksum (a write torn by a crash, or damage to the file); "
        "the other slot was used"
        if torn
        else ""
    )
    return Read(max(slots, key=generation), note)
