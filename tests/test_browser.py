"""A person's path through the dashboard in a real Chromium, under the real CSP."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from records.devtools.synth import DEMO_KEY, demo_runs
from records.ingest import ingest, inputs_from_paths
from records.models import Attempt, Upload

CHROMIUM = os.environ.get("EVALDASH_CHROMIUM", "/usr/bin/chromium")
REQUIRED = os.environ.get("EVALDASH_REQUIRE_BROWSER") == "1"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
    if REQUIRED:
        raise RuntimeError(f"EVALDASH_REQUIRE_BROWSER=1 but there is no Chromium at {CHROMIUM}")
    pytest.skip(f"no Chromium at {CHROMIUM}", allow_module_level=True)

# Playwright's sync API runs an event loop in this thread; the ORM calls in these tests are
# plain set-up, not concurrent work.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield b
        b.close()


@pytest.fixture
def page(browser, live_server, settings, tmp_path):
    settings.EVALDASH_PUBLIC_READ = True
    ingest(
        inputs_from_paths([DEMO_KEY, *demo_runs(tmp_path)]), Upload.objects.create(source="demo")
    )
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    pg.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    pg.problems = problems
    pg.base = live_server.url
    yield pg
    context.close()


def settled(page) -> None:
    """Wait until htmx has swapped and settled what it loaded."""
    busy = page.locator(".htmx-request, .htmx-swapping, .htmx-settling")
    for _ in range(200):  # locators, not evaluated script: the pages' CSP forbids eval
        if busy.count() == 0:
            break
        page.wait_for_timeout(20)
    page.wait_for_timeout(50)


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


def test_the_conformance_matrix_reads_in_a_browser(page, tmp_path):
    from pathlib import Path

    from records.conformance.store import RunMeta, store_run
    from records.ingest import bytes_input

    fix = Path(__file__).parent / "fixtures" / "conformance"
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
    first.locator("details.flips summary").click()  # click 2 folds them; the cases were read
    page.select_option("#compare-form select[name=kind]", "surfaces")
    page.select_option("#compare-form select[name=run]", label="run-2026-11-23-f00dfa")
    page.click("#compare-form button[type=submit]")
    page.wait_for_url("**kind=surfaces**")
    assert "individual" in page.locator("#result").inner_text()
    assert page.problems == [], page.problems


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

    fixtures = Path(__file__).parent / "fixtures"
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
    from records.scores.run import latest_scoring
    from records.scores.tables import score_groups

    run = Run.objects.get(run_id="run-2026-11-23-f00dfa")
    # The demo repeats each case twice: intervals take the case as the unit.
    groups = score_groups(latest_scoring(run))
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
