"""A run's Attempts tab is the search narrowed to that run: the same parameters select the same
attempts, the score cells' drill links are conditions of the search, and the tab's own names
(`outcome` for the verdict, `call_outcome` for a call's) are the only difference."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import override_settings

from records.models import Run, ScoreRow

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("store")]

PUBLIC = override_settings(EVALDASH_PUBLIC_READ=True)


def _tab(client, run: Run, **params) -> set[str]:
    """Every attempt the tab lists, page after page."""
    keys: set[str] = set()
    number = 1
    while True:
        asked = {**params, "per_page": 500, "page": number}
        page = client.get(f"/runs/{run.pk}/attempts/", asked)
        assert page.status_code == 200, page.content[:300]
        keys |= {a.key for a in page.context["attempts"]}
        if len(keys) >= page.context["count"] or not page.context["attempts"]:
            assert page.context["count"] == len(keys)
            return keys
        number += 1


def _searched(client, run: Run, **params) -> set[str]:
    """Every attempt `/search.json` lists, following its `next`."""
    body = client.get("/search.json", {**params, "run": run.run_id, "per_page": 500}).json()
    keys = {a["attempt"] for a in body["attempts"]}
    while body["next"]:
        body = client.get(body["next"]).json()
        keys |= {a["attempt"] for a in body["attempts"]}
    assert body["count"] == len(keys)
    return keys


def _busiest() -> Run:
    return Run.objects.order_by("-attempt_count").first()


@PUBLIC
@pytest.mark.parametrize(
    ("tab", "search"),
    [
        ({"q": "default branch"}, {"q": "default branch"}),
        (
            {"q": "project", "tool": "gitlab_find_action"},
            {"q": "project", "tool": "gitlab_find_action"},
        ),
        ({"call_outcome": "refused"}, {"outcome": "refused"}),
        ({"outcome": "failed"}, {"verdict": "failed"}),
        ({"clean": "yes", "ended_by": "completed"}, {"clean": "yes", "ended_by": "completed"}),
        # A yes/no condition's "no" narrows as much as its "yes": the count is not the run's.
        ({"clean": "no"}, {"clean": "no"}),
        ({"observed": "yes", "q": "issue"}, {"observed": "yes", "q": "issue"}),
    ],
)
def test_the_attempts_tab_lists_what_the_search_lists_for_its_run(client, tab, search):
    run = _busiest()
    listed = _tab(client, run, **tab)
    assert listed == _searched(client, run, **search)
    assert listed, "the example selects something"
    assert len(listed) < run.attempt_count, "and not everything"


@PUBLIC
def test_a_score_cells_drill_link_lists_exactly_its_numerator_on_both_pages(client):
    run = _busiest()
    row = ScoreRow.objects.filter(scoring__run=run, figures__clean__gt=0).first()
    drill = {"row": row.row_key, "column": "clean", "hit": "yes"}
    listed = _tab(client, run, **drill)
    assert len(listed) == row.figures["clean"]
    assert _searched(client, run, **drill) == listed
    missed = _tab(client, run, **{**drill, "hit": "no"})
    assert len(missed) == row.figures["attempts"] - row.figures["clean"]


@PUBLIC
def test_the_tab_refuses_what_its_run_already_fixes_and_unknown_orders(client):
    run = _busiest()
    for bad in ({"run": "another"}, {"digest": "abc"}, {"sort": "stimulus"}, {"column": "x"}):
        page = client.get(f"/runs/{run.pk}/attempts/", bad)
        assert page.status_code == 400, bad
    assert client.get("/search.json", {"sort": "stimulus"}).status_code == 400


@PUBLIC
def test_the_tabs_export_reads_the_same_conditions(client):
    run = _busiest()
    listed = _tab(client, run, q="project", call_outcome="ok")
    doc = client.get(f"/runs/{run.pk}/attempts.json", {"q": "project", "call_outcome": "ok"}).json()
    assert {r["attempt"] for r in doc["rows"]} == listed


_LINK = re.compile(r'<a (class="calls" )?href="(/runs/\d+/attempts/\?[^"]+)">([\d,]+)( \w+)?</a>')


@PUBLIC
@pytest.mark.parametrize("tab", ["scores/", "sessions/"])
def test_each_count_of_attempts_or_calls_links_to_a_search_of_exactly_that_many(client, tab):
    run = _busiest()
    html = client.get(f"/runs/{run.pk}/{tab}").content.decode()
    links = _LINK.findall(html)
    assert links, "the tab links its counts"
    kinds = set()
    for calls, href, n, label in links:
        page = client.get(unescape(href))
        assert page.status_code == 200, href
        got = page.context["call_count"] if calls else page.context["count"]
        assert got == int(n.replace(",", "")), (href, label)
        kinds.add(label.strip() or unescape(href).rsplit("&", 1)[-1].split("=")[0])
    if tab == "scores/":
        assert {"find", "invalid_params", "outcome"} <= kinds, kinds


@PUBLIC
def test_counted_and_counted_apart_split_a_runs_attempts(client):
    from records.models import Verdict

    run = _busiest()
    counted, apart = _tab(client, run, counted="yes"), _tab(client, run, counted="no")
    assert counted and apart and not counted & apart
    assert len(counted) + len(apart) == run.attempt_count
    scoring = run.scorings.order_by("-created_at").first()
    assert len(apart) == Verdict.objects.filter(scoring=scoring, counted=False).count()
    assert _searched(client, run, counted="no") == apart
    # The condition rides along when another filter changes: the form carries it.
    page = client.get(f"/runs/{run.pk}/attempts/", {"counted": "yes"}).content.decode()
    assert re.search(r'<input type="hidden" name="counted" value="yes"', page)
