"""A snippet of matched text with its words marked: pieces of plain text, each with whether it
is a matched word. Templates escape every piece; nothing here writes markup. Pure Python."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

WIDTH = 90  # characters of context either side of the first match


def snippet(text: str, words: list[str], width: int = WIDTH) -> list[tuple[str, bool]]:
    """The stretch of `text` around its first matched word, cut into pieces; [] when no word
    of `words` occurs in it as a word."""
    cut = _cut(text, words, width)
    if cut is None:
        return []
    window, before, after = cut
    pattern = _pattern(tuple(words))
    pieces: list[tuple[str, bool]] = [("…", False)] if before else []
    at = 0
    for m in pattern.finditer(window):
        if m.start() > at:
            pieces.append((window[at : m.start()], False))
        pieces.append((m.group(0), True))
        at = m.end()
    if at < len(window):
        pieces.append((window[at:], False))
    if after:
        pieces.append(("…", False))
    return pieces


def snippet_text(text: str, words: list[str], width: int = WIDTH) -> str:
    """`snippet`'s pieces joined into one text, without cutting them out: what an export
    writes, there found and folded apart (`stretches`, `folded`); "" when no word occurs."""
    return folded(stretches(words, width)(text) or "")


# The text around a match as it is, and whether text was left out before and after it.
Stretch = list


def stretches(words: list[str], width: int = WIDTH) -> Callable[[str | None], Stretch | None]:
    """What finds, in a text, the stretch around its first matched word, before its white
    space is folded (`folded` makes it `snippet_text`'s): None where no word occurs. The words'
    pattern is made once, for an export's hundreds of thousands of texts. Apart from the
    folding, the larger part of the work, so that an export's writer process folds beside the
    request's, which finds the matches."""
    ahead = _ahead(tuple(words)) if words else None

    def stretch(text: str | None) -> Stretch | None:
        if not text or ahead is None or (first := _first(ahead, text)) is None:
            return None
        start = max(0, first.start() - width)
        end = first.end() + width
        return [text[start:end], start > 0, end < len(text)]

    return stretch


def folded(cell: Any) -> Any:
    """A stretch as snippet text: its white space folded, an ellipsis where text was left out;
    any other cell as it is (an export's snippet cell is a stretch or "")."""
    if cell.__class__ is not list:
        return cell
    window, before, after = cell
    return ("…" if before else "") + " ".join(window.split()) + ("…" if after else "")


def _cut(text: str, words: list[str], width: int) -> tuple[str, bool, bool] | None:
    """The stretch of `text` around its first matched word, its white space folded, and
    whether text was left out before and after it; None when none occurs."""
    found = stretches(words, width)(text)
    if found is None:
        return None
    window, before, after = found
    return " ".join(window.split()), before, after


def _first(ahead: re.Pattern, text: str) -> re.Match | None:
    """The first match of `_pattern` in `text`, found with `ahead`, its pattern less the test
    of the character before (a pattern that starts with that test is tried at every
    character, and is three times slower over a call's text): a match after a letter or digit
    is passed over, as `_pattern` passes it over."""
    at = 0
    while (found := ahead.search(text, at)) is not None:
        start = found.start()
        if start == 0 or not text[start - 1].isalnum():  # `[^\W_]` is one letter or digit
            return found
        at = start + 1
    return None


@functools.lru_cache(maxsize=64)
def _pattern(words: tuple[str, ...]) -> re.Pattern:
    """Any of the words, as a whole word, in any case (made once a query, not once a text)."""
    return re.compile(r"(?<![^\W_])" + _words(words), re.IGNORECASE)


@functools.lru_cache(maxsize=64)
def _ahead(words: tuple[str, ...]) -> re.Pattern:
    """`_pattern` without its test of the character before a word (`_first` makes it)."""
    return re.compile(_words(words), re.IGNORECASE)


def _words(words: tuple[str, ...]) -> str:
    """Any of the words, not followed by a letter or digit."""
    return "(" + "|".join(re.escape(w) for w in words) + r")(?![^\W_])"
