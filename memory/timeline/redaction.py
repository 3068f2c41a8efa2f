"""Redaction at write time: personal data and secrets never reach the hash or the disk.

The default `PatternRedactor` replaces e-mail addresses (any script), phone numbers
(international and common national forms), payment-card numbers (Luhn-checked), IBANs
(mod-97-checked), US social security numbers, API keys and tokens of common providers,
``name=value`` secrets (also in JSON and as metadata keys), passwords in connection URLs,
webhook URLs and PEM private keys (IP addresses on request) with stable placeholders such as
``[EMAIL#3f1a9c2e]``: the same value always maps to the same placeholder, so entries that
mention the same address can still be related, while the raw value is gone. The digest is
a truncated SHA-256 of the value (optionally salted); it identifies, it does not reveal.
"""

from __future__ import annotations

import hashlib
import ipaddress
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


# Each pattern below names its class in the placeholder. Those matching digits leave a match
# alone unless it holds at least 8 digits (the callbacks check), which the pre-check relies on.
_EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}(?![\w-])")
_BEARER = re.compile(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9\-._~+/]{12,}=*", re.IGNORECASE)
_SECRET_NAME = (r"(?:api[_-]?key|apikey|secret|token|password|passwd|pwd|access[_-]?key|private[_-]?key"
                r"|credentials?)")
_KEYED_SECRET = re.compile(
    r"(?<![A-Za-z0-9])([A-Za-z0-9_.-]*?" + _SECRET_NAME + r"[A-Za-z0-9_.-]*)"
    r"""(["']?\s*[:=]\s*)(["']?)([^\s'"]{6,})\3""",
    re.IGNORECASE,
)
_URL_PASSWORD = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]*:)([^\s@/]+)@")
_PEM = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY)-----(?:[\s\S]*?-----END \1-----|[A-Za-z0-9+/=\s]*)")
_PREFIXED_KEY = re.compile(
    r"\b(?:sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}"
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|glpat-[A-Za-z0-9_\-]{20,}"
    r"|npm_[A-Za-z0-9]{36}"
    r"|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"
    r"|xox[abprse]-[A-Za-z0-9\-]{10,}"
    r"|AIza[0-9A-Za-z_\-]{30,}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})"
    r"|https://(?:hooks\.slack\.com/(?:services|workflows|triggers)|discord(?:app)?\.com/api/webhooks)/[A-Za-z0-9/_\-]+"
)
# Cards: four groups of four, Amex's 4-6-5, or 13-19 contiguous digits (Luhn-checked; see `_card`),
# never inside a word: a hex id such as an episode id holds digit runs that pass the Luhn check.
_CARD = re.compile(r"(?<![\w.,])(?:\d{4}([ -])\d{4}\1\d{4}\1\d{1,7}|\d{4}([ -])\d{6}\2\d{5}|\d{13,19})(?![\d.,]*\d|\w)")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
_SSN = re.compile(r"(?<![\w-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])")
# Phones: international (+country), or a national form whose shape is a phone number's:
# (3-digit area) or 3-3-4 with hyphens or dots, French pairs, a trunk 0 with separated groups,
# Indian mobiles; numbers only spaced (like "250 500 1000") need a word such as "phone" first.
_PHONE = re.compile(
    r"(?<![\w.+])\+\d{1,3}(?:[ .-]?\(?\d{1,5}\)?){1,6}(?![\w.])"
    r"|(?<![\w.])(?:\(\d{3}\) ?|\d{3}([-.]))\d{3}(?(1)\1|[-.])\d{4}(?![\w.])"
    r"|(?<![\w.])0[1-9](?:[ .]\d\d){4}(?![\w.])"
    r"|(?<![\w.])\(?0\d{1,4}\)?[ /-]\d{3,4}[ -]?\d{3,5}(?![\w.])"
    r"|(?<![\w.])[6-9]\d{4}[ -]\d{5}(?![\w.])"
)
_PHONE_WORD = re.compile(r"\b(?:phone|tel|telephone|mobile|cell|call|fax|sms|whatsapp)\b"
                         r"(?:\W{1,3}(?:me|us|them|at|on|is|no|number|nr))*\W{1,3}(\+?\d[\d ().-]{6,18}\d)",
                         re.IGNORECASE)
_IP_CANDIDATE = re.compile(r"(?<![\w.:])(?:\d{1,3}(?:\.\d{1,3}){3}(?!\w|\.\d)|[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:]))")


