"""An attempt's call trace: turns in order, each tool-call block with the call line it led to,
and JSON values bounded for a page."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from records.models import Attempt, Call, Turn
from records.queries.cost import Cost, Tokens, cost_of

# What a trace renders of one JSON value: indentation multiplies a deeply nested value (a 200 KB
# line became 191 MiB of HTML), so nesting is shown to this depth and the text to this length;
# the rest is one click away as the raw value.
SHOWN_JSON_DEPTH = 24


SHOWN_JSON_CHARS = 64 * 1024


@dataclass
class ShownJson:
    text: str
    cut: bool  # something was left out: the page links to the raw value


def _clipped(value: Any, depth: int) -> tuple[Any, bool]:
    if isinstance(value, dict | list) and value and depth >= SHOWN_JSON_DEPTH:
        return f"… {'{…}' if isinstance(value, dict) else '[…]'} nested deeper", True
    if isinstance(value, dict):
        items = {k: _clipped(v, depth + 1) for k, v in value.items()}
        return {k: v for k, (v, _) in items.items()}, any(c for _, c in items.values())
    if isinstance(value, list):
        items = [_clipped(v, depth + 1) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    return value, False


def shown_json(value: Any, limit: int = SHOWN_JSON_CHARS) -> ShownJson:
    """Indented JSON for a page, bounded in depth and to `limit` characters."""
    clipped, cut = _clipped(value, 0)
    text = json.dumps(clipped, indent=2, ensure_ascii=False)
    if len(text) > limit:
        # Cut after the last whole line, unless one long line (a long string) holds most of it.
        end = text.rfind("\n", 0, limit) + 1
        text = text[: end if end > limit // 2 else limit] + "…"
        cut = True
    return ShownJson(text, cut)


def pretty_json(value: Any) -> str:
    return shown_json(value).text


# What one page of a trace shows: a page holds this many turn lines (every try is one), and each
# body (a block's text, a call's arguments, result or text) is cut to a preview of this many
# characters with the whole body a click away at its own address. A line is at most 1 MiB, so a
# page is bounded whatever the attempt holds; the rows are read one at a time and only their
# previews kept.
TURNS_PER_PAGE = 20
PREVIEW_CHARS = 2_000
PREVIEW_JSON_CHARS = 4_000


@dataclass
class Preview:
    text: str
    length: int  # of the whole body, in characters

    @property
    def cut(self) -> bool:
        return self.length > len(self.text)


def preview(text: str | None, limit: int = PREVIEW_CHARS) -> Preview:
    text = text or ""
    return Preview(text[:limit], len(text))


@dataclass
class TraceCall:
    """A call line with its bodies cut to previews (the row's own fields, less the bodies)."""

    call: Call
    arguments: ShownJson | None
    result: ShownJson | None
    text: Preview

    def __getattr__(self, name: str) -> Any:
        return getattr(self.call, name)


@dataclass
class TraceBlock:
    kind: str
    text: Preview
    tool: str = ""
    arguments: ShownJson | None = None
    raw: Preview | None = None
    call: TraceCall | None = None
    position: int = 0  # in its turn's blocks: the body's address


@dataclass
class TraceTurn:
    turn: Turn
    blocks: list[TraceBlock]
    cost: Cost | None
    extra_calls: list[TraceCall]

    @property
    def rate_limited(self) -> bool:
        return self.turn.status == "rate_limited"


def trace_call(c: Call) -> TraceCall:
    shown = TraceCall(
        c,
        arguments=None if c.arguments is None else shown_json(c.arguments, PREVIEW_JSON_CHARS),
        result=None if c.result is None else shown_json(c.result, PREVIEW_JSON_CHARS),
        text=preview(c.text),
    )
    c.arguments = c.result = c.text = None  # the previews are all the page keeps
    return shown


def answered_tries(attempt: Attempt, indices: Iterable[int]) -> dict[int, int]:
    """For each turn index, the pk of the try its calls belong to: the last try that answered
    (status ok), or the first try when none did."""
    answered: dict[int, tuple[int, str]] = {}
    rows = attempt.turns.filter(index__in=set(indices)).order_by("index", "line")
    for pk, index, status in rows.values_list("pk", "index", "status"):
        if status == "ok" or index not in answered:
            answered[index] = (pk, status)
    return {index: pk for index, (pk, _) in answered.items()}


def turn_rows(attempt: Attempt) -> QuerySet[Turn]:
    return attempt.turns.order_by("index", "line")


def trace(
    attempt: Attempt,
    price: tuple[float, float, float, float] | None,
    start: int = 0,
    stop: int | None = None,
) -> list[TraceTurn]:
    """Turn lines `start` to `stop` in conversation order, each tool-call block paired with the
    call line it led to, every body cut to a preview.

    Call lines carry the turn index they were made in; within a turn, the k-th tool-call block
    of the answered try is paired with the k-th call by call index.
    """
    rows = turn_rows(attempt)[start:stop]
    indices = set(rows.values_list("index", flat=True))
    answered = answered_tries(attempt, indices)
    calls_by_turn: dict[int, list[TraceCall]] = defaultdict(list)
    calls = attempt.calls.filter(turn__in=indices).order_by("index", "line")
    for c in calls.iterator(chunk_size=8):
        calls_by_turn[c.turn].append(trace_call(c))
    out = []
    for t in rows.iterator(chunk_size=4):
        pending = list(calls_by_turn.get(t.index, [])) if answered.get(t.index) == t.pk else []
        blocks = []
        for position, b in enumerate(t.blocks or []):
            kind = b.get("kind", "")
            tb = TraceBlock(
                kind,
                text=preview(b.get("text", "")),
                tool=b.get("tool", ""),
                raw=preview(b["raw"]) if b.get("raw") else None,
                position=position,
            )
            if "arguments" in b:
                tb.arguments = shown_json(b["arguments"], PREVIEW_JSON_CHARS)
            if kind == "tool_call" and pending:
                tb.call = pending.pop(0)
            blocks.append(tb)
        t.blocks = None  # the previews are all the page keeps
        out.append(TraceTurn(t, blocks, cost_of(Tokens.of(t), price), pending))
    return out


def call_pages(attempt: Attempt, call_indices: Iterable[int]) -> dict[int, int]:
    """The trace page (from 1) that shows each of these calls: the page of its answered try."""
    wanted = {i for i in call_indices if isinstance(i, int)}
    if not wanted:
        return {}
    turn_of = dict(attempt.calls.filter(index__in=wanted).values_list("index", "turn"))
    answered = answered_tries(attempt, turn_of.values())
    rows = turn_rows(attempt)
    pages = {}
    for index, turn in turn_of.items():
        pk = answered.get(turn)
        if pk is None:
            continue
        line = rows.values_list("line", flat=True).get(pk=pk)
        position = rows.filter(Q(index__lt=turn) | Q(index=turn, line__lt=line)).count()
        pages[index] = position // TURNS_PER_PAGE + 1
    return pages
