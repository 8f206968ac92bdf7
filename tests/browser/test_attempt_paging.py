"""A turn of many calls shows its first items and loads the next ones in place, at both widths."""

from __future__ import annotations

import pytest

from tests.browser.conftest import WIDTHS, check_layout, settled
from tests.test_attempt_paging import attempt_with_one_turn

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_more_of_a_long_turn_is_loaded_where_the_link_was(page):
    url = f"/attempts/{attempt_with_one_turn(500).pk}/"
    check_layout(page, url)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 1000})
        page.goto(page.base + url)
        calls = page.locator("ol.trace div.call")
        assert calls.count() == 50
        page.click("text=Show more of this turn")
        page.wait_for_selector("#call-100")
        settled(page)
        assert calls.count() == 100 and page.url == page.base + url
        assert page.locator(".more-items").count() == 1  # the link moved past the new calls
    assert page.problems == [], page.problems
