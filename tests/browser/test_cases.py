"""A corpus's cases across runs and one case's timelines, in Chromium."""

from __future__ import annotations

import os

import pytest

from tests.browser.conftest import check_layout

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = os.environ.get("EVALDASH_CASES_SCREENSHOTS", "")


def _shoot(page, url: str, name: str) -> None:
    if not SHOTS:
        return
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 1000})
        page.goto(page.base + url)
        page.wait_for_load_state("networkidle")
        page.screenshot(path=os.path.join(SHOTS, f"{name}-{width}.png"), full_page=True)
        page.screenshot(path=os.path.join(SHOTS, f"{name}-{width}-top.png"))


def test_the_corpus_page_and_a_cases_timelines_read_at_both_widths(page):
    digest = page.runs["run-2026-11-23-f00dfa"].corpus_digest
    check_layout(page, "/cases/")
    check_layout(page, f"/cases/?digest={digest}&sort=-discrimination")
    page.goto(page.base + f"/cases/?digest={digest}")
    assert "Corpus health" in page.locator(".health").inner_text()
    first = page.locator("table.cases tbody tr td a").first
    case = first.inner_text()
    first.click()
    page.wait_for_selector("[data-plotly=timeline-0] .main-svg", timeout=15000)
    assert case in page.locator("h1").inner_text()
    assert page.locator("section.timeline").count() >= 2
    url = page.url.removeprefix(page.base)
    check_layout(page, url)
    _shoot(page, f"/cases/?digest={digest}&sort=-discrimination", "cases")
    _shoot(page, url, "case")
    assert page.problems == [], page.problems
