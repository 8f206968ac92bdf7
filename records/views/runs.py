"""The runs list, one run's page, its attempt list and exports, and deleting a run."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.decorators import login_required, permission_required
from django.core.paginator import Paginator
from django.db import transaction
from django.http import (
    HttpRequest,
    HttpResponse,
)
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from records.models import (
    ENDINGS,
    Attempt,
    AuditEvent,
    CorpusKey,
    Run,
)
from records.queries.cost import run_figures
from records.queries.runs import attempts_for_list, previous_runs, runs_for_list
from records.scores.run import key_for_run, latest_scoring
from records.scores.tables import LEGEND, score_groups
from records.views import charts
from records.views.access import (
    _bad_request,
    _get_run_or_404,
    _partial,
    read_access,
)
from records.views.exports import _export
from records.views.filters import AttemptFilter, RunFilter

RUNS_PER_PAGE = 25


ATTEMPTS_PER_PAGE = 50


@require_GET
@read_access
@vary_on_headers("HX-Request")
def runs(request: HttpRequest) -> HttpResponse:
    runs = RunFilter(request.GET, queryset=runs_for_list())
    if not runs.is_valid():
        return _bad_request(runs.form)
    form = runs.form
    page = Paginator(runs.qs, RUNS_PER_PAGE).get_page(form.cleaned_data.get("page") or 1)
    run_list = list(page.object_list.prefetch_related("summaries", "providers"))
    rows = [(run, run_figures(run)) for run in run_list]
    context = {
        "form": form,
        "page": page,
        "rows": rows,
        "previous": previous_runs(run_list),
    }
    template = (
        "records/runs/list.html#runs-table" if _partial(request) else "records/runs/list.html"
    )
    return render(request, template, context)


def _runs_export_rows(qs: Iterable[Run]) -> Iterable[dict[str, Any]]:
    for run in qs:
        figures = run_figures(run)
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
    runs = RunFilter(request.GET, queryset=runs_for_list())
    if not runs.is_valid():
        return _bad_request(runs.form)
    qs = runs.qs.prefetch_related("summaries", "providers")
    return _export(fmt, "runs", _runs_export_rows(qs.iterator(chunk_size=200)))


@require_GET
@read_access
@vary_on_headers("HX-Request")
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = _get_run_or_404(pk)
    scoring = latest_scoring(run)
    usable = scoring if scoring and scoring.verdict_count else None
    attempts = AttemptFilter(request.GET, queryset=attempts_for_list(run, usable), scoring=usable)
    if not attempts.is_valid():
        return _bad_request(attempts.form)
    form = attempts.form
    paginator = Paginator(attempts.qs, ATTEMPTS_PER_PAGE)
    if not attempts.narrowed:
        # The whole list: its size was stored at ingest, so no page counts a run's attempts.
        paginator.__dict__["count"] = run.attempt_count
    page = paginator.get_page(form.cleaned_data.get("page") or 1)
    context: dict[str, Any] = {
        "run": run,
        "form": form,
        "page": page,
        "scoring": scoring,
        "scored": usable is not None,
    }
    if _partial(request):
        return render(request, "records/runs/detail.html#attempts", context)
    figures = run_figures(run)
    models = sorted(figures.by_model)
    context.update(
        figures=figures,
        providers=list(run.providers.all()),
        sessions=list(run.sessions.all()),
        endings=ENDINGS,
        models=models,
        chart=charts.cost_chart(figures),
        groups=score_groups(usable) if usable else [],
        matching_key=key_for_run(run),
        keys=list(CorpusKey.objects.defer("document")[:50]),
        legend=LEGEND,
        scoring_count=run.scorings.count(),
        can_score=request.user.has_perm("records.add_scoring"),
        can_delete=request.user.has_perm("records.delete_run"),
    )
    return render(request, "records/runs/detail.html", context)


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
    attempts = AttemptFilter(request.GET, queryset=attempts_for_list(run))
    if not attempts.is_valid():
        return _bad_request(attempts.form)
    qs = attempts.qs
    return _export(
        fmt, f"run-{run.pk}-attempts", _attempt_export_rows(qs.iterator(chunk_size=1000))
    )


@require_POST
@login_required
@permission_required("records.delete_run", raise_exception=True)
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

    with transaction.atomic():
        AuditEvent.objects.create(user=request.user, action="delete-run", detail=detail)
        shard = run.shard
        run.delete()  # attempts, turns, calls, verifies, sessions, providers, scores
        shard.delete()  # so the same shard can be uploaded again
    return redirect("records:runs")
