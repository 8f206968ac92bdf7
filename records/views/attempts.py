"""One attempt: its trace, its exports, and the raw values a page cuts short."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.core.paginator import Paginator
from django.db.models import Q
from django.db.models.functions import Length, Substr
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
)
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_GET

from records.models import (
    Attempt,
    Call,
    Turn,
    Verify,
)
from records.queries.annotations import About, case_labels, case_url
from records.queries.attempts import (
    failing_step,
    neighbours,
    price_for,
    signature_step,
    verdict_account,
)
from records.queries.cost import Tokens, cost_of
from records.queries.trace import (
    ITEMS_PER_TURN,
    PREVIEW_CHARS,
    TURNS_PER_PAGE,
    answered_tries,
    call_pages,
    shown_json,
    trace,
    turn_rows,
    turn_window,
)
from records.views.access import (
    bad_request,
    get_attempt_or_404,
    query_form,
    read_access,
    render_page,
)
from records.views.annotations import annotation_panel
from records.views.exports import export, json_object_pieces, json_stream, raw_download
from records.views.forms import PageForm, TurnItemsForm
from records.views.search import RunSearchForm

VERIFIES_SHOWN = 200


@require_GET
@read_access
def attempt_detail(request: HttpRequest, pk: int) -> HttpResponse:
    asked = PageForm({"page": request.GET.get("page", "")})
    if not asked.is_valid():
        return bad_request(asked, request)
    attempt = get_attempt_or_404(pk)
    price, price_note = price_for(attempt)
    scoring = attempt.run.latest_scoring()
    verdict, explained = verdict_account(scoring, attempt)
    steps = explained.told["steps"] if explained and explained.told else []
    failing = failing_step(steps)
    target_call = failing.get("call_index") if failing else None
    reached = [st.get("call_index") for st in steps if st.get("reached")]
    pages, windows = call_pages(attempt, reached)
    # A long trace is paged; opened without a page, it opens where the verdict turns.
    paginator = Paginator(turn_rows(attempt).values_list("pk", flat=True), TURNS_PER_PAGE)
    page = paginator.get_page(asked.cleaned_data["page"] or pages.get(target_call, 1))
    start = (page.number - 1) * TURNS_PER_PAGE
    links = {}
    for index, number in pages.items():
        query = request.GET.copy()
        query["page"] = str(number)
        links[index] = ("" if number == page.number else f"?{query.urlencode()}") + f"#call-{index}"
    # A call deep in a long turn is shown with the part of the turn that holds it.
    for index, (turn_pk, item) in windows.items():
        url = reverse("records:attempt-turn-items", args=[attempt.pk, turn_pk])
        links[index] = f"{url}?start={item}#call-{index}"
    verifies = Verify.objects.filter(attempt=attempt).order_by("line")
    context = {
        "attempt": attempt,
        "run": attempt.run,
        "scoring": scoring,
        "verdict": verdict,
        "account": explained,
        "turns": trace(attempt, price, start, start + TURNS_PER_PAGE),
        "items_per_turn": ITEMS_PER_TURN,
        "trace_page": page,
        "call_links": links,
        "verifies": verifies.defer("detail").annotate(
            detail_preview=Substr("detail", 1, PREVIEW_CHARS), detail_length=Length("detail")
        )[:VERIFIES_SHOWN],
        "verify_count": verifies.count(),
        "verifies_shown": VERIFIES_SHOWN,
        "price_note": price_note,
        "total_cost": None if price is None else cost_of(Tokens.of(attempt), price),
        "facts": sorted((attempt.facts or {}).items()),
        "failing_step": failing,
        # Where a failure mode's attempt list opens it (#failing-step): the step its signature
        # names, else the verdict.
        "signature_step": signature_step(attempt.ended_by, steps) if verdict else None,
        "target_call": target_call,
        "annotations": annotation_panel(request, About("attempt", attempt=attempt.pk)),
        "case_labels": case_labels(attempt.run.corpus_digest, [attempt.case]).get(attempt.case),
        "case_url": case_url(attempt.run.corpus_digest, attempt.case),
        **_neighbours(request, attempt),
    }
    # A trace page followed in place asks for the trace alone.
    return render_page(
        request,
        "records/attempts/detail.html",
        context,
        partial={"trace": "records/attempts/_trace.html"},
    )


def _neighbours(request: HttpRequest, attempt: Attempt) -> dict[str, Any]:
    """The attempts before and after this one in the list it was opened from (the run's attempt
    list with the filters in this page's query string), and that list's address."""
    run = attempt.run
    listed = RunSearchForm(request.GET, run.pk)
    if not listed.is_valid():
        return {}
    previous_pk, next_pk = neighbours(attempt, listed.query())
    query = request.GET.copy()
    query.pop("page", None)
    suffix = f"?{query.urlencode()}" if query else ""
    return {
        "previous_pk": previous_pk,
        "next_pk": next_pk,
        "list_query": suffix,
        "list_url": reverse("records:run-tab", args=[run.pk, "attempts"]) + suffix,
    }


@require_GET
@read_access
def attempt_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    """The whole trace, streamed: turn lines are read a few at a time and each call line on its
    own, so an export's memory does not grow with the attempt."""
    attempt = get_attempt_or_404(pk)
    price, _ = price_for(attempt)
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
        verify = (
            {"name": v.name, "passed": v.passed, "detail": v.detail}
            for v in Verify.objects.filter(attempt=attempt).order_by("line").iterator(64)
        )
        return json_stream(head, [("turns", _json_turns(attempt, price)), ("verify", verify)])
    return export("csv", f"attempt-{attempt.pk}", _csv_rows(attempt, price))


EXPORT_TURNS_AT_ONCE = 8


def _turn_chunks(attempt: Attempt) -> Iterator[tuple[list[Turn], dict[int, int]]]:
    """The attempt's turn lines in order, a few at a time (keyset paging, so no cursor stays
    open between chunks), each chunk with the answered try of its turn indices."""
    after: tuple[int, int] | None = None
    while True:
        rows = turn_rows(attempt)
        if after is not None:
            rows = rows.filter(Q(index__gt=after[0]) | Q(index=after[0], line__gt=after[1]))
        chunk = list(rows[:EXPORT_TURNS_AT_ONCE])
        if not chunk:
            return
        after = (chunk[-1].index, chunk[-1].line)
        yield chunk, answered_tries(attempt, {t.index for t in chunk})


def _calls_of(attempt: Attempt, t: Turn, answered: dict[int, int]) -> Iterator[Call]:
    if answered.get(t.index) != t.pk:
        return iter(())
    return attempt.calls.filter(turn=t.index).order_by("index", "line").iterator(chunk_size=4)


def _turn_fields(t: Turn, price: Any) -> dict[str, Any]:
    cost = cost_of(Tokens.of(t), price)
    return {
        "turn": t.index,
        "try": t.try_number,
        "status": t.status,
        "latency_ms": t.latency_ms,
        "input_tokens": t.input_tokens,
        "output_tokens": t.output_tokens,
        "cache_created_tokens": t.cache_created_tokens,
        "cache_read_tokens": t.cache_read_tokens,
        "cost_usd": round(cost.total, 8) if cost else None,
    }


def _json_turns(attempt: Attempt, price: Any) -> Iterator[Iterator[str]]:
    for chunk, answered in _turn_chunks(attempt):
        for t in chunk:
            fields = {**_turn_fields(t, price), "blocks": t.blocks}
            t.blocks = None
            calls = (_call_dict(c) for c in _calls_of(attempt, t, answered))
            yield json_object_pieces(fields, [("calls", calls)])


def _csv_rows(attempt: Attempt, price: Any) -> Iterator[dict[str, Any]]:
    for chunk, answered in _turn_chunks(attempt):
        for t in chunk:
            base = {**_turn_fields(t, price), "blocks": len(t.blocks or [])}
            t.blocks = None
            empty = True
            for c in _calls_of(attempt, t, answered):
                empty = False
                yield {**base, **_call_dict(c, flat=True)}
            if empty:  # every row has every column: the header is read from the first
                yield {**base, **dict.fromkeys(FLAT_CALL_FIELDS)}


@require_GET
@read_access
@query_form(TurnItemsForm)
def attempt_turn_items(
    request: HttpRequest, pk: int, turn: int, form: TurnItemsForm
) -> HttpResponse:
    """The next items of a turn the trace cut short (`?start=`, the first item's position),
    with a link to the ones after: a fragment for htmx, else a page of its own."""
    attempt = get_attempt_or_404(pk)
    t = get_object_or_404(Turn, pk=turn, attempt_id=pk)
    start = form.cleaned_data["start"]
    context = {
        "attempt": attempt,
        "t": turn_window(attempt, t, start),
        "first_item": start,
        "items_per_turn": ITEMS_PER_TURN,
    }
    return render_page(
        request,
        "records/attempts/turn_items.html",
        context,
        partial="records/attempts/_turn_items.html",
    )


@require_GET
@read_access
def attempt_raw_call(request: HttpRequest, pk: int, call: int, field: str) -> HttpResponse:
    """A call's arguments or result exactly as stored, compact, for values a page cuts short."""
    value = get_object_or_404(Call.objects.only(field), pk=call, attempt_id=pk)
    return raw_download(getattr(value, field), f"attempt-{pk}-call-{call}-{field}")


@require_GET
@read_access
def attempt_raw_block(request: HttpRequest, pk: int, turn: int, block: int) -> HttpResponse:
    """A tool-call block's arguments as stored, compact."""
    blocks = get_object_or_404(Turn.objects.only("blocks"), pk=turn, attempt_id=pk).blocks
    if not 0 <= block < len(blocks or []) or "arguments" not in blocks[block]:
        raise Http404("no such block, or it carries no arguments")
    return raw_download(blocks[block]["arguments"], f"attempt-{pk}-turn-{turn}-block-{block}")


FLAT_CALL_FIELDS = (
    "call_index",
    "tool",
    "requested_action",
    "dispatched_action",
    "dispatched_tool",
    "outcome",
    "refusal_reason",
    "duration_ms",
    "requests",
    "trace_id",
    "dispatch_observed",
    "result_truncated",
    "text_truncated",
)


BODY_PARTS = ("text", "result", "arguments")


@require_GET
@read_access
def attempt_call_body(request: HttpRequest, pk: int, call: int, part: str) -> HttpResponse:
    """One body of a call line in full (its text, or its result or arguments indented up to the
    bound any page keeps), where the trace shows a preview: a fragment for htmx, else a page."""
    if part not in BODY_PARTS:
        raise Http404("a call has no such body")
    c = get_object_or_404(Call.objects.only("index", part), pk=call, attempt_id=pk)
    raw = None if part == "text" else reverse("records:attempt-raw-call", args=[pk, call, part])
    return _body(request, pk, f"call {c.index}: {part}", getattr(c, part), part != "text", raw)


@require_GET
@read_access
def attempt_block_body(request: HttpRequest, pk: int, turn: int, block: int) -> HttpResponse:
    """One block of a turn in full: its text, its raw text, or its arguments indented."""
    t = get_object_or_404(Turn.objects.only("index", "blocks"), pk=turn, attempt_id=pk)
    if not 0 <= block < len(t.blocks or []):
        raise Http404("no such block")
    b = t.blocks[block]
    title = f"turn {t.index}, block {block + 1}: {b.get('kind', '')}"
    if "arguments" in b and not b.get("text") and not b.get("raw"):
        raw = reverse("records:attempt-raw-block", args=[pk, turn, block])
        return _body(request, pk, title, b["arguments"], True, raw)
    return _body(request, pk, title, b.get("raw") or b.get("text", ""), False, None)


def _body(
    request: HttpRequest, pk: int, title: str, value: Any, is_json: bool, raw_url: str | None
) -> HttpResponse:
    shown = shown_json(value) if is_json else None
    context = {
        "attempt_pk": pk,
        "title": title,
        "text": shown.text if shown else (value or ""),
        "is_json": is_json,
        "cut": bool(shown and shown.cut),
        "raw_url": raw_url,
    }
    return render_page(
        request, "records/attempts/body.html", context, partial="records/attempts/_body.html"
    )


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
