"""A scoring's sums are taken from its verdicts as they are written (`records.scoring.sums`):
they must be what the stored verdicts sum to in the database, to the last count and interval."""

from __future__ import annotations

import pytest
from django.db.models import Max, Sum

from records.devtools.synth import MODELS
from records.formats.rows import CONFIRMATIONS, COUNTS, FAILURE_COLUMNS, TOKENS, VERDICT_FIELDS
from records.models import CaseFigure, Run, ScoreCase, ScoreRow, Verdict
from records.scorer.score import OUTCOMES
from records.scoring.ranking import pair_tests, stored_pair_tests
from records.scoring.sums import ScoringSums
from records.scoring.tables import (
    case_figures,
    count_where,
    score_groups,
    score_rows,
    verdict_sums,
)
from tests.builders import demo_key, ingest_bytes, synth_run

pytestmark = pytest.mark.django_db

KEPT = ("pairs", "intervals", "repeats")  # the statistics kept beside the sums


@pytest.fixture
def scoring():
    """A scored run that repeats its cases, with three models on its surfaces (pair tests)."""
    ingest_bytes(
        ("key.json", demo_key()),
        ("modeleval-r.jsonl", synth_run(repeat=3, models=MODELS[:3])),
    )
    scoring = Run.objects.get().latest_scoring()
    assert scoring.verdict_count > 100 and scoring.rows.count() >= 3
    return scoring


def test_the_rows_are_what_the_stored_verdicts_sum_to(scoring):
    summed = {
        r.pop("row_key"): r
        for r in Verdict.objects.filter(scoring=scoring)
        .values("row_key")
        .annotate(
            model=Max("model"),
            surface=Max("surface"),
            attempts=count_where("counted"),
            **verdict_sums(),
            **{c: Sum(c) for c in CONFIRMATIONS},
            session_id=Max("session_id"),
            **{o: count_where("outcome", o) for o in OUTCOMES},
        )
        .order_by()
    }
    stored = ScoreRow.objects.filter(scoring=scoring)
    assert {r.row_key for r in stored} == set(summed)
    for row in stored:
        want = summed[row.row_key]
        assert (row.model, row.surface, row.session_id) == (
            want.pop("model"),
            want.pop("surface"),
            want.pop("session_id"),
        )
        assert {k: v for k, v in row.figures.items() if k not in KEPT} == want
        cases = ScoreCase.objects.filter(scoring=scoring, row_key=row.row_key)
        assert row.case_count == cases.count() > 0


def test_the_per_case_counts_are_what_the_stored_verdicts_sum_to(scoring):
    want = {
        (r["row_key"], r["case"]): (r["completed"], r["counted"], r["total"])
        for r in Verdict.objects.filter(scoring=scoring)
        .values("row_key", "case")
        .annotate(
            completed=count_where("outcome", "completed"),
            counted=count_where("counted"),
            total=Sum(1),
        )
        .order_by()
    }
    got = {
        (r.row_key, r.case): (r.completed, r.counted, r.total)
        for r in ScoreCase.objects.filter(scoring=scoring)
    }
    assert got == want and ScoreCase.objects.filter(scoring=scoring).count() == len(want)


def test_the_kept_statistics_are_those_of_the_cases_read_from_the_verdicts(scoring):
    kept = score_rows(scoring)
    live = score_rows(scoring, live=True)  # each row's cases read from the verdicts again
    assert [r.row_key for r in kept] == [r.row_key for r in live]
    for k, v in zip(kept, live, strict=True):
        assert k.repeats == v.repeats and k.repeats is not None
        assert k.case_intervals.keys() == v.case_intervals.keys()
        for column, ci in k.case_intervals.items():
            if ci is None:
                assert v.case_intervals[column] is None
            else:
                want = v.case_intervals[column]
                assert (ci.low, ci.high) == pytest.approx((want.low, want.high), rel=1e-12)
    tests = pair_tests(score_groups(scoring, live), case_figures(scoring))
    stored = stored_pair_tests(kept)
    assert stored is not None and stored.keys() == tests.keys() and tests
    for pair, columns in tests.items():
        assert stored[pair].keys() == columns.keys()
        for column, t in columns.items():
            s = stored[pair][column]
            assert (s.cases, s.baseline_rate, s.candidate_rate, s.test) == (
                t.cases,
                t.baseline_rate,
                t.candidate_rate,
                t.test,
            )
            assert s.p_value == pytest.approx(t.p_value, rel=1e-9)


