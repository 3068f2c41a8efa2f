"""The readers' per-process caches of text, emptied when an erasure removes text from the store.

The rules and recall read the same recent lines again for every new episode and every query, so
reading a line (its terms, what it affirms and denies, its all-clear sentence, the references and
change records in it) is cached in the process, keyed by the text. An erasure removes text from
the store and the derived state; `forget_cached_text` empties every such cache, so that no erased
word stays in the process's memory after `EpisodicMemory.forget` or `retain` returns. Each module
empties its own caches; the caches keyed by a lexicon alone (compiled patterns) hold no text and
are kept.
"""

from __future__ import annotations

import memory.facts.lessons as lessons
import memory.graph.causes as causes
import memory.graph.changes as changes
import memory.graph.references as references
import memory.retrieval.incidents as incidents
import memory.text as text

READERS = (text, references, changes, incidents)  # the modules that cache what they read of a text


def forget_cached_text() -> None:
    """Empty every per-process cache keyed by text (see the module docstring)."""
    for module in READERS:
        module.forget_cached_text()
    lessons.cached_affirmed_lines.cache_clear()
    causes.forget_candidate_terms()
