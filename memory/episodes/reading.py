"""How the memory reads words, for a reasoner that should read them the same way.

The segmenter, the outcome detector and recall read observation lines through one lexicon
(`memory.lexicon`): which clause a negation rules out, which sentence reports a look that found
nothing wrong, which words say a fix worked. A reasoner that weighs the same lines (the
harness's deterministic one, `agent.heuristic`) gets a `Reader` bound to the memory's lexicon,
the way it gets the memory's encoder, so both read "checked the pump: fine" alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.episodes.model import Outcome
from memory.episodes.outcomes import classify_text
from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.text import affirmed_clauses, all_clear, looked_terms, read_as_found, split_negation, stems, terms


@dataclass(frozen=True)
class Reader:
    """The memory's reading of text, bound to one lexicon (default: the shipped one)."""

    lexicon: Lexicon = DEFAULT_LEXICON

    def stems(self, text: str) -> frozenset[str]:
        """Stemmed content words (stop words, numbers and time words left out)."""
        return stems(text)

    def terms(self, text: str) -> frozenset[str]:
        """Content terms as the memory's indexes and conditions keep them."""
        return terms(text)

    def split_negation(self, text: str) -> tuple[str, str]:
        """(what the text affirms, what it rules out)."""
        return split_negation(text, self.lexicon)

    def affirmed_clauses(self, text: str) -> str:
        """The clauses that state something as present (no negation, no normal-state report)."""
        return affirmed_clauses(text, self.lexicon)

    def all_clear(self, line: str) -> str:
        """The sentence of a line that reports a look which found nothing wrong ("" when none)."""
        return all_clear(line, self.lexicon)

    def read_as_found(self, line: str) -> str:
        """A line without its all-clear sentence."""
        return read_as_found(line, self.lexicon)

    def looked_terms(self) -> frozenset[str]:
        """The terms of the words for a look themselves ("checked", "inspected", ...)."""
        return looked_terms()

    def outcome(self, text: str) -> Outcome:
        """The outcome a line's cue words report (UNKNOWN when none)."""
        return classify_text(text, self.lexicon).outcome
