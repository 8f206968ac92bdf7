"""One answer per question: the runs list, the comparison, a row's history and the CI gate give
the same words for the same pair of runs, decided once (`records.queries.decisions`); a
comparison with nothing compared fails the gate; each cost figure is divided one way on every
page."""

from __future__ import annotations

import html

import pytest
from django.core.management import call_command

from records import evidence
from records.models import ApiToken, Run
from records.queries.answers import answers
from records.queries.compare import compare_runs
from records.queries.cost import run_figures
from records.queries.decisions import decide
from records.queries.gate import gate
from records.queries.history import history
from records.queries.overview import boards
from records.scoring.tables import ranking_groups, score_groups
from records.scoring.vocabulary import COLUMN_TITLE
from records.views.charts import cost_scatter

pytestmark = pytest.mark.django_db


@pytest.fixture
def auth(db):
    _, raw = ApiToken.issue("ci")
    return {"Authorization": f"Bearer {raw}"}


BEFORE, REGRESSED, IMPROVED = (
    "run-2026-11-16-a1b2c3",
    "run-2026-11-23-f00dfa",
    "run-2026-11-24-ee1234",
)


@pytest.mark.parametrize(
    "pair, label", [((BEFORE, REGRESSED), "regressed"), ((REGRESSED, IMPROVED), "improved")]
)
def test_every_page_and_the_gate_say_the_same_of_one_pair(client, viewer, demo, auth, pair, label):
    base, cand = demo[pair[0]], demo[pair[1]]
    decision = decide(base.pk, cand.pk)
    assert decision.label == label and decision.rule.startswith("Holm-adjusted over ")
    # The runs list: the mark and its sentence.
    answer = answers([cand])[cand.pk]
    assert (answer.label, answer.sentence) == (decision.label, decision.sentence)
    runs_page = html.unescape(client.get("/").content.decode())
    assert decision.sentence in runs_page
    # The comparison page: the pair's words, and each row's.
    page = client.get(f"/compare/?kind=runs&baseline={base.pk}&candidate={cand.pk}")
    text = html.unescape(page.content.decode())
    assert decision.sentence[1:] in text and decision.rule in text
    rows, _ = compare_runs(base, cand, page=None)
    for c in rows:
        row = (
            decision.row(c.baseline.row.row_key, c.candidate.row.row_key)
            if c.baseline and c.candidate
            else None
        )
        assert c.evidence == (row.label if row else "")
    # The gate, as JSON and Markdown.
    g = client.get(f"/api/v1/runs/{cand.run_id}/gate?baseline={base.run_id}", headers=auth).json()
    assert g["passed"] is (label != "regressed") and g["rule"] == decision.rule
    assert {r["row"] for r in g["regressed"]} == {r.key.label for r in decision.regressed}
    for r in g["regressed"]:  # raw and adjusted p, the adjusted one Holm's
        assert 0 <= r["p_value"] <= r["p_adjusted"] <= 1
    assert decision.sentence[1:] in g["markdown"]
    # A row's history, its page: each row's point against the run before reads the same.
    for r in decision.rows:
        h = history(base.corpus_digest, r.key.model, r.key.surface, r.key.mode, "Clean")
        point = next(p for p in h.points if p.run == cand)
        assert point.decision.label == r.label and point.rule == decision.rule
        query = {"digest": base.corpus_digest, "model": r.key.model, "surface": r.key.surface}
        if r.key.mode:
            query["mode"] = r.key.mode
        shown = html.unescape(client.get("/history/", query).content.decode())
        table = shown[shown.index("<tbody>") :]
        line = table[table.index(f"<code><bdi>{cand.run_id}</bdi></code>") :]
        line = line[: line.index("</tr>")]
        assert f">{r.label}</span>" in line and decision.rule in line


def test_a_decisions_interval_and_its_words_agree_on_the_comparison(demo):
    decision = decide(demo[BEFORE].pk, demo[REGRESSED].pk)
    for row in decision.rows:
        for d in row.decisions.values():
            i = d.interval
            assert (i.low > 0 or i.high < 0) == (d.label != evidence.NOISE)


def test_runs_whose_rows_pair_with_none_fail_the_gate_saying_why(client, demo, auth):
    Run.objects.filter(pk=demo[REGRESSED].pk).update(repeat=7)
    cand = Run.objects.get(pk=demo[REGRESSED].pk)
    result = gate(cand, demo[BEFORE], "Clean")
    assert result.rows == 0 and not result.passed
    assert "repeat (2 vs 7)" in result.problem
    assert result.as_dict()["rows_compared"] == 0 and result.as_dict()["problem"]
    assert gate(cand, demo[BEFORE], "Clean", allow_empty=True).passed
    r = client.get(
        f"/api/v1/runs/{REGRESSED}/gate?baseline={BEFORE}&allow_empty=1", headers=auth
    ).json()
    assert r["passed"] is True and r["allow_empty"] is True
    with pytest.raises(SystemExit) as exit_:
        call_command("gate", REGRESSED, "--baseline", BEFORE)
    assert exit_.value.code == 1
    assert answers([cand])[cand.pk].label in ("not compared", "no baseline")


