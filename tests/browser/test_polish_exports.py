"""Exports carry what the page shows, as numbers: the comparison's reading, interval and p per
column, its counts as integers; the attempts list's verdict and a summary of its calls."""

from __future__ import annotations

import csv
import io
import re

import pytest

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
    said = clean.get_attribute("title")  # "regressed: -40.0 to -6.7, p = 0.031"
    label, low, high, p = re.fullmatch(r"(.+): (\S+) to (\S+), p = (\S+)", said).groups()

    href = pg.locator("a", has_text="JSON").first.get_attribute("href")
    row = pg.request.get(pg.base + href).json()["rows"][0]
    assert row["reading"] == reading
    assert row["regressed"] == regressed and isinstance(row["regressed"], int)
    assert row["Clean reading"] == label
    assert f"{row['Clean delta low (points)']:+.1f}" == low
    assert f"{row['Clean delta high (points)']:+.1f}" == high
    assert f"{row['Clean p']:.3f}" == p
    n, d = row["Clean after n"], row["Clean after d"]
    assert isinstance(n, int) and isinstance(d, int) and 0 <= n <= d
    assert row["Clean after rate"] == pytest.approx(n / d)

    href = pg.locator("a", has_text="CSV").first.get_attribute("href")
    lines = list(csv.DictReader(io.StringIO(pg.request.get(pg.base + href).text())))
    assert lines[0]["Clean after n"] == str(n) and lines[0]["Clean p"] == str(row["Clean p"])
    assert all(line.keys() == lines[0].keys() for line in lines)
    assert not any(" / " in v for line in lines for v in line.values())  # no "9 / 15" strings
