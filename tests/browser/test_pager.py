"""Long lists jump to a page: the shared pager takes a page number and keeps the list's other
parameters, at a desktop's and a phone's width."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser.conftest import WIDTHS, check_layout, settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def _run_with_pages(page):
    from records.models import Run

    return max(Run.objects.all(), key=lambda r: r.attempts.filter(ended_by="completed").count())


@pytest.mark.parametrize("width", WIDTHS)
def test_the_attempts_list_jumps_to_a_page_keeping_its_filter(page, width):
    run = _run_with_pages(page)
    completed = run.attempts.filter(ended_by="completed").count()
    pages = -(-completed // 50)
    assert pages >= 3, "the demo's list is too short to jump in"
    url = f"/runs/{run.pk}/attempts/?ended_by=completed&sort=-turns"
    check_layout(page, url, widths=(width,))

    pager = page.locator("#attempt-list nav.pager").first
    assert f"page 1 of {pages}" in pager.inner_text()
    jump = pager.locator("form.pager-jump")
    jump.locator("input[name=page]").fill(str(pages))
    SHOTS.mkdir(parents=True, exist_ok=True)
    pager.screenshot(path=str(SHOTS / f"pager-{width}.png"))
    jump.locator("button[type=submit]").click()
    page.wait_for_url(re.compile(rf"page={pages}\b"))
    settled(page)

    address = page.url
    assert "ended_by=completed" in address and "sort=-turns" in address
    pager = page.locator("#attempt-list nav.pager").first
    assert f"page {pages} of {pages}" in pager.inner_text()
    endings = page.locator("#attempt-list .ended-by").all_inner_texts()
    assert endings and set(endings) == {"completed"}
    assert len(endings) == completed - 50 * (pages - 1)
    got = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert got[0] <= got[1], got
    page.screenshot(path=str(SHOTS / f"pager-jumped-{width}.png"), full_page=False)

    # The same form works without htmx: a plain GET keeps the parameters too.
    page.goto(page.base + url)
    page.locator("#attempt-list form.pager-jump input[name=page]").first.fill("2")
    page.locator("#attempt-list form.pager-jump").first.evaluate("f => f.submit()")
    page.wait_for_url(re.compile(r"page=2\b"))
    assert "ended_by=completed" in page.url
    assert "page 2 of" in page.locator("#attempt-list nav.pager").first.inner_text()
    assert page.problems == [], page.problems
