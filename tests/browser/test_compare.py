"""Comparisons: runs, surfaces and models side by side, their charts, and their errors."""

from __future__ import annotations

import pytest

from records.ingest import ingest
from records.models import Upload
from tests.browser.conftest import check_layout, settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
BEFORE, AFTER = "run-2026-11-16-a1b2c3", "run-2026-11-23-f00dfa"


def test_every_comparison_reads_at_both_widths(page):
    a, b = page.runs[BEFORE].pk, page.runs[AFTER].pk
    check_layout(page, "/compare/")
    check_layout(page, f"/compare/?kind=runs&baseline={a}&candidate={b}")
    check_layout(page, f"/compare/?kind=surfaces&run={b}")
    check_layout(page, f"/compare/?kind=models&run={b}")


def test_an_error_answer_is_shown_where_the_person_asked(page):
    a = page.runs[BEFORE].pk
    page.goto(page.base + "/compare/")
    page.select_option("#compare-form select[name=baseline]", str(a))
    page.select_option("#compare-form select[name=candidate]", [str(a)])
    page.click("#compare-form button[type=submit]")
    error = page.locator("#compare-form + .request-error")
    error.wait_for()
    assert "the baseline is also a candidate" in error.inner_text()
    # Put right, the error goes and the comparison shows.
    page.select_option("#compare-form select[name=candidate]", [str(page.runs[AFTER].pk)])
    page.click("#compare-form button[type=submit]")
    page.wait_for_selector("section.comparison")
    settled(page)
    assert page.locator(".request-error").count() == 0
    # The browser logs the 400 it was given; nothing else went wrong.
    assert [p for p in page.problems if "400" not in p] == [], page.problems


EVIL = '<a href="https://evil.invalid/"><b style="color:red">evil</b></a>'
HOVER_FIRST_VALUE = """gd => {
  const trace = gd.data.findIndex(t => t.y.some(v => v !== null));
  const point = gd.data[trace].y.findIndex(v => v !== null);
  window.Plotly.Fx.hover(gd, [{curveNumber: trace, pointNumber: point}]);
}"""


def test_a_model_name_carrying_markup_is_plain_text_in_every_chart(page, tmp_path):
    import json
    from pathlib import Path

    from records.ingest import bytes_input
    from records.models import Run

    fixtures = Path(__file__).parent.parent / "fixtures"
    price = (
        '"price":{"input_per_million_usd":1,"output_per_million_usd":2,'
        '"cache_write_per_million_usd":1,"cache_read_per_million_usd":0.1,'
        '"retrieved_on":"2026-11-01"}'
    )
    shard = (
        (fixtures / "modelrecord" / "modeleval-dynamic.jsonl")
        .read_text()
        .replace('"fixture-corpus"', '"b519a10571ab2192"')
        .replace("run-fixture-dynamic", "run-markup")
    )
    providers = []
    for plain, evil in (("fake:perfect", EVIL), ("fake:wrong-args", EVIL.replace("evil", "evil2"))):
        name = json.dumps(evil)[1:-1]
        shard = shard.replace(plain, name)
        providers.append(f'{{"spec":"{name}","name":"{name}","model":"m",{price}}}')
    shard = shard.replace('"repeat":1}}', f'"repeat":1,"providers":[{",".join(providers)}]}}}}')
    report = ingest(
        [
            bytes_input("key.json", (fixtures / "corpus" / "corpus-key-sample.json").read_bytes()),
            bytes_input("modeleval-markup.jsonl", shard.encode()),
        ],
        Upload.objects.create(source="cli"),
    )
    assert report.ok, report.refused
    run = Run.objects.get(run_id="run-markup")
    charts = 0
    for url in (f"/runs/{run.pk}/cost/", f"/compare/?kind=models&run={run.pk}"):
        page.goto(page.base + url)
        # Charts in a closed <details> are drawn when it opens: open them all.
        page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        drawn = page.locator("[data-plotly]")
        assert drawn.count() > 0, url
        for i in range(drawn.count()):
            chart = drawn.nth(i)
            chart.locator(".main-svg").first.wait_for(timeout=15000)
            # Hover a mark with a value: the label names the model, as the text it is.
            chart.evaluate(HOVER_FIRST_VALUE)
            hover = chart.locator(".hoverlayer")
            hover.locator("text").first.wait_for(timeout=5000)
            assert '<a href="https://evil' in hover.text_content(), url
            # Never a link or bold markup, in the chart, its legend, axes or hover label.
            assert chart.locator("a").count() == 0, url
            assert chart.locator("text[style*='red'], tspan[style*='red']").count() == 0, url
            charts += 1
    # the cost chart, the ranked intervals and bars per group, the cost-quality scatter
    assert charts >= 4
    page.screenshot(path=str(tmp_path / "markup.png"), full_page=True)
    assert page.problems == [], page.problems


