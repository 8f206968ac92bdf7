"""A compared row of hundreds of changed cases pages its case list in place, at both widths."""

from __future__ import annotations

import json

import pytest

from records.devtools.synth import load_demo_key, widen_key
from records.formats.corpus_key import key_to_json
from records.models import Run
from tests.browser.conftest import WIDTHS, check_layout, settled
from tests.builders import ingest_bytes
from tests.test_compare_paging import paged_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def compared(page):
    key = widen_key(load_demo_key(), 400)
    report = ingest_bytes(
        ("corpus-key.json", json.dumps(key_to_json(key)).encode()),
        ("modeleval-a.jsonl", paged_run(key, "run-paged-a", 1, 0.0)),
        ("modeleval-b.jsonl", paged_run(key, "run-paged-b", 2, 0.6)),
    )
    assert report.ok
    a, b = Run.objects.get(run_id="run-paged-a"), Run.objects.get(run_id="run-paged-b")
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
