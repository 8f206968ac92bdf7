"""`__among`: a column among a long list of ids as one parameter (records.bulk.among)."""

from __future__ import annotations

import pytest
from django.db.models import Q

from records.models import Attempt, Call, Verdict
from tests.builders import demo_key, ingest_bytes, synth_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored():
    report = ingest_bytes(("corpus-key.json", demo_key()), ("modeleval-synth.jsonl", synth_run()))
    assert report.ok
    attempts = list(Attempt.objects.order_by("pk"))
    assert len(attempts) > 20
    return attempts


def _ids(qs) -> list[int]:
    return sorted(qs.values_list("pk", flat=True))


def test_among_selects_what_in_selects(stored):
    some = [a.pk for a in stored[::3]]
    cases = sorted({a.case for a in stored[:5]})
    for model, among, values in (
        (Attempt, "pk", some),
        (Call, "attempt", some),  # a foreign key
        (Verdict, "attempt", some),  # a foreign key with no constraint
        (Attempt, "case", cases),  # text
        (Attempt, "pk", []),
        (Attempt, "pk", [2**31 + 5, 2**40]),  # beyond int4, found nowhere
    ):
        chosen = Q(**{f"{among}__among": values})
        listed = Q(**{f"{among}__in": values})
        assert _ids(model.objects.filter(chosen)) == _ids(model.objects.filter(listed))
        assert _ids(model.objects.exclude(chosen)) == _ids(model.objects.exclude(listed))
    assert Call.objects.filter(attempt__among=some).exists()
    assert Attempt.objects.filter(case__among=cases).count() >= len(cases)


def test_among_is_one_parameter_however_long_the_list(stored):
    """The point of it: a chunk of 2,000 ids is one array, not 2,000 placeholders to prepare
    and split (a quarter of a whole-store export on PostgreSQL), and no list meets SQLite's
    limit on a statement's parameters (32,766 in its own builds)."""
    ids = [a.pk for a in stored] + list(range(10**7, 10**7 + 40_000))
    chosen = Attempt.objects.filter(pk__among=ids)
    _, params = chosen.query.sql_with_params()
    assert len(params) == 1
    assert _ids(chosen) == [a.pk for a in stored]


@pytest.mark.parametrize("value", [Attempt.objects.none(), [1, "1"], [True], [None], 5])
def test_among_takes_a_list_of_whole_numbers_or_of_strings_only(value):
    with pytest.raises(TypeError, match="__among"):
        Attempt.objects.filter(pk__among=value)
