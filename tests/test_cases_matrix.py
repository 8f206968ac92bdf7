"""A run's case x model matrix carries the corpus page's flaky flag and marks mixed cells, can be
cut to flaky or mixed cells and sorted, and costs the same queries however many runs came first."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from records.models import Run
from tests.test_cases import ALWAYS, FLAKY, FLIP, NEVER, SPLIT, planted  # noqa: F401

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("planted")]


def _runs() -> list[Run]:
    """The planted runs, oldest first."""
    return list(Run.objects.order_by("started_at", "id"))


def _matrix(client, run, **query):
    answer = client.get(f"/runs/{run.pk}/matrix/", {"surface": "dynamic", **query})
    assert answer.status_code == 200
    return answer


def _cases(answer) -> list[str]:
    return [case for case, _ in answer.context["rows"]]


def test_a_case_whose_repeats_disagree_run_after_run_is_flagged_flaky(client, viewer):
    last = _runs()[-1]
    answer = _matrix(client, last, show="flaky")
    assert _cases(answer) == [FLAKY]
    ((_, cells),) = answer.context["rows"]
    assert all(c["flags"].flaky and c["flags"].mixed for c in cells)
    assert answer.content.decode().count('class="badge warn cell-flaky"') == len(cells) == 2
    # The flag agrees with the corpus page's.
    corpus = client.get("/cases.json", {"digest": last.corpus_digest}).json()
    assert [c["case"] for c in corpus["cases"] if c["flaky"]] == [FLAKY]


def test_a_first_run_has_mixed_cells_but_no_history_to_call_them_flaky(client, viewer):
    first = _runs()[0]
    assert _cases(_matrix(client, first, show="flaky")) == []
    assert "No case on this surface has a cell of that kind" in (
        _matrix(client, first, show="flaky").content.decode()
    )
    assert _cases(_matrix(client, first, show="mixed")) == [FLAKY]
    assert _cases(_matrix(client, first, show="flaky_or_mixed")) == [FLAKY]
    assert len(_cases(_matrix(client, first))) == 5


def test_the_matrix_sorts_by_clean_and_by_flaky_cells(client, viewer):
    last = _runs()[-1]
    lowest = _cases(_matrix(client, last, sort="clean"))
    assert set(lowest[:2]) == {FLIP, NEVER} and set(lowest[2:4]) == {FLAKY, SPLIT}
    assert lowest[-1] == ALWAYS
    assert _cases(_matrix(client, last, sort="-clean"))[0] == ALWAYS
    assert _cases(_matrix(client, last, sort="flaky"))[0] == FLAKY
    assert _cases(_matrix(client, last, sort="-case")) == sorted(lowest, reverse=True)
    # The pager keeps the filter and the order.
    html = _matrix(client, last, sort="-clean").content.decode()
    assert "surface=dynamic&amp;sort=-clean" in html or "sort=-clean&amp;surface=dynamic" in html


def test_an_unknown_filter_or_order_is_a_400(client, viewer):
    for query in ({"show": "bogus"}, {"sort": "steps"}):
        answer = client.get(f"/runs/{_runs()[0].pk}/matrix/", {"surface": "dynamic", **query})
        assert answer.status_code == 400


def test_the_matrix_costs_the_same_queries_after_two_runs_or_eight(client, viewer):
    runs = _runs()
    with CaptureQueriesContext(connection) as second:
        _matrix(client, runs[1], show="flaky_or_mixed")
    with CaptureQueriesContext(connection) as eighth:
        _matrix(client, runs[-1], show="flaky_or_mixed")
    assert len(second) == len(eighth)