def test_runs_whose_rows_share_no_surface_fail_the_gate_naming_the_surfaces(demo):
    from records.models import ScoreRow

    cand = demo[REGRESSED]
    ScoreRow.objects.filter(scoring=cand.latest_scoring()).update(surface="elsewhere")
    result = gate(cand, demo[BEFORE], "Clean")
    assert result.rows == 0 and not result.passed
    assert "they differ in surface (dynamic, individual, meta vs elsewhere)" in result.problem
    assert "model (" not in result.problem  # the models are the same on both sides


def test_rows_that_pair_but_cannot_be_tested_are_not_called_unmatched(demo):
    from records.models import CaseFigure, ScoreRow

    base, cand = demo[BEFORE], demo[REGRESSED]
    scoring = cand.latest_scoring()
    # No case of the candidate has a denominator on Clean, and one of its rows is on a surface
    # the baseline never ran: every other row pairs, but none can be tested.
    CaseFigure.objects.filter(scoring=scoring).update(counted=0)
    moved = ScoreRow.objects.filter(scoring=scoring).order_by("row_key").first()
    ScoreRow.objects.filter(pk=moved.pk).update(surface="elsewhere")
    paired = ScoreRow.objects.filter(scoring=scoring).count() - 1
    decision = decide(base.pk, cand.pk)
    assert decision.label == "not compared"
    assert decision.problem == (
        f"no row of the two runs could be compared: {paired} rows paired on model, surface, "
        "mode and pins, but no case both ran has a denominator on Clean; 2 rows have no "
        "partner in the other run"
    )
    assert "no row of one run has the model" not in decision.problem
    # Where every row pairs, the message names only the rows that could not be tested.
    ScoreRow.objects.filter(pk=moved.pk).update(surface=moved.surface)
    assert decide(base.pk, cand.pk).problem == (
        f"no row of the two runs could be compared: {paired + 1} rows paired on model, "
        "surface, mode and pins, but no case both ran has a denominator on Clean"
    )


def test_cost_per_completed_is_one_figure_on_the_overview_the_cost_tab_and_the_comparison(
    client, viewer, demo
):
    run = demo[REGRESSED]
    scoring = run.latest_scoring()
    standings = [s for b in boards(scoring, score_groups(scoring), "Clean") for s in b.standings]
    figures = run_figures(run, scored=True)
    rows, _ = compare_runs(demo[BEFORE], run, page=None)
    checked = 0
    for s in standings:
        if s.cost is None:
            continue
        key = (s.row.model, s.row.surface)
        tab = [r for r in figures.rows if (r.model, r.surface) == key]
        assert len(tab) == 1
        # One definition: every attempt's cost over the attempts the scorer found Completed.
        want = evidence.cost_per_completed(tab[0].cost.total, s.row.figures["completed"])
        assert s.cost_per_completed == pytest.approx(want)
        assert tab[0].cost_per_completed == pytest.approx(want)
        assert s.cost_per_attempt == pytest.approx(tab[0].cost_per_attempt)
        side = next(
            c.candidate
            for c in rows
            if c.candidate and c.candidate.row.model == key[0] and c.candidate.row.surface == key[1]
        )
        if not next(c for c in rows if c.candidate is side).shared_only:
            assert side.cost_per_completed == pytest.approx(want)
        checked += 1
    assert checked
    # The cost chart's axis is the same per-attempt figure.
    chart = cost_scatter(score_groups(scoring))
    plotted = {
        (trace["name"], surface): x
        for trace in chart["data"]
        if trace.get("mode") == "markers"
        for x, surface in zip(trace["x"], trace["text"], strict=True)
    }
    priced = [s for s in standings if s.cost_per_attempt is not None]
    assert priced
    for s in priced:
        key = (s.row.model, s.row.surface)
        assert plotted[key] == pytest.approx(s.cost_per_attempt, abs=1e-6)
    page = html.unescape(client.get(f"/runs/{run.pk}/cost/").content.decode())
    assert "Per case" in page


