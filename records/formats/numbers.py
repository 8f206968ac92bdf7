"""The one reading of a whole number that a request names (a query parameter, a form field, a
part of an address): ASCII digits only (no sign, no `²`, no other script's digits, which
Python's `int` would take) and bounded, so what comes out always fits both databases' 64-bit
integer columns with room for a view's additions, and never reaches a query as a number the
database cannot hold."""

from __future__ import annotations

# The largest number a request may name: below 2**63 (SQLite's INTEGER and PostgreSQL's bigint),
# with room above for a page's offset arithmetic.
MAX_WHOLE = 10**18
# Page numbers: far past any store's last page, small enough for OFFSET (page x size).
MAX_PAGE = 10**9


class NotWhole(ValueError):
    """A value that is not a whole number in the bounds; its message says what is wanted."""


def parse_whole(raw: str, *, minimum: int = 0, maximum: int = MAX_WHOLE) -> int:
    """`raw` (surrounding spaces aside) as a whole number from `minimum` to `maximum`; a
    minus sign only where `minimum` is below 0."""
    text = raw.strip()
    wanted = f"give a whole number from {minimum} to {maximum} in the digits 0-9"
    negative = minimum < 0 and text.startswith("-")
    digits = text[1:] if negative else text
    # Checked before `int`, so a long run of digits is never converted at all.
    longest = len(str(max(-minimum, maximum)))
    if not digits or len(digits) > longest or not (digits.isascii() and digits.isdigit()):
        raise NotWhole(wanted)
    value = -int(digits) if negative else int(digits)
    if not minimum <= value <= maximum:
        raise NotWhole(wanted)
    return value
