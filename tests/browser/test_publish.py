"""The published-records pages: the list of uploaded model results records and one record's
rows beside the stored runs of the same key, at both widths, with a hostile name escaped."""

from __future__ import annotations

import json
import os

import pytest

from tests.browser.conftest import check_layout

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE = "<img src=x onerror=alert(1)>\u202eevil-model-with-a-rather-long-name-that-must-wrap"
SHOTS = os.environ.get("EVALDASH_SHOTS", "")


def uploaded_record(page) -> int:
    """The demo runs published as upstream would, one row renamed to a hostile name, uploaded."""
    from records.models import Upload
    from records.scoring.publish import publication_of_runs, store_record

    scorings = [run.latest_scoring() for run in page.runs.values()]
    doc = json.loads(publication_of_runs(scorings).record())
    doc["rows"][0]["key"]["model"] = HOSTILE
    data = json.dumps(doc).encode()
    stored = store_record(
        data, doc, "<b>model-results</b>.json", Upload.objects.create(source="cli")
    )
    return stored["record"]


def test_the_published_records_read_at_both_widths_with_names_escaped(page):
    pk = uploaded_record(page)
    for url in ("/publish/records/", f"/publish/records/{pk}/"):
        check_layout(page, url, (1440, 390))
        for width in (1440, 390):
            page.set_viewport_size({"width": width, "height": 1000})
            page.goto(page.base + url)
            page.wait_for_load_state("networkidle")
            body = page.locator("main").inner_text()
            assert page.locator("main img, main b").count() == 0
            if SHOTS:
                name = "records" if url.endswith("records/") else "record"
                page.screenshot(path=f"{SHOTS}/{name}-{width}.png", full_page=True)
        assert "<b>model-results</b>.json" in body
    assert "<img src=x onerror=alert(1)>" in body
    assert page.locator("bdi", has_text="evil-model-with").count() >= 1
    assert page.problems == [], page.problems


def test_a_runs_scores_and_the_history_link_to_the_exports(page):
    run = page.runs["run-2026-11-23-f00dfa"]
    page.goto(page.base + f"/runs/{run.pk}/scores/")
    links = page.locator(".publish-links a")
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert f"/publish/blocks.md?run={run.pk}" in hrefs
    assert f"/publish/model-results.json?run={run.pk}" in hrefs
    page.goto(page.base + f"/history/?digest={run.corpus_digest}")
    assert page.locator(".publish-links a[href='/publish/records/']").count() == 1
    blocks = page.request.get(page.base + f"/publish/blocks.md?run={run.pk}")
    assert blocks.ok and "<!-- START MODEL EVAL LEGEND -->" in blocks.text()
