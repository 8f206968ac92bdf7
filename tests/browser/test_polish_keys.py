"""Keys as other trace viewers have them: j / k (and the arrow keys) for the next and previous
attempt, / for search, ? for the list of keys; never while typing."""

from __future__ import annotations

import pytest

from records.models import Attempt
from tests.browser import shared_demo
from tests.browser.shared_demo import run_pk

pytestmark = [pytest.mark.browser, pytest.mark.django_db]
site, pg = shared_demo.site, shared_demo.pg


def first_attempts(site) -> list[int]:
    run = run_pk(site, "run-2026-11-23-f00dfa")
    return list(Attempt.objects.filter(run_id=run).order_by("line").values_list("pk", flat=True))


def test_j_and_k_and_the_arrows_walk_the_attempts(pg, site):
    a, b, c = first_attempts(site)[:3]
    pg.goto(pg.base + f"/attempts/{a}/")
    pg.keyboard.press("j")
    pg.wait_for_url(f"**/attempts/{b}/**")
    pg.keyboard.press("ArrowRight")
    pg.wait_for_url(f"**/attempts/{c}/**")
    pg.keyboard.press("k")
    pg.wait_for_url(f"**/attempts/{b}/**")
    pg.keyboard.press("ArrowLeft")
    pg.wait_for_url(f"**/attempts/{a}/**")
    assert pg.problems == []


def test_slash_goes_to_search_and_focuses_its_field(pg, site):
    pg.goto(pg.base + "/")
    pg.keyboard.press("/")
    pg.wait_for_url("**/search/**")
    pg.wait_for_load_state("domcontentloaded")
    focused = pg.evaluate("() => document.activeElement.getAttribute('name')")
    assert focused == "q"  # at once: no second / needed
    pg.keyboard.type("j")  # typing in the field is typing, not a key of the page
    assert pg.input_value("input[name=q]") == "j"
    assert "/search/" in pg.url


@pytest.mark.parametrize("width", [1440, 390])
def test_question_mark_lists_the_keys_and_escape_closes_it(pg, site, width):
    pg.set_viewport_size({"width": width, "height": 900})
    pg.goto(pg.base + f"/attempts/{first_attempts(site)[0]}/")
    assert "?" in pg.locator("footer.keys-hint").inner_text()
    pg.keyboard.press("?")
    dialog = pg.locator("dialog#key-help")
    assert dialog.is_visible()
    text = dialog.inner_text()
    for key in ("j", "k", "/", "?"):
        assert key in text
    box = dialog.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width
    pg.keyboard.press("Escape")
    assert not dialog.is_visible()
    assert pg.problems == []


def test_slash_on_the_compare_page_goes_to_the_search_words_not_its_run_finder(pg, site):
    pg.goto(pg.base + "/compare/")
    pg.keyboard.press("/")
    pg.wait_for_url("**/search/**")
    pg.wait_for_load_state("domcontentloaded")
    assert pg.evaluate("() => document.activeElement.getAttribute('name')") == "q"


def _cursor_walk(pg, rows: str) -> None:
    """j twice, k once: the cursor is on the list's second row; Enter opens that row's link."""
    second = pg.locator(rows).nth(1)
    href = second.locator("a[href]").first.get_attribute("href")
    pg.keyboard.press("j")
    pg.keyboard.press("j")
    pg.keyboard.press("j")
    pg.keyboard.press("k")
    assert pg.locator(f"{rows}.row-cursor").count() == 1
    assert "row-cursor" in (second.get_attribute("class") or "")
    pg.keyboard.press("Enter")
    pg.wait_for_url(f"**{href}")
    assert pg.problems == [], pg.problems


def test_j_and_k_move_a_cursor_on_the_runs_and_enter_opens_the_run(pg, site):
    pg.goto(pg.base + "/")
    _cursor_walk(pg, "tbody[data-cursor-rows] > tr")


def test_j_and_k_move_a_cursor_on_search_hits(pg, site):
    pg.goto(pg.base + "/search/?outcome=refused")
    _cursor_walk(pg, "ol.hits[data-cursor-rows] > li")


def test_j_and_k_move_a_cursor_on_the_cases(pg, site):
    pg.goto(pg.base + "/cases/")
    _cursor_walk(pg, "table.cases tbody[data-cursor-rows] > tr")
