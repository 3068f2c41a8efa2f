"""Flush points shared by the processes writing one store.

`EpisodicMemory.flush` closes every open episode. With several processes writing one store,
each feeds the one timeline to its own segmenter, so each must close those episodes at the
same place in the timeline, or their episodes (and everything learned from them) diverge
from `rebuild()`. A flush therefore stores its point first, at the timeline's head and only
while the head is still there (`add_records(..., head=...)`), and then closes its episodes.
Every entry appended later was committed after that point, so a process that reads new
entries and *then* polls the flush records learns every point before those entries, and
closes its open episodes there before feeding them; `rebuild()` flushes at the same points.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from memory.errors import HeadMoved
from memory.persistence.record_fields import checked
from memory.timeline import RecordKind, Store
from memory.timeline.record_body import decoded


class FlushPoints:
    """The flush points (timeline seqs) other processes stored that this process has not applied yet.

    Args:
        store: the shared store (`last_record`, `record_rows`, `others_wrote`).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.after = store.last_record()  # records up to this seq were polled (or were there on open)
        self.applied = -1  # the latest flush point applied
        self.pending: list[int] = []  # points not applied yet, ascending
        store.others_wrote()  # start counting other writers' commits from here

    def store_point(self, catch_up: Callable[[], int], has_open: Callable[[], bool]) -> bool:
        """Store a flush point at the timeline's head; whether there was anything open to flush.

        `catch_up` feeds this process the entries up to the head and returns the head's seq; it
        is called again when another process appended before the point was stored.
        """
        while True:
            head = catch_up()
            if not has_open():
                return False
            try:
                self.store.add_records(RecordKind.FLUSH, [(str(head), {"seq": head})], head=head)
            except HeadMoved:
                continue
            self.applied_at(head)
            return True

    def resume(self, seen: int) -> None:
        """Opening: every flush point stored at or after timeline seq `seen` (the last entry the stored episodes
        cover) is pending, whenever it was stored. A flush stores its point before it stores the episodes it
        closes, so a process that died in between (or that another process opened the store in between) left
        a point the stored episodes do not reflect; the entries fed again from `seen + 1` are closed there."""
        points = {int(point) for point in self.store.record_ids(RecordKind.FLUSH) if point.isdigit()}
        self.pending = sorted(set(self.pending) | {p for p in points if p >= seen and p > self.applied})

    def poll(self) -> None:
        """Read the flush points stored since the last poll (nothing to read unless another process committed)."""
        if not self.store.others_wrote():
            return
        top = self.store.last_record()
        if top <= self.after:
            return
        flush = RecordKind.FLUSH.value
        rows = self.store.record_rows(self.after, top, bodies=(flush,))
        path = self.store.path
        points = {
            checked(decoded(path, kind, i, cast(str, body), seq), path, kind, i, seq)["seq"]
            for seq, kind, i, body in rows
            if kind == flush  # read with its body
        }
        self.after = top
        self.pending = sorted(set(self.pending) | {p for p in points if p > self.applied})

    def take_before(self, seq: int) -> int:
        """How many pending points lie before timeline seq `seq` (each closes the open episodes once); marks them
        applied."""
        due = [p for p in self.pending if p < seq]
        if due:
            self.pending = self.pending[len(due) :]
            self.applied = max(self.applied, due[-1])
        return len(due)

    def applied_at(self, seq: int) -> None:
        """This process flushed after entry `seq` itself."""
        self.applied = max(self.applied, seq)
        self.pending = [p for p in self.pending if p > seq]
