"""Text handling of the edge rules: content words, their similarity, causal cues, subject mentions.

Kept in one module so that the rules can switch to a shared text module without other changes.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Iterable, Sequence

_STOP = frozenset("the and for with from that this was were are has had have not but its into than then "
                  "after since all any per our out one two off via".split())
_TOKEN = re.compile(r"[a-z][a-z0-9_\-]{2,}")
_CHANGE = (r"(?:fix|fixes|change|changes|hotfix|workaround|remediation|mitigation|adjustment|moved|switched|"
           r"replaced|raised|lowered|introduced|added|removed|upgraded|migrated)")
_CAUSAL = re.compile(  # a causal connector before a change, or a reference to an earlier fix/change/incident
    r"\b(?:caused by|because of|due to|triggered by|introduced (?:by|in|with)|added (?:by|in|with)|since|after|"
    rf"following|started with)\b(?:\W+\w+){{0,5}}?\W+{_CHANGE}\b"
    r"|\b(?:last|previous|earlier|recent|yesterday's|last week's|this morning's)\b(?:\W+\w+){0,3}?\W+"
    r"(?:fix|fixes|change|changes|hotfix|workaround|incident)\b"
    rf"|\b(?:was|were|got|been)\s+{_CHANGE}\b(?:\W+\w+){{0,6}}?\W+(?:yesterday|last|earlier|ago)\b",
    re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.;!?])\s+|\n")


def tokens(text: str) -> Counter[str]:
    """Content words of a text (lowercase, 3+ characters, no stopwords)."""
    return Counter(t for t in _TOKEN.findall(text.lower()) if t not in _STOP)


def similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """Cosine similarity of the content-word counts of two sets of texts."""
    ca, cb = tokens(" ".join(a)), tokens(" ".join(b))
    if not ca or not cb:
        return 0.0
    dot = sum(ca[w] * cb[w] for w in ca.keys() & cb.keys())
    return dot / math.sqrt(sum(v * v for v in ca.values()) * sum(v * v for v in cb.values()))


def mentions(sentence: str, subject: str | None) -> bool:
    """Whether `sentence` names `subject` as a whole word (case-insensitive)."""
    return bool(subject) and re.search(rf"(?<![\w-]){re.escape(subject)}(?![\w-])", sentence, re.IGNORECASE) is not None


def causal_sentences(texts: Iterable[str]) -> list[str]:
    """The sentences of `texts` that carry a causal cue, in order."""
    return [s for text in texts for s in _SENTENCE.split(text) if _CAUSAL.search(s)]
