"""Query-string state of the pages. Invalid input is a 400; every state has a shareable URL."""

from __future__ import annotations

from django import forms

from records.models import ENDINGS
from records.queries.runs import RUN_SORTS
from records.scorer.score import OUTCOMES

SURFACE_CHOICES = [
    ("", "any surface"),
    ("dynamic", "dynamic"),
    ("meta", "meta"),
    ("individual", "individual"),
]
MODE_CHOICES = [
    ("", "any mode"),
    ("default", "default"),
    ("read-only", "read-only"),
    ("safe", "safe"),
]
TIER_CHOICES = [
    ("", "any tier"),
    ("free", "free"),
    ("ce", "ce"),
    ("premium", "premium"),
    ("ultimate", "ultimate"),
]


class RunFilterForm(forms.Form):
    SORTS = RUN_SORTS
    model = forms.CharField(required=False, max_length=300)
    surface = forms.ChoiceField(required=False, choices=SURFACE_CHOICES)
    mode = forms.ChoiceField(required=False, choices=MODE_CHOICES)
    tier = forms.ChoiceField(required=False, choices=TIER_CHOICES)
    commit = forms.CharField(required=False, max_length=100, help_text="prefix")
    corpus_digest = forms.CharField(required=False, max_length=64)
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    sort = forms.ChoiceField(
        required=False,
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
    page = forms.IntegerField(required=False, min_value=1)

    def clean(self) -> dict:
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            raise forms.ValidationError("the 'since' date is after the 'until' date")
        return data


class AttemptFilterForm(forms.Form):
    model = forms.CharField(required=False, max_length=300)
    case = forms.CharField(
        required=False,
        max_length=100,
        widget=forms.TextInput(attrs={"placeholder": "case id", "size": 12}),
    )
    surface = forms.ChoiceField(required=False, choices=SURFACE_CHOICES)
    ended_by = forms.ChoiceField(
        required=False, choices=[("", "any ending")] + [(e, e) for e in ENDINGS]
    )
    outcome = forms.ChoiceField(
        required=False,
        choices=[("", "any outcome")] + [(o, o) for o in OUTCOMES],
    )
    clean = forms.ChoiceField(
        required=False, choices=[("", "clean or not"), ("yes", "clean"), ("no", "not clean")]
    )
    page = forms.IntegerField(required=False, min_value=1)


class MatrixForm(forms.Form):
    surface = forms.ChoiceField(required=False, choices=SURFACE_CHOICES[1:])
    page = forms.IntegerField(required=False, min_value=1)


class FlipsForm(forms.Form):
    before = forms.IntegerField(required=False, min_value=1)
    after = forms.IntegerField(required=False, min_value=1)


class ScoreForm(forms.Form):
    key = forms.IntegerField(min_value=1)


class CompareForm(forms.Form):
    KINDS = [
        ("runs", "runs side by side"),
        ("surfaces", "surfaces side by side"),
        ("models", "models side by side"),
    ]
    kind = forms.ChoiceField(choices=KINDS, required=False)
    baseline = forms.IntegerField(required=False, min_value=1)
    candidate = forms.TypedMultipleChoiceField(coerce=int, required=False, choices=[])
    run = forms.IntegerField(required=False, min_value=1)
    page = forms.IntegerField(required=False, min_value=1)

    def __init__(self, *args, run_choices=(), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["candidate"].choices = run_choices

    def clean(self) -> dict:
        data = super().clean()
        kind = data.get("kind") or "runs"
        data["kind"] = kind
        if (
            kind == "runs"
            and data.get("baseline")
            and data.get("baseline") in (data.get("candidate") or [])
        ):
            raise forms.ValidationError("the baseline is also a candidate")
        return data
