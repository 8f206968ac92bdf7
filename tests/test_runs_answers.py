"""The runs list marks each run's Clean against its previous comparable run by the gate's rule:
a planted regression reads "regressed", a change of seed only "within noise", a first run "no
baseline"; each mark links to its comparison and agrees with the gate; a page costs the same
queries however many runs it lists."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from records.devtools.synth import MODELS
from records.models import Run
from records.queries.answers import answers
from records.queries.gate import gate, previous_comparable
from tests.builders import demo_key, ingest_bytes, synth_run

pytestmark = pytest.mark.django_db

WEAKENED = (MODELS[1].spec, "meta")


def _store(n: int, seed: int, regress: dict | None = None) -> None:
    shard = synth_run(
        f"run-{n}",
        seed=seed,
        commit=f"{n:040x}",
        started_at=datetime(2026, 10, 1, 9) + timedelta(days=n),
        repeat=2,
        models=MODELS[:2],
        surfaces=("dynamic", "meta"),
        regress=regress,
    )
    ingest_bytes((f"modeleval-{n}.jsonl", shard))


@pytest.fixture
def three(db):
    """A first run, a second differing only by its seed, a third with one row weakened."""
    ingest_bytes(("key.json", demo_key()))
    _store(1, seed=7)
    _store(2, seed=8)
    _store(3, seed=9, regress={WEAKENED: 0.85})
    return {r.run_id: r for r in Run.objects.all()}


def test_the_runs_list_reads_regressed_within_noise_and_no_baseline(client, viewer, three):
    page = client.get("/")
    marks = page.context["answers"]
    first, second, third = three["run-1"], three["run-2"], three["run-3"]
    assert marks[first.pk].label == "no baseline" and marks[first.pk].comparison_url is None
    assert marks[second.pk].label == "within noise" and marks[second.pk].baseline == first.pk
    assert marks[third.pk].label == "regressed"
    assert marks[third.pk].decision.count("regressed") == 1
    html = page.content.decode()
    link = f"/compare/?kind=runs&baseline={second.pk}&candidate={third.pk}"
    assert f'class="compare-prev answer-regressed" href="{link}"' in html
    assert 'class="compare-prev answer-within-noise"' in html
    assert html.count('class="answer-no-baseline"') == 1
    # The rule is named on the page, as every page that decides names it.
    assert "case by case on Clean, Holm-adjusted over the rows compared, 5% family-wise" in html


def test_each_mark_is_what_the_gate_answers_for_the_run(three, demo):
    runs = list(Run.objects.order_by("started_at", "id"))
    marks = answers(runs)
    for run in runs:
        baseline = previous_comparable(run)
        result = gate(run, baseline, "Clean")
        mark = marks[run.pk]
        assert mark.baseline == (baseline.pk if baseline else None)
        if baseline is None:
            assert mark.label == "no baseline"
            continue
        assert mark.rows == result.rows
        assert (mark.label == "regressed") == (not result.passed)
        assert mark.decision.count("regressed") == len(result.regressed)
    # The demo's second run regresses one model on meta, and its third then recovers.
    assert {marks[r.pk].label for r in runs if r.run_id.startswith("run-2026")} == {
        "no baseline",
        "regressed",
        "improved",
    }


def test_the_marks_cost_the_same_queries_for_one_run_or_many(three, demo):
    with CaptureQueriesContext(connection) as one:
        answers([three["run-2"]])
    runs = list(Run.objects.all())
    with CaptureQueriesContext(connection) as six:
        marked = answers(runs)
    assert len(marked) == 6 and sum(1 for a in marked.values() if a.rows) == 4
    assert len(one) == len(six) == 5


def test_a_run_whose_baseline_is_not_scored_is_not_compared(three):
    from records.models import Scoring

    Scoring.objects.filter(run=three["run-2"]).update(verdict_count=0)
    marks = answers([three["run-2"], three["run-3"]])
    assert marks[three["run-2"].pk].label == "not compared"
    assert marks[three["run-3"].pk].label == "not compared"
    assert marks[three["run-3"].pk].comparison_url  # the comparison says why