def test_a_rates_interval_reads_off_the_chart_hover_and_the_table_cell(page):
    from records.models import Run
    from records.scoring.tables import score_groups

    run = Run.objects.get(run_id="run-2026-11-23-f00dfa")
    # The demo repeats each case twice: intervals take the case as the unit.
    groups = score_groups(run.latest_scoring())
    clean = {r.model: dict(r.columns)["clean"] for r in groups[0].rows}
    best = min(groups[0].rows, key=lambda r: (-clean[r.model][0] / clean[r.model][1], r.model))
    page.goto(page.base + f"/compare/?kind=models&run={run.pk}")
    chart = page.locator("[data-plotly]").first  # the first group's ranking by Clean
    chart.locator(".main-svg").first.wait_for(timeout=15000)
    chart.evaluate(HOVER_FIRST_VALUE)
    hover = chart.locator(".hoverlayer")
    hover.locator("text").first.wait_for(timeout=5000)
    text = hover.text_content()
    n, d = dict(best.columns)["clean"]
    assert best.model in text and f"Clean {n} / {d}" in text
    assert f"95% interval {best.interval('clean').points()}" in text
    page.goto(page.base + f"/runs/{run.pk}/scores/")
    first = groups[0].rows[0]
    cell = page.locator("td.num:has(span.ci)").first
    n, d = dict(first.columns)["clean"]
    assert cell.locator("a.hits").inner_text() == f"{n} / {d}"
    assert cell.locator("span.ci").inner_text() == first.interval("clean").points()
    assert page.problems == [], page.problems


def test_the_compare_form_asks_only_what_the_kind_needs_and_finds_runs(page):
    page.goto(page.base + "/compare/")
    form = page.locator("#compare-form")
    assert form.locator("select[name=baseline]").is_visible()
    assert not form.locator("select[name=run]").is_visible()
    page.select_option("#compare-form select[name=kind]", "models")
    assert form.locator("select[name=run]").is_visible()
    assert not form.locator("select[name=baseline]").is_visible()
    form.locator("input[data-filters-runs]").fill("f00d")
    shown = form.locator("select[name=run] option:not([hidden])").all_inner_texts()
    assert [t for t in shown if t != "—"] == ["run-2026-11-23-f00dfa"]
    page.select_option("#compare-form select[name=run]", label="run-2026-11-23-f00dfa")
    page.click("#compare-form button[type=submit]")
    page.wait_for_url("**kind=models**")
    assert "baseline=" not in page.url  # the fields this kind does not need are not sent
    settled(page)
    page.go_back()  # the form shows the kind it was at, with that kind's fields
    page.wait_for_url(lambda url: "kind=models" not in url)
    settled(page)
    assert page.locator("#compare-form select[name=kind]").input_value() in ("", "runs")
    assert form.locator("select[name=baseline]").is_visible()
    assert not form.locator("select[name=run]").is_visible()
    assert page.problems == [], page.problems


def test_a_comparison_opens_with_its_summary(page):
    a, b = page.runs[BEFORE].pk, page.runs[AFTER].pk
    page.goto(page.base + f"/compare/?kind=runs&baseline={a}&candidate={b}")
    first = page.locator("table.compare-summary tbody tr").first
    assert "openai:gpt-5.4-nano surface=meta" in first.inner_text()
    assert "regressed" in first.inner_text()
    assert int(first.locator("td.num").first.inner_text()) >= 1
    assert page.problems == [], page.problems


def test_the_runs_comparison_folds_the_rows_within_noise_below_the_changed_ones(page):
    a, b = page.runs[BEFORE].pk, page.runs[AFTER].pk
    page.goto(page.base + f"/compare/?kind=runs&baseline={a}&candidate={b}")
    shown = page.locator("#result > section.comparison")
    folded = page.locator("details.unchanged-rows section.comparison")
    assert shown.count() >= 1
    # A row left open reads beyond noise; the demo's others flipped a case or two by chance.
    for i in range(shown.count()):
        head = shown.nth(i).locator("h3")
        assert head.locator(".evidence.e-regressed, .evidence.e-improved").count(), (
            head.inner_text()
        )
    assert folded.count() >= 1
    assert not folded.first.is_visible()
    summary = page.locator("details.unchanged-rows > summary")
    assert f"{folded.count()} rows within noise" in summary.inner_text()
    # The summary table's rows follow the same order: the changed ones first.
    rows = page.locator("table.compare-summary tbody tr")
    classes = [rows.nth(i).get_attribute("class") or "" for i in range(rows.count())]
    assert classes == sorted(classes, key=lambda c: "unchanged" in c)
    height = page.evaluate("() => document.documentElement.scrollHeight")
    summary.click()
    assert folded.first.is_visible()
    opened = page.evaluate("() => document.documentElement.scrollHeight")
    assert height < opened
    print(f"\n[compare] {height} px folded, {opened} px open")
    assert page.problems == [], page.problems
