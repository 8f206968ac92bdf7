"""A dark theme that follows the system setting, charts included."""

from __future__ import annotations

import pytest

from tests.browser import shared_demo
from tests.browser.shared_demo import run_pk

pytestmark = [pytest.mark.browser, pytest.mark.django_db]
site, pg = shared_demo.site, shared_demo.pg

COLOURS = """() => {
  const bg = el => getComputedStyle(el).backgroundColor;
  return {body: bg(document.body), table: bg(document.querySelector("table.data") || document.body),
          ink: getComputedStyle(document.body).color};
}"""


def light(rgb: str) -> float:
    parts = [float(x) for x in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3]]
    return sum(parts) / 3


@pytest.mark.parametrize("width", [1440, 390])
def test_the_pages_and_charts_follow_a_dark_system_setting(pg, site, width):
    run = run_pk(site, "run-2026-11-23-f00dfa")
    pg.set_viewport_size({"width": width, "height": 900})
    pg.emulate_media(color_scheme="dark")
    pg.goto(pg.base + f"/runs/{run}/cost/")
    pg.locator("#cost-chart .main-svg").first.wait_for(timeout=15000)
    got = pg.evaluate(COLOURS)
    assert light(got["body"]) < 60 and light(got["table"]) < 60 and light(got["ink"]) > 180
    paper = pg.locator("#cost-chart .main-svg rect.bg").first.get_attribute("style") or ""
    assert "255, 255, 255" not in paper and "#fff" not in paper
    tick = pg.locator("#cost-chart .xtick text").first.get_attribute("style") or ""
    assert "227, 232, 238" in tick  # the chart's text is light too
    assert pg.evaluate("() => document.documentElement.scrollWidth") <= width

    pg.emulate_media(color_scheme="light")
    pg.goto(pg.base + f"/runs/{run}/cost/")
    pg.locator("#cost-chart .main-svg").first.wait_for(timeout=15000)
    got = pg.evaluate(COLOURS)
    assert light(got["body"]) > 200 and light(got["ink"]) < 80
    assert pg.problems == []