# A necessary condition for any default pattern above to match, checked before running them
# (most log lines hold no sensitive value). Each test below is implied by a match of the
# patterns it stands for, so a text that passes none of them comes out of every `sub`
# unchanged (a test checks this against the full redactor):
# - _EMAIL and _URL_PASSWORD need "@";
# - _BEARER, _KEYED_SECRET and _PEM need one of _SECRET_WORDS, matched case-insensitively.
#   Under re.IGNORECASE exactly four non-ASCII characters match an ASCII letter: İ and ı (i),
#   ſ (s) and the Kelvin sign (k). Mapped to those letters (ASCII_FOLDS) and then lower-cased,
#   the text holds the word wherever the pattern could match it (no other character's lower
#   case is ASCII, and only İ's lower case is longer than one character);
# - _PREFIXED_KEY needs one of its literal prefixes (_KEY_PREFIX);
# - _CARD, _IBAN, _SSN, _PHONE and _PHONE_WORD act only on matches holding 8 digits or more,
#   so an ASCII text with fewer than 8 needs no search; otherwise each needs one of
#   _DIGIT_GROUPS (with the same Unicode-aware \d) or, for _PHONE_WORD, a phone word.
_SECRET_WORDS = ("key", "token", "secret", "passw", "pwd", "bearer", "basic", "credential")
ASCII_FOLDS = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
_KEY_PREFIX = re.compile(r"sk-|_live_|_test_|AKIA|ASIA|gh[pousr]_|github_pat_|glpat-|npm_|SG\.|xox[abprse]-|AIza|eyJ"
                         r"|hooks\.slack\.com|discord")
# The lookahead only states what every alternative starts with: the engine then skips most
# positions at once instead of trying each alternative there (several times faster).
_DIGIT_GROUPS = re.compile(r"(?=[\d+A-Z])(?:\d{13}|\d{4}[ -]\d{4}|\d{4}[ -]\d{6}|[A-Z]{2}\d\d ?[A-Z0-9]{4}"
                           r"|\d{3}-\d\d-\d{4}|\+\d|\d{3}\) ?\d{3}|\d{3}[-.]\d{3}|\d\d[ .]\d\d[ .]\d\d|\d\)?[ /-]\d{3}"
                           r"|\d{4}[ -]\d{5})")
# The words _PHONE_WORD needs, looked for in the folded lower-case text (as the secret words are)
_PHONE_WORDS = ("phone", "tel", "mobile", "cell", "call", "fax", "sms", "whatsapp")
_DIGITS = b"0123456789"


def may_hold_secret(text: str) -> bool:
    """False only when no default pattern of `PatternRedactor` can change `text` (a cheap pre-check)."""
    lowered = _folded(text)
    return _may_hold_keyed(text, lowered) or _may_hold_number(text, lowered)


def _folded(text: str) -> str:
    """`text` lower-cased, the four non-ASCII letters that match an ASCII one ignoring case mapped to it."""
    return (text if text.isascii() else text.translate(ASCII_FOLDS)).lower()


def _may_hold_keyed(text: str, lowered: str) -> bool:
    """The pre-check of the patterns before `_IBAN` in `PatternRedactor.redact_all` (addresses, keys, secrets)."""
    if "@" in text:
        return True
    for word in _SECRET_WORDS:
        if word in lowered:
            return True
    return _KEY_PREFIX.search(text) is not None


def _may_hold_number(text: str, lowered: str) -> bool:
    """The pre-check of `_IBAN` and the patterns after it (numbers: IBANs, cards, SSNs, phones)."""
    if text.isascii():
        raw = text.encode("ascii")
        if len(raw) - len(raw.translate(None, _DIGITS)) < 8:
            return False
    if _DIGIT_GROUPS.search(text) is not None:
        return True
    for word in _PHONE_WORDS:
        if word in lowered:
            return True
    return False


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdecimal())


def _iban_ok(text: str) -> bool:
    compact = text.replace(" ", "")
    if len(compact) < 15 or len(compact) > 34 or sum(c.isdigit() for c in compact) < 8:
        return False
    moved = compact[4:] + compact[:4]
    try:
        return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1
    except ValueError:
        return False


