"""A request under way shows where its answer will go: a tab, a filter and the compare form mark
their target busy until the answer arrives, and a clicked tab is highlighted at once."""

from __future__ import annotations

import pytest

from tests.browser import shared_demo
from tests.browser.shared_demo import run_pk

pytestmark = [pytest.mark.browser, pytest.mark.django_db]
site, pg = shared_demo.site, shared_demo.pg


class Held:
    """Requests to `pattern` wait, unanswered, until `release`."""

    def __init__(self, page, pattern: str):
        self.page, self.routes = page, []
        page.route(pattern, lambda route: self.routes.append(route))

    def wait(self) -> None:
        for _ in range(500):
            if self.routes:
                return
            self.page.wait_for_timeout(20)
        raise AssertionError("no request was sent")

    def release(self) -> None:
        for r in self.routes:
            r.continue_()
        self.routes.clear()

    def hold_busy(self, target: str, answered_url: str) -> None:
        """Once the request is sent, `target` alone is marked busy; released, the page reaches
        `answered_url` and nothing is busy any more."""
        self.wait()
        assert self.page.locator(f"{target}[aria-busy=true]").count() == 1
        self.release()
        self.page.wait_for_url(answered_url)
        self.page.locator(f"{target}:not([aria-busy])").wait_for()
        assert self.page.locator("[aria-busy]").count() == 0


@pytest.mark.parametrize("width", [1440, 390])
def test_a_tab_is_highlighted_at_once_and_its_panel_marked_busy(pg, site, width):
    pg.set_viewport_size({"width": width, "height": 900})
    run = run_pk(site, "run-2026-11-23-f00dfa")
    pg.goto(pg.base + f"/runs/{run}/")
    held = Held(pg, "**/cost/")
    pg.click("nav.run-tabs >> text=Cost")
    held.wait()
    assert pg.locator("#tab[aria-busy=true]").count() == 1
    assert pg.locator("nav.run-tabs a.current").all_inner_texts() == ["Cost"]
    assert pg.locator("nav.run-tabs a[aria-current]").all_inner_texts() == ["Cost"]
    note = pg.evaluate("() => getComputedStyle(document.querySelector('#tab'), '::before').content")
    assert "Loading" in note
    held.release()
    pg.wait_for_url("**/cost/")
    pg.locator("#cost-chart").wait_for()
    assert pg.locator("[aria-busy]").count() == 0
    assert pg.locator("nav.run-tabs a.current").all_inner_texts() == ["Cost"]
    assert pg.problems == []


def test_a_failed_tab_request_puts_the_highlight_back(pg, site):
    run = run_pk(site, "run-2026-11-23-f00dfa")
    pg.goto(pg.base + f"/runs/{run}/")
    pg.route("**/cost/", lambda r: r.fulfill(status=500, body="no", content_type="text/plain"))
    pg.click("nav.run-tabs >> text=Cost")
    pg.locator(".request-error").wait_for()
    assert pg.locator("nav.run-tabs a.current").all_inner_texts() == ["Overview"]
    assert pg.locator("[aria-busy]").count() == 0


def test_a_filter_marks_the_list_busy_until_it_is_filtered(pg, site):
    run = run_pk(site, "run-2026-11-23-f00dfa")
    pg.goto(pg.base + f"/runs/{run}/attempts/")
    held = Held(pg, "**/attempts/?*")
    pg.select_option("form.filters select[name=ended_by]", "completed")
    held.hold_busy("#attempt-list", "**ended_by=completed**")


def test_the_compare_form_marks_the_result_busy(pg, site):
    pg.goto(pg.base + "/compare/")
    held = Held(pg, "**/compare/?*")
    pg.select_option(
        "#compare-form select[name=baseline]", str(run_pk(site, "run-2026-11-16-a1b2c3"))
    )
    pg.select_option(
        "#compare-form select[name=candidate]", str(run_pk(site, "run-2026-11-23-f00dfa"))
    )
    pg.click("#compare-form button[type=submit]")
    held.hold_busy("#result", "**candidate=**")
