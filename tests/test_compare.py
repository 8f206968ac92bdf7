"""Comparisons: runs, surfaces and models side by side, and the guard."""

from __future__ import annotations

import pytest

from records.models import CorpusKey, Run
from records.queries.compare import case_flips, compare_runs, compare_surfaces
from records.scoring.run import score_run

pytestmark = pytest.mark.django_db


def test_the_demo_regression_shows_first_with_its_cases(demo):
    rows, problem = compare_runs(demo["run-2026-11-16-a1b2c3"], demo["run-2026-11-23-f00dfa"])
    assert problem == ""
    first = rows[0]
    assert first.identity.startswith("model=openai:gpt-5.4-nano surface=meta")
    assert first.regressions >= 1 and first.flips[0].kind == "regressed"
    completion = dict((t, (a, b)) for t, a, b, _ in first.columns())["Completion"]
    assert completion[1][0] / completion[1][1] < completion[0][0] / completion[0][1]


def test_two_clicks_from_the_runs_list_reach_the_regression(client, viewer, demo):
    html = client.get("/").content.decode()
    base, cand = demo["run-2026-11-16-a1b2c3"].pk, demo["run-2026-11-23-f00dfa"].pk
    link = f"/compare/?kind=runs&baseline={base}&candidate={cand}"
    assert link in html
    page = client.get(link).content.decode()
    assert page.index("surface=meta") < page.index("surface=dynamic")
    assert "regressed</span>" in page


def test_the_guard_refuses_rows_scored_against_different_corpora(demo):
    other = demo["run-2026-11-24-ee1234"]
    Run.objects.filter(pk=other.pk).update(corpus_digest="0000000000000000")
    other.refresh_from_db()
    score_run(other, CorpusKey.objects.get())  # stale: the key is not the run's corpus
    rows, _ = compare_runs(demo["run-2026-11-16-a1b2c3"], other)
    assert rows and all(r.refused for r in rows if r.baseline and r.candidate)
    assert "different corpora" in rows[0].refused
    assert all(not r.flips for r in rows)


def test_a_case_missing_from_one_side_is_missing_never_passed(demo):
    from records.models import ScoreCase, Scoring

    sa, sb = Scoring.objects.order_by("pk")[:2]
    rows = [
        (sa, "MT-002", 1, 1, 1),
        (sa, "MT-003", 1, 1, 1),
        (sa, "MT-013", 0, 0, 2),
        (sb, "MT-002", 0, 1, 1),
        (sb, "MT-040", 1, 1, 1),
        (sb, "MT-013", 1, 1, 1),
    ]
    ScoreCase.objects.bulk_create(
        ScoreCase(scoring=s, row_key="X", case=c, completed=done, counted=counted, total=total)
        for s, c, done, counted, total in rows
    )
    all_counts, all_changes = case_flips(sa, sb, [("X", "X")])
    counts, changes = all_counts["X"], all_changes["X"]
    got = {f.case: f.kind for f in changes}
    assert got == {
        "MT-002": "regressed",
        "MT-003": "missing",
        "MT-040": "new",
        "MT-013": "counted apart",
    }
    assert [f.kind for f in changes] == ["regressed", "missing", "new", "counted apart"]
    assert counts == {"regressed": 1, "missing": 1, "new": 1, "counted apart": 1}
    missing = next(f for f in changes if f.kind == "missing")
    assert (missing.before, missing.after) == ("1 / 1 completed", "not in this run")
    assert [f.case for f in case_flips(sa, sb, [("X", "X")], limit=1)[1]["X"]] == ["MT-002"]


def test_surfaces_with_different_coverage_compare_only_shared_cases(demo):
    groups = compare_surfaces(demo["run-2026-11-16-a1b2c3"])
    g = next(g for g in groups if g.caption.startswith("openai:gpt-5.4-nano"))
    assert [s.row.surface for s in g.sides] == ["dynamic", "meta", "individual"]
    # MT-040 (and its copy in the demo's key) is not on the individual surface, so only the 14
    # shared cases of 16 are compared.
    assert g.shared_only and g.shared_cases == 14 and "14 case(s)" in g.note


