"""Untrusted text (model specs, provider names, run ids, reasons, anything a shard wrote) placed
in Markdown that GitLab renders (CommonMark, GitLab Flavored Markdown). Pure Python, no Django.

Two escapers, one for each place a value can sit: `markdown_code` puts it in an inline code
span, `markdown_text` in running text. Either way nothing in the value is read as HTML, a link,
an image, emphasis, an entity, a table cell's end, a line's end or a GitLab reference, and a
value with none of those characters comes out as it went in.
"""

from __future__ import annotations

import re

# Line breaks of every kind (a table row or paragraph would end there), other control
# characters, and the bidirectional controls that reorder what a reader sees.
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")

# What ends a line (Python's `str.splitlines`, and so a Markdown renderer's line too).
LINE_ENDS = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def shown_escapes(text: str) -> str:
    """Control and direction characters shown as `\\uXXXX`, so none acts and each is seen."""
    return UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def markdown_code(value: object, *, in_table: bool = False) -> str:
    """`value` as one inline code span of CommonMark / GitLab Flavored Markdown: nothing in it
    is read as HTML, a link, emphasis or an entity. Its fence is longer than any run of
    backticks inside; control and direction characters are shown as `\\uXXXX` escapes; in a
    table cell a pipe is escaped (GFM splits cells before it reads code spans), a backslash
    before it included."""
    text = shown_escapes(str(value))
    if not text:
        return "(empty)"
    if in_table:
        # GFM's cell scanner reads a backslash pair as one escape, so a pipe needs an odd run
        # of backslashes before it to stay inside its cell.
        text = re.sub(r"(\\*)\|", lambda m: m[1] + "\\" * (1 + len(m[1]) % 2) + "|", text)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    # A space inside each end keeps a backtick at the edge from joining the fence (one space is
    # stripped from each side when rendered); a value of spaces only is shown as it is.
    pad = " " if text.strip(" ") and (text[0] in "` " or text[-1] in "` ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# Always escaped: the backslash itself; link and image brackets; emphasis and strikethrough
# (`*` and `~` flank inside a word too); code spans; a table cell's end; an entity reference
# (and GitLab's `&12`, an epic).
_ALWAYS = re.compile(r"[\\\[\]*~`|&]")
# An underscore between two letters or digits opens and closes nothing (CommonMark's flanking
# rules), so `read_api` stays as it is; anywhere else it could emphasise.
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
# GitLab links `@name`, `#12`, `!12`, `%name` and `$12` to users (a mention notifies
# them), issues, merge requests, milestones and snippets; a backslash keeps each as text.
_REFERENCE = re.compile(r"[@#!%$](?=[\w\"])")
# GFM links a bare `scheme://` or `www.` too (an address in a user's name still reads as one).
_BARE_LINK = re.compile(r"(?<=\w):(?=//)|(?<![\w.])(?i:www)\.")
# `<` and `>` could open a tag or an autolink.
_ANGLES = {"<": "&lt;", ">": "&gt;"}


def markdown_text(value: object) -> str:
    """`value` as running text (a table cell, a caption, a line of a report): it reads as the
    characters it holds and as nothing else. Markdown's punctuation is escaped with a
    backslash, `<` and `>` become entities, control and direction characters are shown
    as `\\uXXXX` escapes."""
    text = shown_escapes(str(value))
    text = _ALWAYS.sub(lambda m: "\\" + m.group(), text)
    text = _UNDERSCORE.sub(r"\\_", text)
    text = _REFERENCE.sub(lambda m: "\\" + m.group(), text)
    text = _BARE_LINK.sub(lambda m: m.group()[:-1] + "\\" + m.group()[-1], text)
    return re.sub("[<>]", lambda m: _ANGLES[m.group()], text)
