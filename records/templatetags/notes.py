"""A triage note's Markdown on a page: escaped first, then the small safe subset
(`records.formats.notes`)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

from records.formats.notes import note_html

register = template.Library()


@register.filter
def note(text: Any) -> SafeString:
    """The note as HTML: `note_html` escapes every character of it before it writes any
    element, so what it returns is safe to place as it is."""
    return mark_safe(note_html(str(text or "")))  # noqa: S308 (escaped by note_html)
