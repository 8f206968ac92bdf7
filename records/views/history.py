"""A row's history over the runs of one corpus digest."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from records.models import Run
from records.queries.history import RUNS_SHOWN, history, rows_of_digest
from records.scoring.vocabulary import COLUMN_TITLES
from records.views import charts
from records.views.access import query_form, read_access
from records.views.forms import HistoryForm


@require_GET
@read_access
@query_form(HistoryForm)
def row_history(request: HttpRequest, form: HistoryForm) -> HttpResponse:
    data = form.cleaned_data
    digest, column = data.get("digest"), data.get("column") or COLUMN_TITLES[0]
    context: dict[str, Any] = {
        "form": form,
        "columns": COLUMN_TITLES,
        "column": column,
        "runs_shown": RUNS_SHOWN,
    }
    if not digest:
        context["digests"] = (
            Run.objects.exclude(corpus_digest="")
            .values("corpus_digest")
            .annotate(runs=Count("id"), last=Max("started_at"))
            .order_by("-last")[:100]
        )
    else:
        context["rows"] = rows_of_digest(digest)
        if data.get("model") and data.get("surface"):
            h = history(digest, data["model"], data["surface"], data.get("mode") or None, column)
            context.update(h=h, chart=charts.history_chart(h) if h.points else None)
    return render(request, "records/history/page.html", context)
