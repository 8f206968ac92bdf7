"""Tables at a desktop's width show every column, and at a phone's width a name is never broken
inside a word."""

from __future__ import annotations

import pytest

from records.models import CorpusKey
from tests.browser import shared_demo
from tests.browser.shared_demo import run_pk

pytestmark = [pytest.mark.browser, pytest.mark.django_db]
site, pg = shared_demo.site, shared_demo.pg

# Every table wider than the box it sits in, and every box that scrolls inside itself.
HIDDEN = """() => Array.from(document.querySelectorAll("table.data"))
  .filter(t => t.offsetParent !== null)
  .map(t => {
    const box = t.closest(".scroll") || t.parentElement;
    return {table: t.id || t.className, wide: t.scrollWidth - box.clientWidth,
            tall: box.scrollHeight - box.clientHeight};
  })
  .filter(x => x.wide > 1 || x.tall > 1)"""

# Every word (letters, digits, `_`, `.`, `:`) of a table's cells that the layout put on two lines.
BROKEN = """() => {
  const out = [];
  document.querySelectorAll("table.data th, table.data td").forEach(cell => {
    if (cell.offsetParent === null) return;
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      for (const m of node.textContent.matchAll(/[\\w.:]{2,}/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
        if (tops.size > 1) out.push(m[0]);
      }
    }
  });
  return out;
}"""


def pages(site) -> list[str]:
    first = run_pk(site, "run-2026-11-16-a1b2c3")
    run = run_pk(site, "run-2026-11-23-f00dfa")
    return [
        "/",
        f"/runs/{run}/",
        f"/runs/{run}/scores/",
        f"/runs/{run}/cost/",
        f"/runs/{run}/attempts/",
        f"/runs/{run}/sessions/",
        f"/runs/{run}/matrix/",
        f"/keys/{CorpusKey.objects.get().pk}/",
        f"/compare/?kind=runs&baseline={first}&candidate={run}",
        f"/compare/?kind=models&run={run}",
        f"/compare/?kind=surfaces&run={run}",
        "/keys/",
    ]


@pytest.mark.parametrize(
    ("width", "offenders"),
    [
        pytest.param(1440, HIDDEN, id="1440-no-table-hides-a-column-or-scrolls-in-a-box"),
        pytest.param(390, BROKEN, id="390-no-name-in-a-table-breaks-inside-a-word"),
    ],
)
def test_every_table_page_keeps_its_rule_at_its_width(pg, site, width, offenders):
    pg.set_viewport_size({"width": width, "height": 900})
    found_on = {}
    for url in pages(site):
        pg.goto(pg.base + url)
        pg.wait_for_load_state("networkidle")
        if found := pg.evaluate(offenders):
            found_on[url] = found
    assert found_on == {}
    assert pg.problems == []


def test_the_attempts_tab_shows_its_whole_page_of_rows_without_an_inner_scroll(pg, site):
    pg.set_viewport_size({"width": 1440, "height": 900})
    pg.goto(pg.base + f"/runs/{run_pk(site, 'run-2026-11-23-f00dfa')}/attempts/")
    rows = pg.locator("#attempt-list table.data tbody tr")
    assert rows.count() == 50
    last = rows.last.bounding_box()
    box = pg.locator("#attempt-list .scroll").bounding_box()
    assert last["y"] + last["height"] <= box["y"] + box["height"] + 1
    # Every column, the last one included, lies inside the page.
    header = pg.locator("#attempt-list table.data thead th").last.bounding_box()
    assert header["x"] + header["width"] <= 1440