def test_models_side_by_side_draw_grouped_bars_and_a_cost_scatter(client, viewer, demo):
    run = demo["run-2026-11-16-a1b2c3"]
    r = client.get(f"/compare/?kind=models&run={run.pk}")
    fig = r.context["groups"][0][1]
    assert fig["layout"]["barmode"] == "group"
    assert all(len(t["customdata"]) == 7 for t in fig["data"])  # N and D in the hover
    scatter = r.context["scatter"]
    models = [t["name"] for t in scatter["data"] if t["name"] != "Pareto front"]
    assert models and not any(n.startswith("qwen:") for n in models)  # unpriced: no cost axis
    # The front: every row on it beats every cheaper row on Clean, and no row off it beats it.
    (front,) = [t for t in scatter["data"] if t["name"] == "Pareto front"]
    points = [(x, y) for t in scatter["data"][:-1] for x, y in zip(t["x"], t["y"], strict=True)]
    for x, y in zip(front["x"], front["y"], strict=True):
        assert not any(px <= x and py > y for px, py in points)
    for px, py in points:
        if (px, py) not in zip(front["x"], front["y"], strict=True):
            assert any(fx <= px and fy >= py for fx, fy in zip(front["x"], front["y"], strict=True))
    by_completion = client.get(f"/compare/?kind=models&run={run.pk}&column=Completion")
    assert "Cost against Completion" in by_completion.content.decode()


def test_comparisons_live_in_the_url_update_in_place_and_export(client, viewer, demo):
    base, cand = demo["run-2026-11-16-a1b2c3"].pk, demo["run-2026-11-23-f00dfa"].pk
    q = f"kind=runs&baseline={base}&candidate={cand}"
    part = client.get(f"/compare/?{q}", headers={"HX-Request": "true"}).content.decode()
    assert part.lstrip().startswith('<section id="result">')
    doc = client.get(f"/compare.json?{q}").json()
    assert doc["rows"][0]["regressed"] >= 1 and "cases" in doc["rows"][0]
    md = client.get(f"/compare.md?{q}").content.decode()
    assert "regressed" in md and md.startswith("Comparison of")
    assert client.get(f"/compare/?kind=runs&baseline={base}&candidate={base}").status_code == 400
    assert client.get("/compare/?kind=nonsense").status_code == 400


def test_surfaces_side_by_side_are_tested_case_by_case_against_the_first(client, viewer, demo):
    from records import stats
    from records.models import Verdict

    run = demo["run-2026-11-16-a1b2c3"]
    scoring = run.latest_scoring()
    groups = compare_surfaces(run)
    tested = 0
    for g in groups:
        assert len(g.tests) == len(g.sides) - 1
        for side, tests in zip(g.sides[1:], g.tests, strict=True):
            # Completion per case, read straight from the verdicts, paired over shared cases.
            def per_case(row_key):
                out = {}
                for case, outcome, counted in Verdict.objects.filter(
                    scoring=scoring, row_key=row_key
                ).values_list("case", "outcome", "counted"):
                    n, d = out.get(case, (0, 0))
                    out[case] = (n + (counted and outcome == "completed"), d + counted)
                return out

            a, b = per_case(g.sides[0].row.row_key), per_case(side.row.row_key)
            shared = sorted(set(a) & set(b))
            want = stats.compare([a[c] for c in shared], [b[c] for c in shared])
            got = tests.get("completion")
            assert (got is None) == (want is None)
            if got:
                tested += 1
                assert (got.cases, got.p_value, got.label) == (want.cases, want.p_value, want.label)
    assert tested
    html = client.get(f"/compare/?kind=surfaces&run={run.pk}").content.decode()
    assert "Δ " in html and 'class="evidence e-within-noise"' in html


def test_models_are_ranked_best_first_and_a_sentence_says_which_pairs_differ(client, viewer, demo):
    from records.queries.compare import rank_models
    from records.scoring.tables import score_groups

    run = demo["run-2026-11-23-f00dfa"]
    scoring = run.latest_scoring()
    groups = score_groups(scoring)
    rankings = rank_models(scoring, groups, "Completion")
    assert len(rankings) == len(groups)
    told_apart = 0
    for r in rankings:
        rates = [n / d for _, (n, d), _ in r.ranked]
        assert rates == sorted(rates, reverse=True)
        n = len(r.ranked)
        assert len(r.apart) + r.together == n * (n - 1) // 2
        for higher, lower, test in r.apart:
            assert test.p_value < 0.05 and test.difference > 0
            assert f"{higher} above {lower}" in r.sentence
        told_apart += len(r.apart)
    # The regressed model on meta is told apart from the best one there.
    meta = next(
        r for r, g in zip(rankings, groups, strict=True) if "surface=meta" in g.rows[0].row_key
    )
    assert meta.ranked[-1][0].model == "openai:gpt-5.4-nano"
    assert any(lo == "openai:gpt-5.4-nano" for _, lo, _ in meta.apart)
    page = client.get(f"/compare/?kind=models&run={run.pk}&column=Completion")
    html = page.content.decode()
    assert "Ranked by Completion, with 95% intervals" in html
    assert meta.sentence.replace("'", "&#x27;") in html
    ranked_fig = page.context["groups"][0][4]
    assert ranked_fig["data"][0]["y"] == [r.model for r, _, _ in rankings[0].ranked]
    assert client.get(f"/compare/?kind=models&run={run.pk}&column=Nope").status_code == 400


