"""Thin views: parse the request, call the domain, render."""

from __future__ import annotations

import csv
import functools
import json
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from evaldash.middleware import accepts_uploads
from records import charts, pages, scores
from records.formats.conformance import ambiguities
from records.forms import AttemptFilterForm, FlipsForm, MatrixForm, RunFilterForm, ScoreForm
from records.ingest import Input, ingest
from records.models import (
    ENDINGS,
    ApiToken,
    Attempt,
    AuditEvent,
    Call,
    ConformanceResult,
    ConformanceRun,
    ConformanceSuite,
    CorpusKey,
    ObsCorpus,
    ObsReplay,
    Run,
    Turn,
    Upload,
    Verdict,
    Verify,
)

RUNS_PER_PAGE = 25
ATTEMPTS_PER_PAGE = 50
MATRIX_CELLS = 800


def read_access(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Browsing needs a login unless the operator opened read access (EVALDASH_PUBLIC_READ)."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if settings.EVALDASH_PUBLIC_READ or request.user.is_authenticated:
            return view(request, *args, **kwargs)
        return redirect_to_login(request.get_full_path())

    return wrapper


def require_perm(perm: str, what: str) -> Callable[..., Any]:
    """Logged in and holding `perm`, or a 403 that says what the permission is for."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        @login_required
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.has_perm(perm):
                return HttpResponse(f"You do not have the permission to {what}.", status=403)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def _get_run_or_404(pk: int) -> Run:
    return get_object_or_404(Run.objects.select_related("shard", "shard__upload"), pk=pk)


def _get_attempt_or_404(pk: int) -> Attempt:
    return get_object_or_404(Attempt.objects.select_related("run", "session"), pk=pk)


def _partial(request: HttpRequest) -> bool:
    return bool(request.htmx and not request.htmx.history_restore_request)


def _bad_request(form: Any) -> HttpResponse:
    errors = "; ".join(
        f"{name}: {' '.join(msgs)}" if name != "__all__" else " ".join(msgs)
        for name, msgs in form.errors.items()
    )
    return HttpResponseBadRequest(f"Invalid query: {errors}", content_type="text/plain")


# --- runs ----------------------------------------------------------------------------------------


@require_GET
@read_access
@vary_on_headers("HX-Request")
def runs(request: HttpRequest) -> HttpResponse:
    form = RunFilterForm(request.GET)
    if not form.is_valid():
        return _bad_request(form)
    qs = pages.filtered_runs(form.cleaned_data)
    page = Paginator(qs, RUNS_PER_PAGE).get_page(form.cleaned_data.get("page") or 1)
    run_list = list(page.object_list.prefetch_related("summaries", "providers"))
    rows = [(run, pages.run_figures(run)) for run in run_list]
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "form": form,
        "page": page,
        "rows": rows,
        "query": query.urlencode(),
        "previous": pages.previous_runs(run_list),
    }
    template = "records/runs.html#runs-table" if _partial(request) else "records/runs.html"
    return render(request, template, context)


def _runs_export_rows(qs: Iterable[Run]) -> Iterable[dict[str, Any]]:
    for run in qs:
        figures = pages.run_figures(run)
        yield {
            "id": run.pk,
            "run_id": run.run_id,
            "commit": run.commit,
            "started_at": run.started_at.isoformat() if run.started_at else "",
            "edition": run.edition,
            "gitlab_version": run.gitlab_version,
            "tier": run.tier,
            "tier_confirmed": run.tier_confirmed,
            "filter": run.filter,
            "corpus_digest": run.corpus_digest,
            "contract_digest": run.contract_digest,
            "models": " ".join(run.models_seen),
            "surfaces": " ".join(run.surfaces_seen),
            "attempts": run.attempt_count,
            "input_tokens": run.input_tokens,
            "output_tokens": run.output_tokens,
            "cache_created_tokens": run.cache_created_tokens,
            "cache_read_tokens": run.cache_read_tokens,
            "priced_cost_usd": round(figures.priced_total, 6) if figures.priced_models else None,
            "unpriced_models": " ".join(figures.unpriced_models),
        }


@require_GET
@read_access
def runs_export(request: HttpRequest, fmt: str) -> HttpResponse:
    form = RunFilterForm(request.GET)
    if not form.is_valid():
        return _bad_request(form)
    qs = pages.filtered_runs(form.cleaned_data).prefetch_related("summaries", "providers")
    return _export(fmt, "runs", _runs_export_rows(qs.iterator(chunk_size=200)))


# --- one run -------------------------------------------------------------------------------------


@require_GET
@read_access
@vary_on_headers("HX-Request")
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = _get_run_or_404(pk)
    form = AttemptFilterForm(request.GET)
    if not form.is_valid():
        return _bad_request(form)
    scoring = scores.latest_scoring(run)
    usable = scoring if scoring and scoring.verdict_count else None
    attempts = pages.filtered_attempts(run, form.cleaned_data, usable)
    paginator = Paginator(attempts, ATTEMPTS_PER_PAGE)
    if not any(
        form.cleaned_data.get(k)
        for k in ("model", "surface", "case", "ended_by", "outcome", "clean")
    ):
        # The whole list: its size was stored at ingest, so no page counts a run's attempts.
        paginator.__dict__["count"] = run.attempt_count
    page = paginator.get_page(form.cleaned_data.get("page") or 1)
    query = request.GET.copy()
    query.pop("page", None)
    context: dict[str, Any] = {
        "run": run,
        "form": form,
        "page": page,
        "query": query.urlencode(),
        "scoring": scoring,
        "scored": usable is not None,
    }
    if _partial(request):
        return render(request, "records/run.html#attempts", context)
    figures = pages.run_figures(run)
    models = sorted(figures.by_model)
    context.update(
        figures=figures,
        providers=list(run.providers.all()),
        sessions=list(run.sessions.all()),
        endings=ENDINGS,
        models=models,
        chart=charts.cost_chart(figures),
        groups=scores.score_groups(usable) if usable else [],
        matching_key=scores.key_for_run(run),
        keys=list(CorpusKey.objects.defer("document")[:50]),
        legend=scores.LEGEND,
        scoring_count=run.scorings.count(),
        can_score=request.user.has_perm("records.add_scoring"),
        can_delete=request.user.has_perm("records.delete_run"),
    )
    return render(request, "records/run.html", context)


@require_POST
@require_perm("records.add_scoring", "score runs")
def run_score(request: HttpRequest, pk: int) -> HttpResponse:
    """Score (again) against a chosen key; a key of another digest is fenced as stale corpus."""
    run = _get_run_or_404(pk)
    form = ScoreForm(request.POST)
    if not form.is_valid():
        return _bad_request(form)
    key = get_object_or_404(CorpusKey, pk=form.cleaned_data["key"])
    scores.score_run(run, key)
    return redirect(reverse("records:run", args=[run.pk]) + "#scores")


@require_GET
@read_access
def run_scores_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    run = _get_run_or_404(pk)
    scoring = scores.latest_scoring(run)
    if scoring is None or not scoring.verdict_count:
        return HttpResponse("This run has not been scored.", status=404, content_type="text/plain")
    groups = scores.score_groups(scoring)
    if fmt == "md":
        text = scores.markdown(groups, run)
        if scoring.stale:
            text = (
                "> **Stale corpus**: scored against key "
                + scoring.key.digest
                + ", not the run's corpus "
                + run.corpus_digest
                + ".\n\n"
                + text
            )
        response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = f'inline; filename="run-{run.pk}-scores.md"'
        return response
    rows = []
    for g in groups:
        for r in g.rows:
            row = {
                "caption": g.caption,
                "row_key": r.row_key,
                "model": r.model,
                "surface": r.surface,
                "stale_corpus": scoring.stale,
                "corpus_key": scoring.key.digest,
                "scorer": scoring.scorer_version,
                "refusal": r.refusal[0] if r.refusal else "",
                "refusal_reason": r.refusal[1] if r.refusal else "",
            }
            for name, (n, d) in r.columns:
                row[f"{name}_numerator"], row[f"{name}_denominator"] = n, d
            for name in (
                "discovery",
                "invalid_params",
                "steps",
                "attempts",
                "turns",
                "skipped",
                "unobserved",
                "provider_error",
                "harness_error",
                "gitlab_refused",
                "input_tokens",
                "output_tokens",
                "cache_created_tokens",
                "cache_read_tokens",
            ):
                row[name] = r.figures[name] or 0
            rows.append(row)
    return _export(fmt, f"run-{run.pk}-scores", rows)


@require_GET
@read_access
def run_matrix(request: HttpRequest, pk: int) -> HttpResponse:
    run = _get_run_or_404(pk)
    form = MatrixForm(request.GET)
    if not form.is_valid():
        return _bad_request(form)
    scoring = scores.latest_scoring(run)
    surfaces = sorted(run.surfaces_seen)
    surface = form.cleaned_data.get("surface") or (surfaces[0] if surfaces else "dynamic")
    context: dict[str, Any] = {
        "run": run,
        "scoring": scoring,
        "surface": surface,
        "surfaces": surfaces,
        "form": form,
    }
    if scoring and scoring.verdict_count:
        all_cases = scores.cases_on(scoring, surface)
        # A page holds about MATRIX_CELLS outcomes, however many models and repeats a run has.
        columns = max(1, scoring.rows.filter(surface=surface).count() * max(1, run.repeat))
        per_page = max(5, min(50, MATRIX_CELLS // columns))
        page = Paginator(all_cases, per_page).get_page(form.cleaned_data.get("page") or 1)
        models, cells = scores.case_matrix(scoring, surface, list(page.object_list))
        rows = []
        for case in page.object_list:
            row = []
            for m in models:
                got = cells.get((case, m), [])
                row.append(
                    {
                        "attempts": got,
                        "pass_k": bool(got) and all(o == "completed" for _, _, o, _ in got),
                        "k": len(got),
                    }
                )
            rows.append((case, row))
        context.update(page=page, models=models, rows=rows, repeat=run.repeat)
    return render(request, "records/matrix.html", context)


@require_GET
@read_access
def run_flips(request: HttpRequest, pk: int) -> HttpResponse:
    run = _get_run_or_404(pk)
    form = FlipsForm(request.GET)
    if not form.is_valid():
        return _bad_request(form)
    scorings = list(run.scorings.select_related("key").order_by("-created_at", "-id"))
    by_id = {s.pk: s for s in scorings}
    after = by_id.get(form.cleaned_data.get("after") or 0) or (scorings[0] if scorings else None)
    before = by_id.get(form.cleaned_data.get("before") or 0) or (
        scorings[1] if len(scorings) > 1 else None
    )
    changed = scores.flips(before, after) if before and after else []
    summary: dict[tuple[str, str], dict[str, int]] = {}
    for f in changed:
        key = (f["model"], f["surface"])
        bucket = summary.setdefault(key, {"fixed": 0, "broke": 0, "other": 0})
        if f["after"] == "completed" and f["before"] != "completed":
            bucket["fixed"] += 1
        elif f["before"] == "completed" and f["after"] != "completed":
            bucket["broke"] += 1
        else:
            bucket["other"] += 1
    return render(
        request,
        "records/flips.html",
        {
            "run": run,
            "scorings": scorings,
            "before": before,
            "after": after,
            "flips": changed,
            "summary": sorted(summary.items()),
        },
    )


@require_GET
@read_access
def keys(request: HttpRequest) -> HttpResponse:
    items = list(CorpusKey.objects.select_related("upload").order_by("-created_at", "-id")[:200])
    digests = [k.digest for k in items]
    runs_per_digest = dict(
        Run.objects.filter(corpus_digest__in=digests)
        .values_list("corpus_digest")
        .annotate(n=Count("id"))
        .order_by()
    )
    return render(
        request,
        "records/keys.html",
        {"keys": [(k, runs_per_digest.get(k.digest, 0)) for k in items]},
    )


@require_GET
@read_access
def key_detail(request: HttpRequest, pk: int) -> HttpResponse:
    key = get_object_or_404(CorpusKey, pk=pk)
    cases = list(key.cases.all())
    runs = list(
        Run.objects.filter(Q(corpus_digest=key.digest) | Q(scorings__key=key))
        .distinct()
        .order_by("-started_at")[:100]
    )
    scored_cases = dict(
        Verdict.objects.filter(scoring__key=key)
        .values_list("case")
        .annotate(n=Count("id"))
        .order_by()
    )
    return render(
        request,
        "records/key.html",
        {
            "key": key,
            "cases": [(c, scored_cases.get(c.case_id, 0)) for c in cases],
            "runs": runs,
            "catalog": key.document.get("catalog", {}),
            "retired": key.document.get("retired", []),
        },
    )


def _attempt_export_rows(qs: Iterable[Attempt]) -> Iterable[dict[str, Any]]:
    for a in qs:
        yield {
            "id": a.pk,
            "attempt": a.key,
            "case": a.case,
            "model": a.model,
            "surface": a.effective_surface,
            "mode": a.effective_mode,
            "repeat": a.repeat,
            "ended_by": a.ended_by,
            "reason": a.reason,
            "turns": a.turn_count,
            "tries": a.try_count,
            "calls": a.call_count,
            "input_tokens": a.input_tokens,
            "output_tokens": a.output_tokens,
            "cache_created_tokens": a.cache_created_tokens,
            "cache_read_tokens": a.cache_read_tokens,
            "latency_ms": a.latency_ms,
        }


@require_GET
@read_access
def run_attempts_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    run = _get_run_or_404(pk)
    form = AttemptFilterForm(request.GET)
    if not form.is_valid():
        return _bad_request(form)
    qs = pages.filtered_attempts(run, form.cleaned_data)
    return _export(
        fmt, f"run-{run.pk}-attempts", _attempt_export_rows(qs.iterator(chunk_size=1000))
    )


# --- one attempt ---------------------------------------------------------------------------------


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
    turns = pages.trace(attempt, price)
    total = None
    if price is not None:
        from records.cost import Tokens, cost_of

        total = cost_of(Tokens.of(attempt), price)
    scoring = scores.latest_scoring(attempt.run)
    verdict = Verdict.objects.filter(scoring=scoring, attempt=attempt).first() if scoring else None
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
    }
    return render(request, "records/attempt.html", context)


@require_GET
@read_access
def attempt_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    attempt = _get_attempt_or_404(pk)
    price, _ = _price_for(attempt)
    rows = []
    for t in pages.trace(attempt, price):
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


def _json_stream(
    head: dict[str, Any], key: str, items: Iterable[Any], tail: dict[str, Any]
) -> StreamingHttpResponse:
    """One JSON object sent piece by piece, compact: `head`'s fields, then `key` as a list of
    `items` one at a time, then `tail`'s fields. Indentation is left out on purpose: it grows
    with nesting (a 200 KB value 1,000 levels deep indents to 190 MiB)."""

    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)

    def pieces() -> Iterable[str]:
        yield dump(head)[:-1] + ("," if head else "") + dump(key) + ":["
        for n, item in enumerate(items):
            yield ("," if n else "") + dump(item)
        yield "]" + ("," + dump(tail)[1:] if tail else "}")

    return StreamingHttpResponse(pieces(), content_type="application/json")


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


def _raw(value: Any, name: str) -> HttpResponse:
    response = HttpResponse(
        json.dumps(value, ensure_ascii=False, separators=(",", ":")),
        content_type="application/json",
    )
    response["Content-Disposition"] = f'attachment; filename="{name}.json"'
    return response


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


# --- exports -------------------------------------------------------------------------------------


class _Echo:
    def write(self, value: str) -> str:
        return value


def _csv_safe(value: Any) -> Any:
    # A cell starting with = + - @ is a formula to a spreadsheet, also after leading white space
    # (spreadsheets skip it); quote it as text.
    if isinstance(value, str) and (
        value[:1] in ("\t", "\r") or value.lstrip()[:1] in ("=", "+", "-", "@")
    ):
        return "'" + value
    return value


def _export(fmt: str, name: str, rows: Iterable[dict[str, Any]]) -> HttpResponse:
    if fmt == "json":
        return JsonResponse({"rows": list(rows)}, json_dumps_params={"indent": 1})
    writer = csv.writer(_Echo())

    def stream() -> Iterable[str]:
        header = None
        for row in rows:
            if header is None:
                header = list(row)
                yield writer.writerow(header)
            yield writer.writerow([_csv_safe(row.get(k)) for k in header])

    response = StreamingHttpResponse(stream(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response


# --- uploads -------------------------------------------------------------------------------------


def _uploaded_inputs(request: HttpRequest) -> list[Input]:
    files = request.FILES.getlist("file") + request.FILES.getlist("files")
    out = []
    for f in files:
        out.append(Input(f.name, _opener(f), f.size))
    return out


def _opener(f: Any) -> Callable[[], Any]:
    def open_() -> Any:
        f.seek(0)
        return _NoClose(f)

    return open_


class _NoClose:
    """Hands an uploaded file to the ingest as a stream without letting it close the upload."""

    def __init__(self, f: Any) -> None:
        self.f = f

    def __getattr__(self, name: str) -> Any:
        return getattr(self.f, name)

    def __enter__(self) -> _NoClose:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.f.seek(0)

    def close(self) -> None:
        pass


def _override(request: HttpRequest) -> bool:
    """The operator's explicit override for a corpus key whose declared digest differs."""
    return request.POST.get("allow_digest_mismatch") in ("1", "true", "on", "yes")


@accepts_uploads
@require_http_methods(["GET", "POST"])
@login_required
def upload(request: HttpRequest) -> HttpResponse:
    can_upload = request.user.has_perm("records.add_upload")
    context: dict[str, Any] = {
        "can_upload": can_upload,
        "max_bytes": settings.EVALDASH_MAX_UPLOAD_BYTES,
    }
    if request.method == "POST":
        if not can_upload:
            return HttpResponse("You do not have the upload permission.", status=403)
        inputs = _uploaded_inputs(request)
        if not inputs:
            context["error"] = "Choose at least one file to upload."
            status = 400
        else:
            up = Upload.objects.create(source=Upload.Source.WEB, user=request.user)
            context["report"] = ingest(inputs, up, allow_digest_mismatch=_override(request))
            context["upload"] = up
            status = 200 if context["report"].ok else 422
        template = "records/upload.html#report" if _partial(request) else "records/upload.html"
        return render(request, template, context, status=status)
    context["recent"] = Upload.objects.select_related("user").order_by("-created_at")[:15]
    return render(request, "records/upload.html", context)


@require_GET
@read_access
def upload_detail(request: HttpRequest, pk: int) -> HttpResponse:
    up = get_object_or_404(Upload.objects.select_related("user", "token"), pk=pk)
    return render(
        request,
        "records/upload_detail.html",
        {"upload": up, "summary": up.summary, "shards": up.shards.select_related("run")},
    )


def _api_token(request: HttpRequest) -> tuple[ApiToken | None, HttpResponse | None]:
    """The live upload token of a request, or the response that refuses it."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return None, JsonResponse(
            {"error": "send an upload token as 'Authorization: Bearer TOKEN'"}, status=401
        )
    token = ApiToken.authenticate(raw.strip())
    if token is None:
        return None, JsonResponse({"error": "the token is not known"}, status=401)
    if not token.active:
        return None, JsonResponse({"error": "the token was revoked"}, status=403)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token, None


@accepts_uploads
@csrf_exempt  # token-authenticated, no cookies involved
@require_POST
def api_upload(request: HttpRequest) -> HttpResponse:
    token, failure = _api_token(request)
    if failure:
        return failure
    inputs = _uploaded_inputs(request)
    if not inputs:
        return JsonResponse({"error": "no file: send files as multipart field 'file'"}, status=400)
    up = Upload.objects.create(source=Upload.Source.API, token=token)
    report = ingest(inputs, up, allow_digest_mismatch=_override(request))
    body = {"upload": up.pk, **report.as_dict(), "summary": report.summary_line()}
    return JsonResponse(body, status=200 if report.ok else 422)


# --- sealed corpus replays -----------------------------------------------------------------------


@require_GET
@read_access
def replays(request: HttpRequest) -> HttpResponse:
    corpora = list(
        ObsCorpus.objects.annotate(replay_count=Count("replays")).order_by("-created_at")[:200]
    )
    latest = {}
    for r in ObsReplay.objects.filter(corpus__in=corpora).order_by(
        "corpus_id", "-created_at", "-id"
    ):
        latest.setdefault(r.corpus_id, r)
    return render(
        request, "records/replays.html", {"corpora": [(c, latest.get(c.pk)) for c in corpora]}
    )


@require_GET
@read_access
def obs_corpus(request: HttpRequest, pk: int) -> HttpResponse:
    corpus = get_object_or_404(ObsCorpus, pk=pk)
    runs = list(corpus.replays.order_by("created_at", "id")[:20])
    verdicts = {r.pk: {v["subjectId"]: v for v in json.loads(r.report)["verdicts"]} for r in runs}
    labels = corpus.corpus.get("labels", {})
    rows = [
        (s["id"], s["revision"], labels.get(s["id"]), [verdicts[r.pk].get(s["id"]) for r in runs])
        for s in corpus.corpus.get("subjects", [])
    ]
    return render(
        request, "records/obs_corpus.html", {"corpus": corpus, "runs": runs, "rows": rows}
    )


@require_GET
@read_access
def replay_detail(request: HttpRequest, pk: int) -> HttpResponse:
    replay = get_object_or_404(ObsReplay.objects.select_related("corpus", "upload"), pk=pk)
    report = json.loads(replay.report)
    reasons: dict[tuple[str, str], int] = {}
    rows = []
    for v in report["verdicts"]:
        key = (v["verdict"], v.get("reason", ""))
        reasons[key] = reasons.get(key, 0) + 1
        rows.append((v, replay.results.get(v["subjectId"])))
    return render(
        request,
        "records/replay.html",
        {
            "replay": replay,
            "report": report,
            "rows": rows,
            "reasons": sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])),
            "fields": ("identity", "revision", "inputTokens", "outputTokens", "latencyMillis"),
        },
    )


@require_GET
@read_access
def replay_report(request: HttpRequest, pk: int) -> HttpResponse:
    replay = get_object_or_404(ObsReplay, pk=pk)
    response = HttpResponse(replay.report, content_type="application/json")
    response["Content-Disposition"] = f'inline; filename="oca-replay-{replay.pk}.json"'
    return response


# --- adapter conformance runs --------------------------------------------------------------------


def _latest_runs() -> list[ConformanceRun]:
    latest: dict[str, ConformanceRun] = {}
    for run in ConformanceRun.objects.select_related("suite").order_by("adapter", "-ran_at", "-id"):
        latest.setdefault(run.adapter, run)
    return sorted(latest.values(), key=lambda r: r.adapter)


def _matrix() -> tuple[list[str], list[tuple[ConformanceRun, list[Any]]]]:
    runs = _latest_runs()
    results: dict[int, dict[str, ConformanceResult]] = {r.pk: {} for r in runs}
    for res in ConformanceResult.objects.filter(run__in=runs):
        results[res.run_id][res.case] = res
    cases: list[str] = []
    for run in runs:
        names = [c["name"] for c in run.suite.cases] if run.suite else list(results[run.pk])
        for name in names:
            if name not in cases:
                cases.append(name)
    return cases, [(run, [results[run.pk].get(c) for c in cases]) for run in runs]


@require_GET
@read_access
def conformance(request: HttpRequest) -> HttpResponse:
    cases, rows = _matrix()
    return render(
        request,
        "records/conformance.html",
        {
            "cases": cases,
            "rows": rows,
            "suites": ConformanceSuite.objects.all()[:20],
        },
    )


@require_GET
@read_access
def conformance_export(request: HttpRequest, fmt: str) -> HttpResponse:
    cases, rows = _matrix()
    out = []
    for run, cells in rows:
        for case, res in zip(cases, cells, strict=True):
            out.append(
                {
                    "adapter": run.adapter,
                    "adapter_version": run.adapter_version,
                    "commit": run.commit,
                    "ran_at": run.ran_at.isoformat(),
                    "run": run.pk,
                    "aborted": run.aborted,
                    "case": case,
                    "status": "aborted"
                    if run.aborted
                    else ("not run" if res is None else ("pass" if res.passed else "fail")),
                    "failures": " | ".join(res.failures)
                    if res and fmt == "csv"
                    else (res.failures if res else []),
                }
            )
    return _export(fmt, "conformance-matrix", out)


@require_GET
@read_access
def conformance_failures(request: HttpRequest) -> HttpResponse:
    from records.formats.conformance import template_of

    groups: dict[str, list[tuple[ConformanceRun, ConformanceResult, str]]] = {}
    for run in _latest_runs():
        for res in run.results.filter(passed=False):
            for text in res.failures:
                groups.setdefault(template_of(text), []).append((run, res, text))
    ordered = sorted(groups.items(), key=lambda kv: (-len({r.adapter for r, _, _ in kv[1]}), kv[0]))
    return render(request, "records/conformance_failures.html", {"groups": ordered})


@require_GET
@read_access
def conformance_adapter(request: HttpRequest) -> HttpResponse:
    name = request.GET.get("name", "")
    runs = list(
        ConformanceRun.objects.filter(adapter=name)
        .select_related("suite")
        .order_by("ran_at", "id")[:200]
    )
    if not runs:
        raise Http404("no run of that adapter")
    by_run: dict[int, dict[str, ConformanceResult]] = {r.pk: {} for r in runs}
    for res in ConformanceResult.objects.filter(run__in=runs):
        by_run[res.run_id][res.case] = res
    cases: list[str] = []
    for run in runs:
        for c in by_run[run.pk]:
            if c not in cases:
                cases.append(c)
    # Which rule broke when, and which commit fixed it: transitions between completed runs.
    events = []
    previous: dict[str, bool] = {}
    for run in runs:
        if run.aborted:
            continue
        for case, res in by_run[run.pk].items():
            before = previous.get(case)
            if before is True and not res.passed:
                events.append(("broke", case, run, res))
            elif before is False and res.passed:
                events.append(("fixed", case, run, res))
            previous[case] = res.passed
    rows = [(c, [by_run[r.pk].get(c) for r in runs]) for c in cases]
    return render(
        request,
        "records/conformance_adapter.html",
        {
            "name": name,
            "runs": runs,
            "rows": rows,
            "events": list(reversed(events)),
        },
    )


@require_GET
@read_access
def conformance_run(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(ConformanceRun.objects.select_related("suite", "upload"), pk=pk)
    return render(
        request, "records/conformance_run.html", {"run": run, "results": list(run.results.all())}
    )


@require_GET
@read_access
def conformance_suite(request: HttpRequest, pk: int) -> HttpResponse:
    suite = get_object_or_404(ConformanceSuite, pk=pk)
    case = request.GET.get("case")
    chosen = next((c for c in suite.cases if c.get("name") == case), None) if case else None
    if case and chosen is None:
        raise Http404("no such case in this suite")
    return render(
        request,
        "records/conformance_suite.html",
        {
            "suite": suite,
            "ambiguities": ambiguities(suite.cases),
            "chosen": chosen,
            "chosen_json": {
                k: pages.pretty_json(v)
                for k, v in (chosen or {}).items()
                if k not in ("name", "rule")
            },
        },
    )


@accepts_uploads
@csrf_exempt  # token-authenticated, no cookies involved
@require_POST
def api_conformance(request: HttpRequest) -> HttpResponse:
    token, failure = _api_token(request)
    if failure:
        return failure
    return _conformance_post(request, Upload.objects.create(source=Upload.Source.API, token=token))


def _conformance_post(request: HttpRequest, upload: Upload) -> HttpResponse:
    from records.conformance_runs import RunMeta, store_run
    from records.formats.conformance import ConformanceError

    f = request.FILES.get("output")
    data = f.read() if f else b""
    name = f.name if f else "(no output)"
    try:
        out = store_run(data, name, RunMeta.from_strings(name, request.POST.dict()), upload)
    except ConformanceError as exc:
        upload.summary = {"refused": [exc.as_dict()]}
        upload.save(update_fields=["summary"])
        return JsonResponse({"refused": [exc.as_dict()]}, status=422)
    upload.summary = {"conformance_runs": [out]}
    upload.save(update_fields=["summary"])
    return JsonResponse(out, status=200)


@accepts_uploads
@require_POST
@require_perm("records.add_upload", "upload")
def upload_conformance(request: HttpRequest) -> HttpResponse:
    response = _conformance_post(
        request, Upload.objects.create(source=Upload.Source.WEB, user=request.user)
    )
    if response.status_code == 200:
        import json as _json

        return redirect("records:conformance-run", pk=_json.loads(response.content)["run"])
    return response


# --- comparisons ---------------------------------------------------------------------------------


@require_GET
@read_access
@vary_on_headers("HX-Request")
def compare(request: HttpRequest) -> HttpResponse:
    from records import compare as cmp
    from records.forms import CompareForm

    run_choices = list(Run.objects.order_by("-started_at", "-id").values_list("pk", "run_id")[:200])
    form = CompareForm(request.GET or None, run_choices=run_choices)
    context: dict[str, Any] = {"form": form, "run_choices": run_choices}
    if request.GET and not form.is_valid():
        return _bad_request(form)
    data = form.cleaned_data if request.GET else {"kind": "runs"}
    context["kind"] = data["kind"]
    if data["kind"] == "runs" and data.get("baseline") and data.get("candidate"):
        baseline = _get_run_or_404(data["baseline"])
        page_no = data.get("page") or 1
        comparisons = []
        pages_needed = 1
        for pk in data["candidate"]:
            candidate = _get_run_or_404(pk)
            rows, problem = cmp.compare_runs(baseline, candidate, page=page_no)
            pages_needed = max(pages_needed, -(-len(rows) // cmp.ROWS_PER_PAGE))
            start = (page_no - 1) * cmp.ROWS_PER_PAGE
            comparisons.append((candidate, rows[start : start + cmp.ROWS_PER_PAGE], problem))
        query = request.GET.copy()
        query.pop("page", None)
        context.update(
            baseline=baseline,
            comparisons=comparisons,
            page_no=page_no,
            pages_needed=pages_needed,
            base_query=query.urlencode(),
        )
    elif data["kind"] in ("surfaces", "models") and data.get("run"):
        run = _get_run_or_404(data["run"])
        context["run"] = run
        if data["kind"] == "surfaces":
            context["surface_groups"] = cmp.compare_surfaces(run)
        else:
            scoring = scores.latest_scoring(run)
            groups = scores.score_groups(scoring) if scoring and scoring.verdict_count else []
            context.update(
                groups=[(g, charts.grouped_bars(g), f"bars-{i}") for i, g in enumerate(groups)],
                scoring=scoring,
                scatter=charts.cost_scatter(groups, run) if groups else None,
            )
    context["query"] = request.GET.urlencode()
    template = "records/compare.html#result" if _partial(request) else "records/compare.html"
    return render(request, template, context)


@require_GET
@read_access
def compare_export(request: HttpRequest, fmt: str) -> HttpResponse:
    from records import compare as cmp
    from records.forms import CompareForm

    run_choices = list(Run.objects.values_list("pk", "run_id"))
    form = CompareForm(request.GET, run_choices=run_choices)
    if (
        not form.is_valid()
        or not form.cleaned_data.get("baseline")
        or not form.cleaned_data.get("candidate")
    ):
        return HttpResponseBadRequest(
            "name a baseline and at least one candidate", content_type="text/plain"
        )
    baseline = _get_run_or_404(form.cleaned_data["baseline"])
    rows_out = []
    for pk in form.cleaned_data["candidate"]:
        candidate = _get_run_or_404(pk)
        rows, problem = cmp.compare_runs(baseline, candidate, flip_limit=None, page=None)
        for c in rows:
            base = {
                "baseline": baseline.run_id,
                "candidate": candidate.run_id,
                "row": c.identity,
                "refused": c.refused or problem,
                "shared_cases_only": c.shared_only,
                "regressed": c.regressions,
                "fixed": c.fixes,
            }
            if c.baseline and c.candidate and not c.refused:
                for title, a, b, d in c.columns():
                    base[f"{title} before"] = f"{a[0]} / {a[1]}" if a[1] else "-"
                    base[f"{title} after"] = f"{b[0]} / {b[1]}" if b[1] else "-"
                    base[f"{title} delta (points)"] = None if d is None else round(d, 2)
                base["cost delta usd"] = None if c.cost_delta is None else round(c.cost_delta, 6)
                if fmt == "json":
                    base["cases"] = [f.__dict__ for f in c.flips]
            rows_out.append(base)
    if fmt == "md":
        lines = [
            f"Comparison of `{baseline.run_id}` (baseline) with "
            + ", ".join(f"`{_get_run_or_404(pk).run_id}`" for pk in form.cleaned_data["candidate"]),
            "",
        ]
        for r in rows_out:
            lines.append(
                f"- `{r['row']}` vs `{r['candidate']}`: "
                + (
                    f"not compared: {r['refused']}"
                    if r["refused"]
                    else f"{r['regressed']} regressed, {r['fixed']} fixed"
                    + ("; shared cases only" if r["shared_cases_only"] else "")
                    + "; "
                    + ", ".join(
                        f"{t} {r[t + ' before']} → {r[t + ' after']}"
                        for t in ("Clean", "Completion")
                        if t + " before" in r
                    )
                )
            )
        text = "\n".join(s.replace("<", "&lt;").replace(">", "&gt;") for s in lines) + "\n"
        return HttpResponse(text, content_type="text/markdown; charset=utf-8")
    return _export(fmt, "comparison", rows_out)


@require_POST
@require_perm("records.delete_run", "delete runs")
def run_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Delete a run, its shard record and its scores; the deletion is recorded."""
    run = _get_run_or_404(pk)
    detail = {
        "run": run.pk,
        "run_id": run.run_id,
        "commit": run.commit,
        "shard": run.shard.name,
        "sha256": run.shard.sha256,
        "attempts": run.attempt_count,
        "scorings": run.scorings.count(),
    }
    from django.db import transaction

    with transaction.atomic():
        AuditEvent.objects.create(user=request.user, action="delete-run", detail=detail)
        shard = run.shard
        run.delete()  # attempts, turns, calls, verifies, sessions, providers, scores
        shard.delete()  # so the same shard can be uploaded again
    return redirect("records:runs")


@require_GET
@login_required
def audit(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        return HttpResponse("Only staff can read the audit log.", status=403)
    uploads = Upload.objects.select_related("user", "token").order_by("-created_at")[:100]
    events = AuditEvent.objects.select_related("user")[:100]
    return render(request, "records/audit.html", {"uploads": uploads, "events": events})
