"""Publishing as upstream publishes: the nine managed blocks and the committed record
(`docs/development/testing/model-results.json`) for a run or a chosen set of runs."""

from __future__ import annotations

from django import forms
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from records.formats.model_results import COLUMN_KEYS
from records.formats.numbers import NotWhole, parse_whole
from records.models import PublishedRecord, Run, Scoring
from records.scoring.publish import publication_of_runs, publishes, stored_rows_like
from records.scoring.vocabulary import COLUMN_TITLES
from records.views.access import query_form, read_access
from records.views.forms import PageForm


class RunIds(forms.MultipleChoiceField):
    """Run ids, as many as the address names (`?run=3&run=7`)."""

    default_error_messages = {
        "invalid_choice": "%(value)s is not a run number: give whole numbers in the digits 0-9",
    }

    def valid_value(self, value: str) -> bool:
        try:
            parse_whole(str(value), minimum=1)
        except NotWhole:
            return False
        return True


class PublishForm(forms.Form):
    run = RunIds(help_text="the runs to publish, folded in the order given")

    def clean_run(self) -> list[Scoring]:
        ids = [parse_whole(v) for v in self.cleaned_data["run"]]
        runs = Run.objects.in_bulk(ids)
        if missing := [str(i) for i in ids if i not in runs]:
            raise forms.ValidationError(f"no run {', '.join(missing)}")
        scorings = []
        for pk in dict.fromkeys(ids):
            scoring = runs[pk].latest_scoring()
            if not publishes(scoring):
                raise forms.ValidationError(f"run {pk} has not been scored")
            scorings.append(scoring)
        return scorings


@require_GET
@read_access
@query_form(PublishForm)
def publish_blocks(request: HttpRequest, form: PublishForm) -> HttpResponse:
    """The nine managed blocks, with their markers, ready to paste between upstream's; what
    upstream would not publish follows them, as its command reports it."""
    publication = publication_of_runs(form.cleaned_data["run"])
    text = publication.blocks()
    if report := publication.report():
        text += "\n" + "\n".join(report) + "\n"
    response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = 'inline; filename="model-results-blocks.md"'
    return response


@require_GET
@read_access
@query_form(PublishForm)
def publish_record(request: HttpRequest, form: PublishForm) -> HttpResponse:
    """The committed record for the chosen runs, as `gen_model_results -shards` writes it."""
    publication = publication_of_runs(form.cleaned_data["run"])
    response = HttpResponse(publication.record(), content_type="application/json")
    response["Content-Disposition"] = 'attachment; filename="model-results.json"'
    return response


RECORD_ROWS_PER_PAGE = 50
RUNS_PER_ROW = 10


@require_GET
@read_access
def published_records(request: HttpRequest) -> HttpResponse:
    """Every uploaded model results record."""
    records = PublishedRecord.objects.select_related("upload")[:200]
    return render(request, "records/publish/records.html", {"records": records})


@require_GET
@read_access
@query_form(PageForm)
def published_record(request: HttpRequest, pk: int, form: PageForm) -> HttpResponse:
    """A record's published rows, each with its provenance and cases, beside the stored runs
    whose row has the same key."""
    record = get_object_or_404(PublishedRecord, pk=pk)
    page = Paginator(record.rows.all(), RECORD_ROWS_PER_PAGE).get_page(form.cleaned_data["page"])
    rows = list(page)
    matches = stored_rows_like([r.row_key for r in rows], RUNS_PER_ROW)
    entries = [(r, _columns(r.columns), matches.get(r.row_key, [])) for r in rows]
    context = {
        "record": record,
        "page": page,
        "entries": entries,
        "titles": COLUMN_TITLES,
        "per_row": RUNS_PER_ROW,
    }
    return render(request, "records/publish/record.html", context)


def _columns(columns: dict) -> list[tuple[int, int]]:
    return [(columns[c]["numerator"], columns[c]["denominator"]) for c in COLUMN_KEYS]
