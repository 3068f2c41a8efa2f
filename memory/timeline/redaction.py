"""Redaction at write time: personal data and secrets never reach the hash or the disk.

The default `PatternRedactor` replaces e-mail addresses, phone numbers, payment-card
numbers (Luhn-checked) and API keys / bearer tokens with stable placeholders such as
``[EMAIL#3f1a9c2e]``: the same value always maps to the same placeholder, so entries that
mention the same address can still be related, while the raw value is gone. The digest is
a truncated SHA-256 of the value (optionally salted); it identifies, it does not reveal.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Callable, Protocol


class Redactor(Protocol):
    """Anything that maps text (and metadata) to a redacted copy."""

    def redact(self, text: str) -> str:
        """Return `text` with sensitive values replaced."""
        ...


def _luhn_ok(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_BEARER = re.compile(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9\-._~+/]{12,}=*", re.IGNORECASE)
_KEYED_SECRET = re.compile(
    r"\b(api[_-]?key|apikey|secret|token|password|passwd|access[_-]?key)(\s*[:=]\s*)(['\"]?)([^\s'\"]{6,})\3",
    re.IGNORECASE,
)
_PREFIXED_KEY = re.compile(
    r"\b(?:sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|AIza[0-9A-Za-z_\-]{30,}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})"
)
_CARD = re.compile(r"(?<![\d.,])(?:\d[ -]?){12,18}\d(?![\d.,]*\d)")
_PHONE = re.compile(
    r"(?<![\w.])(?<!\d[ .-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])\d{3,4}[ .-]\d{3,4}(?![\w.])(?![ .-]\d)"
    r"|(?<![\w.])\+\d{8,14}(?![\w.])"
)


# A necessary condition for any of the patterns above to match, checked before running them
# (most log lines hold no sensitive value). Each test below is implied by a match of the
# patterns it stands for, so a text that passes none of them comes out of every `sub`
# unchanged (a test checks this against the full redactor):
# - _EMAIL needs "@";
# - _BEARER and _KEYED_SECRET need one of _SECRET_WORDS, matched case-insensitively. Under
#   re.IGNORECASE exactly four non-ASCII characters match an ASCII letter: İ and ı (i), ſ (s)
#   and the Kelvin sign (k). Mapped to those letters (ASCII_FOLDS) and then lower-cased,
#   the text holds the word wherever the pattern could match it (no other character's
#   lower case is ASCII, and only İ's lower case is longer than one character);
# - _PREFIXED_KEY needs one of its literal prefixes (_KEY_PREFIX);
# - _CARD needs 13 digits each followed by at most one space or hyphen, _PHONE three digits,
#   a separator and three more, or "+" and eight digits (_DIGIT_GROUPS, with the same
#   Unicode-aware \d); a card has at least 13 digits and a phone number at least 8, so an
#   ASCII text with fewer than 8 needs no search.
_SECRET_WORDS = ("key", "token", "secret", "passw", "bearer", "basic")
ASCII_FOLDS = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
_KEY_PREFIX = re.compile(r"sk-|AKIA|gh[pousr]_|xox[abprs]-|AIza|eyJ")
_DIGIT_GROUPS = re.compile(r"\d(?:[ -]?\d){12}|\d{3}[ .-]\d{3}|\+\d{8}")
_DIGITS = b"0123456789"


def may_hold_secret(text: str) -> bool:
    """False only when no pattern of `PatternRedactor` can match `text` (a cheap pre-check)."""
    if "@" in text:
        return True
    ascii_only = text.isascii()
    lowered = (text if ascii_only else text.translate(ASCII_FOLDS)).lower()
    for word in _SECRET_WORDS:
        if word in lowered:
            return True
    if _KEY_PREFIX.search(text) is not None:
        return True
    if ascii_only:
        raw = text.encode("ascii")
        if len(raw) - len(raw.translate(None, _DIGITS)) < 8:
            return False
    return _DIGIT_GROUPS.search(text) is not None


class PatternRedactor:
    """Regex-based redactor for e-mails, phones, cards, keys and tokens.

    Args:
        salt: mixed into the placeholder digests; keep it fixed for a store so that
            placeholders stay stable across sessions.
    """

    def __init__(self, salt: str = "") -> None:
        self._salt = salt

    def _token(self, label: str, value: str) -> str:
        digest = hashlib.sha256((self._salt + value).encode("utf-8")).hexdigest()[:8]
        return f"[{label}#{digest}]"

    def redact(self, text: str) -> str:
        """Return `text` with every recognised sensitive value replaced."""
        return self.redact_all(text) if may_hold_secret(text) else text

    def redact_all(self, text: str) -> str:
        """`redact` without the pre-check: every pattern runs."""
        text = _BEARER.sub(lambda m: f"{m.group(1)} {self._token('TOKEN', m.group(0))}", text)
        text = _KEYED_SECRET.sub(
            lambda m: f"{m.group(1)}{m.group(2)}{self._token('SECRET', m.group(4))}", text
        )
        text = _PREFIXED_KEY.sub(lambda m: self._token("APIKEY", m.group(0)), text)
        text = _EMAIL.sub(lambda m: self._token("EMAIL", m.group(0).lower()), text)

        def card(match: re.Match[str]) -> str:
            digits = re.sub(r"\D", "", match.group(0))
            if 13 <= len(digits) <= 19 and _luhn_ok(digits):
                return self._token("CARD", digits)
            return match.group(0)

        text = _CARD.sub(card, text)
        text = _PHONE.sub(lambda m: self._token("PHONE", re.sub(r"\D", "", m.group(0))), text)
        return text


class NoRedaction:
    """Explicit opt-out: stores text exactly as given."""

    def redact(self, text: str) -> str:
        return text


def redact_value(value: Any, redact: Callable[[str], str]) -> Any:
    """Apply `redact` to every string inside a JSON-like value (dicts, lists, scalars)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_value(item, redact) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(item, redact) for item in value]
    return value
