"""Finding untrusted text a page leaves unisolated: text holding U+202E (right-to-left
override) that no <bdi> or dir="auto" element encloses, or, in a <title> (which holds no
element), that no FSI ... PDI pair (U+2068, U+2069) encloses."""

from __future__ import annotations

from html.parser import HTMLParser

RLO = "\u202e"


class Unisolated(HTMLParser):
    """Text holding U+202E that no <bdi> or dir="auto" element encloses."""

    VOID = {"br", "img", "input", "meta", "link", "hr", "col", "source", "wbr", "area", "base"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[bool] = []
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag == "bdi" or ("dir", "auto") in attrs)

    def handle_endtag(self, tag):
        if tag not in self.VOID and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if RLO not in data or self.lasttag == "script":
            return
        if self.lasttag == "title":
            if not _isolated_in_text(data):
                self.found.append(f"<title>{data.strip()[:80]}")
        elif not any(self.stack):
            self.found.append(data.strip()[:80])


def _isolated_in_text(text: str) -> bool:
    """Whether every U+202E of `text` lies inside an isolate (FSI, LRI or RLI ... PDI)."""
    depth = 0
    for char in text:
        if char in "\u2066\u2067\u2068":
            depth += 1
        elif char == "\u2069":
            depth = max(0, depth - 1)
        elif char == RLO and depth == 0:
            return False
    return True
