"""An attempt's page: the verdict first, the call it turns on, and its neighbours in the list."""

from __future__ import annotations

import pytest

from records.models import Attempt, Verdict
from records.scoring.run import account
from tests.browser.conftest import check_layout, settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
RUN = "run-2026-11-23-f00dfa"


def _failed_with_a_call() -> Attempt:
    failed = Verdict.objects.filter(outcome="failed").select_related("scoring", "attempt")
    for v in failed.order_by("attempt__line"):
        if any(
            not s["complete"] and s["reached"] for s in (account(v).told or {}).get("steps", [])
        ):
            return v.attempt
    raise AssertionError("the demo has no failed attempt whose failing step was reached")


def test_an_attempt_reads_at_both_widths(page):
    check_layout(page, f"/attempts/{_failed_with_a_call().pk}/")


def test_a_failed_attempts_failing_call_is_three_clicks_from_home(page):
    page.goto(page.base + "/")
    page.locator("#runs-table tbody tr", has_text=RUN).locator("a").first.click()  # 1
    board = page.locator("section.board[data-surface=meta]")
    board.wait_for()
    board.locator("a.misses").first.click()  # 2: the attempts that did not complete
    page.wait_for_url("**hit=no**")
    settled(page)
    rows = page.locator("#attempt-list tbody tr")
    outcome = page.locator("#attempt-list tbody tr td:nth-child(7)")
    assert rows.count() >= 1
    # Open the first failed one whose failing step was reached (3).
    target = None
    for i in range(rows.count()):
        if outcome.nth(i).inner_text().strip() == "failed":
            target = rows.nth(i)
            break
    assert target is not None
    target.locator("a").first.click()
    page.wait_for_url("**/attempts/*/**")
    head = page.locator(".verdict-head")
    assert head.locator(".verdict-word").inner_text() == "Failed"
    # The headline comes before any "completed" of the attempt's own ending.
    assert page.locator("h1 + .verdict-head").count() == 1
    marked = page.locator(".call.targeted")
    if marked.count():
        assert head.locator("a.to-call").get_attribute("href") == "#" + marked.get_attribute("id")
    assert page.problems == [], page.problems


def test_the_failing_call_is_marked_and_the_list_goes_on(page):
    attempt = _failed_with_a_call()
    run = attempt.run
    page.goto(page.base + f"/attempts/{attempt.pk}/?outcome=failed")
    marked = page.locator(".call.targeted")
    assert marked.count() == 1
    assert "The verdict turns on this call" in marked.inner_text()
    nxt = page.locator("a[rel=next]")
    failed = list(
        Attempt.objects.filter(run=run, verdicts__outcome="failed")
        .order_by("line")
        .values_list("pk", flat=True)
    )
    i = failed.index(attempt.pk)
    if i + 1 < len(failed):
        assert nxt.get_attribute("href") == f"/attempts/{failed[i + 1]}/?outcome=failed"
    if i > 0:
        prev = page.locator("a[rel=prev]").get_attribute("href")
        assert prev == f"/attempts/{failed[i - 1]}/?outcome=failed"
    assert page.problems == [], page.problems
