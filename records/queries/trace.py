"""An attempt's call trace: turns in order, each tool-call block with the call line it led to,
and JSON values bounded for a page."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, F, Q, QuerySet, Window
from django.db.models.functions import RowNumber

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


# What one turn shows at first: this many of its items (its blocks in order, then the calls of
# its answered try that no tool-call block led to). A turn of thousands of calls would otherwise
# be one page of thousands; the rest is loaded on demand, this many at a time.
ITEMS_PER_TURN = 50


@dataclass
class TraceTurn:
    turn: Turn
    blocks: list[TraceBlock]
    cost: Cost | None
    extra_calls: list[TraceCall]
    more: int = 0  # items of the turn past these, loaded on demand
    next_item: int = 0  # the position of the first of them

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


def _call_counts(attempt: Attempt, indices: Iterable[int]) -> dict[int, int]:
    rows = attempt.calls.filter(turn__in=set(indices)).values_list("turn").annotate(n=Count("id"))
    return dict(rows.order_by())


def _first_calls(
    attempt: Attempt, indices: set[int], limit: int
) -> tuple[dict[int, list[TraceCall]], dict[int, int]]:
    """The first `limit` calls of each turn index, in call order, and how many calls each turn
    holds: one query, however many calls a turn holds. An attempt of at most `limit` calls has
    no turn to cut short, so its calls are read plainly; a longer one's are ranked and counted
    in the database, which reads only the ones shown."""
    calls = attempt.calls.filter(turn__in=indices)
    if attempt.call_count > limit:
        by_turn = {"partition_by": F("turn")}
        calls = calls.annotate(
            position=Window(RowNumber(), order_by=[F("index"), F("line")], **by_turn),
            turn_calls=Window(Count("id"), **by_turn),
        ).filter(position__lte=limit)
    out: dict[int, list[TraceCall]] = defaultdict(list)
    counts: dict[int, int] = {}
    for c in calls.order_by("index", "line").iterator(8):
        counts[c.turn] = getattr(c, "turn_calls", counts.get(c.turn, 0) + 1)
        if len(out[c.turn]) < limit:
            out[c.turn].append(trace_call(c))
    return out, counts


def _turn_items(
    t: Turn,
    calls: list[TraceCall],
    first_call: int,
    call_count: int,
    start: int,
    stop: int,
) -> tuple[list[TraceBlock], list[TraceCall], int]:
    """Items `start` to `stop` of a turn (its blocks, then the calls no tool-call block led to),
    each tool-call block paired with its call; `calls` are the turn's calls from position
    `first_call` on (none for a try that did not answer). Returns the blocks, the extra calls
    and how many items lie past `stop`."""
    blocks_in = t.blocks or []
    paired = 0  # the calls the blocks before this one were paired with
    blocks = []
    for position, b in enumerate(blocks_in):
        kind = b.get("kind", "")
        pairs = kind == "tool_call" and paired < call_count
        if start <= position < stop:
            tb = TraceBlock(
                kind,
                text=preview(b.get("text", "")),
                tool=b.get("tool", ""),
                raw=preview(b["raw"]) if b.get("raw") else None,
                position=position,
            )
            if "arguments" in b:
                tb.arguments = shown_json(b["arguments"], PREVIEW_JSON_CHARS)
            if pairs and 0 <= paired - first_call < len(calls):
                tb.call = calls[paired - first_call]
            blocks.append(tb)
        paired += pairs
    extra_count = call_count - paired
    # The extra calls are the items after the blocks.
    first_extra, last_extra = max(0, start - len(blocks_in)), max(0, stop - len(blocks_in))
    extras = [
        calls[i - first_call]
        for i in range(paired + first_extra, paired + min(extra_count, last_extra))
        if 0 <= i - first_call < len(calls)
    ]
    return blocks, extras, max(0, len(blocks_in) + extra_count - stop)


def trace(
    attempt: Attempt,
    price: tuple[float, float, float, float] | None,
    start: int = 0,
    stop: int | None = None,
    items: int = ITEMS_PER_TURN,
) -> list[TraceTurn]:
    """Turn lines `start` to `stop` in conversation order, each tool-call block paired with the
    call line it led to, every body cut to a preview, at most `items` items of each turn.

    Call lines carry the turn index they were made in; within a turn, the k-th tool-call block
    of the answered try is paired with the k-th call by call index.
    """
    rows = turn_rows(attempt)[start:stop]
    indices = set(rows.values_list("index", flat=True))
    answered = answered_tries(attempt, indices)
    calls_by_turn, counts = _first_calls(attempt, indices, items)
    out = []
    for t in rows.iterator(chunk_size=4):
        ours = answered.get(t.index) == t.pk
        calls = calls_by_turn.get(t.index, []) if ours else []
        count = counts.get(t.index, 0) if ours else 0
        blocks, extras, more = _turn_items(t, calls, 0, count, 0, items)
        t.blocks = None  # the previews are all the page keeps
        out.append(TraceTurn(t, blocks, cost_of(Tokens.of(t), price), extras, more, items))
    return out


def turn_window(attempt: Attempt, t: Turn, start: int, items: int = ITEMS_PER_TURN) -> TraceTurn:
    """Items `start` to `start + items` of one turn line: the rest of a turn the trace cut short."""
    ours = answered_tries(attempt, [t.index]).get(t.index) == t.pk
    calls = attempt.calls.filter(turn=t.index).order_by("index", "line")
    count = calls.count() if ours else 0
    blocks_in = t.blocks or []
    # The calls these items reach follow one another from the first item's: the calls the
    # blocks before it were paired with, then the extras before it.
    tool_blocks_before = sum(1 for b in blocks_in[:start] if b.get("kind") == "tool_call")
    first = min(tool_blocks_before, count) + max(0, start - len(blocks_in))
    wanted = [trace_call(c) for c in calls[first : first + items].iterator(8)] if count else []
    blocks, extras, more = _turn_items(t, wanted, first, count, start, start + items)
    t.blocks = None
    return TraceTurn(t, blocks, None, extras, more, start + items)


def call_pages(
    attempt: Attempt, call_indices: Iterable[int]
) -> tuple[dict[int, int], dict[int, tuple[int, int]]]:
    """Where each of these calls is shown: the trace page (from 1) of its answered try; and,
    for a call its turn shows only on demand (past the turn's first ITEMS_PER_TURN items), the
    turn line's pk and the start of the part of it that shows the call."""
    wanted = {i for i in call_indices if isinstance(i, int)}
    if not wanted:
        return {}, {}
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
    return pages, _call_windows(attempt, turn_of, answered)


def _call_windows(
    attempt: Attempt, turn_of: dict[int, int], answered: dict[int, int]
) -> dict[int, tuple[int, int]]:
    if attempt.call_count <= ITEMS_PER_TURN:  # no turn is long enough to be cut short
        return {}
    counts = _call_counts(attempt, turn_of.values())
    out = {}
    for index, turn in turn_of.items():
        pk = answered.get(turn)
        if pk is None or counts.get(turn, 0) <= ITEMS_PER_TURN:  # a short turn shows every call
            continue
        offset = attempt.calls.filter(turn=turn, index__lt=index).count()
        if offset < ITEMS_PER_TURN:  # among the first items
            continue
        blocks = Turn.objects.only("blocks").get(pk=pk).blocks or []
        tools = [n for n, b in enumerate(blocks) if b.get("kind") == "tool_call"]
        position = tools[offset] if offset < len(tools) else len(blocks) + offset - len(tools)
        if position >= ITEMS_PER_TURN:
            out[index] = (pk, position // ITEMS_PER_TURN * ITEMS_PER_TURN)
    return out