def test_the_ranking_sentence_names_what_can_and_cannot_be_told_apart():
    from records.queries.compare import Ranking
    from records.stats import compare

    test = compare([(0, 1)] * 20, [(1, 1)] * 20)
    one = Ranking("Clean", [("a", (1, 1), None)], [], 0, 1, [])
    assert "nothing to rank" in one.sentence
    none = Ranking("Clean", [("a", (9, 10), None), ("b", (8, 10), None)], [], 1, 10, [])
    assert none.sentence.startswith("No pair of the 2 models can be told apart")
    rows = [("a", (20, 20), None), ("b", (0, 20), None)]
    assert Ranking("Clean", rows, [("a", "b", test)], 0, 20, []).sentence.startswith(
        "Every pair of the 2 models can be told apart at this sample size (20 cases shared; "
        "Holm-adjusted over 1 pair, 5% family-wise): a above b"
    )


def test_a_changed_case_opens_both_runs_attempts_side_by_side(client, viewer, demo):
    from records.queries.compare import compare_runs

    base, cand = demo["run-2026-11-16-a1b2c3"], demo["run-2026-11-23-f00dfa"]
    rows, _ = compare_runs(base, cand)
    row = rows[0]
    flip = next(f for f in row.flips if f.kind == "regressed")
    html = client.get(
        f"/compare/?kind=runs&baseline={base.pk}&candidate={cand.pk}"
    ).content.decode()
    assert "/compare/case/?baseline=" in html
    a, b = row.baseline.row.row_key, row.candidate.row.row_key
    r = client.get(
        "/compare/case/",
        {"baseline": base.pk, "candidate": cand.pk, "a": a, "b": b, "case": flip.case},
    )
    assert r.status_code == 200
    pairs = r.context["pairs"]
    assert pairs and all(x and y for x, y in pairs)
    for x, y in pairs:
        assert x.attempt.case == y.attempt.case == flip.case
        assert x.attempt.run_id == base.pk and y.attempt.run_id == cand.pk
        assert x.verdict.scoring == base.latest_scoring()
    # A regressed case: some pair differs, and the first difference is marked on both sides.
    marked = [(x, y) for x, y in pairs if x.differs_at is not None or y.differs_at is not None]
    assert marked
    x, y = marked[0]
    ix = [c.index for c in x.calls].index(x.differs_at) if x.differs_at is not None else None
    iy = [c.index for c in y.calls].index(y.differs_at) if y.differs_at is not None else None
    i = ix if ix is not None else iy
    before = [(c.requested_action or c.tool, c.arguments) for c in x.calls[:i]]
    after = [(c.requested_action or c.tool, c.arguments) for c in y.calls[:i]]
    assert before == after  # everything up to the marked call agrees
    assert 'class="call differs' in r.content.decode()
    # The call each verdict turns on is the one its attempt page marks (the failing step's).
    from records.queries.attempts import failing_step, verdict_account

    for side in (s for pair in pairs for s in pair):
        _, told = verdict_account(side.verdict.scoring, side.attempt)
        step = failing_step(told.told["steps"]) if told and told.told else None
        assert side.turns_at == (step.get("call_index") if step else None)
    failed = [s for pair in pairs for s in pair if s.turns_at is not None]
    assert failed and f'id="candidate-call-{failed[-1].turns_at}"' in r.content.decode()
    assert "The call this verdict turns on" in r.content.decode()
    assert client.get("/compare/case/?baseline=1").status_code == 400


def test_what_a_scoring_keeps_for_pages_equals_reading_every_case(demo):
    """The pair tests and case intervals kept with the score rows when a run is scored are
    what reading every case again gives, so pages read them without reading the cases."""
    from records.queries.compare import rank_models
    from records.scoring.ranking import pair_tests, stored_pair_tests
    from records.scoring.tables import case_figures, score_groups, score_rows

    scoring = demo["run-2026-11-23-f00dfa"].latest_scoring()
    kept_rows, live_rows = score_rows(scoring), score_rows(scoring, live=True)
    assert all("pairs" in r.figures for r in kept_rows)
    for kept, live in zip(kept_rows, live_rows, strict=True):
        assert kept.case_intervals.keys() == live.case_intervals.keys()  # the demo repeats cases
        for column, ci in live.case_intervals.items():
            got = kept.case_intervals[column]
            assert (got is None) == (ci is None)
            if ci:
                assert (got.low, got.high) == pytest.approx((ci.low, ci.high))
        assert kept.repeats == live.repeats
    groups = score_groups(scoring, kept_rows)
    stored = stored_pair_tests(kept_rows)
    fresh = pair_tests(groups, case_figures(scoring, [r.row_key for r in kept_rows]))
    assert stored.keys() == fresh.keys()
    for pair, columns in fresh.items():
        for column, t in columns.items():
            s = stored[pair][column]
            assert (s.cases, s.p_value, s.label) == (t.cases, pytest.approx(t.p_value), t.label)
    # And a page reads them with no query of the cases.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as q:
        rankings = rank_models(scoring, groups, "Clean")
    assert len(q) == 0 and rankings


