"""A row's history over the runs of one corpus digest: its points, intervals and first drop."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from records import stats
from records.devtools.synth import MODELS
from records.models import Run, Verdict
from records.queries.gate import gate
from records.queries.history import history
from records.scoring.ranking import paired_tests
from records.scoring.tables import case_figures
from records.scoring.vocabulary import COLUMN_BY_TITLE
from tests.builders import demo_key, ingest_bytes, synth_run

pytestmark = pytest.mark.django_db
NANO, BEFORE, REGRESSED, AFTER = (
    "openai:gpt-5.4-nano",
    "run-2026-11-16-a1b2c3",
    "run-2026-11-23-f00dfa",
    "run-2026-11-24-ee1234",
)


def _per_case(run, model, surface):
    out = {}
    for case, clean, counted in Verdict.objects.filter(
        scoring=run.latest_scoring(), model=model, surface=surface
    ).values_list("case", "clean", "counted"):
        n, d = out.get(case, (0, 0))
        out[case] = (n + (counted and clean), d + counted)
    return out


def test_the_first_drop_beyond_noise_is_marked_with_its_comparison(demo):
    h = history(demo[BEFORE].corpus_digest, NANO, "meta", None, "Clean")
    assert [p.run.run_id for p in h.points] == [BEFORE, REGRESSED, AFTER]
    assert h.mode == "default"
    first, drop, after = h.points
    assert first.test is None and drop.previous == demo[BEFORE]
    # Each point is the run's own figure, its interval taking the case as the unit (repeat 2).
    cases = _per_case(demo[REGRESSED], NANO, "meta")
    assert drop.ratio == (sum(n for n, _ in cases.values()), sum(d for _, d in cases.values()))
    assert drop.interval == stats.case_interval(list(cases.values()))
    # The drop is the paired test over the cases both runs share, decided as the gate decides
    # the pair (Holm over its rows), and it is marked once.
    before = _per_case(demo[BEFORE], NANO, "meta")
    shared = sorted(set(before) & set(cases))
    want = stats.compare([before[c] for c in shared], [cases[c] for c in shared])
    assert drop.test.p_value == want.p_value
    gated = gate(demo[REGRESSED], demo[BEFORE], "Clean").regressed
    assert any(r["key"]["model"] == NANO and r["key"]["surface"] == "meta" for r in gated)
    assert drop.decision.label == "regressed" and drop.first_drop and h.first_drop is drop
    assert not after.first_drop


def test_a_row_that_never_fell_has_no_drop(demo):
    h = history(
        demo[BEFORE].corpus_digest, "anthropic:claude-haiku-4-5-20251001", "dynamic", None, "Clean"
    )
    assert len(h.points) == 3 and h.first_drop is None


def test_the_history_page_lives_in_the_url(client, viewer, demo):
    digest = demo[BEFORE].corpus_digest
    assert digest in client.get("/history/").content.decode()
    rows = client.get(f"/history/?digest={digest}").content.decode()
    assert "Pick a row" in rows and NANO in rows
    q = f"digest={digest}&model={NANO}&surface=meta&column=Clean"
    page = client.get(f"/history/?{q}")
    html = page.content.decode()
    assert "First drop beyond noise" in html
    base, cand = demo[BEFORE].pk, demo[REGRESSED].pk
    assert f"/compare/?kind=runs&amp;baseline={base}&amp;candidate={cand}" in html
    fig = page.context["chart"]
    assert fig["data"][2]["customdata"][1][0] == REGRESSED
    assert fig["data"][3]["name"] == "first drop beyond noise"
    assert client.get(f"/history/?{q}&column=Nope").status_code == 400
    # The run page's score rows link here.
    run_page = client.get(f"/runs/{cand}/scores/").content.decode()
    assert f"/history/?digest={digest}&amp;model=openai%3Agpt-5.4-nano&amp;surface=meta" in run_page


def _store_runs(first: int, last: int) -> None:
    """Synthetic runs `first` to `last` of the demo's corpus, a day apart."""
    ingest_bytes(("key.json", demo_key()))
    for n in range(first, last + 1):
        shard = synth_run(
            f"run-{n}",
            seed=n,
            commit=f"{n:040x}",
            started_at=datetime(2026, 10, 1, 9) + timedelta(days=n),
            models=MODELS[:2],
            surfaces=("dynamic", "meta"),
        )
        ingest_bytes((f"modeleval-{n}.jsonl", shard))


@pytest.mark.parametrize("title", ["Clean", "Completion"])
def test_a_history_costs_the_same_queries_for_three_runs_or_six(db, title):
    def queries() -> int:
        digest = Run.objects.values_list("corpus_digest", flat=True).first()
        with CaptureQueriesContext(connection) as seen:
            h = history(digest, MODELS[0].spec, "meta", None, title)
        assert len(h.points) == Run.objects.count()
        column = COLUMN_BY_TITLE[title]
        for p, q in zip(h.points[:-1], h.points[1:], strict=True):  # per-case figures, read apart
            before = case_figures(p.run.latest_scoring(), [p.row_key])[p.row_key]
            now = case_figures(q.run.latest_scoring(), [q.row_key])[q.row_key]
            assert q.test.p_value == paired_tests(before, now, (column,))[column].p_value
        return len(seen)

    _store_runs(1, 3)
    three = queries()
    _store_runs(4, 6)
    # Any column, not Clean alone: the pairs' figures are read in one query, not one a run.
    assert queries() == three <= 9
