"""The runs list's filters, from the query string (django-filter).

Invalid input is a 400 (the views check `is_valid`); every state has a URL that can be shared.
"""

from __future__ import annotations

from typing import Any

import django_filters as df
from django import forms
from django.db.models import Exists, OuterRef, QuerySet

from records.formats.numbers import MAX_PAGE
from records.models import SurfaceSummary
from records.queries.runs import RUN_SORTS
from records.views.forms import MODE_CHOICES, SURFACE_CHOICES, TIER_CHOICES, WholeNumberField

# The runs list's orders (records.queries.runs.RUN_SORTS) as the form names them.
SORT_LABELS = {
    "-started": "newest first",
    "started": "oldest first",
    "-attempts": "most attempts",
    "attempts": "fewest attempts",
    "-tokens": "most tokens",
    "tokens": "fewest tokens",
    "commit": "commit",
}


class _RunForm(forms.Form):
    def clean(self) -> dict[str, Any]:
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            raise forms.ValidationError("the 'since' date is after the 'until' date")
        return data


def _unset(qs: QuerySet, name: str, value: Any) -> QuerySet:
    return qs  # read in filter_queryset, or by the view (the page)


class _PageFilter(df.Filter):
    """The page number: validated with the filters, read by the view's paginator."""

    field_class = WholeNumberField


class RunFilter(df.FilterSet):
    # Model, surface and mode must hold of one summary row together, not of three apart.
    model = df.CharFilter(method=_unset, max_length=300)
    surface = df.ChoiceFilter(choices=SURFACE_CHOICES, method=_unset, empty_label="any surface")
    mode = df.ChoiceFilter(choices=MODE_CHOICES, method=_unset, empty_label="any mode")
    tier = df.ChoiceFilter(choices=TIER_CHOICES, empty_label="any tier")
    commit = df.CharFilter(lookup_expr="startswith", max_length=100, help_text="prefix")
    corpus_digest = df.CharFilter(lookup_expr="startswith", max_length=64, help_text="prefix")
    since = df.DateFilter(
        field_name="started_at",
        lookup_expr="date__gte",
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    until = df.DateFilter(
        field_name="started_at",
        lookup_expr="date__lte",
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    sort = df.ChoiceFilter(
        method=_unset,
        empty_label=None,
        choices=list(SORT_LABELS.items()),
    )

    page = _PageFilter(method=_unset, min_value=1, max_value=MAX_PAGE)

    class Meta:
        form = _RunForm
        fields: list[str] = []

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        data = self.form.cleaned_data
        qs = super().filter_queryset(queryset)
        summary = {name: data[name] for name in ("surface", "mode") if data.get(name)}
        if data.get("model"):
            summary["model__icontains"] = data["model"]  # any part of the spec
        if summary:
            qs = qs.filter(Exists(SurfaceSummary.objects.filter(run=OuterRef("pk"), **summary)))
        return qs.order_by(*RUN_SORTS[data.get("sort") or "-started"])
