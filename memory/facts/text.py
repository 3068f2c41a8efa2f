"""Text handling of the fact rules: observation text → normalized content terms.

Kept in one module so that the rules can switch to a shared text module without other changes.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z][a-z0-9]*", re.ASCII)
_STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers him his how i if in into is it its
    itself just me more most my no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their them then there these they
    this those through to too under until up very was we were what when where which while
    who whom why will with would you your yours per via still only""".split()
)


def normalize_term(word: str) -> str:
    """Lower-cased word with a light, documented suffix strip (-ing, -ed, -es after a sibilant, -s)."""
    word = word.lower()
    if word.endswith("ing") and len(word) >= 7:
        return word[:-3]
    if word.endswith("ed") and len(word) >= 6:
        return word[:-2]
    if word.endswith(("sses", "ches", "shes", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) >= 4:
        return word[:-1]
    return word


def terms(text: str) -> frozenset[str]:
    """Normalized content terms of a text: alphabetic words of 3+ letters, no stopwords."""
    words = _WORD.findall(text.lower())
    return frozenset(normalize_term(w) for w in words if len(w) >= 3 and w not in _STOPWORDS)
