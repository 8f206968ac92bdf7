"""Labels and notes in Chromium: the review queue moved through with j and k and labelled with a
key, and a note added in place on a case's page, each page read at both widths."""

from __future__ import annotations

import os

import pytest

from tests.browser.conftest import check_layout, log_in, settled, shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = os.environ.get("EVALDASH_REVIEW_SCREENSHOTS", "")


@pytest.fixture(autouse=True)
def vocabulary(db):
    """The vocabulary the migration seeds (a transactional test's flush empties the table)."""
    import importlib

    from django.apps import apps

    importlib.import_module("records.migrations.0019_annotations").seed_labels(apps, None)


def _plant(runs) -> list[str]:
    """The demo's runs made to hold what the queue is for: in every run, two cases whose
    repeats disagree (flaky), and two that pass in the runs before the newest and fail in it."""
    from records.models import CaseFigure

    ordered = sorted(runs.values(), key=lambda r: (r.started_at, r.pk))
    cases = sorted(
        {f.case for f in CaseFigure.objects.filter(scoring=ordered[-1].latest_scoring())}
    )
    flaky, flipped = cases[:2], cases[2:4]
    for n, run in enumerate(ordered, start=1):
        for f in CaseFigure.objects.filter(scoring=run.latest_scoring(), case__in=flaky + flipped):
            f.marks = "1010" if f.case in flaky else ("1111" if n < len(ordered) else "0000")
            f.clean, f.counted, f.total = f.marks.count("1"), 4, 4
            f.save()
    return flaky + flipped


def test_the_queue_is_moved_through_with_keys_and_labelled_in_place(page):
    planted = _plant(page.runs)
    log_in(page, "labeller", "add_annotation")
    check_layout(page, "/review/")
    shoot(page, "/review/", "review", SHOTS)
    page.goto(page.base + "/review/")
    page.wait_for_load_state("networkidle")
    items = page.locator("[data-review-item]")
    before = items.count()
    assert before >= 3, before
    shown = set(page.locator(".review-evidence").all_inner_texts())
    assert shown >= set(planted[2:]), shown
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert "current" in (items.nth(1).get_attribute("class") or "")
    second = items.nth(1).locator(".review-evidence").inner_text()
    page.keyboard.press("1")  # known-flaky
    settled(page)
    page.wait_for_function(
        "n => document.querySelectorAll('[data-review-item]').length === n", arg=before - 1
    )
    assert second not in page.locator(".review-evidence").all_inner_texts()
    # The next item is current, so the next key labels it.
    assert "current" in (items.nth(1).get_attribute("class") or "")
    from records.models import Annotation

    (a,) = Annotation.objects.all()
    # A case, or a failure mode new in the newest run (the queue holds both).
    assert (a.case or a.mode, a.label.slug, a.author) == (second, "known-flaky", "labeller")
    # Its evidence is one click away.
    page.locator(".review-evidence").first.click()
    page.wait_for_load_state("networkidle")
    assert "/cases/case/" in page.url or "/failures/" in page.url
    assert page.problems == [], page.problems


def test_a_label_refused_in_the_queue_leaves_its_item_saying_why(page):
    from records.models import Label

    _plant(page.runs)
    log_in(page, "labeller", "add_annotation")
    page.goto(page.base + "/review/")
    page.wait_for_load_state("networkidle")
    items = page.locator("[data-review-item]")
    before = items.count()
    first = items.first.locator(".review-evidence").inner_text()
    # The label is taken out of the vocabulary after the page was drawn.
    Label.objects.filter(slug="expected").delete()
    items.first.locator("button[value=expected]").click()
    settled(page)
    page.wait_for_selector("[data-review-item] ul.errors[role=alert]")
    assert items.count() == before
    assert items.first.locator(".review-evidence").inner_text() == first
    # The browser logs the 422 (the label was refused); nothing else went wrong.
    assert [p for p in page.problems if "422" not in p] == [], page.problems


def test_a_note_is_added_in_place_on_a_cases_page(page):
    digest = page.runs["run-2026-11-23-f00dfa"].corpus_digest
    log_in(page, "labeller", "add_annotation")
    page.goto(page.base + f"/cases/?digest={digest}")
    page.locator("table.cases tbody tr td a").first.click()
    page.wait_for_load_state("networkidle")
    url = page.url.removeprefix(page.base)
    form = page.locator("form.annotation-new")
    form.locator("select[name=label]").select_option("corpus-bug")
    form.locator("textarea[name=note]").fill(
        "The key expects **main**; see https://issues.example/7 <img src=x onerror=alert(1)>"
    )
    form.locator("button[type=submit]").click()
    settled(page)
    page.wait_for_selector("article.annotation")
    assert page.url.removeprefix(page.base) == url  # in place: no navigation
    note = page.locator("article.annotation .note")
    assert note.locator("strong").inner_text() == "main"
    assert note.locator("a").get_attribute("href") == "https://issues.example/7"
    assert note.locator("img").count() == 0 and "<img" in note.inner_text()
    check_layout(page, url)
    shoot(page, url, "case-annotated", SHOTS, full=False)
    assert page.problems == [], page.problems


def test_labels_show_on_the_attempt_page_the_cases_page_and_the_search(page):
    from records.models import Attempt, Label
    from records.queries.annotations import About, Writer, write

    run = page.runs["run-2026-11-23-f00dfa"]
    attempt = Attempt.objects.filter(run=run).order_by("line").first()
    flaky, bug = Label.objects.get(slug="known-flaky"), Label.objects.get(slug="model-error")
    write(
        About("case", run.corpus_digest, attempt.case),
        Writer("ci"),
        label=flaky,
        note="`health` times out",
    )
    write(
        About("attempt", attempt=attempt.pk), Writer("ci"), label=bug, link="https://ci.example/9"
    )
    url = f"/attempts/{attempt.pk}/"
    check_layout(page, url)
    page.goto(page.base + url)
    panel = page.locator("#annotations")
    assert (
        "model-error" in panel.inner_text()
        and panel.locator("a[href='https://ci.example/9']").count()
    )
    shoot(page, url, "attempt-annotated", SHOTS, full=False)
    cases = f"/cases/?digest={run.corpus_digest}&label=known-flaky"
    check_layout(page, cases)
    page.goto(page.base + cases)
    assert page.locator("table.cases tbody tr").count() == 1
    shoot(page, cases, "cases-labelled", SHOTS, full=False)
    check_layout(page, "/search/?label=known-flaky")
    page.goto(page.base + "/search/?label=known-flaky")
    assert page.locator("[data-facet=label]").count() == 1
    assert page.locator("li.hit .label-known-flaky").count() >= 1
    shoot(page, "/search/?label=known-flaky", "search-labelled", SHOTS, full=False)
    assert page.problems == [], page.problems
