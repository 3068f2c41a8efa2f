"""The checks a number passes before redaction calls it a card or an IBAN.

A payment card's number passes the Luhn check and starts with a brand's prefix, at a length
that brand issues; an IBAN's check digits make its mod-97 remainder 1. Both are formats, not
words: `memory.timeline.redaction` decides from them and from the text around a number.
"""

from __future__ import annotations

import re


def luhn_ok(digits: str) -> bool:
    """Whether a digit string passes the Luhn check (card numbers and some ids do)."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def decimal_digits(text: str) -> str:
    """The decimal digits of `text` (any script's), in order."""
    return "".join(c for c in text if c.isdecimal())


def iban_ok(text: str) -> bool:
    """Whether `text` (spaces allowed) has an IBAN's length, at least 8 digits and a valid mod-97 check."""
    compact = text.replace(" ", "")
    if len(compact) < 15 or len(compact) > 34 or sum(c.isdigit() for c in compact) < 8:
        return False
    moved = compact[4:] + compact[:4]
    try:
        return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1
    except ValueError:
        return False


# Card brands: the prefix of each, and the lengths it is issued in
_BRANDS = re.compile(
    r"(?P<amex>3[47])|(?P<diners>3(?:0[0-5]|[68]))|(?P<visa>4)|(?P<mastercard>5[1-5]|2(?:2[2-9]|[3-6]\d"
    r"|7[01]|720))|(?P<long>6011|65|64[4-9]|62|35(?:2[89]|[3-8]\d))"
)
_BRAND_LENGTHS = {
    "amex": (15,),
    "diners": (14, 16),
    "visa": (13, 16, 19),
    "mastercard": (16,),
    "long": (16, 17, 18, 19),
}


def issued_as_card(digits: str) -> bool:
    """Whether a digit string starts with a card brand's prefix and has a length that brand issues."""
    brand = _BRANDS.match(digits)
    return brand is not None and len(digits) in _BRAND_LENGTHS[brand.lastgroup or ""]
