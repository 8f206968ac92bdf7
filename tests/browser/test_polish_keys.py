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
    pg.keyboard.press("/")
    focused = pg.evaluate("() => document.activeElement.getAttribute('name')")
    assert focused == "q"
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
