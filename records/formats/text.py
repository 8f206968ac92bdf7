"""Text rules every reader shares. Pure Python, no Django.

PostgreSQL text cannot hold the NUL character, and SQLite can: to keep the two databases
answering alike, every reader refuses a decoded string that carries one, naming where it is.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

# What Go's strings.TrimSpace trims (unicode.IsSpace: the White_Space property). Python's
# str.strip() also trims U+001C to U+001F, which Go keeps: upstream's reader finds "\u001f"
# not blank, and so must evaldash's.
GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)


def go_blank(value: str) -> bool:
    """Whether `strings.TrimSpace(value) == ""` in Go (upstream's `required`)."""
    return not value.strip(GO_SPACE)


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


_GO_SHORT = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_GO_ESCAPED = re.compile('["\\\\\x00-\x1f<>&\u2028\u2029]')


def go_json_string(text: str) -> str:
    """`text` as Go's encoding/json writes a string (HTML escaping on, as json.Marshal and a
    default Encoder have it): `"`, `\\` and the controls escaped (`\\b \\f \\n \\r \\t` short,
    others `\\u00XX`), `<`, `>`, `&`, U+2028 and U+2029 as `\\u003c`...; the rest as itself."""
    return '"' + _GO_ESCAPED.sub(lambda m: _GO_SHORT.get(m[0]) or f"\\u{ord(m[0]):04x}", text) + '"'


# Go's encoding/json folds a key rune by rune to the smallest rune of its simple-fold orbit
# (fold.go's foldRune): ASCII letters come out upper case. The field names matched here are
# ASCII, and the only runes outside ASCII whose orbit holds an ASCII letter are LATIN SMALL
# LETTER LONG S (with S and s) and KELVIN SIGN (with K and k); every other rune outside ASCII
# folds to a rune outside ASCII, so it is kept as it is: it can never match such a name.
_GO_FOLD = str.maketrans({"\u017f": "S", "\u212a": "K"})


def go_fold(name: str) -> str:
    """A JSON key as Go's decoder folds it to find a struct field with an ASCII name: ASCII
    letters upper-cased, `ſ` as `S` and the Kelvin sign as `K` (so `ſuite` folds as `SUITE`);
    `ı`, `İ`, `ß` and `ﬁ` fold to no ASCII letter."""
    if name.isascii():
        return name.upper()
    return "".join(c.upper() if c.isascii() else c for c in name.translate(_GO_FOLD))


def go_field(key: str, names: Any) -> str | None:
    """The field of `names` Go's decoder fills for `key`: the exact name first, else the first
    whose fold is the key's."""
    if key in names:
        return key
    folded = go_fold(key)
    return next((name for name in names if go_fold(name) == folded), None)
