"""Anchors: what lets `verify` see a lost tail, rows written past the store's writer, and tampered derived rows.

Two mechanisms, both written by the store's writer:

- **Digest chains** over the derived tables. Each ``records`` and ``snapshots`` row gets a
  row in ``digests``: the SHA-256 of the previous digest and the row's content. Changing a
  derived row (with the triggers dropped) breaks its digest; the timeline has its own chain.
- **A sidecar anchor** next to the store file (``<store>-anchor``): the timeline's entry
  count and head id and the head of each digest chain. Every write transaction writes it
  twice, holding a lock on the anchor file from before its ``BEGIN`` to after both writes:
  *pending* (the state the transaction is about to commit, flushed to disk before the
  ``COMMIT``) and *committed* (the same state, after the ``COMMIT``). So the store always
  equals the newest committed anchor, or a pending one written after it (a crash between
  the two writes, or a commit that failed). A store holding fewer rows than its anchor lost
  its tail (a deleted ``-wal``, truncated file or deleted rows); a store holding more was
  written past the store's writer (rows inserted with plain SQL, digests and all), and both
  are findings. Each write goes into the oldest of three slots, each with a checksum and a
  counter, so a write torn by a crash loses nothing the store needs: the slots it did not
  touch still hold the last committed state and the pending one.

A slot failing its checksum is what a torn write leaves, unless flipping one bit makes it
valid again: that is damage to the file (a torn write mixes two records, which differ in far
more than one bit), a finding.

Neither mechanism protects against someone who can rewrite both the store and its anchor with
the writer's own code: copy the anchor (or the head id `verify` prints) somewhere they cannot
write to for that. Anchors written by earlier versions (two slots, written after the commit
only) are read as a lower bound, as they were written, until the first write here.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from memory.errors import StoreError
from memory.timeline.sidecars import open_sidecar

try:  # advisory file locks: POSIX; elsewhere writers rely on SQLite's lock alone
    import fcntl
except ImportError:  # pragma: no cover - not on the platforms the project runs on
    fcntl = None  # type: ignore[assignment]

SLOT = 512  # bytes per anchor slot
SLOTS = 3  # slots in a file written by this version (files of the first format hold 2)
FORMAT = "v2"  # the marker of a slot of this format
DERIVED = ("records", "snapshots")  # tables chained in ``digests``
GENESIS = "0" * 64


class Anchor(NamedTuple):
    """A state of the store: what it held when a write transaction ended."""

    entries: int  # number of timeline entries
    head: str  # id of the last entry (GENESIS when there is none)
    derived: dict[str, tuple[int, str]]  # table -> (seq, digest) of its last chained row (0, GENESIS when none)


class Slot(NamedTuple):
    """One valid slot of the anchor file."""

    anchor: Anchor
    counter: int  # grows with every write of the file; -1 for a slot of the first format
    pending: bool  # written before its transaction's COMMIT (a later committed slot confirms it)


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


def _state(anchor: Anchor) -> list[str]:
    return [
        str(anchor.entries),
        anchor.head,
        *(f"{table} {seq} {digest}" for table, (seq, digest) in sorted(anchor.derived.items())),
    ]


def encode(anchor: Anchor, counter: int, *, pending: bool) -> bytes:
    """One slot: ``<sha256 of the rest> v2 <counter> <P|C> <entries> <head> <table> <seq> <digest> …``,
    padded to `SLOT` bytes."""
    body = " ".join([FORMAT, str(counter), "P" if pending else "C", *_state(anchor)])
    return f"{hashlib.sha256(body.encode()).hexdigest()} {body}\n".encode().ljust(SLOT, b" ")


def decode(slot: bytes) -> Slot | None:
    """The slot's content, or None when it is empty, torn or damaged (either format)."""
    try:
        checksum, body = slot.decode("ascii").strip().split(" ", 1)
        if hashlib.sha256(body.encode()).hexdigest() != checksum:
            return None
        words = body.split(" ")
        counter, pending = -1, False
        if words[0] == FORMAT:
            if words[2] not in ("P", "C"):
                return None
            counter, pending, words = int(words[1]), words[2] == "P", words[3:]
        entries, head, *rest = words
        if len(rest) % 3:
            return None
        derived = {rest[i]: (int(rest[i + 1]), rest[i + 2]) for i in range(0, len(rest), 3)}
        return Slot(Anchor(int(entries), head, derived), counter, pending)
    except (UnicodeDecodeError, ValueError, IndexError):
        return None


def generation(anchor: Anchor) -> int:
    """Grows with every commit (entries plus derived rows): orders the slots of the first format."""
    return anchor.entries + sum(seq for seq, _ in anchor.derived.values())


def one_bit_off(slot: bytes) -> bool:
    """Whether flipping a single bit of a slot that fails its checksum makes it valid: damage, not a tear."""
    used = len(slot.rstrip(b" \0"))
    data = bytearray(slot)
    for at in range(used):
        for bit in range(8):
            data[at] ^= 1 << bit
            if decode(bytes(data)) is not None:
                return True
            data[at] ^= 1 << bit
    return False


