"""A compared row of hundreds of changed cases pages its case list in place, at both widths."""

from __future__ import annotations

import pytest

from tests.browser.conftest import WIDTHS, check_layout, settled
from tests.test_compare_paging import paged_pair

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def compared(page):
    a, b = paged_pair("run-paged")
    return f"/compare/?kind=runs&baseline={a.pk}&candidate={b.pk}"


def test_the_next_page_of_a_rows_cases_replaces_the_list_in_place(page, compared):
    check_layout(page, compared)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 1000})
        page.goto(page.base + compared)
        box = page.locator("section.comparison .case-changes").first
        first = box.locator("a.case-link").first.inner_text()
        assert box.locator("a.case-link").count() == 50
        assert "changed cases 1 to 50 of" in box.locator("nav.pager").inner_text()
        box.locator("nav.pager >> text=later cases").click()
        page.wait_for_selector("text=changed cases 51 to 100 of")
        settled(page)
        box = page.locator("section.comparison .case-changes").first
        assert box.locator("a.case-link").count() == 50
        assert box.locator("a.case-link").first.inner_text() != first
        assert page.url == page.base + compared  # the comparison stays where it was
        box.locator("nav.pager >> text=earlier cases").click()
        page.wait_for_selector("text=changed cases 1 to 50 of")
        settled(page)
        assert page.locator("section.comparison a.case-link").first.inner_text() == first
    assert page.problems == [], page.problems
