"""Failure modes across runs and one mode's page, in Chromium."""

from __future__ import annotations

import os

import pytest

from tests.browser.conftest import check_layout, shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = os.environ.get("EVALDASH_FAILURES_SCREENSHOTS", "")


def test_the_failure_modes_and_a_modes_page_read_at_both_widths(page):
    digest = page.runs["run-2026-11-23-f00dfa"].corpus_digest
    check_layout(page, f"/failures/?digest={digest}")
    page.goto(page.base + f"/failures/?digest={digest}")
    page.wait_for_selector("table.failures [data-plotly] .main-svg", timeout=15000)
    assert "did not pass" in page.locator("p.summary").inner_text()
    first = page.locator("table.failures tbody tr td.num a").first
    attempts = first.inner_text()
    first.click()
    page.wait_for_selector("[data-plotly=mode-trend] .main-svg", timeout=15000)
    assert "Failure mode" in page.locator("h1").inner_text()
    assert attempts.replace(",", "") in page.locator("p.summary").inner_text().replace(",", "")
    url = page.url.removeprefix(page.base)
    check_layout(page, url)
    # The attempts pager swaps in place, and a row opens its attempt at the verdict.
    page.locator("#mode-attempts tbody tr td a").first.click()
    page.wait_for_load_state("networkidle")
    assert page.url.endswith("#failing-step")
    attempt = page.url.removeprefix(page.base)
    newest = page.runs["run-2026-11-24-ee1234"]
    page.goto(page.base + f"/runs/{newest.pk}/")
    line = page.locator("p.new-failures").inner_text()
    assert "since the previous run" in line
    page.locator("p.new-failures a").first.click()
    page.wait_for_selector("table.failures")
    assert "run=run-2026-11-24-ee1234" in page.url
    shoot(page, f"/runs/{newest.pk}/", "run-overview", SHOTS)
    shoot(page, f"/failures/?digest={digest}", "failures", SHOTS)
    shoot(page, url, "failure-mode", SHOTS)
    shoot(page, attempt, "failing-step", SHOTS)
    assert page.problems == [], page.problems


def test_the_failure_modes_follow_a_dark_system_setting(page):
    digest = page.runs["run-2026-11-23-f00dfa"].corpus_digest
    page.emulate_media(color_scheme="dark")
    page.goto(page.base + f"/failures/?digest={digest}")
    page.wait_for_selector("table.failures [data-plotly] .main-svg", timeout=15000)
    body = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    parts = [float(x) for x in body[body.index("(") + 1 : body.index(")")].split(",")[:3]]
    assert sum(parts) / 3 < 60
    paper = page.locator("table.failures .main-svg rect.bg").first.get_attribute("style") or ""
    assert "255, 255, 255" not in paper
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, "failures-dark-1440.png"))
    page.emulate_media(color_scheme="light")
    assert page.problems == [], page.problems
