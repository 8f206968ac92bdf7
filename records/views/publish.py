"""Publishing as upstream publishes: the nine managed blocks and the committed record
(`docs/development/testing/model-results.json`) for a run or a chosen set of runs."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from records.models import Run, Scoring
from records.scores.publish import publication_of_runs
from records.scores.run import latest_scoring
from records.views.access import query_form, read_access


class RunIds(forms.MultipleChoiceField):
    """Run ids, as many as the address names (`?run=3&run=7`)."""

    def valid_value(self, value: str) -> bool:
        return str(value).isdigit()


class PublishForm(forms.Form):
    run = RunIds(help_text="the runs to publish, folded in the order given")

    def clean_run(self) -> list[Scoring]:
        ids = [int(v) for v in self.cleaned_data["run"]]
        runs = Run.objects.in_bulk(ids)
        if missing := [str(i) for i in ids if i not in runs]:
            raise forms.ValidationError(f"no run {', '.join(missing)}")
        scorings = []
        for pk in dict.fromkeys(ids):
            scoring = latest_scoring(runs[pk])
            if scoring is None or not scoring.verdict_count:
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
