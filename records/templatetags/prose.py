"""Prose the pages show: Markdown's inline code (the captions are written once, for the Markdown
export and the pages) rendered as `<code>`, every part escaped; what an upload stored, in words."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import escape, format_html, format_html_join
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
        return kept(str(text))
    return format_html_join(
        "",
        "{}",
        (
            (format_html("<code>{}</code>", kept(p)) if i % 2 else kept(p),)
            for i, p in enumerate(parts)
        ),
    )


# What an upload's summary lists, by kind, as the pages name one of each (more take an "s").
STORED_KINDS = {
    "stored": "shard",
    "keys": "corpus key",
    "replays": "sealed replay document",
    "suites": "conformance suite",
    "conformance_runs": "conformance run",
}


@register.filter
def stored_words(summary: Any) -> str:
    """What an upload stored, kind by kind ("3 shards, 1 corpus key"), so that no page adds
    shards and keys into one count another page gives for shards alone."""
    if not isinstance(summary, dict):
        return "nothing"
    parts = []
    for kind, one in STORED_KINDS.items():
        n = len(summary.get(kind) or [])
        if n:
            parts.append(f"{n:,} {one}{'' if n == 1 else 's'}")
    return ", ".join(parts) or "nothing"


@register.filter
def stored_run(sha256: Any) -> Any:
    """The run a shard of this sha256 is stored as (its `pk` and `run_id`), for "already
    present" to link."""
    from records.models import Run

    return Run.objects.filter(shard__sha256=str(sha256)).only("pk", "run_id").first()
