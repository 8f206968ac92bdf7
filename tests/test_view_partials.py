"""Each tab of a run's page is a view of its own at its address, and one helper decides what an
htmx request gets: the page's partial (varying on HX-Request), never the whole page."""

from __future__ import annotations

import pytest
from django.test import RequestFactory
from django.urls import resolve

from records.views import runs
from records.views.access import partial_template
from tests.builders import FIXTURE_SHARD
from tests.test_views import store

pytestmark = pytest.mark.django_db

TABS = {
    "": runs.run_overview,
    "scores/": runs.run_scores,
    "cost/": runs.run_cost,
    "attempts/": runs.run_attempts,
    "sessions/": runs.run_sessions,
}


@pytest.fixture
def run(db):
    return store(FIXTURE_SHARD.read_bytes(), FIXTURE_SHARD.name)


def test_each_tab_is_its_own_view_at_the_address_it_had(run):
    for tab, view in TABS.items():
        assert resolve(f"/runs/{run.pk}/{tab}").func is view


@pytest.mark.parametrize("tab", list(TABS))
def test_a_tab_is_the_whole_page_or_for_htmx_the_tab_alone(client, viewer, run, tab):
    url = f"/runs/{run.pk}/{tab}"
    page = client.get(url)
    assert page.status_code == 200 and "<html" in page.content.decode()
    part = client.get(url, headers={"HX-Request": "true", "HX-Target": "tab"})
    body = part.content.decode()
    assert body.lstrip().startswith(
        f'<section id="tab" data-tab="{tab.rstrip("/") or "overview"}">'
    )
    assert "<html" not in body
    for r in (page, part):
        assert "HX-Request" in r["Vary"]
    # A history restore asks for the whole page again.
    restore = client.get(url, headers={"HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert "<html" in restore.content.decode()


@pytest.mark.parametrize("tab", ["", "scores/", "cost/", "sessions/"])
def test_a_bad_query_on_a_tab_is_a_400_naming_the_field(client, viewer, run, tab):
    r = client.get(f"/runs/{run.pk}/{tab}?sort=nonsense&column=nonsense")
    assert r.status_code == 400 and ("sort" in r["X-Error"] or "column" in r["X-Error"])


def test_a_missing_run_is_a_404_on_every_tab(client, viewer, run):
    for tab in TABS:
        assert client.get(f"/runs/{run.pk + 1}/{tab}").status_code == 404


def test_the_partial_is_chosen_by_name_by_template_or_by_target():
    factory = RequestFactory()

    def request(**headers):
        r = factory.get("/", headers=headers)
        from django_htmx.middleware import HtmxDetails

        r.htmx = HtmxDetails(r)
        return r

    page, htmx = request(), request(HX_Request="true", HX_Target="trace")
    assert partial_template(page, "p.html", "tab") == "p.html"
    assert partial_template(htmx, "p.html", "tab") == "p.html#tab"
    assert partial_template(htmx, "p.html", "x/_part.html") == "x/_part.html"
    assert partial_template(htmx, "p.html", {"trace": "x/_t.html"}) == "x/_t.html"
    assert partial_template(htmx, "p.html", {"list": "x/_l.html"}) == "p.html"
    assert partial_template(htmx, "p.html", {"list": "x/_l.html", None: "tab"}) == "p.html#tab"
