"""Text rules every reader shares. Pure Python, no Django.

PostgreSQL text cannot hold the NUL character, and SQLite can: to keep the two databases
answering alike, every reader refuses a decoded string that carries one, naming where it is.
"""

from __future__ import annotations

from typing import Any

import msgspec

# How a NUL can reach a decoded JSON string: only escaped (a raw control byte is invalid JSON).
NUL_ESCAPE = b"\\u0000"


def nul_field(value: Any, path: str = "") -> str | None:
    """The dotted path of the first string (or key) in `value` holding a NUL character."""
    if isinstance(value, msgspec.Struct):
        value = msgspec.to_builtins(value)
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, str):
            if "\x00" in v:
                return where
        elif isinstance(v, dict):
            for k, item in reversed(list(v.items())):
                sub = f"{where}.{k}" if where else str(k)
                if "\x00" in str(k):
                    return sub
                stack.append((sub, item))
        elif isinstance(v, list | tuple):
            stack.extend((f"{where}[{i}]", item) for i, item in reversed(list(enumerate(v))))
    return None


NUL_MESSAGE = "holds a NUL character (\\u0000), which evaldash does not store"


def invalid_utf8(raw: bytes) -> str | None:
    """'invalid UTF-8 at byte N' (1-based, in `raw`) if it is not UTF-8, else None."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"invalid UTF-8 at byte {exc.start + 1:,}"
    return None


# Go's encoding/json matches an object key to a struct field by its exact name first, else by
# simple Unicode case folding (each rune stands for the smallest rune of its fold orbit). The
# field names here are ASCII, and the only runes outside ASCII whose orbit holds an ASCII letter
# are LATIN SMALL LETTER LONG S (in s's) and KELVIN SIGN (in k's); every other rune outside
# ASCII folds to itself or to another rune outside ASCII, so it can never match such a name.
_GO_FOLD = str.maketrans({"\u017f": "s", "\u212a": "k"})


def go_fold(name: str) -> str:
    """`name` as Go's decoder compares it with an ASCII field name, case-insensitively."""
    if name.isascii():
        return name.lower()
    return "".join(c.lower() if c.isascii() else c for c in name.translate(_GO_FOLD))
