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
