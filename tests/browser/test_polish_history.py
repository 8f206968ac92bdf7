"""Back and Forward through pages htmx changed in place: each step shows the page its address
names, nothing left dimmed or "Loading", the tab highlighted the one shown."""

from __future__ import annotations

import pytest

from tests.browser import shared_demo
from tests.browser.conftest import settled
from tests.browser.shared_demo import run_pk

pytestmark = [pytest.mark.browser, pytest.mark.django_db]
site, pg = shared_demo.site, shared_demo.pg
RUN = "run-2026-11-23-f00dfa"
TABS = [
    ("overview", "Overview", ""),
    ("scores", "Scores", "scores/"),
    ("cost", "Cost", "cost/"),
    ("attempts", "Attempts", "attempts/"),
    ("sessions", "Sessions and provenance", "sessions/"),
]


def shows(pg, tab: str, label: str) -> None:
    """The page is the tab `tab` as a fresh load would draw it."""
    settled(pg)
    assert pg.locator("[aria-busy]").count() == 0, "a restored page is still marked busy"
    assert pg.locator("section#tab").get_attribute("data-tab") == tab
    current = pg.locator("nav.run-tabs a.current")
    assert current.count() == 1 and current.inner_text() == label
    assert pg.locator("nav.run-tabs a[aria-current]").inner_text() == label


def test_back_and_forward_walk_every_tab_of_a_run(pg, site):
    pk = run_pk(site, RUN)
    base = f"/runs/{pk}/"
    pg.goto(pg.base + base)
    shows(pg, "overview", "Overview")
    for tab, label, path in TABS[1:]:
        pg.click(f"nav.run-tabs >> text={label}")
        pg.wait_for_url(f"**{base}{path}")
        shows(pg, tab, label)
    for tab, label, path in reversed(TABS[:-1]):
        pg.go_back()
        pg.wait_for_url(f"**{base}{path}")
        shows(pg, tab, label)
    for tab, label, path in TABS[1:]:
        pg.go_forward()
        pg.wait_for_url(f"**{base}{path}")
        shows(pg, tab, label)
    assert pg.problems == [], pg.problems


def test_back_from_a_ranking_puts_the_first_ranking_back(pg, site):
    pk = run_pk(site, RUN)
    pg.goto(pg.base + f"/runs/{pk}/")
    first = pg.locator("nav.column-picker a.current").inner_text()
    pg.click("nav.column-picker a:not(.current) >> nth=0")
    pg.wait_for_url("**column=*")
    settled(pg)
    chosen = pg.locator("nav.column-picker a.current").inner_text()
    assert chosen != first
    pg.go_back()
    pg.wait_for_url(f"**/runs/{pk}/")
    settled(pg)
    assert pg.locator("[aria-busy]").count() == 0
    assert pg.locator("nav.column-picker a.current").inner_text() == first
    pg.go_forward()
    pg.wait_for_url("**column=*")
    settled(pg)
    assert pg.locator("nav.column-picker a.current").inner_text() == chosen
    assert pg.problems == [], pg.problems


def test_back_to_a_tab_with_a_chart_draws_the_chart_again(pg, site):
    pk = run_pk(site, RUN)
    pg.goto(pg.base + f"/runs/{pk}/cost/")
    pg.wait_for_selector("#cost-chart .main-svg")
    pg.click("nav.run-tabs >> text=Scores")
    pg.wait_for_url(f"**/runs/{pk}/scores/")
    settled(pg)
    pg.go_back()
    pg.wait_for_url(f"**/runs/{pk}/cost/")
    pg.wait_for_selector("#cost-chart .main-svg")
    # Drawn again by the page's script (a copy of the old drawing would carry no mark of it).
    assert pg.locator("#cost-chart[data-drawn]").count() == 1
    assert pg.problems == [], pg.problems


def test_back_without_a_kept_snapshot_asks_the_server_for_the_whole_page(pg, site):
    pk = run_pk(site, RUN)
    pg.goto(pg.base + f"/runs/{pk}/")
    pg.click("nav.run-tabs >> text=Cost")
    pg.wait_for_url(f"**/runs/{pk}/cost/")
    settled(pg)
    pg.evaluate("() => sessionStorage.removeItem('htmx-history-cache')")
    with pg.expect_request(
        lambda r: r.url.endswith(f"/runs/{pk}/") and "hx-history-restore-request" in r.headers
    ):
        pg.go_back()
    pg.wait_for_url(f"**/runs/{pk}/")
    pg.locator("section#tab[data-tab=overview]").wait_for()
    shows(pg, "overview", "Overview")
    assert pg.locator("header.top").count() == 1  # the page once, not a page inside a page
    assert pg.problems == [], pg.problems