def test_a_scoring_kept_under_the_bootstrap_is_ranked_by_todays_test(demo):
    """Pair tests kept by the rule before (a paired bootstrap, its 95% interval as bounds) are
    not read: the page works the tests out again from the cases, by today's rule. Tests kept
    today give their interval at any level, as a family-wise decision asks."""
    from records.models import ScoreRow
    from records.queries.compare import rank_models
    from records.scoring.ranking import stored_pair_tests
    from records.scoring.tables import score_groups, score_rows

    scoring = demo["run-2026-11-23-f00dfa"].latest_scoring()
    rows = score_rows(scoring)
    stored = stored_pair_tests(rows)
    some = next(t for columns in stored.values() for t in columns.values() if t.test == "paired t")
    assert some.interval_at(0.05 / 6).low <= some.delta.low
    today = [
        (r.title, [(hi, lo) for hi, lo, _ in r.apart])
        for r in rank_models(scoring, score_groups(scoring, rows), "Clean")
    ]
    assert any(apart for _, apart in today)
    for row in ScoreRow.objects.filter(scoring=scoring):
        for columns in row.figures["pairs"].values():
            for column, kept in columns.items():
                cases, base, cand, p, test, _ = kept
                columns[column] = [cases, base, cand, -0.1, 0.1, p, "paired bootstrap"]
        row.save(update_fields=["figures"])
    rows = score_rows(scoring)
    assert stored_pair_tests(rows) is None
    again = rank_models(scoring, score_groups(scoring, rows), "Clean")
    assert [(r.title, [(hi, lo) for hi, lo, _ in r.apart]) for r in again] == today


def test_the_figures_per_case_are_the_sums_of_their_verdicts(demo):
    """What per-case intervals and paired tests read, summed in the database, against the
    verdicts added up one by one."""
    from records.formats.rows import ADDITIVE, TOKENS
    from records.models import Verdict
    from records.scoring.tables import SUMMED, case_figures

    scoring = demo["run-2026-11-23-f00dfa"].latest_scoring()
    want: dict = {}
    for v in Verdict.objects.filter(scoring=scoring):
        f = want.setdefault(v.row_key, {}).setdefault(v.case, dict.fromkeys(SUMMED, 0))
        f["total"] += 1
        f["counted"] += v.counted
        f["completed"] += v.outcome == "completed"
        f["clean"] += v.clean
        f["unaided"] += v.unaided
        f["turns"] += v.tries
        for name in (*ADDITIVE, *TOKENS):
            f[name] += getattr(v, name)
    got = case_figures(scoring)
    assert got == want and len(got) > 1
    some = sorted(got)[:1]
    assert case_figures(scoring, some) == {some[0]: want[some[0]]}
    assert case_figures(scoring, []) == {}
    assert all(type(n) is int for row in got.values() for f in row.values() for n in f.values())


def test_what_can_go_unseen_is_each_rows_own_figure_at_its_holm_level(client, viewer, demo):
    """The comparison says, row by row, how small a change its test could miss: the row's
    decision's figure (its noise, its Holm level), not one figure for a number of cases."""
    import html as html_lib

    from records.queries.decisions import decide

    base, cand = demo["run-2026-11-16-a1b2c3"], demo["run-2026-11-23-f00dfa"]
    decision = decide(base.pk, cand.pk)
    page = html_lib.unescape(
        client.get(f"/compare/?kind=runs&baseline={base.pk}&candidate={cand.pk}").content.decode()
    )
    page = " ".join(page.split())
    figures = {r.detectable_points for r in decision.rows}
    assert None not in figures and len(figures) > 1  # rows differ in their noise
    at_five = set()
    for r in decision.rows:
        (d,) = r.decisions.values()  # Clean, the decided column
        assert r.detectable_points == round(100 * d.test.detectable_at(d.alpha)) <= 100
        at_five.add(round(100 * d.test.detectable_at()) == r.detectable_points)
        assert f"> {r.detectable_points} points</span> can go unseen" in page
    assert at_five == {False}  # read at Holm's level for its family of 12, not at 5%
