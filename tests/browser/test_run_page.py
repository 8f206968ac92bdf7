"""A run's page: the overview, its tabs at their own addresses, and figures that drill down."""

from __future__ import annotations

import pytest

from tests.browser.conftest import check_layout, log_in, settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
RUN = "run-2026-11-23-f00dfa"


def test_every_tab_reads_at_both_widths(page):
    pk = page.runs[RUN].pk
    for tab in ("", "scores/", "cost/", "attempts/", "sessions/"):
        check_layout(page, f"/runs/{pk}/{tab}")
    check_layout(page, f"/runs/{pk}/?column=Completion")


def test_tabs_load_in_place_at_their_own_address(page):
    pk = page.runs[RUN].pk
    page.goto(page.base + f"/runs/{pk}/")
    page.click("nav.run-tabs >> text=Scores")
    page.wait_for_url(f"**/runs/{pk}/scores/")
    settled(page)
    assert page.locator("nav.run-tabs a.current").inner_text() == "Scores"
    assert page.locator("table.scores").count() >= 1
    page.go_back()
    page.wait_for_url(f"**/runs/{pk}/")
    settled(page)
    assert page.locator("section.board").count() >= 1
    assert page.problems == [], page.problems


def test_each_score_cell_opens_the_attempts_behind_it_and_those_that_missed(page):
    pk = page.runs[RUN].pk
    page.goto(page.base + f"/runs/{pk}/scores/")
    row = page.locator("table.scores tbody tr").first
    cells = row.locator("td.num:has(a.hits)")
    assert cells.count() >= 5  # every column with a rate, not only Clean and Completion
    links = []
    for i in range(cells.count()):
        cell = cells.nth(i)
        n, d = (int(x.replace(",", "")) for x in cell.locator("a.hits").inner_text().split(" / "))
        miss = cell.locator("a.misses")
        links.append(
            (
                cell.locator("a.hits").get_attribute("href"),
                miss.get_attribute("href") if miss.count() else None,
                n,
                d,
            )
        )
    for hits, misses, n, d in links:
        page.goto(page.base + hits)
        shown = _summed(page)
        assert shown[0] == n, (hits, shown, n)
        if any(c in hits for c in ("column=clean", "column=unaided", "column=completion")):
            # One attempt per unit of the numerator: the list is exactly that long.
            assert _count(page) == n, hits
        if misses:
            page.goto(page.base + misses)
            got = _summed(page)
            assert got[1] - got[0] == d - n, (misses, got, n, d)
    assert page.problems == [], page.problems


def _count(page) -> int:
    return int(page.locator("#attempt-list .attempt-count").inner_text().replace(",", ""))


def _summed(page) -> tuple[int, int]:
    text = page.locator("#attempt-list .column-sum strong").inner_text()
    n, d = (int(x.replace(",", "")) for x in text.split(" / "))
    return n, d


def test_deleting_a_run_asks_first(page):
    from records.models import Run

    log_in(page, "keeper", "delete_run")
    pk = page.runs[RUN].pk
    page.goto(page.base + f"/runs/{pk}/sessions/")
    page.click("a.button.danger")  # opens the question, deletes nothing
    page.wait_for_url(f"**/runs/{pk}/delete/")
    assert Run.objects.filter(pk=pk).exists()
    count = Run.objects.get(pk=pk).attempt_count
    assert f"{count} attempts" in page.locator(".fence").inner_text()
    page.click("form.confirm button.danger")
    page.wait_for_url(page.base + "/")
    assert not Run.objects.filter(pk=pk).exists()
    assert page.problems == [], page.problems


def test_tables_sort_by_any_column_through_the_address(page):
    from records.models import Attempt

    run = page.runs[RUN]
    page.goto(page.base + f"/runs/{run.pk}/attempts/?ended_by=completed")
    page.click("#attempt-list th.sortable >> text=Turns")
    page.wait_for_url("**sort=turns**")
    settled(page)
    assert "ended_by=completed" in page.url  # the filter stays
    turns = [int(t) for t in page.locator("#attempt-list tbody td:nth-child(9)").all_inner_texts()]
    want = list(
        Attempt.objects.filter(run=run, ended_by="completed")
        .order_by("turn_count", "line")
        .values_list("turn_count", flat=True)[:50]
    )
    assert turns == want
    page.click("#attempt-list th.sortable >> text=Turns")  # again: the other way
    page.wait_for_url("**sort=-turns**")
    settled(page)
    turns = [int(t) for t in page.locator("#attempt-list tbody td:nth-child(9)").all_inner_texts()]
    assert turns == sorted(turns, reverse=True)

    page.goto(page.base + f"/runs/{run.pk}/scores/")
    page.locator("table.scores").first.locator("th.sortable >> text=Completion").click()
    page.wait_for_url("**sort=-completion**")  # a score sorts highest first
    cells = page.locator("table.scores").first.locator("tbody tr td:nth-child(8) a.hits")
    rates = []
    for text in cells.all_inner_texts():
        n, d = (int(x) for x in text.split(" / "))
        rates.append(n / d)
    assert rates == sorted(rates, reverse=True)
    assert page.problems == [], page.problems


def test_the_cost_table_sorts_through_the_address_unknown_cost_last(page):
    pk = page.runs[RUN].pk
    page.goto(page.base + f"/runs/{pk}/cost/")
    page.click("#cost-table th.sortable >> text=Per attempt")
    page.wait_for_url("**sort=-per_attempt**")  # highest first
    settled(page)
    rows = page.locator("#cost-table tbody tr:not(.total)")
    cells = rows.locator("td:nth-child(13)").all_inner_texts()
    known = [float(c.replace("$", "").replace(",", "")) for c in cells if c.startswith("$")]
    assert known and known == sorted(known, reverse=True)
    # Unknown cost (an unpriced model) comes after every known one.
    unknown = ["unknown:" in t for t in rows.all_inner_texts()]
    assert any(unknown) and unknown == sorted(unknown)
    assert page.problems == [], page.problems


def test_how_attempts_ended_sorts_by_an_ending(page):
    pk = page.runs[RUN].pk
    page.goto(page.base + f"/runs/{pk}/sessions/")
    page.click("#endings-table th.sortable >> text=completed")
    page.wait_for_url("**sort=-completed**")
    settled(page)
    # Column 5: the first ending, "completed" (model, surface, mode, attempts come first).
    counts = [
        int(t.replace(",", ""))
        for t in page.locator("#endings-table tbody td:nth-child(5)").all_inner_texts()
    ]
    assert counts and counts == sorted(counts, reverse=True)
    assert page.problems == [], page.problems
