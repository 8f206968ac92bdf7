"""Exports carry what the page shows, as numbers: the comparison's reading, interval and p per
column, its counts as integers; the attempts list's verdict and a summary of its calls."""

from __future__ import annotations

import csv
import io
import re

import pytest

from records.devtools.synth import demo_key
from tests.browser import shared_demo
from tests.browser.shared_demo import run_pk

pytestmark = [pytest.mark.browser, pytest.mark.django_db]
site, pg = shared_demo.site, shared_demo.pg


def test_the_comparison_export_carries_the_pages_reading_interval_and_p_as_numbers(pg, site):
    base, cand = run_pk(site, "run-2026-11-16-a1b2c3"), run_pk(site, "run-2026-11-23-f00dfa")
    pg.goto(pg.base + f"/compare/?kind=runs&baseline={base}&candidate={cand}")
    first = pg.locator("table.compare-summary tbody tr").first
    reading = first.locator("td").nth(1).inner_text().strip()
    regressed = int(first.locator("td").nth(2).inner_text())
    clean = first.locator("td.delta").first  # the Clean column
    # "regressed: -75.2 to -25.5 (99.6%), Holm p < 0.001": the decided column's reading
    said = clean.get_attribute("title")
    label, low, high, p = re.fullmatch(
        r"(.+): (\S+) to (\S+) \(\S+%\), Holm p ([=<] \S+)", said
    ).groups()

    href = pg.locator("a", has_text="JSON").first.get_attribute("href")
    row = pg.request.get(pg.base + href).json()["rows"][0]
    assert row["reading"] == reading
    assert row["regressed"] == regressed and isinstance(row["regressed"], int)
    assert row["Clean reading"] == label
    assert f"{row['Clean delta low (points)']:+.1f}" == low
    assert f"{row['Clean delta high (points)']:+.1f}" == high
    adjusted = row["Clean p adjusted"]
    assert p == ("< 0.001" if adjusted < 0.0005 else f"= {adjusted:.3f}")
    n, d = row["Clean after n"], row["Clean after d"]
    assert isinstance(n, int) and isinstance(d, int) and 0 <= n <= d
    assert row["Clean after rate"] == pytest.approx(n / d, abs=5e-7)  # six places

    href = pg.locator("a", has_text="CSV").first.get_attribute("href")
    lines = list(csv.DictReader(io.StringIO(pg.request.get(pg.base + href).text())))
    assert lines[0]["Clean after n"] == str(n) and lines[0]["Clean p"] == str(row["Clean p"])
    assert all(line.keys() == lines[0].keys() for line in lines)
    assert not any(" / " in v for line in lines for v in line.values())  # no "9 / 15" strings


def test_the_attempts_exports_carry_each_verdict_and_a_summary_of_its_calls(pg, site):
    from records.models import Attempt, Call, Verdict

    run = run_pk(site, "run-2026-11-23-f00dfa")
    pg.goto(pg.base + f"/runs/{run}/attempts/?outcome=failed")
    href = pg.locator("#attempt-list a", has_text="JSON").first.get_attribute("href")
    rows = pg.request.get(pg.base + href).json()["rows"]
    shown = int(pg.locator(".attempt-count").inner_text().replace(",", ""))
    assert len(rows) == shown > 0
    for row in rows[:5]:
        attempt = Attempt.objects.get(pk=row["id"])
        verdict = Verdict.objects.filter(attempt=attempt).latest("scoring_id")
        assert row["outcome"] == verdict.outcome == "failed"
        assert row["clean"] is False and row["scored_against"] == demo_key().digest
        calls = Call.objects.filter(attempt=attempt).order_by("line", "index")
        assert row["calls_summary"] == "; ".join(f"{c.tool} {c.outcome}" for c in calls)
    href = pg.locator("#attempt-list a", has_text="CSV").first.get_attribute("href")
    lines = list(csv.DictReader(io.StringIO(pg.request.get(pg.base + href).text())))
    assert {line["outcome"] for line in lines} == {"failed"}
    assert all(line["calls_summary"] for line in lines)
