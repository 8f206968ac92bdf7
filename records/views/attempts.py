"""One attempt: its trace, its exports, and the raw values a page cuts short."""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
)
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from records.models import (
    Attempt,
    Call,
    Turn,
    Verdict,
    Verify,
)
from records.queries.cost import Tokens, cost_of
from records.queries.trace import trace
from records.scores.run import latest_scoring
from records.views.access import (
    _get_attempt_or_404,
    read_access,
)
from records.views.exports import _export, _json_stream, _raw
from records.views.filters import AttemptFilter


def _price_for(attempt: Attempt) -> tuple[Any, str]:
    provider = attempt.run.providers.filter(spec=attempt.model).first()
    if provider is None:
        return None, "the run line lists no provider with this spec, so cost is unknown"
    if not provider.priced:
        return None, "the run line carries no price for this model, so cost is unknown"
    return provider.price, f"priced from the run line, retrieved on {provider.retrieved_on or '?'}"


@require_GET
@read_access
def attempt_detail(request: HttpRequest, pk: int) -> HttpResponse:
    attempt = _get_attempt_or_404(pk)
    price, price_note = _price_for(attempt)
    turns = trace(attempt, price)
    total = None
    if price is not None:
        total = cost_of(Tokens.of(attempt), price)
    scoring = latest_scoring(attempt.run)
    verdict = Verdict.objects.filter(scoring=scoring, attempt=attempt).first() if scoring else None
    # The call the verdict turns on: the first step that did not complete, where a call reached it.
    failing = next(
        (
            st
            for st in (verdict.detail.get("steps", []) if verdict and verdict.detail else [])
            if not st.get("complete") and st.get("reached")
        ),
        None,
    )
    context = {
        "attempt": attempt,
        "run": attempt.run,
        "scoring": scoring,
        "verdict": verdict,
        "turns": turns,
        "verifies": list(Verify.objects.filter(attempt=attempt).order_by("line")),
        "price_note": price_note,
        "total_cost": total,
        "facts": sorted((attempt.facts or {}).items()),
        "failing_step": failing,
        "target_call": failing.get("call_index") if failing else None,
        **_neighbours(request, attempt, scoring if verdict else None),
    }
    return render(request, "records/attempts/detail.html", context)


def _neighbours(request: HttpRequest, attempt: Attempt, scoring: Any) -> dict[str, Any]:
    """The attempts before and after this one in the list it was opened from (the run's attempt
    list with the filters in this page's query string), and that list's address."""
    run = attempt.run
    listed = AttemptFilter(
        request.GET, queryset=Attempt.objects.filter(run=run).order_by("line"), scoring=scoring
    )
    if not listed.is_valid():
        return {}
    qs = listed.qs
    order = [str(f) for f in qs.query.order_by] or ["line"]
    query = request.GET.copy()
    query.pop("page", None)
    suffix = f"?{query.urlencode()}" if query else ""
    return {
        "previous_pk": qs.filter(_beyond(attempt, order, before=True))
        .order_by(*(_flip(f) for f in order))
        .values_list("pk", flat=True)
        .first(),
        "next_pk": qs.filter(_beyond(attempt, order, before=False))
        .values_list("pk", flat=True)
        .first(),
        "list_query": suffix,
        "list_url": reverse("records:run-tab", args=[run.pk, "attempts"]) + suffix,
    }


def _flip(field: str) -> str:
    return field[1:] if field.startswith("-") else f"-{field}"


def _beyond(attempt: Attempt, order: list[str], *, before: bool) -> Q:
    """The rows after `attempt` in the list's order (`before`: the rows ahead of it): for
    each field of the order, equal on the fields before it and past it on this one."""
    condition = Q(pk__in=[])
    equal = Q()
    for field in order:
        name = field.lstrip("-")
        ascending = not field.startswith("-")
        value = getattr(attempt, name)
        past = "lt" if ascending == before else "gt"
        condition |= equal & Q(**{f"{name}__{past}": value})
        equal &= Q(**{name: value})
    return condition


@require_GET
@read_access
def attempt_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    attempt = _get_attempt_or_404(pk)
    price, _ = _price_for(attempt)
    rows = []
    for t in trace(attempt, price):
        calls = [b.call for b in t.blocks if b.call] + t.extra_calls
        base = {
            "turn": t.turn.index,
            "try": t.turn.try_number,
            "status": t.turn.status,
            "latency_ms": t.turn.latency_ms,
            "input_tokens": t.turn.input_tokens,
            "output_tokens": t.turn.output_tokens,
            "cache_created_tokens": t.turn.cache_created_tokens,
            "cache_read_tokens": t.turn.cache_read_tokens,
            "cost_usd": round(t.cost.total, 8) if t.cost else None,
            "blocks": t.turn.blocks if fmt == "json" else len(t.turn.blocks or []),
        }
        if fmt == "json":
            base["calls"] = [_call_dict(c) for c in calls]
            rows.append(base)
        else:
            for c in calls or [None]:
                rows.append({**base, **(_call_dict(c, flat=True) if c else {})})
    if fmt == "json":
        head = {
            "attempt": attempt.key,
            "case": attempt.case,
            "model": attempt.model,
            "surface": attempt.effective_surface,
            "ended_by": attempt.ended_by,
            "reason": attempt.reason,
            "facts": attempt.facts,
            "stimulus": attempt.stimulus,
        }
        verify = [
            {"name": v.name, "passed": v.passed, "detail": v.detail}
            for v in Verify.objects.filter(attempt=attempt).order_by("line")
        ]
        return _json_stream(head, "turns", rows, {"verify": verify})
    return _export("csv", f"attempt-{attempt.pk}", rows)


@require_GET
@read_access
def attempt_raw_call(request: HttpRequest, pk: int, call: int, field: str) -> HttpResponse:
    """A call's arguments or result exactly as stored, compact, for values a page cuts short."""
    value = get_object_or_404(Call.objects.only(field), pk=call, attempt_id=pk)
    return _raw(getattr(value, field), f"attempt-{pk}-call-{call}-{field}")


@require_GET
@read_access
def attempt_raw_block(request: HttpRequest, pk: int, turn: int, block: int) -> HttpResponse:
    """A tool-call block's arguments as stored, compact."""
    blocks = get_object_or_404(Turn.objects.only("blocks"), pk=turn, attempt_id=pk).blocks
    if not 0 <= block < len(blocks or []) or "arguments" not in blocks[block]:
        raise Http404("no such block, or it carries no arguments")
    return _raw(blocks[block]["arguments"], f"attempt-{pk}-turn-{turn}-block-{block}")


def _call_dict(c: Any, flat: bool = False) -> dict[str, Any]:
    d = {
        "call_index": c.index,
        "tool": c.tool,
        "requested_action": c.requested_action,
        "dispatched_action": c.dispatched_action,
        "dispatched_tool": c.dispatched_tool,
        "outcome": c.outcome,
        "refusal_reason": c.refusal_reason,
        "duration_ms": c.duration_ms,
        "requests": c.requests,
        "trace_id": c.trace_id,
        "dispatch_observed": c.dispatch_observed,
        "result_truncated": c.result_truncated,
        "text_truncated": c.text_truncated,
    }
    if not flat:
        d.update(arguments=c.arguments, result=c.result, text=c.text)
    return d
