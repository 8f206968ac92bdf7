"""An attempt's call trace: turns in order, each tool-call block with the call line it led to,
and JSON values bounded for a page."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

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


def shown_json(value: Any) -> ShownJson:
    """Indented JSON for a page, bounded in depth and length."""
    clipped, cut = _clipped(value, 0)
    text = json.dumps(clipped, indent=2, ensure_ascii=False)
    if len(text) > SHOWN_JSON_CHARS:
        text = text[: text.rfind("\n", 0, SHOWN_JSON_CHARS) + 1] + "…"
        cut = True
    return ShownJson(text, cut)


def pretty_json(value: Any) -> str:
    return shown_json(value).text


@dataclass
class TraceBlock:
    kind: str
    text: str = ""
    tool: str = ""
    arguments: ShownJson | None = None
    raw: str = ""
    call: Call | None = None
    long: bool = False
    position: int = 0  # in its turn's blocks: the raw value's address


@dataclass
class TraceTurn:
    turn: Turn
    blocks: list[TraceBlock]
    cost: Cost | None
    extra_calls: list[Call]

    @property
    def rate_limited(self) -> bool:
        return self.turn.status == "rate_limited"


LONG_TEXT = 600


def trace(attempt: Attempt, price: tuple[float, float, float, float] | None) -> list[TraceTurn]:
    """Turns in conversation order, each tool-call block paired with the call line it led to.

    Call lines carry the turn index they were made in; within a turn, the k-th tool-call block
    of the answered try is paired with the k-th call by call index.
    """
    turns = list(attempt.turns.order_by("index", "line"))
    calls = list(attempt.calls.order_by("index", "line"))
    calls_by_turn: dict[int, list[Call]] = defaultdict(list)
    for c in calls:
        calls_by_turn[c.turn].append(c)
    answered: dict[int, Turn] = {}
    for t in turns:
        if t.status == "ok" or t.index not in answered:
            answered[t.index] = t
    out = []
    for t in turns:
        pending = calls_by_turn.get(t.index, []) if answered.get(t.index) is t else []
        pending = list(pending)
        blocks = []
        for position, b in enumerate(t.blocks or []):
            kind = b.get("kind", "")
            tb = TraceBlock(
                kind,
                text=b.get("text", ""),
                tool=b.get("tool", ""),
                raw=b.get("raw", ""),
                position=position,
            )
            if "arguments" in b:
                tb.arguments = shown_json(b["arguments"])
            if kind == "tool_call" and pending:
                tb.call = pending.pop(0)
            tb.long = len(tb.text) > LONG_TEXT
            blocks.append(tb)
        out.append(TraceTurn(t, blocks, cost_of(Tokens.of(t), price), pending))
    return out
