"""The lexicon a store's derived records were read with: recorded once, checked on every open.

The derived records (episodes with their outcomes, edges, fact versions) are a projection of
the timeline under a lexicon (`memory.lexicon`): another lexicon reads other outcomes, causes
and lessons from the same entries. A store records the lexicon its records are derived with
(`record_lexicon`: a snapshot of kind `LEXICON` named by `Lexicon.fingerprint`, its body the
lexicon's canonical words) and opens only with that lexicon (`check_lexicon`), as it opens only
with the encoder that embedded its entries: records of two lexicons in one store would disagree
with any rebuild.

The shipped lexicon is part of the library, like the rules' code: a store derived with the shipped
lexicon opens with the shipped lexicon of another version of the library too (its words may have
changed, as the rules may have). A store written before lexicons were recorded was derived with
the shipped lexicon. To read a store's timeline with another lexicon, export the timeline and
import it into a new store (``python -m memory export`` / ``import``), where it is derived anew.

The first lexicon recorded is the store's: when two processes open a new store at once, with two
lexicons, both record theirs and the one recorded second is refused.
"""

from __future__ import annotations

from pathlib import Path

from memory.errors import EpisodicMemoryError, StoreError
from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.timeline import Encoder, Redactor, Store, Timeline
from memory.timeline.stores import open_store

LEXICON = "lexicon/1"  # snapshot kind of the recorded lexicon (id: its fingerprint)


class LexiconMismatch(StoreError):
    """A store was opened with another lexicon than the one its derived records were read with."""


def shipped(lexicon: Lexicon) -> bool:
    """Whether `lexicon` has the shipped lexicon's words."""
    return lexicon.fingerprint == DEFAULT_LEXICON.fingerprint


def recorded_lexicon(store: Store) -> tuple[str, bool] | None:
    """(fingerprint, shipped) of the lexicon a store records (the first recorded), or None."""
    found = store.snapshot_index(LEXICON)
    if not found:
        return None
    _, fingerprint, meta = found[0]
    return fingerprint, bool(meta.get("shipped")) if isinstance(meta, dict) else False


def record_lexicon(store: Store, lexicon: Lexicon) -> None:
    """Record that the store's derived records are read with `lexicon` (kept when one is recorded already; a store
    of the process alone, in memory, records nothing)."""
    if getattr(store, "path", None) == ":memory:":
        return
    store.add_snapshot(
        LEXICON,
        lexicon.fingerprint,
        {"fingerprint": lexicon.fingerprint, "shipped": shipped(lexicon), "groups": len(lexicon.groups)},
        lexicon.canonical(),
    )


def check_lexicon(store: Store, lexicon: Lexicon) -> None:
    """Open `store` with `lexicon`: record it in a store that records none, refuse another than the one recorded.

    A store of the process alone (in memory) records nothing.

    Raises:
        LexiconMismatch: the store's derived records were read with another lexicon.
    """
    if getattr(store, "path", None) == ":memory:":
        return
    found = recorded_lexicon(store)
    if found is None and store.last_record() > 0:  # derived before lexicons were recorded: the shipped one
        found = ("the shipped lexicon of the library version that wrote it", True)
        if shipped(lexicon):
            record_lexicon(store, lexicon)
    elif found is None:
        record_lexicon(store, lexicon)
        found = recorded_lexicon(store)  # the first recorded, should another process have recorded one meanwhile
    assert found is not None
    fingerprint, was_shipped = found
    if fingerprint != lexicon.fingerprint and not (was_shipped and shipped(lexicon)):
        path = str(getattr(store, "path", ""))
        raise LexiconMismatch(
            f"{path if path and '://' not in path else 'the store'}: its derived records (outcomes, edges, facts) "
            f"were read with lexicon {fingerprint}, not {lexicon.fingerprint}; open it with the lexicon that derived "
            "them, or export its timeline and import it into a new store to derive it with this one"
        )


def open_timeline(
    path: str | Path | None, encoder: Encoder, redactor: Redactor | None, lexicon: Lexicon
) -> tuple[Store, Timeline]:
    """The store `path` names and a timeline on it; the store is closed again if the timeline refuses it, or if
    its derived records were read with another lexicon (`memory.persistence.lexicons`)."""
    store = open_store(path)
    try:
        timeline = Timeline(store, encoder, redactor)
        check_lexicon(store, lexicon)
        return store, timeline
    except EpisodicMemoryError:  # e.g. the store's entries were embedded by another encoder
        store.close()
        raise
