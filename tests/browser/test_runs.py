"""The runs list: filters that follow the address, the headline, and the paths from it."""

from __future__ import annotations

import pytest

from records.models import Attempt
from tests.browser.conftest import check_layout, settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_runs_list_reads_at_both_widths(page):
    check_layout(page, "/")
    check_layout(page, "/?model=gpt&sort=commit")


def test_a_person_filters_runs_opens_a_run_sees_the_chart_and_reads_a_trace(page):
    page.goto(page.base + "/")
    assert page.locator("#runs-table tbody tr").count() == 3
    page.select_option("select[name=surface]", "meta")
    page.fill("input[name=commit]", "f00d")
    page.press("input[name=commit]", "Enter")
    page.wait_for_url("**commit=f00d**")
    rows = page.locator("#runs-table tbody tr")
    rows.first.wait_for()
    assert rows.count() == 1 and "run-2026-11-23-f00dfa" in rows.first.inner_text()

    rows.first.locator("a").first.click()
    page.wait_for_selector("section.board")  # the run opens on its overview
    page.click("nav.run-tabs >> text=Cost")  # a tab loads in place, at its own address
    page.wait_for_url("**/cost/")
    page.wait_for_selector("#cost-chart .main-svg", timeout=15000)  # Plotly drew the chart
    assert page.locator("#cost-chart .bars .point").count() > 0

    page.click("nav.run-tabs >> text=Attempts")
    page.wait_for_url("**/attempts/")
    settled(page)
    page.select_option("form.filters select[name=ended_by]", "completed")
    page.wait_for_url("**ended_by=completed**")
    endings = page.locator("#attempt-list .ended-by").all_inner_texts()
    assert endings and set(endings) == {"completed"}

    page.goto(page.base + f"/attempts/{_attempt_with_thinking()}/")
    details = page.locator("details.thinking").first
    assert details.get_attribute("open") is None
    details.locator("summary").click()
    assert details.get_attribute("open") is not None
    assert details.locator("pre").is_visible()
    assert page.problems == [], page.problems


def _attempt_with_thinking() -> int:
    for a in Attempt.objects.filter(model__startswith="anthropic:").order_by("pk"):
        if any(b.get("kind") == "thinking" for t in a.turns.all() for b in t.blocks):
            return a.pk
    raise AssertionError("the demo has no attempt with a thinking block")


def test_back_shows_the_filters_the_list_was_filtered_by(page):
    page.goto(page.base + "/")
    page.select_option("select[name=surface]", "meta")
    page.wait_for_url("**surface=meta**")
    settled(page)
    page.fill("input[name=commit]", "f00d")
    page.press("input[name=commit]", "Enter")
    page.wait_for_url("**commit=f00d**")
    settled(page)
    page.go_back()
    page.wait_for_url(lambda url: "commit=" not in url)
    settled(page)
    # The list is filtered by surface alone, and the controls say so.
    assert page.locator("select[name=surface]").input_value() == "meta"
    assert page.locator("input[name=commit]").input_value() == ""
    page.go_back()
    page.wait_for_url(lambda url: "surface=" not in url)
    settled(page)
    assert page.locator("select[name=surface]").input_value() == ""
    assert page.locator("#runs-table tbody tr").count() == 3
    assert page.problems == [], page.problems


def test_the_best_model_on_meta_by_clean_and_its_cost_is_two_clicks_from_home(page):
    page.goto(page.base + "/")
    page.locator("#runs-table tbody tr", has_text="run-2026-11-23-f00dfa").locator(
        "a"
    ).first.click()
    board = page.locator("section.board[data-surface=meta]")  # click 1: the run's overview
    board.wait_for()
    assert page.locator("nav.column-picker a.current").inner_text() == "Clean"
    top = board.locator("tbody tr").first
    assert "best" in top.locator("td.score").get_attribute("class")
    cost = top.locator("td.cost").inner_text()
    assert cost.startswith("$")
    # What it says is what the scores say: the best Clean on meta, and its cost per attempt.
    from records.queries.overview import boards
    from records.scoring.tables import score_groups

    run = page.runs["run-2026-11-23-f00dfa"]
    scoring = run.latest_scoring()
    (meta,) = [b for b in boards(scoring, score_groups(scoring), "Clean") if b.surface == "meta"]
    best = meta.standings[0]
    assert best.row.model in top.inner_text() and cost == f"${best.cost_per_attempt:,.4f}"
    assert page.problems == [], page.problems


def test_a_person_shows_a_regression_between_two_commits_in_two_clicks(page):
    page.goto(page.base + "/")
    row = page.locator("#runs-table tbody tr", has_text="run-2026-11-23-f00dfa")
    row.locator("a.compare-prev").click()  # click 1
    page.wait_for_selector("section.comparison")
    first = page.locator("section.comparison").first
    assert "openai:gpt-5.4-nano surface=meta" in first.locator("h3").inner_text()
    assert "regressed" in first.locator("h3").inner_text()
    cases = first.locator("details.flips tr.flip-regressed")
    assert cases.count() >= 1  # click 2 is not even needed: regressions open by default
    assert page.problems == [], page.problems
