"""The case x model matrix's legend names every mark its cells show."""

from __future__ import annotations

import pytest

from records.scorer.score import OUTCOMES
from records.views.scores import MATRIX_MARKS
from tests.browser import shared_demo
from tests.browser.shared_demo import run_pk

site, pg = shared_demo.site, shared_demo.pg


def test_every_outcome_but_completed_has_a_mark_and_its_words():
    assert set(MATRIX_MARKS) == set(OUTCOMES) - {"completed"}
    marks = [mark for mark, _ in MATRIX_MARKS.values()]
    assert len(set(marks)) == len(marks)


@pytest.mark.browser
@pytest.mark.django_db
@pytest.mark.parametrize("width", [1440, 390])
def test_the_legend_names_every_mark_the_matrix_shows(pg, site, width):
    pg.set_viewport_size({"width": width, "height": 900})
    run = run_pk(site, "run-2026-11-23-f00dfa")
    seen = set()
    for surface in ("dynamic", "individual", "meta"):
        pg.goto(pg.base + f"/runs/{run}/matrix/?surface={surface}")
        legend = pg.locator("p.matrix-legend").inner_text()
        for mark in pg.locator("table.matrix a.cell").all_inner_texts():
            if not mark.startswith("✓"):
                assert f"{mark} = " in legend, (surface, mark)
                seen.add(mark)
        for mark, words in MATRIX_MARKS.values():
            assert f"{mark} = {words}" in legend
        assert pg.evaluate("() => document.documentElement.scrollWidth") <= width
    assert seen  # the demo's matrix does show outcomes other than completed
