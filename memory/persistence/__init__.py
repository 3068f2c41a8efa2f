"""Persistence of the derived state: opening a memory from its store, and state runs.

`loader` fills a `memory.state.MemoryState` from the stored records (and from *state runs*,
columnar copies of the derived state for ranges of the records, `runs`, written by
`run_encoding`), reading episodes and problems on first use (`lazy`) and the runs' vectors
from the store's sidecar row by row (`vectors`); it also writes new runs as the memory grows.
`lexicons` records the lexicon a store's derived records are read with, and refuses another.
"""

from memory.persistence.lazy import lazy_state
from memory.persistence.loader import DEFAULT_PERSISTENCE, Opened, Persistence, StoredState

__all__ = ["DEFAULT_PERSISTENCE", "Opened", "Persistence", "StoredState", "lazy_state"]
