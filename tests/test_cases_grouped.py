"""The corpus page reads a case's runs grouped in the database; a case's page reads its repeats
row by row. Both must tell the same story of every case, however its figures are spread:
a run missing a model, a run holding a model in two score rows (two modes), uncounted repeats."""

from __future__ import annotations

import pytest

from records.models import CaseFigure, Run
from tests.test_cases import FLAKY, FLIP, KEY, SPLIT, STRONG, WEAK, planted  # noqa: F401

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("planted")]


def _spread() -> None:
    """Run 3 loses the weak model's figures of the flipping case; run 6 holds the strong model's
    figures of the flaky case in two rows, the second two more repeats, one counted apart; run 7
    counts none of the split case's weak repeats."""
    runs = list(Run.objects.order_by("started_at", "id"))
    scoring = {n: r.latest_scoring() for n, r in enumerate(runs, start=1)}
    CaseFigure.objects.filter(scoring=scoring[3], case=FLIP, model=WEAK).delete()
    extra = CaseFigure.objects.get(scoring=scoring[6], case=FLAKY, model=STRONG)
    extra.pk, extra.row_key = None, extra.row_key + " mode=second"
    extra.marks, extra.clean, extra.counted, extra.total = "1-", 1, 1, 2
    extra.save()
    CaseFigure.objects.filter(scoring=scoring[7], case=SPLIT, model=WEAK).update(
        marks="--", clean=0, counted=0
    )


def _case_page(client, case):
    answer = client.get("/cases/case/", {"digest": KEY.digest, "case": case})
    assert answer.status_code == 200
    return answer.context["line"]


def test_the_corpus_figures_equal_each_cases_own_page(client, viewer):
    _spread()
    corpus = client.get("/cases.json", {"digest": KEY.digest}).json()["cases"]
    page = client.get("/cases/", {"digest": KEY.digest}).context["corpus"].cases
    checked = 0
    for grouped, shown in zip(corpus, page, strict=True):
        line = _case_page(client, grouped["case"])
        assert shown.case == line.case == grouped["case"]
        assert grouped["attempts"] == line.attempts == shown.attempts
        assert grouped["clean"] == list(line.clean) == list(shown.clean)
        assert shown.interval == line.interval
        assert shown.separation == line.separation
        for flag in ("flaky", "flipped", "never_passed", "always_passed"):
            assert grouped[flag] == getattr(line, flag) == getattr(shown, flag), flag
        assert len(grouped["by_model"]) == len(line.by_model)
        for g, m in zip(grouped["by_model"], line.by_model, strict=True):
            assert (g["model"], g["surface"]) == (m.model, m.surface)
            assert g["clean"] == list(m.clean)
            assert (g["low"], g["high"]) == (
                (m.interval.low, m.interval.high) if m.interval else (None, None)
            )
            assert g["flaky"] == m.flaky
            assert g["first_flip"] == (m.flip_at.run.run_id if m.flip_at else None)
            assert g["timeline"] == [
                {"run_id": p.run.run_id, "clean": list(p.clean)} for p in m.timeline
            ]
        checked += 1
    assert checked == len(KEY.cases)


def test_the_spread_figures_are_read_as_planted(client, viewer):
    _spread()
    corpus = {
        c["case"]: c for c in client.get("/cases.json", {"digest": KEY.digest}).json()["cases"]
    }
    weak_flip = next(m for m in corpus[FLIP]["by_model"] if m["model"] == WEAK)
    assert [p["run_id"] for p in weak_flip["timeline"]] == [
        f"run-{n}" for n in (1, 2, 4, 5, 6, 7, 8)
    ]
    assert weak_flip["first_flip"] == "run-5"
    strong_flaky = next(m for m in corpus[FLAKY]["by_model"] if m["model"] == STRONG)
    # Run 6's two rows summed: "10" and "1-" are 2 Clean of 3 counted.
    assert strong_flaky["timeline"][5] == {"run_id": "run-6", "clean": [2, 3]}
    assert corpus[FLAKY]["attempts"] == 2 * 2 * 8 + 2
    line = _case_page(client, FLAKY)
    strong = next(m for m in line.by_model if m.model == STRONG)
    assert strong.timeline[5].marks == "101-"
    weak_split = next(m for m in corpus[SPLIT]["by_model"] if m["model"] == WEAK)
    assert weak_split["timeline"][6] == {"run_id": "run-7", "clean": [0, 0]}
    assert weak_split["clean"] == [0, 14]
