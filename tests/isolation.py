"""Finding untrusted text a page leaves unisolated: text holding U+202E (right-to-left
override) that no <bdi> or dir="auto" element encloses."""

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
        if RLO in data and not any(self.stack) and self.lasttag not in ("title", "script"):
            self.found.append(data.strip()[:80])
