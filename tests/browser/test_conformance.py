"""The conformance pages: the matrix of adapters and cases."""

from __future__ import annotations

import pytest

from records.ingest import ingest
from records.models import Upload
from tests.browser.conftest import check_layout

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_conformance_matrix_reads_in_a_browser(page, tmp_path):
    from pathlib import Path

    from records.conformance.store import RunMeta, store_run
    from records.ingest import bytes_input

    fix = Path(__file__).parent.parent / "fixtures" / "conformance"
    up = Upload.objects.create(source="cli")
    ingest([bytes_input("cases.json", (fix / "cases.json").read_bytes())], up)
    store_run(
        (fix / "run-two-failures.jsonl").read_bytes(),
        "out.jsonl",
        RunMeta("java/langchain4j", 1),
        up,
    )
    store_run(
        b"", "aborted.jsonl", RunMeta("dotnet/agent-framework", 1, error="driver: exec failed"), up
    )
    page.goto(page.base + "/conformance/")
    matrix = page.locator("#conformance-matrix")
    assert matrix.locator("tbody tr").count() == 2
    assert matrix.locator("td.fail").count() == 2 and matrix.locator("td.pass").count() == 8
    assert "not marked untrusted" in matrix.locator("td.fail").first.inner_text()
    assert "aborted" in matrix.locator("td.aborted").inner_text()
    page.screenshot(path=str(tmp_path / "conformance.png"), full_page=True)
    assert page.problems == [], page.problems


def test_the_conformance_pages_read_at_both_widths(page):
    check_layout(page, "/conformance/")


def test_a_failed_cell_is_in_view_at_1440_without_scrolling_sideways(page):
    from pathlib import Path

    from records.conformance.store import RunMeta, store_run
    from records.ingest import bytes_input

    fix = Path(__file__).parent.parent / "fixtures" / "conformance"
    up = Upload.objects.create(source="cli")
    ingest([bytes_input("cases.json", (fix / "cases.json").read_bytes())], up)
    passing = (fix / "run-all-pass.jsonl").read_bytes()
    # The suite's last case failed, by the adapter last in name order: the corner a wide
    # matrix hid at the far right.
    last = b'"case":"a_turn_retried_a_second_later_is_stored_once"'
    lines = passing.splitlines()
    lines = [
        ln.replace(
            b'"passed":true',
            b'"passed":false,"failures":["memory message 0 is not marked untrusted"]',
        )
        if last in ln
        else ln
        for ln in lines
    ]
    lines[-1] = lines[-1].replace(b'"failed":0', b'"failed":1')
    for adapter in ("a/passes", "b/passes", "c/passes"):
        store_run(passing, "out.jsonl", RunMeta(adapter, 0), up)
    store_run(b"\n".join(lines) + b"\n", "out.jsonl", RunMeta("z/fails-last", 1), up)
    page.set_viewport_size({"width": 1440, "height": 1000})
    page.goto(page.base + "/conformance/")
    fails = page.locator("#conformance-matrix td.fail")
    assert fails.count() == 1
    for i in range(fails.count()):
        box = fails.nth(i).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 1440, box
    # The failing adapter is the first row; its name stays put when the matrix scrolls.
    first = page.locator("#conformance-matrix tbody tr").first.locator("th")
    assert "z/fails-last" in first.inner_text()
    assert first.evaluate("th => getComputedStyle(th).position") == "sticky"
    assert page.problems == [], page.problems
