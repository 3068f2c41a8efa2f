"""One error hierarchy for the memory package."""

from __future__ import annotations


class EpisodicMemoryError(Exception):
    """Base class of every error the memory package raises on purpose."""


class StoreError(EpisodicMemoryError):
    """The store cannot be opened or used (missing file, not a store, wrong schema)."""


class StoreChanged(StoreError):
    """Another writer appended while a whole-store operation (an erasure) was prepared.

    Preparing it again may succeed.
    """


class DamagedStore(StoreError):
    """The store's file, or a row in it, cannot be read as stored (a damaged database, a malformed derived record)."""


class ImmutableRecordError(StoreError):
    """An UPDATE or DELETE was attempted on an insert-only table."""


class HeadMoved(StoreError):
    """Records meant for one timeline position were not stored: another writer appended meanwhile."""


class IntegrityError(EpisodicMemoryError):
    """Stored records do not match their content addresses or their chain."""


class ImportFailed(EpisodicMemoryError):
    """A JSONL import was rejected; nothing was imported.

    Attributes:
        path: the file being imported.
        line: 1-based line number of the first bad record (0 when not line-specific).
    """

    def __init__(self, path: str, line: int, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {reason}")


class EncoderMismatch(StoreError):
    """A store was opened with another encoder than the one that embedded its entries."""


class EncoderUnavailable(EpisodicMemoryError):
    """An optional encoder was asked for but its model or package is not installed."""


class DamagedBody(DamagedStore, IntegrityError):
    """A derived record's stored body does not decompress.

    The store is damaged, and the record is not what was written.
    """


class InvalidEntry(EpisodicMemoryError, ValueError):
    """An entry was refused at the timeline's boundary (wrong type, out of range, too large)."""
