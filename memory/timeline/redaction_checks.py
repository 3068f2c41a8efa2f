"""Pre-checks of the default redactor: the literals each of its patterns needs to match.

`memory.timeline.redaction.PatternRedactor` runs its patterns only on a text that holds what they
need (most log lines hold no sensitive value); `may_hold_secret` answers for every pattern at once,
also for the canonical JSON of metadata (`memory.timeline.redaction_values`). The patterns are named
as in `memory.timeline.redaction`.
"""

from __future__ import annotations

import re

# A necessary condition for any default pattern to match, checked before running them
# (most log lines hold no sensitive value). Each test below is implied by a match of the
# patterns it stands for, so a text that passes none of them comes out of every `sub`
# unchanged (a test checks this against the full redactor):
# - _EMAIL and _URL_PASSWORD need "@";
# - _BEARER, _KEYED_SECRET, _XML_SECRET, _PHRASED_SECRET and _PEM need one of the secret words
#   ("key", "token", "secret", "pw", "pass", "cred", "bearer", "basic"; "pass" and "pw" stand for
#   every label spelt "pass…", "pw…"), matched case-insensitively. Under re.IGNORECASE exactly
#   four non-ASCII characters match an ASCII letter: İ and ı (i), ſ (s) and the Kelvin sign (k).
#   Mapped to those letters (ASCII_FOLDS) and then lower-cased, the text holds the word wherever
#   the pattern could match it (no other character's lower case is ASCII, and only İ's lower
#   case is longer than one character);
# - _PREFIXED_KEY needs one of its literal prefixes: found lower-cased in that same text (it holds
#   every ASCII literal of the raw text, lower-cased) or, for those spelt with capitals, in the raw
#   text (_KEY_CAPITALS); _URL_PASSWORD's Oracle form needs "jdbc:oracle:", _CLI_PASSWORD "-u"
#   (also in "--user") or "--password"; each of _PAIRED_SECRETS needs its context (an AKIA/ASIA or
#   AC id, or "aws" or "twilio");
# - _CARD, _IBAN, _SSN, _PHONE and _PHONE_WORD act only on matches holding 8 digits or more,
#   so an ASCII text with fewer than 8 needs no search; otherwise each needs one of
#   _DIGIT_GROUPS (with the same Unicode-aware \d) or, for _PHONE_WORD, a phone word.
# The literals are looked for in one scan of the lower-cased text (_KEYED_HINTS) and one of the raw
# text (_KEY_CAPITALS). Each alternative starts at its literal's rarest character and checks the
# others around it, so the scan skips, in C, every position that cannot start one: several times
# faster than looking for each literal in turn. Pattern by pattern, the same literals decide which
# patterns `PatternRedactor.redact` runs on a text that holds one.
ASCII_FOLDS = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
# The lower-case literals of _PREFIXED_KEY (its webhook URLs by "hooks.slack" and "discord").
_PREFIX_HINT = (
    r"k(?:ey-|(?<=sk)-|(?<=hook)s\.slack)|c(?<=disc)ord|pypi-|x(?:ox[abprse]-|app-)|v(?<=hv)[sb]\.|glpat-|ya29\."
    r"|_(?:live_|test_|(?<=whsec_)|(?<=gh[pousr]_)|(?<=github_)pat_|(?<=npm_)|(?<=hf_)|(?<=dop_)v1_"
    r"|(?<=shp(?:at|ca|pa|ss)_))"
)
_PREFIX_HINTS = re.compile(_PREFIX_HINT)
# Every literal of the list above, in the folded lower-case text: "@", the secret words ("aws" and
# "twilio" for the paired secrets' contexts), "-u" and "jdbc:oracle:", and the key prefixes.
_KEYED_HINTS = re.compile(
    r"@|k(?:ey|(?<=tok)en)|c(?:(?<=sec)ret|red)|w(?:(?<=aw)s|(?<=tw)ilio)|pw|pass|b(?:earer|asic)"
    r"|u(?<=-u)|jdbc:oracle:|" + _PREFIX_HINT
)
# The literals of _PREFIXED_KEY spelt with capitals (and the AC id of a Twilio context), in the raw text.
_KEY_CAPITALS = re.compile(r"A(?:KIA|SIA|Iza|C[0-9a-f])|S(?:K[0-9a-f]|G\.)|GOCSPX-|J(?<=eyJ)")
# The secret words of the patterns that read a label (_XML_SECRET, _KEYED_SECRET, _PHRASED_SECRET)
_LABEL_WORDS = ("key", "secret", "token", "pass", "pw", "cred")
# What each of _PAIRED_SECRETS' contexts needs: its word (in the folded lower-case text) or an id's prefix.
_PAIRED_HINTS = (("aws", "AKIA", "ASIA"), ("twilio", "AC", "AC"))
# The lookahead only states what every alternative starts with: the engine then skips most
# positions at once instead of trying each alternative there (several times faster).
_DIGIT_GROUPS = re.compile(
    r"(?=[\d+A-Z])(?:\d{13}|\d{4}[ -]\d{4}|\d{4}[ -]\d{6}|[A-Z]{2}\d\d ?[A-Z0-9]{4}"
    r"|\d{3}-\d\d-\d{4}|\+\d|\d{3}\) ?\d{3}|\d{3}[-.]\d{3}|\d\d[ .]\d\d[ .]\d\d|\d\)?[ /-]\d{3}"
    r"|\d{4}[ -]\d{5})"
)
# The same groups pattern by pattern (what `PatternRedactor.redact` runs each number pattern on): an
# IBAN's country and check digits, a card's groups or run, an SSN, and a phone number's shapes, its
# trunk form by the "0" it starts with.
_IBAN_HINT = re.compile(r"(?=[A-Z])[A-Z]{2}\d\d ?[A-Z0-9]{4}")
_CARD_HINT = re.compile(r"(?=\d)(?:\d{13}|\d{4}[ -]\d{4})")
_SSN_HINT = re.compile(r"(?=\d)\d{3}-\d\d-\d{4}")
_PHONE_HINT = re.compile(
    r"(?=[\d+])(?:\+\d|\d{3}\) ?\d{3}|\d{3}[-.]\d{3}|\d\d[ .]\d\d[ .]\d\d|0\d{1,4}\)?[ /-]\d{3}|\d{4}[ -]\d{5})"
)
# The words _PHONE_WORD needs, looked for in the folded lower-case text (as the secret words are)
_PHONE_WORDS = ("phone", "tel", "mobile", "cell", "call", "fax", "sms", "whatsapp")
_DIGITS = b"0123456789"


