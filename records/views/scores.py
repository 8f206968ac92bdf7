"""Scoring a run by hand, its score tables as exports, the case matrix, what changed between two
scorings, and the corpus keys."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required, permission_required
from django.core.paginator import Paginator
from django.db.models import Count, Q, QuerySet
from django.http import (
    HttpRequest,
    HttpResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from records.models import (
    CorpusKey,
    Run,
    Verdict,
)
from records.queries.cases import matrix_cases, matrix_cells
from records.queries.scores import flip_summary, score_export_rows
from records.scorer.score import OUTCOMES
from records.scoring.changes import verdict_changes
from records.scoring.markdown import markdown
from records.scoring.publish import publishes
from records.scoring.run import score_run
from records.scoring.tables import case_matrix, cases_on, score_groups
from records.tasks.scoring import rescoring_progress, run_states
from records.views.access import (
    get_run_or_404,
    is_partial,
    query_form,
    read_access,
    render_page,
)
from records.views.exports import export
from records.views.forms import FlipsForm, MatrixForm, ScoreForm

MATRIX_CELLS = 800


@require_POST
@login_required
@permission_required("records.add_scoring", raise_exception=True)
@query_form(ScoreForm)
def run_score(request: HttpRequest, pk: int, form: ScoreForm) -> HttpResponse:
    """Score (again) against a chosen key; a key of another digest is fenced as stale corpus."""
    run = get_run_or_404(pk)
    key = get_object_or_404(CorpusKey, pk=form.cleaned_data["key"])
    score_run(run, key)
    return redirect(reverse("records:run", args=[run.pk]) + "#scores")


@require_GET
@read_access
def run_scores_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    run = get_run_or_404(pk)
    scoring = run.latest_scoring()
    # The Markdown is upstream's: a run whose every row it refuses before scoring is its
    # refusals, although none of its attempts could be scored.
    if not (publishes(scoring) if fmt == "md" else scoring and scoring.verdict_count):
        return HttpResponse("This run has not been scored.", status=404, content_type="text/plain")
    groups = score_groups(scoring)
    if fmt == "md":
        text = markdown(scoring, groups, intervals=request.GET.get("intervals") == "1")
        response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = f'inline; filename="run-{run.pk}-md"'
        return response
    return export(fmt, f"run-{run.pk}-scores", score_export_rows(scoring, groups))


# Each outcome but completed has a mark in a matrix cell (its first four letters) and words in
# the legend (its name spelled out, but for two), built from the scorer's outcomes so that the
# legend names every mark a cell can show.
LEGEND_WORDS = {"gitlab_refused": "GitLab refused", "malformed": "malformed output"}
MATRIX_MARKS = {
    outcome: (outcome[:4], LEGEND_WORDS.get(outcome, outcome.replace("_", " ")))
    for outcome in OUTCOMES
    if outcome != "completed"
}


@require_GET
@read_access
@query_form(MatrixForm)
def run_matrix(request: HttpRequest, pk: int, form: MatrixForm) -> HttpResponse:
    run = get_run_or_404(pk)
    scoring = run.latest_scoring()
    surfaces = sorted(run.surfaces_seen)
    surface = form.cleaned_data.get("surface") or (surfaces[0] if surfaces else "dynamic")
    context: dict[str, Any] = {
        "run": run,
        "scoring": scoring,
        "surface": surface,
        "surfaces": surfaces,
        "marks": {outcome: mark for outcome, (mark, _) in MATRIX_MARKS.items()},
        "mark_legend": list(MATRIX_MARKS.values()),
        "form": form,
    }
    if scoring and scoring.verdict_count:
        flags = matrix_cells(run, scoring, surface)
        all_cases = matrix_cases(
            cases_on(scoring, surface),
            flags,
            form.cleaned_data.get("show") or "",
            form.cleaned_data.get("sort") or "",
        )
        # A page holds about MATRIX_CELLS outcomes, however many models and repeats a run has.
        columns = max(1, scoring.rows.filter(surface=surface).count() * max(1, run.repeat))
        per_page = max(5, min(50, MATRIX_CELLS // columns))
        page = Paginator(all_cases, per_page).get_page(form.cleaned_data.get("page") or 1)
        models, cells = case_matrix(scoring, surface, list(page.object_list))
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
                        "flags": flags.get((case, m)),
                    }
                )
            rows.append((case, row))
        context.update(page=page, models=models, rows=rows, repeat=run.repeat)
    return render(request, "records/scores/matrix.html", context)


@require_GET
@read_access
@query_form(FlipsForm)
def run_flips(request: HttpRequest, pk: int, form: FlipsForm) -> HttpResponse:
    run = get_run_or_404(pk)
    scorings = list(run.scorings.select_related("key").order_by("-created_at", "-id"))
    by_id = {s.pk: s for s in scorings}
    after = by_id.get(form.cleaned_data.get("after") or 0) or (scorings[0] if scorings else None)
    before = by_id.get(form.cleaned_data.get("before") or 0) or (
        scorings[1] if len(scorings) > 1 else None
    )
    changed = verdict_changes(before, after) if before and after else []
    return render(
        request,
        "records/scores/changes.html",
        {
            "run": run,
            "scorings": scorings,
            "before": before,
            "after": after,
            "flips": changed,
            "summary": flip_summary(changed),
        },
    )


def _tally(rows: QuerySet, field: str) -> dict[Any, int]:
    """How many of `rows` carry each value of `field`, counted in the database."""
    return dict(rows.values_list(field).annotate(n=Count("id")).order_by())


@require_GET
@read_access
def keys(request: HttpRequest) -> HttpResponse:
    items = list(CorpusKey.objects.select_related("upload").order_by("-created_at", "-id")[:200])
    digests = [k.digest for k in items]
    runs_per_digest = _tally(Run.objects.filter(corpus_digest__in=digests), "corpus_digest")
    return render(
        request,
        "records/scores/keys.html",
        {"keys": [(k, runs_per_digest.get(k.digest, 0)) for k in items]},
    )


@require_GET
@read_access
def key_detail(request: HttpRequest, pk: int) -> HttpResponse:
    key = get_object_or_404(CorpusKey, pk=pk)
    runs = list(
        Run.objects.filter(Q(corpus_digest=key.digest) | Q(scorings__key=key))
        .distinct()
        .order_by("-started_at")[:100]
    )
    states = run_states(key, runs)
    context: dict[str, Any] = {
        "key": key,
        "runs": [(r, states[r.pk]) for r in runs],
        "progress": rescoring_progress(key),
    }
    if is_partial(request):  # the re-scoring section polling itself: only what it shows
        return render_page(request, "records/scores/key.html", context, partial="rescoring")
    scored_cases = _tally(Verdict.objects.filter(scoring__key=key), "case")
    context |= {
        "cases": [(c, scored_cases.get(c.case_id, 0)) for c in key.cases.all()],
        "catalog": key.document.get("catalog", {}),
        "retired": key.document.get("retired", []),
    }
    return render_page(request, "records/scores/key.html", context, partial="rescoring")
