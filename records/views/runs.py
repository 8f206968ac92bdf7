"""The runs list, one run's page, its attempt list and exports, and deleting a run."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
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
from django.views.decorators.vary import vary_on_headers

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
from records.queries.compare import rate
from records.queries.cost import run_figures, sort_figures
from records.queries.overview import boards as overview_boards
from records.queries.runs import (
    column_over,
    headlines,
    model_suggestions,
    runs_for_list,
)
from records.queries.search import Search
from records.scorer.score import RATIO_COLUMNS
from records.scoring.run import (
    PAGE_SCORING_MAX_ATTEMPTS,
    score_if_unscored,
)
from records.scoring.tables import score_groups
from records.scoring.vocabulary import (
    COLUMN_BY_TITLE,
    COLUMN_TITLES,
    LEGEND,
    TITLE_OF,
    TITLED_COLUMNS,
)
from records.views import charts
from records.views.access import (
    _bad_request,
    _get_run_or_404,
    _partial,
    read_access,
)
from records.views.exports import _export
from records.views.filters import RunFilter
from records.views.forms import ColumnForm, FiguresSortForm, SortForm
from records.views.search import RunSearchForm, results_context

RUNS_PER_PAGE = 25


ATTEMPTS_PER_PAGE = 50


@require_GET
@read_access
@vary_on_headers("HX-Request")
def runs(request: HttpRequest) -> HttpResponse:
    runs = RunFilter(request.GET, queryset=runs_for_list())
    if not runs.is_valid():
        return _bad_request(runs.form, request)
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
        return _bad_request(runs.form, request)
    qs = runs.qs.prefetch_related("summaries", "providers")
    return _export(fmt, "runs", _runs_export_rows(qs.iterator(chunk_size=200)))


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


@require_GET
@read_access
@vary_on_headers("HX-Request")
def run_detail(request: HttpRequest, pk: int, tab: str = "overview") -> HttpResponse:
    run = _get_run_or_404(pk)
    if tab == "overview" and request.GET.keys() & LEGACY_LIST_PARAMS:
        # An attempt-list address of before the tabs: the list is its own tab now.
        return redirect(_tab_url(run, "attempts") + "?" + request.GET.urlencode())
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
    }
    if tab == "attempts":
        response = _attempts_tab(request, run, usable, context)
        if response is not None:
            return response
    elif tab == "overview":
        form = ColumnForm(request.GET)
        if not form.is_valid():
            return _bad_request(form, request)
        column = form.cleaned_data.get("column") or COLUMN_TITLES[0]
        context.update(column=column, column_key=COLUMN_BY_TITLE[column], columns=COLUMN_TITLES)
        if usable:
            context["boards"] = overview_boards(usable, score_groups(usable), column)
        else:
            context["figures"] = run_figures(run)
            context["endings"] = ENDINGS
    elif tab == "scores":
        form = SortForm(request.GET)
        if not form.is_valid():
            return _bad_request(form, request)
        groups = score_groups(usable) if usable else []
        _sort_rows(groups, form.cleaned_data.get("sort") or "")
        context.update(
            groups=groups,
            sortable_columns=TITLED_COLUMNS,
            matching_key=run.key(),
            keys=list(CorpusKey.objects.defer("document")[:50]),
            legend=LEGEND,
            scoring_count=run.scorings.count(),
            can_score=request.user.has_perm("records.add_scoring"),
        )
    elif tab == "cost":
        figures, bad = _sorted_figures(request, run)
        if bad:
            return bad
        context.update(
            figures=figures,
            chart=charts.cost_chart(figures) if figures.priced_models else None,
        )
    else:  # sessions and provenance
        figures, bad = _sorted_figures(request, run)
        if bad:
            return bad
        context.update(
            figures=figures,
            endings=ENDINGS,
            providers=list(run.providers.all()),
            sessions=list(run.sessions.all()),
            can_delete=request.user.has_perm("records.delete_run"),
        )
    template = "records/runs/detail.html#tab" if _partial(request) else "records/runs/detail.html"
    return render(request, template, context)


def _sorted_figures(request: HttpRequest, run: Run) -> tuple[Any, HttpResponse | None]:
    """The run's figures in the order the address asks for, or the 400 for a bad order."""
    form = FiguresSortForm(request.GET)
    if not form.is_valid():
        return None, _bad_request(form, request)
    figures = run_figures(run)
    sort_figures(figures, form.cleaned_data.get("sort") or "")
    return figures, None


def _sort_rows(groups: list[Any], sort: str) -> None:
    """Each group's rows by model (the default) or by a column's rate, rows without a rate last."""
    key, descending = sort.lstrip("-"), sort.startswith("-")
    for g in groups:
        if key in RATIO_COLUMNS:
            rates = {r.row_key: rate(dict(r.columns)[key]) for r in g.rows}
            rated = sorted(
                (r for r in g.rows if rates[r.row_key] is not None),
                key=lambda r: rates[r.row_key],
                reverse=descending,
            )
            g.rows = rated + [r for r in g.rows if rates[r.row_key] is None]
        elif key == "model":
            g.rows.sort(key=lambda r: r.model, reverse=descending)


def _attempts_tab(
    request: HttpRequest, run: Run, scoring: Any, context: dict[str, Any]
) -> HttpResponse | None:
    """Fill the attempts tab's context (the search narrowed to this run); an answer of its own
    for a bad filter or for the list alone (a filter changed in place)."""
    form = RunSearchForm(request.GET, run.pk)
    if not form.is_valid():
        return _bad_request(form, request)
    context.update(results_context(form, request.GET, ATTEMPTS_PER_PAGE, run.attempt_count))
    column = form.cleaned_data.get("column")
    context.update(
        models=sorted(run.models_seen),
        drilled=form.drilled,
        column_sum=(
            (TITLE_OF[column], column_over(scoring, context["search"].attempts, column))
            if column and scoring
            else None
        ),
    )
    if _partial(request) and request.htmx.target == "attempt-list":
        return render(request, "records/runs/_attempts.html#attempts", context)
    return None


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
    run = _get_run_or_404(pk)
    form = RunSearchForm(request.GET, run.pk)
    if not form.is_valid():
        return _bad_request(form, request)
    scoring = run.latest_scoring()
    qs = Search(form.query()).ordered().defer("stimulus", "facts")
    if scoring:
        verdicts = Verdict.objects.filter(scoring=scoring, attempt=OuterRef("pk"))
        qs = qs.annotate(
            outcome=Subquery(verdicts.values("outcome")[:1]),
            clean=Subquery(verdicts.values("clean")[:1]),
        )
    return _export(
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
    run = _get_run_or_404(pk)
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
