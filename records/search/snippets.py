"""A snippet of matched text with its words marked: pieces of plain text, each with whether it
is a matched word. Templates escape every piece; nothing here writes markup. Pure Python."""

from __future__ import annotations

import re

WIDTH = 90  # characters of context either side of the first match


def snippet(text: str, words: list[str], width: int = WIDTH) -> list[tuple[str, bool]]:
    """The stretch of `text` around its first matched word, cut into pieces; [] when no word
    of `words` occurs in it as a word."""
    if not text or not words:
        return []
    pattern = re.compile(
        r"(?<![^\W_])(" + "|".join(re.escape(w) for w in words) + r")(?![^\W_])", re.IGNORECASE
    )
    first = pattern.search(text)
    if first is None:
        return []
    start = max(0, first.start() - width)
    end = min(len(text), first.end() + width)
    window = " ".join(text[start:end].split())
    pieces: list[tuple[str, bool]] = [("…", False)] if start else []
    at = 0
    for m in pattern.finditer(window):
        if m.start() > at:
            pieces.append((window[at : m.start()], False))
        pieces.append((m.group(0), True))
        at = m.end()
    if at < len(window):
        pieces.append((window[at:], False))
    if end < len(text):
        pieces.append(("…", False))
    return pieces
