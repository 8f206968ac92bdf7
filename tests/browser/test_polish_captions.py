"""Captions and titles of score tables: two tables of one surface say what sets each apart and
why they are not ranked together; a caption's code is shown as code, not as Markdown."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from records.devtools.synth import MODELS, demo_key
from records.models import Run
from tests.browser import shared_demo
from tests.browser.shared_demo import run_pk
from tests.builders import ingest_bytes, synth_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db]
site, pg = shared_demo.site, shared_demo.pg


@pytest.fixture(scope="module")
def uneven(site, django_db_blocker) -> Iterator[Run]:
    """A dynamic-only run whose last model lacks the last case: two tables of dynamic."""
    key = demo_key()  # the key the shared demo stored
    cases = [c for c in key.cases if "dynamic" in (c.surfaces_only or ["dynamic"])]
    shard = synth_run(
        "run-uneven",
        seed=11,
        key=key,
        surfaces=("dynamic",),
        max_attempts=len(cases) * len(MODELS) - 1,
    )
    with django_db_blocker.unblock():
        ingest_bytes(("modeleval-uneven.jsonl", shard))
        yield Run.objects.get(run_id="run-uneven")


@pytest.mark.parametrize("width", [1440, 390])
def test_a_surface_whose_rows_cover_different_cases_is_ranked_as_one_board(pg, uneven, width):
    pg.set_viewport_size({"width": width, "height": 900})
    pg.goto(pg.base + f"/runs/{uneven.pk}/")
    boards = pg.locator("section.board")
    # The overview ranks every model of the surface together, each pair on its shared cases.
    assert boards.count() == 1
    caption = boards.locator("p.caption").inner_text()
    assert "each pair is compared on the cases both ran" in caption
    assert boards.locator("tbody tr").count() == len(MODELS)
    width_now = pg.evaluate("() => document.documentElement.scrollWidth")
    assert width_now <= width
    # The Scores tab keeps upstream's two tables, each titled by what sets it apart.
    pg.goto(pg.base + f"/runs/{uneven.pk}/scores/")
    titles = [t.strip() for t in pg.locator("section.group h3.group-title").all_inner_texts()]
    assert len(titles) == len(set(titles)) == 2, titles
    assert all(t.lower().startswith("dynamic · ") for t in titles), titles
    assert any("the whole corpus" in t for t in titles) and any(" of " in t for t in titles)
    for note in pg.locator("p.apart").all_inner_texts():
        assert "Not ranked with the other dynamic table" in note and "cases" in note
    assert pg.problems == []


def test_one_table_per_surface_keeps_its_plain_title(pg, site):
    pg.goto(pg.base + f"/runs/{run_pk(site, 'run-2026-11-23-f00dfa')}/")
    titles = pg.locator("section.board h2").all_inner_texts()
    assert sorted(t.strip().lower() for t in titles) == ["dynamic", "individual", "meta"]
    assert pg.locator("p.apart").count() == 0


def test_captions_show_code_as_code_and_no_backtick(pg, site, uneven):
    run = run_pk(site, "run-2026-11-23-f00dfa")
    first = run_pk(site, "run-2026-11-16-a1b2c3")
    for url, code in (
        (f"/runs/{run}/", ".caption code"),
        (f"/runs/{run}/scores/", ".caption code"),
        (f"/runs/{uneven.pk}/scores/", ".apart code"),
        (f"/compare/?kind=models&run={run}", ".caption code"),
        (f"/compare/?kind=surfaces&run={run}", "main"),
        (f"/compare/?kind=runs&baseline={first}&candidate={uneven.pk}", "main"),
    ):
        pg.goto(pg.base + url)
        text = pg.locator("main").inner_text()
        assert "`" not in text, url
        assert pg.locator(code).count() > 0, url


def test_the_markdown_export_keeps_its_backticks(pg, site):
    run = run_pk(site, "run-2026-11-16-a1b2c3")  # the first run: no row of it is a duplicate
    body = pg.request.get(pg.base + f"/runs/{run}/scores.md").text()
    assert "Compared as one table because these rows agree on surface `" in body
