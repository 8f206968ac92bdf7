"""The search takes a bounded number of filters, and its "remove this filter" links are built
from each parameter encoded once (issue 45, B26)."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from records.views.search import MAX_FILTERS

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/search/", "/search.json", "/search.csv"])
def test_a_search_of_400_runs_is_refused_naming_the_cap(client, viewer, path):
    r = client.get(path, {"run": [f"run-{n}" for n in range(400)]})
    assert r.status_code == 400
    text = r.content.decode()
    assert f"at most {MAX_FILTERS} parameters (MAX_FILTERS); 400 given" in text


def test_a_search_at_the_cap_answers_with_one_removal_link_per_filter(client, viewer):
    runs = [f"run-{n}/x" for n in range(MAX_FILTERS - 1)]
    r = client.get("/search/", {"run": runs, "q": "word"})
    assert r.status_code == 200
    form = r.context["form"]
    links = form.narrowed
    assert [(n, v) for n, v, _ in links] == [("q", "word")] + [("run", v) for v in runs]
    for name, value, rest in links:
        left = parse_qsl(rest)
        assert (name, value) not in left and len(left) == MAX_FILTERS - 1
    # Bounded by the cap: the page is not the 4 MB of 400 filters.
    assert len(r.content) < 1_000_000
