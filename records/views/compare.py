"""Runs, surfaces and models side by side, and the comparison's exports."""

from __future__ import annotations

from typing import Any

from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
)
from django.shortcuts import render
from django.views.decorators.http import require_GET

from records import evidence
from records.models import (
    Run,
)
from records.queries import compare as cmp
from records.queries.compare_export import comparison_markdown, comparison_rows
from records.queries.decisions import decide
from records.scoring.tables import ranking_groups, score_groups
from records.scoring.vocabulary import COLUMN_BY_TITLE, COLUMN_TITLES
from records.views import charts
from records.views.access import (
    bad_request,
    get_run_or_404,
    query_form,
    read_access,
    render_page,
)
from records.views.exports import export
from records.views.forms import CaseCompareForm, CompareForm, RowCasesForm


def row_changed(c: cmp.RowComparison) -> bool:
    """Whether a compared row shows a change: a side missing or refused, or the comparison's
    own reading beyond noise (a row not tested case by case: a case that flipped). A row whose
    flips are within noise folds away on the page; its counts stay in the summary table."""
    if c.refused or c.baseline is None or c.candidate is None:
        return True
    if not c.evidence:
        return bool(c.regressions or c.fixes)
    return c.evidence != evidence.NOISE


@require_GET
@read_access
def compare(request: HttpRequest) -> HttpResponse:

    run_choices = list(Run.objects.order_by("-started_at", "-id").values_list("pk", "run_id")[:200])
    form = CompareForm(request.GET or None, run_choices=run_choices)
    context: dict[str, Any] = {
        "form": form,
        "run_choices": run_choices,
        "column_titles_all": COLUMN_TITLES,
    }
    if request.GET and not form.is_valid():
        return bad_request(form, request)
    data = form.cleaned_data if request.GET else {"kind": "runs"}
    context["kind"] = data["kind"]
    if data["kind"] == "runs" and data.get("baseline") and data.get("candidate"):
        baseline = get_run_or_404(data["baseline"])
        page_no = data.get("page") or 1
        comparisons = []
        pages_needed = 1
        titles = data["column"]
        # Every row on every named column, read as one family: as the gate decides them.
        columns = tuple(COLUMN_BY_TITLE[t] for t in titles)
        for pk in data["candidate"]:
            candidate = get_run_or_404(pk)
            decision = decide(baseline.pk, candidate.pk, columns)
            rows, problem = cmp.compare_runs(baseline, candidate, page=page_no, decision=decision)
            pages_needed = max(pages_needed, -(-len(rows) // cmp.ROWS_PER_PAGE))
            start = (page_no - 1) * cmp.ROWS_PER_PAGE
            # On the page (whose rows alone carry their tests): the changed rows first, in the
            # comparison's order, and the unchanged after them, folded away.
            shown = sorted(
                rows[start : start + cmp.ROWS_PER_PAGE], key=lambda c: not row_changed(c)
            )
            changed = sum(row_changed(c) for c in shown)
            comparisons.append((candidate, shown, problem, decision, changed, len(shown) - changed))
        context.update(
            decided_column=", ".join(titles),
            baseline=baseline,
            column_titles=COLUMN_TITLES,
            comparisons=comparisons,
            page_no=page_no,
            pages_needed=pages_needed,
        )
    elif data["kind"] in ("surfaces", "models") and data.get("run"):
        run = get_run_or_404(data["run"])
        context["run"] = run
        if data["kind"] == "surfaces":
            context["surface_groups"] = cmp.compare_surfaces(
                run, data.get("surface") or (), data.get("baseline_surface") or ""
            )
        else:
            scoring = run.latest_scoring()
            groups = (
                ranking_groups(score_groups(scoring)) if scoring and scoring.verdict_count else []
            )
            column = data["column"][0]
            rankings = cmp.rank_models(scoring, groups, column) if groups else []
            context.update(
                groups=[
                    cmp.RankedGroup(
                        g,
                        charts.grouped_bars(g),
                        f"bars-{i}",
                        r,
                        charts.ranked_intervals(r),
                        f"ranked-{i}",
                    )
                    for i, (g, r) in enumerate(zip(groups, rankings, strict=True))
                ],
                column=column,
                columns=COLUMN_TITLES,
                scoring=scoring,
                scatter=charts.cost_scatter(groups, column) if groups else None,
            )
    return render_page(request, "records/compare/page.html", context, partial="result")


@require_GET
@read_access
def compare_export(request: HttpRequest, fmt: str) -> HttpResponse:

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
    baseline = get_run_or_404(form.cleaned_data["baseline"])
    candidates = [get_run_or_404(pk) for pk in form.cleaned_data["candidate"]]
    rows = comparison_rows(
        baseline, candidates, cases=fmt == "json", titles=form.cleaned_data["column"]
    )
    if fmt == "md":
        text = comparison_markdown(baseline, candidates, list(rows))
        return HttpResponse(text, content_type="text/markdown; charset=utf-8")
    return export(fmt, "comparison", rows)


@require_GET
@read_access
@query_form(CaseCompareForm)
def compare_case(request: HttpRequest, form: CaseCompareForm) -> HttpResponse:
    """One case of a compared row: the two runs' attempts side by side, call by call."""
    data = form.cleaned_data
    baseline, candidate = get_run_or_404(data["baseline"]), get_run_or_404(data["candidate"])
    sa, sb = baseline.latest_scoring(), candidate.latest_scoring()
    if sa is None or sb is None:
        raise Http404("both runs must be scored")
    pairs = cmp.case_side_by_side(sa, sb, data["a"], data["b"], data["case"])
    return render(
        request,
        "records/compare/case.html",
        {
            "baseline": baseline,
            "candidate": candidate,
            "case": data["case"],
            "identity": cmp.row_label(sb, data["b"]),
            "pairs": pairs,
        },
    )


@require_GET
@read_access
@query_form(RowCasesForm)
def compare_cases(request: HttpRequest, form: RowCasesForm) -> HttpResponse:
    """A page of one compared row's changed cases, past the first the comparison shows: a
    fragment for htmx (it replaces the list in place), else a page of its own."""
    data = form.cleaned_data
    baseline, candidate = get_run_or_404(data["baseline"]), get_run_or_404(data["candidate"])
    sa, sb = baseline.latest_scoring(), candidate.latest_scoring()
    if sa is None or sb is None:
        raise Http404("both runs must be scored")
    context = {
        "baseline": baseline,
        "candidate": candidate,
        "a": data["a"],
        "b": data["b"],
        "identity": cmp.row_label(sb, data["b"]),
        "cases": cmp.row_cases(sa, sb, data["a"], data["b"], data.get("page") or 1),
    }
    return render_page(
        request,
        "records/compare/cases.html",
        context,
        partial="records/compare/_case_changes.html",
    )