def _target(decoded: list[Slot | None], keep: Anchor | None) -> int:
    """The slot a write goes into: the oldest (an empty or torn one first) of those the store cannot need.

    It may need the newest slot holding `keep` (the state it is in, or the state this write's
    transaction commits), and every pending state written after the newest confirmation: a writer
    stopped during its COMMIT may have left its transaction in the WAL without the other processes
    seeing it yet (SQLite recovers it later), so a live writer may think such a state never
    committed. With three slots one is always free but after two such stops in a row; then the
    oldest of those pending states goes.
    """
    age = [-2 if slot is None else slot.counter for slot in decoded]
    committed = max((s.counter for s in decoded if s is not None and not s.pending), default=-1)
    holding = [i for i, s in enumerate(decoded) if s is not None and s.anchor == keep]
    needed = {max(holding, key=lambda i: age[i])} if holding else set()
    unconfirmed = {i for i, s in enumerate(decoded) if s is not None and s.pending and s.counter > committed}
    free = [i for i in range(SLOTS) if i not in needed | unconfirmed] or [i for i in range(SLOTS) if i not in needed]
    return min(free, key=lambda i: (age[i], i))


_sync = getattr(os, "fdatasync", os.fsync)  # the slots' bytes, not the file's times: the size never changes


def _slots(data: bytes) -> list[bytes]:
    return [data[i * SLOT : (i + 1) * SLOT] for i in range(SLOTS)]


class Writer:
    """Writes a store's anchors through one open file.

    `durable` flushes each pending write to disk before the transaction commits (a store
    whose commits survive power loss keeps an anchor that does too); committed writes are
    not flushed: losing one leaves the pending slot, which the store then equals.
    """

    def __init__(self, path: str, *, durable: bool = True) -> None:
        self._path = sidecar(path)
        self._durable = durable
        self._fd: int | None = None
        self._locked = False  # inside `locked`: no other writer writes the file
        self._known: list[Slot | None] | None = None  # the slots as this writer left them, while it holds the lock
        self._decodes: dict[bytes, Slot | None] = {}  # `decode` of the slots last read or written here, by their bytes

    def _open(self) -> int:
        if self._fd is None:
            self._fd = open_sidecar(self._path, os.O_RDWR | os.O_CREAT)
        return self._fd

    @contextmanager
    def locked(self, timeout: float) -> Iterator[None]:
        """Hold the anchor file's exclusive lock (taken before the store's write lock, so writers never deadlock).

        Raises:
            StoreError: the anchor file is a link, cannot be opened, or another writer held the lock `timeout` s.
        """
        try:
            fd = self._open()
        except OSError as exc:
            raise StoreError(f"{self._path}: cannot open the store's anchor ({exc.strerror})") from exc
        if fcntl is None:
            yield
            return
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"{self._path}: the store is locked by another writer (waited {timeout:g} s; "
                        "try again or raise lock_timeout)"
                    ) from None
                time.sleep(0.002)
        self._locked = True
        try:
            yield
        finally:
            self._locked, self._known = False, None  # another writer may write the file once it is released
            fcntl.flock(fd, fcntl.LOCK_UN)

    def refuse_unanchored(self, current: Anchor) -> None:
        """Under the lock, before a write: refuse a store that is not a state its anchor records (rows
        written past the store's writer, digests and all, or rows gone), which this write would anchor.
        Slots of the first format record a lower bound only, and a store without an anchor file has none.

        Raises:
            StoreError: naming how the store differs (`python -m memory verify` lists everything).
        """
        fd = self._open()
        stored = _slots(os.pread(fd, SLOTS * SLOT, 0).ljust(SLOTS * SLOT, b"\0"))
        decoded = self._decoded(stored)
        found = read_slots(stored, decoded)
        if self._locked:
            self._known = decoded
        if found.damage:
            raise StoreError(f"{self._path}: {found.damage}; refusing to write (python -m memory verify lists it)")
        if found.exact and found.anchor is not None and current not in (found.anchor, *found.pending):
            raise StoreError(
                f"{self._path}: the store is not a state its anchor records (entries {current.entries}, "
                f"anchored {found.anchor.entries}; rows written past the store's writer, or rows lost); "
                "refusing to write, which would anchor them (python -m memory verify lists every difference)"
            )

    def write(self, anchor: Anchor, *, pending: bool, keep: Anchor | None = None) -> None:
        """Write `anchor` into the oldest slot (an empty or torn one first) that does not hold `keep`, the
        state the store is in until this write's transaction commits (the pending write) or the state it
        commits (the confirmation), with the next counter. So a crash at any point leaves a slot the store
        equals, however many writes before it were cut short.

        Raises:
            StoreError: the anchor file is a symbolic link (`memory.timeline.sidecars`).
            OSError: the write or flush failed.
        """
        fd = self._open()
        decoded = self._known  # a second write under the same lock: the slots as the first one left them
        if decoded is None:
            decoded = self._decoded(_slots(os.pread(fd, SLOTS * SLOT, 0).ljust(SLOTS * SLOT, b"\0")))
        target = _target(decoded, keep)
        counter = max((slot.counter for slot in decoded if slot is not None), default=-1) + 1
        data = encode(anchor, counter, pending=pending)
        os.pwrite(fd, data, SLOT * target)
        self._decodes[data] = Slot(anchor, counter, pending)  # what `decode` reads back from these bytes
        if pending and self._durable:
            _sync(fd)
        if self._locked:  # remembered only while the lock keeps other writers out
            self._known = [*decoded[:target], Slot(anchor, counter, pending), *decoded[target + 1 :]]

    def _decoded(self, stored: list[bytes]) -> list[Slot | None]:
        """`decode` of each slot; a slot this writer last read or wrote is not checked and parsed again."""
        known = self._decodes
        decoded = [known[slot] if slot in known else decode(slot) for slot in stored]
        self._decodes = dict(zip(stored, decoded))
        return decoded

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@contextmanager
def settled(path: str, timeout: float = 30.0) -> Iterator[bool]:
    """Hold the anchor file's shared lock: no writer is between its pending anchor and its committed one,
    so the store and its anchor can be compared. Yields whether the lock is held (False when there is no
    anchor file, it is a link, or a writer held it `timeout` s: the comparison may then see a write in
    progress)."""
    try:
        fd = open_sidecar(sidecar(path), os.O_RDONLY)
    except (OSError, StoreError):
        yield False
        return
    try:
        held = fcntl is None
        deadline = time.monotonic() + timeout
        while not held:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                held = True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.002)
        yield held
    finally:
        os.close(fd)  # releases the lock


