"""Numbers read one way on every page: one money format ($1.00, never $1.0), thousands
separators beside each other, and cost scatter points whose surfaces never overlap as labels."""

from __future__ import annotations

import re

import pytest

from records.queries.cost import usd
from records.scoring.tables import TableRow
from tests.browser import shared_demo
from tests.browser.shared_demo import run_pk

site, pg = shared_demo.site, shared_demo.pg


def test_a_price_is_shown_in_cents_at_least():
    assert usd(1.0, digits=None) == "$1.00"
    assert usd(0.075, digits=None) == "$0.075"
    assert usd(0.0, digits=None) == "$0.00"
    assert usd(1234.5, digits=None) == "$1,234.50"
    assert usd(0.1234, digits=2) == "$0.12"


def test_overhead_on_pages_carries_thousands_separators():
    row = TableRow.__new__(TableRow)
    row.figures = {"steps": 2788, "discovery": 1085, "invalid_params": 138}
    assert row.overhead_shown == "1,223 / 2,788 (1,085 find, 138 invalid_params)"
    assert row.overhead.startswith("1223 / 2788")  # the Markdown export keeps upstream's figures


@pytest.fixture(params=[1440, 390], ids=str)
def width(request, pg) -> int:
    """Each test below runs at a desktop's and a phone's width, the page already that wide."""
    pg.set_viewport_size({"width": request.param, "height": 900})
    return request.param


@pytest.mark.browser
@pytest.mark.django_db
def test_prices_read_as_money_on_the_sessions_tab(pg, site, width):
    pg.goto(pg.base + f"/runs/{run_pk(site, 'run-2026-11-23-f00dfa')}/sessions/")
    prices = pg.locator("td.price").all_inner_texts()
    assert any("$1.00 / $5.00 / $1.25 / $0.10" in " ".join(p.split()) for p in prices), prices
    for p in prices:
        assert not re.search(r"\$\d+\.\d(?!\d)", p), p
    assert pg.evaluate("() => document.documentElement.scrollWidth") <= width


@pytest.mark.browser
@pytest.mark.django_db
def test_the_cost_scatter_marks_surfaces_by_shape_not_by_overlapping_labels(pg, site, width):
    pg.goto(pg.base + f"/compare/?kind=models&run={run_pk(site, 'run-2026-11-23-f00dfa')}")
    pg.locator("#scatter .main-svg").first.wait_for(timeout=15000)
    assert pg.locator("#scatter .scatterlayer .point").count() >= 9
    assert pg.locator("#scatter .textpoint").count() == 0  # no label beside any point
    key = " ".join(t or "" for t in pg.locator("#scatter .annotation-text").all_text_contents())
    assert key.startswith("Shape = surface:")
    for surface in ("dynamic", "individual", "meta"):
        assert surface in key
    assert pg.problems == []
