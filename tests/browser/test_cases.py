"""A corpus's cases across runs and one case's timelines, in Chromium."""

from __future__ import annotations

import os

import pytest

from tests.browser.conftest import check_layout, shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = os.environ.get("EVALDASH_CASES_SCREENSHOTS", "")


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
    shoot(page, f"/cases/?digest={digest}&sort=-discrimination", "cases", SHOTS)
    shoot(page, url, "case", SHOTS)
    assert page.problems == [], page.problems
