"""Persistence of the derived state: opening a memory from its store, and state runs.

`loader` fills a `memory.state.MemoryState` from the stored records (and from *state runs*,
columnar copies of the derived state for ranges of the records, `runs`, read by `run_reader`,
loaded by `run_loading` and written by `run_encoding`), reading episodes and problems on first
use (`lazy`) and the runs' vectors from the store's sidecar row by row (`vectors`, rows laid
out by `sparse_rows`); it also writes new runs as the memory grows. `feed` is the write path
that keeps the state and the records in step with the timeline. `lexicons` records the lexicon
a store's derived records are read with, and refuses another.
"""

from memory.persistence.lazy import lazy_state
from memory.persistence.loader import DEFAULT_PERSISTENCE, OpenedState, Persistence, StoredState

__all__ = ["DEFAULT_PERSISTENCE", "OpenedState", "Persistence", "StoredState", "lazy_state"]
