"""The runs list's and a run's attempt list's filters, from the query string (django-filter).

Invalid input is a 400 (the views check `is_valid`); every state has a URL that can be shared.
"""

from __future__ import annotations

from typing import Any

import django_filters as df
from django import forms
from django.db.models import Exists, F, OuterRef, Q, QuerySet

from records.models import ENDINGS, SurfaceSummary, Verdict
from records.queries.runs import RUN_SORTS
from records.scorer.score import OUTCOMES
from records.scores.tables import TITLED_COLUMNS
from records.views.forms import MODE_CHOICES, SURFACE_CHOICES, TIER_CHOICES


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

    field_class = forms.IntegerField


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
        choices=[
            ("-started", "newest first"),
            ("started", "oldest first"),
            ("-attempts", "most attempts"),
            ("attempts", "fewest attempts"),
            ("-tokens", "most tokens"),
            ("tokens", "fewest tokens"),
            ("commit", "commit"),
        ],
    )

    page = _PageFilter(method=_unset, min_value=1)

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


# What a score cell's drill links select, per column: the verdicts behind its numerator, and
# the ones that missed it (the counted attempts that are not behind it; for a column of steps,
# the attempts with a step that missed). Summed over the attempts listed, the column then reads
# the cell's numerator, or what the numerator lacks of the denominator.
HITS: dict[str, tuple[Q, Q]] = {
    "clean": (Q(clean=True), Q(counted=True, clean=False)),
    "unaided": (Q(unaided=True), Q(counted=True, unaided=False)),
    "completion": (Q(outcome="completed"), Q(counted=True) & ~Q(outcome="completed")),
    **{
        column: (Q(**{f"{n}__gt": 0}), Q(**{f"{n}__lt": F(d)}))
        for column, n, d in (
            ("reached", "reached_n", "reached_d"),
            ("accepted_first_time", "aft_n", "aft_d"),
            ("argument_fidelity", "fidelity_n", "fidelity_d"),
            ("confirmation", "confirmation_n", "confirmation_d"),
        )
    },
}


class AttemptFilter(df.FilterSet):
    """A run's attempts. The score filters (a row of the score table, a column's hits or
    misses, the outcome, clean) read the verdicts of `scoring`, all in one subquery."""

    model = df.CharFilter(max_length=300)
    case = df.CharFilter(
        max_length=100, widget=forms.TextInput(attrs={"placeholder": "case id", "size": 12})
    )
    surface = df.ChoiceFilter(
        field_name="effective_surface", choices=SURFACE_CHOICES, empty_label="any surface"
    )
    ended_by = df.ChoiceFilter(choices=[(e, e) for e in ENDINGS], empty_label="any ending")
    outcome = df.ChoiceFilter(
        choices=[(o, o) for o in OUTCOMES], method=_unset, empty_label="any outcome"
    )
    clean = df.ChoiceFilter(
        choices=[("yes", "clean"), ("no", "not clean")],
        method=_unset,
        empty_label="clean or not",
    )
    row = df.CharFilter(max_length=2000, method=_unset, widget=forms.HiddenInput)
    column = df.ChoiceFilter(
        choices=TITLED_COLUMNS,
        method=_unset,
        empty_label="any column",
        widget=forms.HiddenInput,
    )
    hit = df.ChoiceFilter(
        choices=[("yes", "behind the numerator"), ("no", "missed")],
        method=_unset,
        widget=forms.HiddenInput,
    )

    sort = df.OrderingFilter(
        fields=(
            ("line", "line"),
            ("case", "case"),
            ("model", "model"),
            ("effective_surface", "surface"),
            ("repeat", "repeat"),
            ("ended_by", "ended_by"),
            ("turn_count", "turns"),
            ("try_count", "tries"),
            ("call_count", "calls"),
            ("input_tokens", "input_tokens"),
        ),
    )
    page = _PageFilter(method=_unset, min_value=1)

    class Meta:
        fields: list[str] = []

    def __init__(self, *args: Any, scoring: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scoring = scoring

    def verdict_condition(self) -> Q | None:
        """What the chosen score filters ask of an attempt's verdict; None when none is set."""
        data = self.form.cleaned_data
        parts = []
        if data.get("outcome"):
            parts.append(Q(outcome=data["outcome"]))
        if data.get("clean"):
            parts.append(Q(clean=data["clean"] == "yes"))
        if data.get("row"):
            parts.append(Q(row_key=data["row"]))
        if data.get("column") and data.get("hit"):
            hit, miss = HITS[data["column"]]
            parts.append(hit if data["hit"] == "yes" else miss)
        if not parts:
            return None
        condition = parts[0]
        for part in parts[1:]:
            condition &= part
        return condition

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        qs = super().filter_queryset(queryset)
        if self.form.cleaned_data.get("sort"):
            qs = qs.order_by(*qs.query.order_by, "line")  # ties in file order: pages stay stable
        condition = self.verdict_condition()
        if condition is None or self.scoring is None:
            return qs  # nothing scored: the score filters have nothing to read
        verdicts = Verdict.objects.filter(scoring=self.scoring, attempt=OuterRef("pk"))
        return qs.filter(Exists(verdicts.filter(condition)))

    @property
    def narrowed(self) -> bool:
        """Whether any filter is set: the whole list's size was stored at ingest."""
        data = self.form.cleaned_data
        return any(data.get(name) for name in self.filters if name not in ("page", "sort"))
