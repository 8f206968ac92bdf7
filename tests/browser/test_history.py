"""A row's history over the runs of one corpus."""

from __future__ import annotations

import pytest

from tests.browser.conftest import check_layout

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_history_reads_at_both_widths_and_marks_the_drop(page):
    digest = page.runs["run-2026-11-23-f00dfa"].corpus_digest
    url = f"/history/?digest={digest}&model=openai:gpt-5.4-nano&surface=meta&column=Clean"
    check_layout(page, "/history/")
    check_layout(page, f"/history/?digest={digest}")
    check_layout(page, url)
    page.goto(page.base + url)
    page.wait_for_selector("[data-plotly=history-chart] .main-svg", timeout=15000)
    assert "run-2026-11-23-f00dfa" in page.locator(".fence").inner_text()
    assert page.locator("tr.first-drop").count() == 1
    # The mode the page chose is the one its control shows (a script must not blank it).
    assert page.locator("input[name=mode]").input_value() == "default"
    assert page.problems == [], page.problems
