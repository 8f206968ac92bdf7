"""A triage note's Markdown as HTML, safely. Pure Python, no Django.

The rule: the whole text is HTML-escaped first, so nothing a note holds is ever read as markup;
only then is a small subset of Markdown turned into the few elements it names. What it knows:
paragraphs (a blank line between), a list of lines that start with `- ` or `* `, a line break
within a paragraph, `code`, **strong**, *emphasis* (or _emphasis_), [text](address) and a bare
address, where an address is http or https only (any other scheme stays text). Links open
nothing of the page's own: they carry `rel="nofollow noopener noreferrer"`. Direction and
control characters are shown as `\\uXXXX` so that none reorders what a reader sees.
"""

from __future__ import annotations

import html
import re

# Bidirectional controls and other control characters but the line break and the tab.
UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
LIST_ITEM = re.compile(r"^[-*] +(.*)$")
# An address as it reads once escaped: no space, no quote (escaped as &quot; anyway), no
# closing bracket of the Markdown around it.
# An escaped `<`, `>` or quote ends it: it is the text around the address, not part of it.
ADDRESS = r"https?://(?:(?!&(?:lt|gt|quot|#x27);)[^\s()\[\]<>])+"
INLINE = re.compile(
    r"(?P<code>`(?P<code_text>[^`\n]+)`)"
    rf"|(?P<link>\[(?P<link_text>[^\]\n]+)\]\((?P<link_to>{ADDRESS})\))"
    rf"|(?P<bare>{ADDRESS})"
    r"|(?P<strong>\*\*(?P<strong_text>[^*\n]+)\*\*)"
    r"|(?P<em>(?<![\w*])\*(?P<em_text>[^*\s][^*\n]*?)\*(?![\w*])"
    r"|(?<![\w_])_(?P<em2_text>[^_\s][^_\n]*?)_(?![\w_]))"
)
# An address's trailing punctuation is the sentence's, not the address's.
# A `;` that closes an escaped character (`&amp;`) belongs to it, and is kept.
TRAILING = re.compile(r"(?:[.,:!?]|(?<!&amp);|&#x27;|&quot;)+$")


def _anchor(address: str, text: str) -> str:
    return f'<a href="{address}" rel="nofollow noopener noreferrer">{text}</a>'


def _inline(escaped: str) -> str:
    def replace(m: re.Match[str]) -> str:
        if m["code"]:
            return f"<code>{m['code_text']}</code>"
        if m["link"]:
            return _anchor(m["link_to"], m["link_text"])
        if m["bare"]:
            address = m["bare"]
            tail = TRAILING.search(address)
            cut = tail.start() if tail else len(address)
            return _anchor(address[:cut], address[:cut]) + address[cut:]
        if m["strong"]:
            return f"<strong>{m['strong_text']}</strong>"
        return f"<em>{m['em_text'] or m['em2_text']}</em>"

    return INLINE.sub(replace, escaped)


def note_html(text: str) -> str:
    """The note as HTML: escaped, then the Markdown subset above; an empty note is ""."""
    shown = UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text.replace("\r\n", "\n"))
    escaped = html.escape(shown, quote=True)
    blocks = [b for b in re.split(r"\n\s*\n", escaped) if b.strip()]
    out = []
    for block in blocks:
        lines = [line.strip() for line in block.strip().split("\n")]
        # Runs of list lines are a list; the lines between them a paragraph.
        run: list[str] = []
        listed = False
        for line in [*lines, None]:
            item = LIST_ITEM.match(line) if line is not None else None
            if run and (line is None or bool(item) != listed):
                if listed:
                    out.append("<ul>" + "".join(f"<li>{_inline(x)}</li>" for x in run) + "</ul>")
                else:
                    out.append(f"<p>{'<br>'.join(_inline(x) for x in run)}</p>")
                run = []
            if line is not None:
                listed = bool(item)
                run.append(item[1] if item else line)
    return "".join(out)
