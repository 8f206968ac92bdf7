"""The runs list, one run's page, its attempt list and exports, and deleting a run."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

from django.contrib.auth.decorators import login_required, permission_required
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.http import (
    HttpRequest,
    HttpResponse,
)
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from records.models import (
    ENDINGS,
    Attempt,
    AuditEvent,
    Call,
    CorpusKey,
    Run,
    Verdict,
)
from records.queries.answers import answers
from records.queries.cost import run_figures, sort_figures
from records.queries.failures import new_failures
from records.queries.overview import boards as overview_boards
from records.queries.runs import (
    column_over,
    headlines,
    model_suggestions,
    runs_for_list,
)
from records.queries.scores import sort_rows
from records.queries.search import Search
from records.scoring.run import (
    PAGE_SCORING_MAX_ATTEMPTS,
    score_if_unscored,
)
from records.scoring.tables import ranking_groups, score_groups
from records.scoring.vocabulary import (
    COLUMN_BY_TITLE,
    COLUMN_TITLES,
    LEGEND,
    TITLE_OF,
    TITLED_COLUMNS,
)
from records.search.index import indexing
from records.views import charts
from records.views.access import (
    Partial,
    bad_request,
    get_run_or_404,
    query_form,
    read_access,
    render_page,
)
from records.views.exports import export
from records.views.filters import RunFilter
from records.views.forms import ColumnForm, FiguresSortForm, SortForm
from records.views.search import RunSearchForm, results_context

RUNS_PER_PAGE = 25


ATTEMPTS_PER_PAGE = 50


@require_GET
@read_access
def runs(request: HttpRequest) -> HttpResponse:
    runs = RunFilter(request.GET, queryset=runs_for_list())
    if not runs.is_valid():
        return bad_request(runs.form, request)
    form = runs.form
    page = Paginator(runs.qs, RUNS_PER_PAGE).get_page(form.cleaned_data.get("page") or 1)
    run_list = list(page.object_list.prefetch_related("summaries", "providers"))
    rows = [(run, run_figures(run)) for run in run_list]
    context = {
        "form": form,
        "page": page,
        "rows": rows,
        "answers": answers(run_list),
        "headlines": headlines(run_list),
        "model_suggestions": model_suggestions(),
    }
    return render_page(request, "records/runs/list.html", context, partial="runs-table")


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
        return bad_request(runs.form, request)
    qs = runs.qs.prefetch_related("summaries", "providers")
    return export(fmt, "runs", _runs_export_rows(qs.iterator(chunk_size=200)))


# A run's page is one tab at a time, each at its own address; a tab's link loads it in place.
RUN_TABS = [
    ("overview", "Overview"),
    ("scores", "Scores"),
    ("cost", "Cost"),
    ("attempts", "Attempts"),
    ("sessions", "Sessions and provenance"),
]


# The attempt filters a run's address carried before the attempt list became a tab of its own.
LEGACY_LIST_PARAMS = {"model", "surface", "case", "ended_by", "outcome", "clean", "page"}


def _tab_url(run: Run, tab: str) -> str:
    if tab == "overview":
        return reverse("records:run", args=[run.pk])
    return reverse("records:run-tab", args=[run.pk, tab])


def _scoring_state(run: Run) -> tuple[Any, CorpusKey | None, bool]:
    """The run's latest scoring; the stored key it waits for when it has none (its ingest was
    killed before scoring it); and whether this request scored it. A run small enough to score
    while the page loads is scored here; a larger one is left pending, for a retried upload,
    the gate or `manage.py rescore --pending`, so a page view stays bounded."""
    scoring = run.latest_scoring()
    if scoring is not None:
        return scoring, None, False
    key = run.key()
    if key is None or run.attempt_count > PAGE_SCORING_MAX_ATTEMPTS:
        return None, key, False
    scored_now = score_if_unscored(run) is not None
    scoring = run.latest_scoring()  # this request's, or one a concurrent request just stored
    return scoring, None if scoring else key, scored_now


def _run_page(run: Run, tab: str) -> tuple[dict[str, Any], Any]:
    """What every tab of a run's page shows around it (the run, its tabs, its scoring and what
    that scoring waits for), and the scoring when it holds verdicts."""
    scoring, pending_key, scored_now = _scoring_state(run)
    usable = scoring if scoring and scoring.verdict_count else None
    context: dict[str, Any] = {
        "run": run,
        "tab": tab,
        "tabs": [(key, label, _tab_url(run, key)) for key, label in RUN_TABS],
        "scoring": scoring,
        "scored": usable is not None,
        "pending_key": pending_key,
        "scored_now": scored_now,
        "attempts_url": _tab_url(run, "attempts"),
        # Stored, its search index still being written after its shard (nothing else waits).
        "indexing": indexing(run),
        "index_row": getattr(run, "pending_index", None) if indexing(run) else None,
    }
    return context, usable


# The tabs past the first share one address pattern (`records:run-tab`, the tab's name in it),
# routed to one view each; a view is handed its tab's name as `tab`.


def _render_tab(
    request: HttpRequest, context: dict[str, Any], partial: Partial = "tab"
) -> HttpResponse:
    """The whole run page, or (an htmx request, a tab's link followed in place) the tab alone."""
    return render_page(request, "records/runs/detail.html", context, partial=partial)


def _legacy_list(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """An attempt-list address of before the tabs leads to the list, its own tab now."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, pk: int, **kwargs: Any) -> HttpResponse:
        if request.GET.keys() & LEGACY_LIST_PARAMS:
            run = get_run_or_404(pk)
            return redirect(_tab_url(run, "attempts") + "?" + request.GET.urlencode())
        return view(request, pk, **kwargs)

    return wrapper


@require_GET
@read_access
@_legacy_list
@query_form(ColumnForm)
def run_overview(request: HttpRequest, pk: int, form: ColumnForm) -> HttpResponse:
    run = get_run_or_404(pk)
    context, usable = _run_page(run, "overview")
    column = form.cleaned_data.get("column") or COLUMN_TITLES[0]
    context.update(column=column, column_key=COLUMN_BY_TITLE[column], columns=COLUMN_TITLES)
    if usable:
        context["boards"] = overview_boards(usable, ranking_groups(score_groups(usable)), column)
        context["new_failures"] = new_failures(run)
    else:
        context["figures"] = run_figures(run)
        context["endings"] = ENDINGS
    return _render_tab(request, context)


@require_GET
@read_access
@query_form(SortForm)
def run_scores(request: HttpRequest, pk: int, form: SortForm, tab: str = "scores") -> HttpResponse:
    run = get_run_or_404(pk)
    context, usable = _run_page(run, tab)
    groups = score_groups(usable) if usable else []
    sort_rows(groups, form.cleaned_data.get("sort") or "")
    # The keys to score against are read for the form only, which only those who may score see.
    can_score = request.user.has_perm("records.add_scoring")
    context.update(
        groups=groups,
        sortable_columns=TITLED_COLUMNS,
        matching_key=run.key() if can_score else None,
        keys=list(CorpusKey.objects.defer("document")[:50]) if can_score else [],
        legend=LEGEND,
        scoring_count=run.scorings.count(),
        can_score=can_score,
    )
    return _render_tab(request, context)


def _figures_tab(
    view: Callable[[HttpRequest, Run, Any], dict[str, Any]],
) -> Callable[..., HttpResponse]:
    """A tab of the run's figures (cost, sessions) in the order the address asks for: `view`
    is given the run and its figures and answers what the tab shows besides them."""

    @require_GET
    @read_access
    @query_form(FiguresSortForm)
    @functools.wraps(view)
    def wrapper(request: HttpRequest, pk: int, form: FiguresSortForm, tab: str) -> HttpResponse:
        run = get_run_or_404(pk)
        context, _ = _run_page(run, tab)
        figures = run_figures(run, scored=True)
        sort_figures(figures, form.cleaned_data.get("sort") or "")
        context.update(figures=figures, **view(request, run, figures))
        return _render_tab(request, context)

    return wrapper


@_figures_tab
def run_cost(request: HttpRequest, run: Run, figures: Any) -> dict[str, Any]:
    return {"chart": charts.cost_chart(figures) if figures.priced_models else None}


@_figures_tab
def run_sessions(request: HttpRequest, run: Run, figures: Any) -> dict[str, Any]:
    """The sessions and provenance tab."""
    return {
        "endings": ENDINGS,
        "providers": list(run.providers.all()),
        "sessions": list(run.sessions.all()),
        "can_delete": request.user.has_perm("records.delete_run"),
    }


@require_GET
@read_access
def run_attempts(request: HttpRequest, pk: int, tab: str = "attempts") -> HttpResponse:
    """The attempts tab: the search narrowed to this run. A filter changed in place asks for
    the list alone (it targets the list, not the tab)."""
    run = get_run_or_404(pk)
    form = RunSearchForm(request.GET, run.pk)
    if not form.is_valid():
        return bad_request(form, request)
    context, usable = _run_page(run, tab)
    context.update(results_context(form, request.GET, ATTEMPTS_PER_PAGE, run.attempt_count))
    column = form.cleaned_data.get("column")
    context.update(
        models=sorted(run.models_seen),
        drilled=form.drilled,
        column_sum=(
            (TITLE_OF[column], column_over(usable, context["search"].attempts, column))
            if column and usable
            else None
        ),
    )
    return _render_tab(
        request, context, {"attempt-list": "records/runs/_attempts.html#attempts", None: "tab"}
    )


def _attempt_export_rows(
    qs: Iterable[Attempt], scored_against: str | None = None, chunk: int = 1000
) -> Iterable[dict[str, Any]]:
    """Each attempt as the exports carry it: its figures, its verdict (when the run is scored)
    and a summary of its calls, read a chunk of attempts at a time (memory stays bounded)."""
    attempts: Iterator[Attempt] = iter(qs)
    while batch := list(islice(attempts, chunk)):
        calls: dict[int, list[str]] = defaultdict(list)
        for aid, tool, outcome in (
            Call.objects.filter(attempt_id__in=[a.pk for a in batch])
            .order_by("attempt_id", "line", "index")
            .values_list("attempt_id", "tool", "outcome")
        ):
            calls[aid].append(f"{tool} {outcome}")
        for a in batch:
            # Annotated when the run is scored (`clean` is also a model method: read the field).
            outcome, clean = a.__dict__.get("outcome"), a.__dict__.get("clean")
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
                "outcome": outcome,
                "clean": clean,
                "scored_against": scored_against if outcome else None,
                "turns": a.turn_count,
                "tries": a.try_count,
                "calls": a.call_count,
                # Each call as "<tool> <outcome>", in the order they were made.
                "calls_summary": "; ".join(calls[a.pk]),
                "input_tokens": a.input_tokens,
                "output_tokens": a.output_tokens,
                "cache_created_tokens": a.cache_created_tokens,
                "cache_read_tokens": a.cache_read_tokens,
                "latency_ms": a.latency_ms,
            }


@require_GET
@read_access
def run_attempts_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    run = get_run_or_404(pk)
    form = RunSearchForm(request.GET, run.pk)
    if not form.is_valid():
        return bad_request(form, request)
    scoring = run.latest_scoring()
    qs = Search(form.query()).ordered().defer("stimulus", "facts")
    if scoring:
        verdicts = Verdict.objects.filter(scoring=scoring, attempt=OuterRef("pk"))
        qs = qs.annotate(
            outcome=Subquery(verdicts.values("outcome")[:1]),
            clean=Subquery(verdicts.values("clean")[:1]),
        )
    return export(
        fmt,
        f"run-{run.pk}-attempts",
        _attempt_export_rows(qs.iterator(chunk_size=1000), scoring.key.digest if scoring else None),
    )


@require_http_methods(["GET", "POST"])
@login_required
@permission_required("records.delete_run", raise_exception=True)
def run_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Delete a run, its shard record and its scores, once confirmed (GET asks, POST deletes);
    the deletion is recorded."""
    run = get_run_or_404(pk)
    if request.method == "GET":
        return render(
            request,
            "records/runs/delete.html",
            {"run": run, "scorings": run.scorings.count(), "sessions": run.sessions.count()},
        )
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
