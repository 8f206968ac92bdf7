"""Cases across runs: a case that flipped at run 5, one whose repeats disagree in every run, one
no model passes, one every model passes, and one that tells two models apart, each reported so
on the corpus page, its JSON and the case's page."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from records.devtools.synth import MODELS, load_demo_key
from records.models import CaseFigure, Run, Verdict
from tests.builders import ingest_series

KEY = load_demo_key()
CASES = [c.id for c in KEY.cases[:5]]
FLIP, FLAKY, NEVER, ALWAYS, SPLIT = CASES
STRONG, WEAK = MODELS[0].spec, MODELS[1].spec
RUNS = 8


def _marks(case: str, model: str, run: int) -> str:
    """The two repeats' outcomes planted for a case, model and run (1-based)."""
    if case == FLIP:
        return "11" if run <= 4 else "00"
    if case == FLAKY:
        return "10"
    if case == NEVER:
        return "00"
    if case == ALWAYS:
        return "11"
    return "11" if model == STRONG else "00"


@pytest.fixture
def planted(db):
    """Eight scored runs of the demo corpus, two models on one surface, two repeats of the first
    five cases; each case's outcomes then planted in its kept figures."""
    ingest_series(RUNS, repeat=2, cases=len(CASES))
    runs = list(Run.objects.order_by("started_at"))
    for n, run in enumerate(runs, start=1):
        for f in CaseFigure.objects.filter(scoring=run.latest_scoring()):
            f.marks = _marks(f.case, f.model, n)
            f.clean, f.counted, f.total = f.marks.count("1"), 2, 2
            f.save()
    return runs


def _cases(client, **query):
    answer = client.get("/cases.json", {"digest": KEY.digest, **query})
    assert answer.status_code == 200 and answer["Content-Type"] == "application/json"
    return answer.json()


def test_each_planted_case_is_reported_so(client, viewer, planted):
    data = _cases(client)
    assert data["digest"] == KEY.digest
    assert data["runs"] == [f"run-{n}" for n in range(1, RUNS + 1)]
    by_case = {c["case"]: c for c in data["cases"]}
    assert len(by_case) == len(KEY.cases)

    flip = by_case[FLIP]
    assert flip["flipped"] and not flip["flaky"]
    assert {m["first_flip"] for m in flip["by_model"]} == {"run-5"}
    assert [p["clean"] for p in flip["by_model"][0]["timeline"]] == [[2, 2]] * 4 + [[0, 2]] * 4

    flaky = by_case[FLAKY]
    assert flaky["flaky"] and not flaky["flipped"]
    assert all(m["flaky"] for m in flaky["by_model"])
    assert flaky["clean"] == [16, 32] and flaky["difficulty"] == 0.5

    assert by_case[NEVER]["never_passed"] and not by_case[NEVER]["always_passed"]
    assert by_case[ALWAYS]["always_passed"] and not by_case[ALWAYS]["never_passed"]
    for case in (NEVER, ALWAYS):
        assert by_case[case]["discrimination"] == 0
        assert not (by_case[case]["flaky"] or by_case[case]["flipped"])

    split = by_case[SPLIT]
    assert split["discrimination"] == 1.0
    others = [c["discrimination"] for c in data["cases"] if c["case"] != SPLIT]
    assert all(d is None or d < 1.0 for d in others)
    assert not (split["flaky"] or split["flipped"])
    rates = {m["model"]: m["clean"] for m in split["by_model"]}
    assert rates == {STRONG: [16, 16], WEAK: [0, 16]}
    for c in data["cases"]:
        if c["clean"][1]:
            assert c["low"] <= c["clean"][0] / c["clean"][1] <= c["high"]


def test_the_corpus_page_says_its_health_in_sentences_and_filters_to_each_flag(
    client, viewer, planted
):
    page = client.get("/cases/", {"digest": KEY.digest}).content.decode()
    assert "2 of the 5 cases with counted attempts carry no information" in page
    assert f"The cases that separate the models most: {SPLIT} (V = 1.00)" in page
    assert "1 case is flaky and 1 flipped." in page
    for flag, case in (
        ("flaky", FLAKY),
        ("flipped", FLIP),
        ("never_passed", NEVER),
        ("always_passed", ALWAYS),
    ):
        html = client.get("/cases/", {"digest": KEY.digest, "flag": flag}).content.decode()
        shown = [c for c in CASES if f"<bdi>{c}</bdi>" in html]
        assert shown == [case], flag