class Read(NamedTuple):
    """The sidecar as `verify` finds it."""

    anchor: Anchor | None  # the newest committed state (of the first format: the newest slot); None: no anchor
    pending: list[Anchor]  # pending states written after it (newest first), which the store may equal instead
    exact: bool  # the store must equal `anchor` or `pending` (this format), not merely hold it (first format)
    note: str  # why there is no anchor, or that a slot is torn ("" when neither)
    damage: str  # a slot damaged since it was written (a finding), "" when none


def read(path: str) -> Read:
    """The anchors of a store file: its newest committed state, and a pending one after it."""
    try:
        with os.fdopen(open_sidecar(sidecar(path), os.O_RDONLY), "rb") as handle:
            data = handle.read(SLOTS * SLOT)
    except StoreError:
        return Read(None, [], False, f"{sidecar(path)} is a symbolic link: not read", "")
    except FileNotFoundError:
        return Read(None, [], False, "no anchor file (a store written before anchors, or a copy without it)", "")
    except OSError as exc:
        return Read(None, [], False, f"anchor file unreadable ({exc.strerror})", "")
    return read_slots(_slots(data.ljust(SLOTS * SLOT, b"\0")))


def read_slots(stored: list[bytes], decoded: list[Slot | None] | None = None) -> Read:
    """What the slots of an anchor file say (`read`); `decoded`: the slots already decoded, if they are."""
    decoded = [decode(slot) for slot in stored] if decoded is None else decoded
    bad = [i for i, (slot, s) in enumerate(zip(stored, decoded)) if s is None and slot.strip(b"\0 ")]
    damaged = [i for i in bad if one_bit_off(stored[i])]
    damage = (
        f"anchor file: slot {damaged[0]} is damaged (one bit differs from a valid slot: the file was changed "
        "after it was written, not torn by a crash)"
        if damaged
        else ""
    )
    note = (
        f"anchor file: slot {bad[0]} fails its checksum (a write torn by a crash); the other slots were used"
        if bad and not damaged
        else ""
    )
    slots = [s for s in decoded if s is not None]
    current = [s for s in slots if s.counter >= 0]
    if not current:  # the first format (or nothing valid): the newest slot, a lower bound
        if not slots:
            return Read(None, [], False, note or "anchor file holds no valid slot", damage)
        return Read(max((s.anchor for s in slots), key=generation), [], False, note, damage)
    committed = max((s for s in current if not s.pending), key=lambda s: s.counter, default=None)
    # Each pending state after the last confirmation is one a writer was about to commit: the store equals
    # one of them when that writer (and any after it) stopped between its COMMIT and its confirmation.
    after = sorted(
        (s for s in current if s.pending and (committed is None or s.counter > committed.counter)),
        key=lambda s: -s.counter,
    )
    pending = [s.anchor for s in after]
    if committed is None:
        return Read(pending[0], pending[1:], True, note, damage)
    return Read(committed.anchor, pending, True, note, damage)