def may_hold_secret(text: str) -> bool:
    """False only when no default pattern of `PatternRedactor` can change `text` (a cheap pre-check)."""
    lowered = _folded(text)
    return _may_hold_keyed(text, lowered) or _may_hold_number(text, lowered)


def _folded(text: str) -> str:
    """`text` lower-cased, the four non-ASCII letters that match an ASCII one ignoring case mapped to it."""
    lowered = text.lower()
    # Mapping each character through a table is slow: only ı and ſ keep their form when lower-cased,
    # İ becomes "i" and a combining dot (U+0307), and the Kelvin sign "k" already.
    if lowered.isascii() or not ("\u0131" in lowered or "\u017f" in lowered or "\u0307" in lowered):
        return lowered
    return text.translate(ASCII_FOLDS).lower()


def _may_hold_keyed(text: str, lowered: str) -> bool:
    """The pre-check of the patterns before `_IBAN` in `PatternRedactor.redact_all` (addresses, keys, secrets)."""
    return _KEYED_HINTS.search(lowered) is not None or _KEY_CAPITALS.search(text) is not None


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


def _after(text: str, lowered: str, replaced: str) -> tuple[str, str]:
    """`replaced` (what a pattern made of `text`) and its folded lower-case form (`lowered` when unchanged)."""
    return (text, lowered) if replaced == text else (replaced, _folded(replaced))
