"""The search across runs in Chromium: a facet click narrows, words search, Back restores."""

from __future__ import annotations

import pytest

from tests.browser.conftest import check_layout, settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_search_reads_at_both_widths(page):
    check_layout(page, "/search/?outcome=refused")
    check_layout(page, "/search/?q=project+get")


def _count(page) -> int:
    return int(page.locator("#search-results .attempt-count").inner_text().replace(",", ""))


def test_a_facet_click_a_text_search_and_back(page):
    page.goto(page.base + "/search/?outcome=refused")
    everything = _count(page)
    facet = page.locator(".facet[data-facet=run] li").first
    narrowed_to = int(facet.locator(".n").inner_text().replace(",", ""))
    assert 0 < narrowed_to < everything
    facet.locator("a").click()
    page.wait_for_url("**run=**")
    settled(page)
    assert _count(page) == narrowed_to
    assert page.locator(".facet[data-facet=run] li.active").count() == 1

    page.fill("input[name=q]", "look action")
    page.press("input[name=q]", "Enter")
    page.wait_for_url("**q=look*action**")
    settled(page)
    searched = _count(page)
    assert 0 < searched <= narrowed_to
    assert page.locator(".hit mark").first.inner_text().lower() in ("look", "action")
    call = page.locator(".hit-calls a.call-link").first
    href = call.get_attribute("href")
    assert "#call-" in href

    page.go_back()
    page.wait_for_url("**/search/?outcome=refused&run=**")
    settled(page)
    assert _count(page) == narrowed_to
    page.go_back()
    page.wait_for_url("**/search/?outcome=refused")
    settled(page)
    assert _count(page) == everything
    assert page.problems == [], page.problems


def test_a_facet_click_brings_the_top_of_the_results_into_view(page):
    page.set_viewport_size({"width": 390, "height": 800})  # the facets are below the results
    page.goto(page.base + "/search/?outcome=refused")
    facet = page.locator(".facet[data-facet=run] li a").first
    facet.scroll_into_view_if_needed()
    assert page.locator("#search-results").bounding_box()["y"] < 0  # the top is off-screen
    facet.click()
    page.wait_for_url("**run=*")
    settled(page)
    top = page.locator("#search-results").bounding_box()["y"]
    assert 0 <= top < 800, top
    assert page.problems == [], page.problems
