"""Two pieces of Go's encoding/json that comparing bytes with upstream needs. Pure Python.

`compact` is json.Compact: the same bytes less the white space between tokens (strings, number
spellings and key order untouched). `member` is the raw text of one member of a top-level
object, as a `json.RawMessage` field receives it: names match case-insensitively and the last
of duplicate names wins, as Go's decoder has it.
"""

from __future__ import annotations

import json

_SPACE = b" \t\r\n"


def compact(raw: bytes) -> bytes:
    out = bytearray()
    in_string = escaped = False
    for byte in raw:
        if in_string:
            out.append(byte)
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte in _SPACE:
            continue
        else:
            out.append(byte)
            in_string = byte == 0x22
    return bytes(out)


def _skip_space(data: bytes, i: int) -> int:
    while i < len(data) and data[i] in _SPACE:
        i += 1
    return i


def _string_end(data: bytes, i: int) -> int:
    """The index after the string that starts at data[i] (a quote)."""
    i += 1
    while i < len(data):
        if data[i] == 0x5C:
            i += 2
            continue
        if data[i] == 0x22:
            return i + 1
        i += 1
    raise ValueError("unterminated string")


def _value_end(data: bytes, i: int) -> int:
    """The index after the JSON value that starts at data[i]."""
    if data[i] == 0x22:
        return _string_end(data, i)
    if data[i] in b"[{":
        depth = 0
        while i < len(data):
            c = data[i]
            if c == 0x22:
                i = _string_end(data, i)
                continue
            if c in b"[{":
                depth += 1
            elif c in b"]}":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        raise ValueError("unterminated value")
    while i < len(data) and data[i] not in b",}] \t\r\n":
        i += 1
    return i


def member(doc: bytes, name: str) -> bytes | None:
    """The raw bytes of `name`'s value in the top-level object `doc` (valid JSON), or None."""
    found = None
    i = _skip_space(doc, 0)
    if i >= len(doc) or doc[i] != 0x7B:
        return None
    i = _skip_space(doc, i + 1)
    while i < len(doc) and doc[i] != 0x7D:
        end = _string_end(doc, i)
        key = json.loads(doc[i:end])
        i = _skip_space(doc, end) + 1  # the colon
        start = _skip_space(doc, i)
        i = _value_end(doc, start)
        if key.lower() == name.lower():
            found = doc[start:i]
        i = _skip_space(doc, i)
        if i < len(doc) and doc[i] == 0x2C:
            i = _skip_space(doc, i + 1)
    return found
