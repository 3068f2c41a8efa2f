"""The short-term window: each principal's latest entries, as entries or as chat messages."""

from __future__ import annotations

from collections import deque

from memory.timeline import Entry, Kind, Role, Store

RECENT_WINDOW = 256  # entries kept per principal


class RecentEntries:
    """The last `size` entries of each principal, read from the store on first use, then kept current.

    Args:
        store: where a principal's latest entries are read from (`tail(principal, n)`).
        size: entries kept per principal.
    """

    def __init__(self, store: Store, size: int = RECENT_WINDOW) -> None:
        self.store = store
        self.size = size
        self._windows: dict[str, deque[Entry]] = {}

    def window(self, principal: str) -> deque[Entry]:
        """A principal's window, oldest first."""
        window = self._windows.get(principal)
        if window is None:
            window = deque(self.store.tail(principal, self.size), maxlen=self.size)
            self._windows[principal] = window
        return window

    def add(self, entry: Entry) -> None:
        """A new entry was appended (windows not read yet are read later, with it)."""
        if entry.principal in self._windows:
            self._windows[entry.principal].append(entry)

    def observations_since(self, principal: str, seq: int) -> list[str]:
        """The texts of a principal's observations in the window after timeline position `seq`."""
        return [e.text for e in self.window(principal) if e.seq > seq and e.kind is Kind.OBSERVATION]

    def last(self, principal: str, n: int) -> list[Entry]:
        """The last `n` entries of a principal, oldest first."""
        return list(self.window(principal))[-n:] if n > 0 else []


def as_messages(entries: list[Entry]) -> list[dict[str, str]]:
    """Entries as chat messages: agent entries are "assistant", others "user"; same roles merged."""
    out: list[dict[str, str]] = []
    for entry in entries:
        role = "assistant" if entry.role is Role.AGENT else "user"
        line = f"[{entry.kind.value}] {entry.text}"
        if out and out[-1]["role"] == role:
            out[-1]["content"] += "\n" + line
        else:
            out.append({"role": role, "content": line})
    return out
