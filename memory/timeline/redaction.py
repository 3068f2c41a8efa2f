"""Redaction at write time: personal data and secrets never reach the hash or the disk.

The default `PatternRedactor` replaces e-mail addresses (any script), phone numbers
(international and common national forms), payment-card numbers (Luhn-checked), IBANs
(mod-97-checked), US social security numbers, API keys and tokens of common providers
(recognised by their format, with or without a word naming them), ``name=value`` secrets (also
in JSON, XML and as metadata keys), secrets written as a phrase ("the password is …", "api key:
…", "bearer …"), credentials in connection URLs, JDBC strings and command lines, webhook URLs
and PEM private keys (IP addresses on request) with stable placeholders such as
``[EMAIL#3f1a9c2e]``: the same value always maps to the same placeholder, so entries that
mention the same address can still be related, while the raw value is gone. The digest is
a truncated SHA-256 of the value (optionally salted); it identifies, it does not reveal.
A label is kept and its value replaced: "the password is [SECRET#…]".

A digit run is a card number when it passes the Luhn check and is written like one: in groups
(4-4-4-4, Amex's 4-6-5), or contiguous with a card brand's prefix and length and a card word
nearby ("visa", "card", "cc", "pan"…), not right after an id's label ("request", "trace_id=",
"order #"…): a 16-digit request id passes the Luhn check one time in ten.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from typing import Protocol

from memory.timeline.checksums import decimal_digits, iban_ok, issued_as_card, luhn_ok
from memory.timeline.redaction_checks import (
    _CARD_HINT,
    _IBAN_HINT,
    _KEY_CAPITALS,
    _LABEL_WORDS,
    _PAIRED_HINTS,
    _PHONE_HINT,
    _PHONE_WORDS,
    _PREFIX_HINTS,
    _SSN_HINT,
    _after,
    _folded,
    _may_hold_keyed,
    _may_hold_number,
)
from memory.timeline.redaction_checks import ASCII_FOLDS as ASCII_FOLDS  # where callers found them
from memory.timeline.redaction_checks import may_hold_secret as may_hold_secret


class Redactor(Protocol):
    """Anything that maps text (and metadata) to a redacted copy."""

    def redact(self, text: str) -> str:
        """Return `text` with sensitive values replaced."""
        ...


# Each pattern below names its class in the placeholder. Those matching digits leave a match
# alone unless it holds at least 8 digits (the callbacks check), which the pre-checks rely on
# (`memory.timeline.redaction_checks` lists what each pattern needs).
_EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}(?![\w-])")
_BEARER = re.compile(r"\b(Bearer|Basic|Token)\s+([A-Za-z0-9\-._~+/]{8,}=*)", re.IGNORECASE)
_SECRET_NAME = (
    r"(?:api[_-]?key|apikey|secret|token|password|passwd|passphrase|pwd|access[_-]?key"
    r"|private[_-]?key|credentials?|creds|(?<![a-z])pass(?![a-z])|(?<![a-z])pw(?![a-z])"
    r"|(?:account|auth|license|licence|subscription|signing|encryption|master)[_-]?key)"
)
_KEYED_SECRET = re.compile(
    r"(?<![A-Za-z0-9])([A-Za-z0-9_.-]*?" + _SECRET_NAME + r"[A-Za-z0-9_.-]*)"
    r"""(["']?\s*[:=]\s*)(["']?)([^\s'"]{6,})\3""",
    re.IGNORECASE,
)
# XML elements named like a secret: <password>…</password>
_XML_SECRET = re.compile(r"(<([\w:.-]*" + _SECRET_NAME + r"[\w:.-]*)>)([^<>]{1,200}?)(</\2>)", re.IGNORECASE)
# A secret written as a phrase: a label, then "is", ":", "=", "to", "-" or a space, then the value.
# Between the label and "is", ":" or "=" may stand up to five words or a parenthesis ("the password
# for the admin account is …", "temp password (expires friday): …"). Which values count is
# decided in `_phrased`: written like a secret, or quoted.
_LABEL = (
    r"pass(?:word|wd|phrase)?|pwd|pw|creds|credentials?|secret|token"
    r"|(?:api|access|secret|secret[\s_-]access|private|license|licence|subscription|signing|encryption"
    r"|master|auth|account)[\s_-]?key|apikey"
)
_PHRASED_SECRET = re.compile(
    r"(?<![A-Za-z0-9])(?:" + _LABEL + r")(?![A-Za-z0-9])"
    r"(?:(?:\s+[\w.@/-]+){1,5}?\s*(?:\([^()]{0,40}\))?|\s*\([^()]{0,40}\))?"
    r"(?:\s*(?::=|[:=]|->|=>|\u2192)\s*|\s+(?:is|was|are|were)(?:\s+(?:now|still|just|literally|actually|set\s+to"
    r"|changed\s+to|reset\s+to))?\s*:?\s+)"
    r"(?P<quote>[\"'`]?)(?P<value>[^\s\"'`<>]{6,})"
    r"|(?<![A-Za-z0-9])(?:" + _LABEL + r")(?![A-Za-z0-9])"
    r"(?:\s+(?:now|set\s+to|changed\s+to|reset\s+to|rotated\s+to|updated\s+to|to)\s+|\s+[-\u2013\u2014]\s+|\s+)"
    r"(?P<quote2>[\"'`]?)(?P<value2>[^\s\"'`<>]{6,})",
    re.IGNORECASE,
)
# Credentials in connection strings: scheme://user:password@host (the password may hold "@": the
# last "@" before the host ends it), and Oracle's thin JDBC form user/password@.
_URL_PASSWORD = re.compile(
    r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]*:)([^\s/]+)@"
    r"|\b(jdbc:oracle:[a-z]+:[^\s/@:]+/)([^\s@]+)@"
)
# Credentials on a command line: curl -u user:password, mysql -u root -pPASSWORD, --password X
_CLI_PASSWORD = re.compile(
    r"(?<!\S)((?:-u|--user)\s+[^\s:]+:)(\S+)"
    r"|(?<!\S)(-u\s*\S+\s+-p\s*)(\S+)"
    r"|(?<!\S)(--password(?:=|\s+))(\S+)"
)
_PEM = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----"
    r"(?:[\s\S]*?-----END \1-----|(?:[A-Za-z0-9+/=\s]|\\[nr])*)"
)
_PREFIXED_KEY = re.compile(
    r"\b(?:sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}"
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|whsec_[A-Za-z0-9]{16,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|glpat-[A-Za-z0-9_\-]{20,}"
    r"|npm_[A-Za-z0-9]{36}"
    r"|pypi-AgE[A-Za-z0-9_\-]{16,}"
    r"|hf_[A-Za-z0-9]{30,}"
    r"|dop_v1_[a-f0-9]{64}"
    r"|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"
    r"|hv[sb]\.[A-Za-z0-9_\-]{20,}"
    r"|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"
    r"|xox[abprse]-[A-Za-z0-9\-]{10,}"
    r"|xapp-\d-[A-Za-z0-9\-]{10,}"
    r"|AIza[0-9A-Za-z_\-]{30,}"
    r"|ya29\.[A-Za-z0-9_\-.]{20,}"
    r"|GOCSPX-[A-Za-z0-9_\-]{20,}"
    r"|(?:AC|SK)[0-9a-f]{32}"
    r"|key-[0-9a-z]{32}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})(?![A-Za-z0-9])"  # whole: AKIA ids are 20 long
    r"|https://(?:hooks\.slack\.com/(?:services|workflows|triggers)|discord(?:app)?\.com/api/webhooks)/[A-Za-z0-9/_\-]+"
)
# Secrets that carry no mark of their own, known by the id they are paired with: an AWS secret
# access key (40 base-64 characters) in a text that holds an access key id or says "aws", a
# Twilio auth token (32 hex digits) in one that holds an account SID or says "twilio".
_PAIRED_SECRETS = (
    (
        re.compile(r"(?:AKIA|ASIA)[0-9A-Z]{16}|(?i:aws)"),
        re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"),
    ),
    (re.compile(r"\bAC[0-9a-f]{32}\b|(?i:twilio)"), re.compile(r"(?<![A-Za-z0-9])[0-9a-f]{32}(?![A-Za-z0-9])")),
)
# Cards: four groups of four, Amex's 4-6-5, or 13-19 contiguous digits (Luhn-checked; see `_card`),
# never inside a word: a hex id such as an episode id holds digit runs that pass the Luhn check.
_CARD = re.compile(r"(?<![\w.,])(?:\d{4}([ -])\d{4}\1\d{4}\1\d{1,7}|\d{4}([ -])\d{6}\2\d{5}|\d{13,19})(?![\d.,]*\d|\w)")
# A contiguous run is a card only near a card word and not right after an id's label.
_CARD_WORD = re.compile(
    r"(?<![A-Za-z])(?:cards?|card[_-]?(?:number|no|num)|cardholder|visa|master\s?card|amex"
    r"|american\s+express|discover|diners|jcb|unionpay|maestro|cc|ccn|cc[_-]?num(?:ber)?|pan"
    r"|credit|debit)(?![A-Za-z])",
    re.IGNORECASE,
)
_ID_LABEL = re.compile(
    r"(?<![A-Za-z])(?:ids?|request|req|trace|span|order|txn|transaction|invoice|ticket|job|build"
    r"|run|ref|reference|correlation|session|account|acct|user|customer|msg|message|event|batch"
    r"|shipment|tracking)(?:[_-]?id)?[\s:=#_-]{0,3}$|#\s?$",
    re.IGNORECASE,
)
_CARD_CONTEXT = 40  # characters looked at before a contiguous run for a card word (half as many after)
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
# (never the word of a placeholder: "[PHONE#11072303]" has a digest of digits only, about one time in 40)
_PHONE_WORD = re.compile(
    r"(?<!\[)\b(?:phone|tel|telephone|mobile|cell|call|fax|sms|whatsapp)\b"
    r"(?:\W{1,3}(?:me|us|them|at|on|is|no|number|nr))*\W{1,3}(\+?\d[\d ().-]{6,18}\d)",
    re.IGNORECASE,
)
_IP_CANDIDATE = re.compile(
    r"(?<![\w.:])(?:\d{1,3}(?:\.\d{1,3}){3}(?!\w|\.\d)|[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:]))"
)


def _is_placeholder(value: str) -> bool:
    """Whether a value holds a placeholder already ("[CARD#…]", also behind a bracket: "{[CARD#…]")."""
    return (value.startswith("[") and "#" in value) or bool(_PLACED.search(value))


_SYMBOLS = frozenset("!@#$%^&*+=~?/\\|")
_PLACED = re.compile(r"\[[A-Z]+#[0-9a-f]+")  # also cut short of its "]" by a sentence end


def _looks_secret(value: str) -> bool:
    """Whether a value after a label is written like a secret: letters with digits, mixed case
    inside the word, or letters with symbols; never a plain word ("expired", "case-sensitive")."""
    if len(value) < 6 or _is_placeholder(value):
        return False
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    inner_upper = any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    symbols = any(c in _SYMBOLS for c in value)
    return letters and (digits or inner_upper or symbols)


def _written_as_card(text: str, start: int, end: int, digits: str) -> bool:
    """A contiguous digit run counts as a card with a brand's prefix and length, a card word
    near it on its line, and no id's label right before it."""
    if not issued_as_card(digits):
        return False
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    before = text[max(line_start, start - _CARD_CONTEXT) : start]
    if _ID_LABEL.search(before):
        return False
    after = text[end : min(line_end, end + _CARD_CONTEXT // 2)]
    return _CARD_WORD.search(before) is not None or _CARD_WORD.search(after) is not None


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
        """Return `text` with every recognised sensitive value replaced (what `redact_all` returns)."""
        lowered = _folded(text)
        if _may_hold_keyed(text, lowered):
            return self._redact_checked(text, lowered)
        if _may_hold_number(text, lowered):
            # The patterns before the numbers' would each meet `text` unchanged, and none can match it.
            return self._redact_numbers(text)
        return self._redact_ip(text) if self._ip else text

    def redact_all(self, text: str) -> str:
        """`redact` without its pre-checks: every pattern runs (the definition `redact` is tested against)."""
        text = _PEM.sub(lambda m: self._token("PRIVATEKEY", m.group(0)), text)
        text = _URL_PASSWORD.sub(self._head_value, text)
        text = _CLI_PASSWORD.sub(self._head_value, text)
        text = _BEARER.sub(self._bearer, text)
        paired = [secret for context, secret in _PAIRED_SECRETS if context.search(text)]
        text = _PREFIXED_KEY.sub(lambda m: self._token("APIKEY", m.group(0)), text)
        for secret in paired:
            text = secret.sub(self._paired, text)
        text = _XML_SECRET.sub(self._xml, text)
        text = _KEYED_SECRET.sub(self._keyed, text)
        text = _PHRASED_SECRET.sub(self._phrased, text)
        text = _EMAIL.sub(lambda m: self._token("EMAIL", m.group(0).lower()), text)
        return self._redact_all_numbers(text)

    def _redact_checked(self, text: str, lowered: str) -> str:
        """`redact_all`, each pattern run only when the text as it meets it holds a literal the pattern needs
        (the pre-check's notes); `lowered` is `text` folded and lower-cased, and follows each replacement."""
        if "-----BEGIN " in text:
            text, lowered = _after(text, lowered, _PEM.sub(lambda m: self._token("PRIVATEKEY", m.group(0)), text))
        if "@" in text:
            text, lowered = _after(text, lowered, _URL_PASSWORD.sub(self._head_value, text))
        if "-u" in text or "--password" in text:
            text, lowered = _after(text, lowered, _CLI_PASSWORD.sub(self._head_value, text))
        if "bearer" in lowered or "basic" in lowered or "token" in lowered:
            text, lowered = _after(text, lowered, _BEARER.sub(self._bearer, text))
        paired = [
            secret
            for (context, secret), (word, *ids) in zip(_PAIRED_SECRETS, _PAIRED_HINTS)
            if (word in lowered or any(map(text.__contains__, ids))) and context.search(text)
        ]
        if _PREFIX_HINTS.search(lowered) or _KEY_CAPITALS.search(text):
            text, lowered = _after(text, lowered, _PREFIXED_KEY.sub(lambda m: self._token("APIKEY", m.group(0)), text))
        for secret in paired:
            text, lowered = _after(text, lowered, secret.sub(self._paired, text))
        if any(map(lowered.__contains__, _LABEL_WORDS)):
            if "</" in text:
                text, lowered = _after(text, lowered, _XML_SECRET.sub(self._xml, text))
            if ":" in text or "=" in text:
                text, lowered = _after(text, lowered, _KEYED_SECRET.sub(self._keyed, text))
            text, lowered = _after(text, lowered, _PHRASED_SECRET.sub(self._phrased, text))
        if "@" in text:
            text, lowered = _after(text, lowered, _EMAIL.sub(lambda m: self._token("EMAIL", m.group(0).lower()), text))
        if _may_hold_number(text, lowered):
            return self._redact_numbers(text)
        return self._redact_ip(text) if self._ip else text

    def _redact_numbers(self, text: str) -> str:
        """The number patterns of `redact_all` (and IP addresses when asked), in its order, each run only
        when the text as it meets it holds that pattern's digit groups (or a phone word)."""
        if _IBAN_HINT.search(text):
            text = _IBAN.sub(
                lambda m: self._token("IBAN", m.group(0).replace(" ", "")) if iban_ok(m.group(0)) else m.group(0),
                text,
            )
        if _CARD_HINT.search(text):
            text = _CARD.sub(self._card, text)
        if _SSN_HINT.search(text):
            text = _SSN.sub(lambda m: self._token("SSN", m.group(0)), text)
        folded = _folded(text)
        if any(map(folded.__contains__, _PHONE_WORDS)):
            text = _PHONE_WORD.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + self._phone(m.group(1)), text)
        if _PHONE_HINT.search(text):
            text = _PHONE.sub(lambda m: self._phone(m.group(0)), text)
        return self._redact_ip(text) if self._ip else text

    def _redact_all_numbers(self, text: str) -> str:
        """`_redact_numbers` without its pre-checks."""
        text = _IBAN.sub(
            lambda m: self._token("IBAN", m.group(0).replace(" ", "")) if iban_ok(m.group(0)) else m.group(0), text
        )
        text = _CARD.sub(self._card, text)
        text = _SSN.sub(lambda m: self._token("SSN", m.group(0)), text)
        text = _PHONE_WORD.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + self._phone(m.group(1)), text)
        text = _PHONE.sub(lambda m: self._phone(m.group(0)), text)
        return self._redact_ip(text) if self._ip else text

    def _head_value(self, match: re.Match[str]) -> str:
        """A match of alternatives each of two groups, (what stays, the secret): the secret replaced."""
        i = next(i for i in range(1, len(match.groups()), 2) if match.group(i) is not None)
        head, value = match.group(i), match.group(i + 1)
        rest = match.group(0)[len(head) + len(value) :]  # the "@" after a URL's password
        return match.group(0) if _is_placeholder(value) else f"{head}{self._token('SECRET', value)}{rest}"

    def _bearer(self, match: re.Match[str]) -> str:
        # "Basic troubleshooting" or "token expiration" name no credential: the value must look like one
        if not _looks_secret(match.group(2)):
            return match.group(0)
        return f"{match.group(1)} {self._token('TOKEN', match.group(0))}"

    def _paired(self, match: re.Match[str]) -> str:
        value = match.group(0)
        # a key mixes letters and digits; a 40-character one mixes cases too (a commit id does not)
        mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
        keylike = any(c.isdigit() for c in value) and any(c.isalpha() for c in value) and (len(value) != 40 or mixed)
        return self._token("SECRET", value) if keylike else value

    def _xml(self, match: re.Match[str]) -> str:
        value = match.group(3).strip()
        if len(value) < 4 or _is_placeholder(value):
            return match.group(0)
        return f"{match.group(1)}{self._token('SECRET', value)}{match.group(4)}"

    def _phrased(self, match: re.Match[str]) -> str:
        group = "value" if match.group("value") is not None else "value2"
        quoted = bool(match.group("quote" if group == "value" else "quote2"))
        value = match.group(group)
        if len(value.rstrip(".,;:)]}>")) >= 6:  # the end of the sentence is not the secret's
            value = value.rstrip(".,;:)]}>")
        if _is_placeholder(value) or not (quoted or _looks_secret(value)):
            return match.group(0)
        start = match.start(group) - match.start(0)
        return match.group(0)[:start] + self._token("SECRET", value) + match.group(0)[start + len(value) :]

    def _keyed(self, match: re.Match[str]) -> str:
        value = match.group(4)
        if value.startswith("[") and "#" in value:  # already a placeholder
            return match.group(0)
        return f"{match.group(1)}{match.group(2)}{match.group(3)}{self._token('SECRET', value)}{match.group(3)}"

    def _card(self, match: re.Match[str]) -> str:
        digits = decimal_digits(match.group(0))
        groups = re.split(r"[ -]", match.group(0))
        round_numbers = len(groups) > 1 and all(g.endswith("00") for g in groups)  # "1000 2000 3000 4000"
        if not (13 <= len(digits) <= 19 and digits[0] in "23456" and not round_numbers and luhn_ok(digits)):
            return match.group(0)
        if len(groups) == 1 and not _written_as_card(match.string, match.start(), match.end(), digits):
            return match.group(0)
        return self._token("CARD", digits)

    def _phone(self, value: str) -> str:
        digits = decimal_digits(value)
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
