"""`__among`: a column among a long list of ids, as one array on PostgreSQL (records.bulk.among)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from records.models import Attempt, Call
from tests.builders import FIXTURE_SHARD, ingest_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored():
    assert ingest_bytes(("modeleval-fixture.jsonl", FIXTURE_SHARD.read_bytes())).stored
    return list(Attempt.objects.order_by("pk"))


def _ids(qs) -> list[int]:
    return sorted(qs.values_list("pk", flat=True))


def test_among_selects_what_in_selects_by_key_foreign_key_and_text(stored):
    some = [a.pk for a in stored[::2]]
    assert _ids(Attempt.objects.filter(pk__among=some)) == _ids(Attempt.objects.filter(pk__in=some))
    assert _ids(Call.objects.filter(attempt__among=some)) == _ids(
        Call.objects.filter(attempt__in=some)
    )
    cases = sorted({a.case for a in stored[:3]})
    assert _ids(Attempt.objects.filter(case__among=cases)) == _ids(
        Attempt.objects.filter(case__in=cases)
    )
    assert Call.objects.filter(attempt__among=some).exists()
    assert not Attempt.objects.filter(pk__among=[]).exists()
    assert not Attempt.objects.filter(pk__among=[-1]).exists()


def test_among_sends_the_list_as_one_parameter_on_postgresql(stored):
    """The point of it: a chunk of 2,000 ids is one array, not 2,000 placeholders to prepare
    and split (a quarter of a whole-store export on PostgreSQL)."""
    ids = [a.pk for a in stored] + list(range(10**6, 10**6 + 2000))
    with CaptureQueriesContext(connection) as queries:
        assert _ids(Attempt.objects.filter(pk__among=ids)) == [a.pk for a in stored]
    (sql,) = [q["sql"] for q in queries.captured_queries]
    if connection.vendor == "postgresql":
        assert "= ANY(" in sql and " IN (" not in sql
    else:
        assert " IN (" in sql


@pytest.mark.parametrize("value", [Attempt.objects.none(), [1, "1"], [True], 5])
def test_among_takes_a_list_of_whole_numbers_or_of_strings_only(value):
    with pytest.raises(TypeError, match="__among"):
        Attempt.objects.filter(pk__among=value)
