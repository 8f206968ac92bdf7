"""Prose the pages show: Markdown's inline code (the captions are written once, for the Markdown
export and the pages) rendered as `<code>`, every part escaped."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeData, SafeString, mark_safe

register = template.Library()


@register.filter
def inline_code(text: Any) -> SafeString:
    """Surface `meta` as surface <code>meta</code>; text with an unpaired
    backtick is shown as written."""
    if isinstance(text, SafeData):  # already escaped (a joined list, say)
        kept = mark_safe  # noqa: E731
    else:
        kept = escape
    parts = str(text).split("`")
    if len(parts) % 2 == 0:
        return mark_safe(kept(str(text)))  # noqa: S308
    return mark_safe(  # noqa: S308 (every part escaped here or before)
        "".join(
            format_html("<code>{}</code>", kept(p)) if i % 2 else kept(p)
            for i, p in enumerate(parts)
        )
    )