def test_pass_k_of_each_row_is_what_its_cases_verdicts_say(scoring):
    # Read from the verdicts alone, case by case: of the cases with a counted attempt, those
    # whose every counted attempt completed (pass^k) and those with one that did (pass@k).
    cells: dict[tuple[str, str], list[int]] = {}
    for row_key, case, counted, outcome in Verdict.objects.filter(scoring=scoring).values_list(
        "row_key", "case", "counted", "outcome"
    ):
        cell = cells.setdefault((row_key, case), [0, 0])
        cell[0] += counted
        cell[1] += outcome == "completed"
    want: dict[str, list[int]] = {}
    for (row_key, _), (counted, completed) in cells.items():
        if counted:
            w = want.setdefault(row_key, [0, 0, 0])
            w[0] += 1
            w[1] += completed == counted
            w[2] += completed > 0
    rows = score_rows(scoring)
    assert rows and all(r.repeats is not None for r in rows)
    assert {r.row_key: [r.repeats.cases, r.repeats.every, r.repeats.any] for r in rows} == want
    assert {r.repeats.k for r in rows} == {3}
    # Some cases passed every time and some only sometimes: the two figures differ somewhere.
    assert any(r.repeats.every < r.repeats.any for r in rows)


def _figures(scoring):
    return sorted(
        CaseFigure.objects.filter(scoring=scoring).values_list(
            "case", "row_key", "model", "surface", "clean", "counted", "total", "marks"
        )
    )


def test_the_case_figures_are_those_read_from_the_verdicts_in_repeat_order(scoring):
    made = _figures(scoring)
    assert made and any(len(m) == 3 for *_, m in made)
    CaseFigure.objects.store_for(scoring)  # read from the stored verdicts instead
    assert _figures(scoring) == made


def _verdict(attempt: int, outcome: str, clean: bool, counted: bool) -> tuple:
    """A verdict row (`VERDICT_FIELDS`) of row "r", case "c"; no counts, one try."""
    head = ("r", "c", "m", "s", outcome, "", clean, clean, True, counted)
    row = (attempt, *head, *[0] * len(COUNTS), *[""] * len(FAILURE_COLUMNS), None, 1)
    row += (0,) * len(TOKENS)
    assert len(row) == len(VERDICT_FIELDS)
    return row


def test_a_cases_marks_follow_the_repeats_not_the_order_the_verdicts_came_in():
    sums = ScoringSums()
    # Attempt 11 is the first repeat, 12 the second and 10 the third; they come in id order.
    sums.add(
        [
            _verdict(10, "failed", False, True),
            _verdict(11, "completed", True, True),
            _verdict(12, "skipped", False, False),
        ],
        {10: 3, 11: 1, 12: 2},
    )
    assert list(sums.marks()) == [("c", "r", "m", "s", "1-0")]
    assert list(sums.case_counts()) == [("r", "c", 1, 2, 3)]
    ((key, model, surface, session, figures, cases),) = sums.rows()
    assert (key, model, surface, session, cases) == ("r", "m", "s", None, ["c"])
    assert figures["attempts"] == 2 and figures["total"] == 3 and figures["clean"] == 1
    assert (figures["completed"], figures["failed"], figures["skipped"]) == (1, 1, 1)
    assert figures["turns"] == 3


def test_a_groups_pairs_tested_together_are_each_pairs_test_alone():
    """A scoring tests a group's pairs together, each row's side over the cases its pairs share
    summed once: every test must be the one its pair gives alone, to the bit, also where a row
    lacks a case the others ran or a column has no attempt to count on a case."""
    from types import SimpleNamespace

    import numpy as np

    from records.scoring.ranking import paired_tests
    from records.scoring.sums import CASE_FIGURES

    rng = np.random.default_rng(11)

    def figures(repeats: int) -> dict[str, int]:
        f = {name: int(rng.integers(0, repeats + 1)) for name in CASE_FIGURES}
        f["counted"] = f["total"] = repeats
        f.update({name: repeats for name in CASE_FIGURES if name.endswith("_d")})
        return f

    cases = [f"case-{i}" for i in range(40)]
    per_case = {key: {c: figures(3) for c in cases} for key in ("r1", "r2", "r3", "r4")}
    del per_case["r3"]["case-7"]  # r3's pairs share 39 cases, the others 40
    per_case["r2"]["case-9"]["reached_d"] = 0  # not counted on that case, that column alone
    per_case["r5"] = {c: figures(1) for c in cases}  # one attempt a case: McNemar's
    per_case["r6"] = {c: figures(1) for c in cases}
    groups = [
        SimpleNamespace(rows=[SimpleNamespace(row_key=k) for k in ("r4", "r2", "r1", "r3")]),
        SimpleNamespace(rows=[SimpleNamespace(row_key=k) for k in ("r5", "r6")]),
    ]
    together = pair_tests(groups, per_case)
    assert len(together) == 7
    for (a, b), columns in together.items():
        alone = paired_tests(per_case[a], per_case[b])
        assert list(columns) == list(alone)
        for column, test in columns.items():
            assert test == alone[column]
    assert together[("r1", "r3")]["clean"].cases == 39
    assert together[("r1", "r2")]["reached"].cases == 39
    assert together[("r5", "r6")]["clean"].test == "McNemar exact"
    assert together[("r1", "r2")]["clean"].test == "paired t"