def test_the_corpus_page_sorts_by_discrimination_and_links_each_figure_to_the_search(
    client, viewer, planted
):
    page = client.get("/cases/", {"digest": KEY.digest, "sort": "-discrimination"})
    lines = [c for c, _ in page.context["lines"]]
    assert lines[0].case == SPLIT
    html = page.content.decode()
    assert f"/search/?digest={KEY.digest}&amp;case={SPLIT}&amp;clean=yes" in html
    assert client.get("/cases/", {"sort": "sideways"}).status_code == 400


def test_the_default_digest_is_the_newest_keys(client, viewer, planted):
    assert _cases(client)["digest"] == KEY.digest
    html = client.get("/cases/").content.decode()
    assert f"<code>{KEY.digest}</code>" in html


def test_narrowing_by_date_and_commit_keeps_the_runs_chosen(client, viewer, planted):
    after = _cases(client, since="2026-10-06")
    assert after["runs"] == ["run-5", "run-6", "run-7", "run-8"]
    flip = next(c for c in after["cases"] if c["case"] == FLIP)
    assert not flip["flipped"] and flip["never_passed"]
    assert _cases(client, commit=f"{3:040x}")["runs"] == ["run-3"]
    assert _cases(client, model="nano")["cases"][0]["by_model"][0]["model"] == WEAK
    bad = client.get("/cases.json", {"since": "yesterday"})
    assert bad.status_code == 400 and "since" in bad.json()["fields"]


def test_a_cases_page_shows_its_timelines_and_links_the_first_flip_to_the_comparison(
    client, viewer, planted
):
    page = client.get("/cases/case/", {"digest": KEY.digest, "case": FLIP})
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count("First flip:") == 2
    run4, run5 = planted[3], planted[4]
    assert f"/compare/case/?baseline={run4.pk}&amp;candidate={run5.pk}&amp;a=" in html
    line = page.context["line"]
    assert all(m.flip_at.run.run_id == "run-5" for m in line.by_model)
    # Repeats within a run are shown apart, in order.
    flaky = client.get("/cases/case/", {"digest": KEY.digest, "case": FLAKY}).content.decode()
    assert 'title="repeat 1: Clean"' in flaky and 'title="repeat 2: not Clean"' in flaky
    assert client.get("/cases/case/", {"digest": KEY.digest, "case": "NOPE"}).status_code == 404


def test_the_pages_queries_do_not_grow_with_the_runs(client, viewer, planted):
    def count(path, **query):
        with CaptureQueriesContext(connection) as seen:
            assert client.get(path, {"digest": KEY.digest, **query}).status_code == 200
        return len(seen)

    every = (count("/cases/"), count("/cases/case/", case=FLIP), count("/cases.json"))
    fewer = (
        count("/cases/", since="2026-10-06"),
        count("/cases/case/", case=FLIP, since="2026-10-06"),
        count("/cases.json", since="2026-10-06"),
    )
    assert every == fewer


def test_scoring_keeps_each_cases_figures_and_older_scorings_get_theirs_when_read(
    client, viewer, planted
):
    run = planted[0]
    scoring = run.latest_scoring()
    CaseFigure.objects.store_for(scoring)  # the verdicts' own figures, not the planted ones
    kept = {(f.case, f.model): (f.clean, f.counted, f.marks) for f in scoring.case_figures.all()}
    for (case, model), (clean, counted, marks) in kept.items():
        verdicts = Verdict.objects.filter(scoring=scoring, case=case, model=model).order_by(
            "attempt__repeat"
        )
        assert clean == sum(v.clean for v in verdicts) and counted == sum(
            v.counted for v in verdicts
        )
        assert marks == "".join(("1" if v.clean else "0") if v.counted else "-" for v in verdicts)
    CaseFigure.objects.filter(scoring=scoring).delete()
    data = _cases(client)
    assert data["runs"][0] == "run-1"
    assert scoring.case_figures.count() == len(kept)


def test_a_case_name_is_escaped_and_isolated(client, viewer, planted):
    CaseFigure.objects.filter(case=FLAKY).update(model='<script>alert("m")</script>')
    html = client.get("/cases/case/", {"digest": KEY.digest, "case": FLAKY}).content.decode()
    assert "<script>alert" not in html
    assert "<bdi>&lt;script&gt;alert(&quot;m&quot;)&lt;/script&gt;</bdi>" in html
    bad = client.get("/cases.json", {"digest": "zz"})
    assert bad.status_code == 400 and json.loads(bad.content)["fields"]["digest"]
