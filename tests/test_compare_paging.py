"""The comparison of two runs with hundreds of changed cases pages each row's case list: a page
holds one page of cases, the next is a link away (in place by htmx), and the exports stay whole."""

from __future__ import annotations

import io
import json
import re
from datetime import datetime

import pytest

from records.devtools.synth import MODELS, load_demo_key, widen_key, write_run
from records.formats.corpus_key import key_to_json
from records.models import Run
from records.queries.compare import FLIP_ORDER, FLIPS_SHOWN
from tests.builders import ingest_bytes

pytestmark = pytest.mark.django_db

CASE_ROW = re.compile(r'<tr class="flip-[^"]*">\s*<td><a class="case-link"[^>]*&amp;case=([^"&]+)"')
LATER = re.compile(r'<a href="(/compare/cases/\?[^"]+)"\s+hx-get="[^"]+"[^>]*>later cases')


def paged_run(key, run_id: str, seed: int, regress: float) -> bytes:
    buf = io.BytesIO()
    write_run(
        buf,
        key,
        run_id=run_id,
        commit=f"{seed:040x}",
        started_at=datetime(2026, 11, seed, 9),
        seed=seed,
        models=MODELS[:1],
        surfaces=("dynamic",),
        regress={(MODELS[0].spec, "dynamic"): regress},
    )
    return buf.getvalue()


def paged_pair(prefix: str) -> tuple[Run, Run]:
    """A baseline and a regressed candidate over a 400-case corpus, stored with their key."""
    key = widen_key(load_demo_key(), 400)
    report = ingest_bytes(
        ("corpus-key.json", json.dumps(key_to_json(key)).encode()),
        ("modeleval-a.jsonl", paged_run(key, f"{prefix}-a", 1, 0.0)),
        ("modeleval-b.jsonl", paged_run(key, f"{prefix}-b", 2, 0.6)),
    )
    assert report.ok
    return Run.objects.get(run_id=f"{prefix}-a"), Run.objects.get(run_id=f"{prefix}-b")


@pytest.fixture
def runs():
    return paged_pair("run")


def _html(html) -> str:
    return html.replace("&amp;", "&")


def test_a_row_of_hundreds_of_changed_cases_shows_one_page_and_reaches_every_other(
    client, viewer, runs
):
    a, b = runs
    html = client.get(f"/compare/?kind=runs&baseline={a.pk}&candidate={b.pk}").content.decode()
    shown = CASE_ROW.findall(html)
    assert len(shown) == FLIPS_SHOWN
    rows = client.get(f"/compare.json?kind=runs&baseline={a.pk}&candidate={b.pk}").json()["rows"]
    (changed,) = [r["cases"] for r in rows if r["cases"]]
    assert len(changed) > 3 * FLIPS_SHOWN  # hundreds of changes: several pages
    later = LATER.search(html)
    assert later, "the next page of cases is linked"
    seen = list(shown)
    while later:
        part = client.get(_html(later.group(1)), headers={"HX-Request": "true"}).content.decode()
        assert part.lstrip().startswith('<div class="case-changes">') and "<html" not in part
        page = CASE_ROW.findall(part)
        assert 0 < len(page) <= FLIPS_SHOWN
        seen += page
        later = LATER.search(part)
    # Every changed case once, in the order the export lists them (regressions first).
    assert seen == [c["case"] for c in changed]


def test_a_page_of_cases_is_a_page_of_its_own_without_javascript(client, viewer, runs):
    a, b = runs
    html = client.get(f"/compare/?kind=runs&baseline={a.pk}&candidate={b.pk}").content.decode()
    url = _html(LATER.search(html).group(1))
    page = client.get(url).content.decode()
    assert "<html" in page and "back to the comparison" in page
    assert f"changed cases {FLIPS_SHOWN + 1} to {2 * FLIPS_SHOWN} of" in page
    assert "earlier cases" in page
    # Past the end, the last page.
    last = client.get(url.replace("page=2", "page=999")).content.decode()
    assert "later cases" not in last and len(CASE_ROW.findall(last)) > 0


def test_the_exports_carry_every_changed_case(client, viewer, runs):
    a, b = runs
    query = f"kind=runs&baseline={a.pk}&candidate={b.pk}"
    rows = client.get(f"/compare.json?{query}").json()["rows"]
    (row,) = [r for r in rows if r["cases"]]
    assert len(row["cases"]) == sum(row[k] for k in FLIP_ORDER if k != "still passing") > 150


@pytest.mark.parametrize("query", ["", "baseline=1", "baseline=1&candidate=2&a=x&b=y&page=0"])
def test_a_case_list_without_its_rows_is_refused(client, viewer, query):
    assert client.get(f"/compare/cases/?{query}").status_code == 400