def test_a_surfaces_models_are_ranked_together_when_their_rows_cover_different_cases(
    client, viewer, db
):
    from tests.builders import demo_key, ingest_bytes, synth_run

    # A run cut off after 90 attempts (of 96): its rows on one surface ran different cases.
    ingest_bytes(("key.json", demo_key()), ("modeleval-cut.jsonl", synth_run(max_attempts=90)))
    run = Run.objects.get(run_id="run-synth")
    scoring = run.latest_scoring()
    upstream = score_groups(scoring)
    surfaces = {g.surface for g in upstream}
    assert len(upstream) > len(surfaces), "the cut run should split a surface into tables"
    board = boards(scoring, ranking_groups(upstream), "Clean")
    assert len(board) == len(surfaces)
    joined = 0
    for b in board:
        rows = [s.row for s in b.standings]
        assert len({r.model for r in rows}) == len(rows) > 1
        if len({r.case_count for r in rows}) > 1:
            joined += 1
            assert "compared on the cases both ran" in b.caption
            assert b.ranking.cases > 0  # every pair was tested on its shared cases
            assert b.ranking.together + len(b.ranking.apart) == len(rows) * (len(rows) - 1) // 2
    assert joined
    page = client.get(f"/runs/{run.pk}/")
    assert len(page.context["boards"]) == len(surfaces)


def test_rows_that_differ_only_in_case_coverage_are_compared_on_the_cases_both_ran(
    client, viewer, db
):
    from tests.builders import demo_key, ingest_bytes, synth_run

    # The same setup twice; the later run cut off after 90 attempts (of 96).
    ingest_bytes(
        ("key.json", demo_key()),
        ("modeleval-a.jsonl", synth_run("run-whole", seed=7)),
        ("modeleval-b.jsonl", synth_run("run-cut", seed=8, max_attempts=90)),
    )
    base, cand = Run.objects.get(run_id="run-whole"), Run.objects.get(run_id="run-cut")
    decision = decide(base.pk, cand.pk)
    assert not decision.problem
    uneven = [r for r in decision.rows if r.cases[0] != r.cases[1]]
    assert uneven, "the cut run should leave some rows with fewer cases"
    for r in uneven:
        assert r.decisions  # compared, not refused
        assert r.shared == min(r.cases)
        assert r.coverage == f"on {r.shared} shared case{'s' if r.shared != 1 else ''} of " + (
            f"{r.cases[0]} / {r.cases[1]}"
        )
    page = html.unescape(
        client.get(f"/compare/?kind=runs&baseline={base.pk}&candidate={cand.pk}").content.decode()
    )
    for r in uneven:
        assert r.coverage in page
    result = gate(cand, base, "Clean").as_dict()
    assert result["rows_compared"] == len(decision.rows) and not result["problem"]


def test_a_gate_on_two_columns_and_the_comparison_it_links_decide_over_the_same_family(
    client, viewer, demo, auth
):
    base, cand = demo[BEFORE], demo[REGRESSED]
    g = client.get(
        f"/api/v1/runs/{cand.run_id}/gate?baseline={base.run_id}&column=Clean&column=Completion",
        headers=auth,
    ).json()
    decision = decide(base.pk, cand.pk, ("clean", "completion"))
    assert (
        g["rule"]
        == decision.rule
        == f"Holm-adjusted over {decision.family} row-columns, 5% family-wise"
    )
    assert decision.family > len(decision.rows)
    # The link carries both columns, and the page it opens decides over both, naming the rule.
    link = g["comparison_url"]
    assert "column=Clean&column=Completion" in link
    page = client.get(link[link.index("/compare/") :])
    assert page.status_code == 200
    (_, rows, _, shown, _, _) = page.context["comparisons"][0]
    assert shown.rule == g["rule"] and shown.columns == ("clean", "completion")
    text = html.unescape(page.content.decode())
    assert g["rule"] in text and decision.sentence[1:] in text
    # Row by row and column by column, the page reads as the gate: the same rows regressed.
    regressed = {(r["row"], r["column"]) for r in g["regressed"]}
    on_page = {
        (r.key.label, COLUMN_TITLE[column])
        for r in shown.rows
        for column, d in r.decisions.items()
        if d.label == evidence.REGRESSED
    }
    assert on_page == regressed
    for c in rows:
        if c.decision is not None:
            want = decision.row(c.baseline.row.row_key, c.candidate.row.row_key)
            assert {k: d.p_adjusted for k, d in c.decision.decisions.items()} == {
                k: d.p_adjusted for k, d in want.decisions.items()
            }
    # The page's exports decide as the page does.
    query = link[link.index("?") :]
    exported = client.get(f"/compare.json{query}").json()["rows"]
    assert {r["rule"] for r in exported if r["reading"]} == {g["rule"]}
    # The form takes the columns as the gate does: repeated, each one a column.
    bad = client.get(f"/compare/?kind=runs&baseline={base.pk}&candidate={cand.pk}&column=Nope")
    assert bad.status_code == 400