class PatternRedactor:
    """Regex-based redactor for e-mails, phones, cards, IBANs, SSNs, keys, tokens and secrets.

    Args:
        salt: mixed into the placeholder digests; keep it fixed for a store so that
            placeholders stay stable across sessions.
        ip: also redact IPv4 and IPv6 addresses (off by default: in operations logs they
            name machines more often than people).
    """

    def __init__(self, salt: str = "", *, ip: bool = False) -> None:
        self._salt = salt
        self._ip = ip

    @property
    def ip(self) -> bool:
        """Whether IP addresses are redacted too."""
        return self._ip

    def _token(self, label: str, value: str) -> str:
        digest = hashlib.sha256((self._salt + value).encode("utf-8", "surrogatepass")).hexdigest()[:8]
        return f"[{label}#{digest}]"

    def redact(self, text: str) -> str:
        """Return `text` with every recognised sensitive value replaced."""
        lowered = _folded(text)
        if _may_hold_keyed(text, lowered):
            return self.redact_all(text)
        if _may_hold_number(text, lowered):
            # The patterns before the numbers' would each meet `text` unchanged, and none can match it.
            return self._redact_numbers(text)
        return self._redact_ip(text) if self._ip else text

    def redact_all(self, text: str) -> str:
        """`redact` without the pre-check: every pattern runs."""
        text = _PEM.sub(lambda m: self._token("PRIVATEKEY", m.group(0)), text)
        text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{self._token('SECRET', m.group(2))}@", text)
        text = _BEARER.sub(lambda m: f"{m.group(1)} {self._token('TOKEN', m.group(0))}", text)
        text = _PREFIXED_KEY.sub(lambda m: self._token("APIKEY", m.group(0)), text)
        text = _KEYED_SECRET.sub(self._keyed, text)
        text = _EMAIL.sub(lambda m: self._token("EMAIL", m.group(0).lower()), text)
        return self._redact_numbers(text)

    def _redact_numbers(self, text: str) -> str:
        """The number patterns of `redact_all` (and IP addresses when asked), in its order."""
        text = _IBAN.sub(lambda m: self._token("IBAN", m.group(0).replace(" ", "")) if _iban_ok(m.group(0))
                         else m.group(0), text)
        text = _CARD.sub(self._card, text)
        text = _SSN.sub(lambda m: self._token("SSN", m.group(0)), text)
        text = _PHONE_WORD.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + self._phone(m.group(1)), text)
        text = _PHONE.sub(lambda m: self._phone(m.group(0)), text)
        return self._redact_ip(text) if self._ip else text

    def _keyed(self, match: re.Match[str]) -> str:
        value = match.group(4)
        if value.startswith("[") and "#" in value:  # already a placeholder
            return match.group(0)
        return f"{match.group(1)}{match.group(2)}{match.group(3)}{self._token('SECRET', value)}{match.group(3)}"

    def _card(self, match: re.Match[str]) -> str:
        digits = _digits(match.group(0))
        groups = re.split(r"[ -]", match.group(0))
        round_numbers = len(groups) > 1 and all(g.endswith("00") for g in groups)  # "1000 2000 3000 4000"
        if 13 <= len(digits) <= 19 and digits[0] in "23456" and not round_numbers and _luhn_ok(digits):
            return self._token("CARD", digits)
        return match.group(0)

    def _phone(self, value: str) -> str:
        digits = _digits(value)
        return self._token("PHONE", digits) if 8 <= len(digits) <= 15 else value

    def _redact_ip(self, text: str) -> str:
        def address(match: re.Match[str]) -> str:
            try:
                return self._token("IP", str(ipaddress.ip_address(match.group(0))))
            except ValueError:  # e.g. a time of day such as 10:30:00
                return match.group(0)

        return _IP_CANDIDATE.sub(address, text)


class NoRedaction:
    """Explicit opt-out: stores text exactly as given."""

    def redact(self, text: str) -> str:
        return text


_SECRET_KEY = re.compile(_SECRET_NAME, re.IGNORECASE)


def redact_value(value: Any, redact: Callable[[str], str]) -> Any:
    """Apply `redact` to every string inside a JSON-like value, keys included.

    A string under a key that names a secret (``api_key``, ``password``, ``token``…) is
    redacted whole: ``{"api_key": "abc123"}`` holds no pattern, the key says what it is.
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(key, str) and isinstance(item, str) and item and _SECRET_KEY.search(key):
                item = "[SECRET]"  # no digest: a short password's unsalted digest could be guessed
            out[redact(key) if isinstance(key, str) else key] = redact_value(item, redact)
        return out
    if isinstance(value, (list, tuple)):
        return [redact_value(item, redact) for item in value]
    return value


def leaves_unchanged(redactor: Redactor, canonical_json: str) -> bool:
    """True only when ``redact_value(value, redactor.redact)`` returns `value` as it is (up to
    lists for tuples), judged from the canonical JSON of `value` alone: one pre-check instead
    of one per string.

    JSON writes every character a default pattern, a secret word or a key prefix is made of
    as itself (it escapes only quotes, backslashes and control characters), so a string of
    `value` that `may_hold_secret` flags is flagged inside the JSON too; a key naming a secret
    holds a secret word. Only the default redactor without IP redaction and `NoRedaction` are
    known here; any other redactor is always asked.
    """
    if type(redactor) is PatternRedactor:
        return not redactor.ip and not may_hold_secret(canonical_json)
    return type(redactor) is NoRedaction and not may_hold_secret(canonical_json)
