"""Query-string state of the pages. Invalid input is a 400; every state has a shareable URL."""

from __future__ import annotations

from collections.abc import Iterable

from django import forms

from records.formats.numbers import MAX_PAGE, MAX_WHOLE, NotWhole, parse_whole
from records.formats.shard import MODES, SURFACES, TIERS
from records.queries.cost import ROW_SORTS
from records.scorer.score import RATIO_COLUMNS
from records.scoring.vocabulary import COLUMN_TITLES

SURFACE_CHOICES = [(s, s) for s in SURFACES]
MODE_CHOICES = [(m, m) for m in MODES]
TIER_CHOICES = [(t, t) for t in TIERS]
COLUMN_CHOICES = [(t, t) for t in COLUMN_TITLES]


class WholeNumberField(forms.IntegerField):
    """An integer parameter, read by the one parser (`parse_whole`: ASCII digits, bounded to
    what both databases hold); anything else is the form's error, so a 400."""

    def __init__(self, *, min_value: int = 0, max_value: int = MAX_WHOLE, **kwargs) -> None:
        super().__init__(min_value=min_value, max_value=max_value, **kwargs)

    def to_python(self, value):
        if value in self.empty_values:
            return None
        try:
            return parse_whole(str(value), minimum=self.min_value, maximum=self.max_value)
        except NotWhole as exc:
            raise forms.ValidationError(str(exc), code="invalid") from None


def page_field(**kwargs) -> WholeNumberField:
    """A page number (1 up to MAX_PAGE)."""
    return WholeNumberField(required=False, min_value=1, max_value=MAX_PAGE, **kwargs)


def whole(value: str, *, minimum: int = 0, maximum: int = MAX_WHOLE) -> int:
    """`parse_whole` as a choice field's coercion."""
    return parse_whole(value, minimum=minimum, maximum=maximum)


def _sorts(keys: Iterable[str]) -> list[tuple[str, str]]:
    """A table's orders through the address: each key, `-` before it for the highest first."""
    return [("", "")] + [(f"{sign}{k}", f"{sign}{k}") for k in keys for sign in ("", "-")]


class MatrixForm(forms.Form):
    surface = forms.ChoiceField(required=False, choices=SURFACE_CHOICES)
    show = forms.ChoiceField(
        required=False,
        # Each of the matrix's filters (records.queries.cases.MATRIX_SHOWS) named for its cells.
        choices={"": "every case"}
        | {
            show: f"{show.replace('_', ' ')} cells" for show in ("flaky_or_mixed", "flaky", "mixed")
        },
    )
    sort = forms.ChoiceField(
        required=False,
        choices={
            "": "case",
            "-case": "case, last first",
            "clean": "Clean, lowest first",
            "-clean": "Clean, highest first",
            "flaky": "most flaky cells first",
            "mixed": "most mixed cells first",
        },
    )
    page = page_field()


class PageForm(forms.Form):
    page = page_field()


class TurnItemsForm(forms.Form):
    start = WholeNumberField(min_value=0)


class FlipsForm(forms.Form):
    before = WholeNumberField(required=False, min_value=1)
    after = WholeNumberField(required=False, min_value=1)


class ScoreForm(forms.Form):
    key = WholeNumberField(min_value=1)


class CompareForm(forms.Form):
    KINDS = [
        ("runs", "runs side by side"),
        ("surfaces", "surfaces side by side"),
        ("models", "models side by side"),
    ]
    kind = forms.ChoiceField(choices=KINDS, required=False)
    baseline = WholeNumberField(required=False, min_value=1)
    candidate = forms.TypedMultipleChoiceField(coerce=whole, required=False, choices=[])
    run = WholeNumberField(required=False, min_value=1)
    page = page_field()
    # Runs: the columns decided, repeated as the gate takes them (none named: Clean), every
    # row on every one of them read as one family. Models: the first ranks them.
    column = forms.MultipleChoiceField(required=False, choices=COLUMN_CHOICES)
    # The surfaces comparison: which surfaces (none named: every one), and which the others
    # are measured against (none named: the first in the usual order).
    surface = forms.MultipleChoiceField(required=False, choices=SURFACE_CHOICES)
    baseline_surface = forms.ChoiceField(required=False, choices=SURFACE_CHOICES)

    def __init__(self, *args, run_choices=(), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["candidate"].choices = run_choices

    def clean(self) -> dict:
        data = super().clean()
        kind = data.get("kind") or "runs"
        data["kind"] = kind
        data["column"] = list(dict.fromkeys(data.get("column") or [COLUMN_TITLES[0]]))
        if (
            kind == "runs"
            and data.get("baseline")
            and data.get("baseline") in (data.get("candidate") or [])
        ):
            raise forms.ValidationError("the baseline is also a candidate")
        chosen, against = data.get("surface") or [], data.get("baseline_surface")
        if against and chosen and against not in chosen:
            self.add_error("baseline_surface", "the baseline surface is not one of those chosen")
        return data


class ProgressForm(forms.Form):
    """An upload's state as polled: `recent` by the upload page, whose list of recent uploads
    comes back with the finished state."""

    recent = forms.BooleanField(required=False)


class HistoryForm(forms.Form):
    digest = forms.CharField(required=False, max_length=64)
    model = forms.CharField(required=False, max_length=500)
    surface = forms.ChoiceField(required=False, choices=SURFACE_CHOICES)
    mode = forms.CharField(required=False, max_length=100)
    column = forms.ChoiceField(required=False, choices=COLUMN_CHOICES)


class ColumnForm(forms.Form):
    """The score a page ranks by, as titled on the pages."""

    column = forms.ChoiceField(required=False, choices=COLUMN_CHOICES)


class SortForm(forms.Form):
    """A score table's order: a column (as named in exports), `-` before it for highest first."""

    sort = forms.ChoiceField(required=False, choices=_sorts(("model", *RATIO_COLUMNS)))


class CaseCompareForm(forms.Form):
    """One case of a compared row, in two runs."""

    baseline = WholeNumberField(min_value=1)
    candidate = WholeNumberField(min_value=1)
    a = forms.CharField(max_length=2000)
    b = forms.CharField(max_length=2000)
    case = forms.CharField(max_length=500)


class RowCasesForm(forms.Form):
    """One page of a compared row's changed cases."""

    baseline = WholeNumberField(min_value=1)
    candidate = WholeNumberField(min_value=1)
    a = forms.CharField(max_length=2000)
    b = forms.CharField(max_length=2000)
    page = page_field()


class FiguresSortForm(forms.Form):
    """The order of a table of a run's figures: a column, `-` before it for the highest first."""

    sort = forms.ChoiceField(required=False, choices=_sorts(ROW_SORTS))
