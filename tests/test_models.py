"""What the models know of themselves: the page of each record that has one, a run's key and
latest scoring, each run's latest scoring at once, and the runs still waiting to be scored."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.apps import apps

from records.conformance.store import RunMeta, store_run
from records.ingest import bytes_input, ingest
from records.models import (
    Attempt,
    ConformanceRun,
    ConformanceSuite,
    CorpusKey,
    ObsCorpus,
    ObsReplay,
    PublishedRecord,
    Run,
    Scoring,
    Upload,
)
from records.scoring.run import score_run

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def families():
    """One sealed replay and one conformance run with its suite."""
    upload = Upload.objects.create(source="cli")
    replay = (FIXTURES / "obscorpus" / "replay.json").read_bytes()
    suite = (FIXTURES / "conformance" / "cases.json").read_bytes()
    report = ingest([bytes_input("replay.json", replay), bytes_input("cases.json", suite)], upload)
    assert not report.as_dict()["refused"]
    output = (FIXTURES / "conformance" / "run-two-failures.jsonl").read_bytes()
    store_run(output, "run.jsonl", RunMeta(adapter="pg", exit_status=1), upload)


def test_every_record_with_a_page_links_to_it_and_the_page_answers(client, viewer, demo, families):
    run = next(iter(demo.values()))
    records = {
        f"/runs/{run.pk}/": run,
        f"/attempts/{Attempt.objects.filter(run=run).first().pk}/": run.attempts.first(),
        f"/keys/{CorpusKey.objects.get().pk}/": CorpusKey.objects.get(),
        f"/uploads/{Upload.objects.first().pk}/": Upload.objects.first(),
        f"/replays/{ObsReplay.objects.get().pk}/": ObsReplay.objects.get(),
        f"/replays/corpus/{ObsCorpus.objects.get().pk}/": ObsCorpus.objects.get(),
        f"/conformance/runs/{ConformanceRun.objects.get().pk}/": ConformanceRun.objects.get(),
        f"/conformance/suites/{ConformanceSuite.objects.get().pk}/": ConformanceSuite.objects.get(),
    }
    for path, record in records.items():
        assert record.get_absolute_url() == path
        assert client.get(path).status_code == 200, path
    assert PublishedRecord(pk=7).get_absolute_url() == "/publish/records/7/"


def test_a_run_finds_the_newest_key_of_its_digest_and_none_without_one(demo):
    run = next(iter(demo.values()))
    (key,) = CorpusKey.objects.all()
    assert run.key() == key and run.corpus_digest == key.digest
    newer = CorpusKey.objects.create(
        name="again.json",
        sha256="0" * 64,
        digest=key.digest,
        declared_digest=key.declared_digest,
        upload=key.upload,
        case_count=key.case_count,
        document=key.document,
    )
    assert run.key() == newer
    CorpusKey.objects.create(
        name="other.json",
        sha256="1" * 64,
        digest="0123456789abcdef",
        declared_digest="0123456789abcdef",
        upload=key.upload,
        case_count=0,
        document={},
    )
    assert run.key() == newer
    run.corpus_digest = ""
    assert run.key() is None


def test_the_latest_scoring_is_the_newest_and_latest_for_reads_every_run_at_once(
    demo, django_assert_num_queries
):
    runs = list(demo.values())
    first = {r.pk: r.latest_scoring() for r in runs}
    assert all(s is not None and s.run_id == pk for pk, s in first.items())
    again = score_run(runs[0], CorpusKey.objects.get())
    assert runs[0].latest_scoring() == again != first[runs[0].pk]
    # A scoring that holds no verdict (one that failed) is no run's latest for the tables.
    Scoring.objects.create(run=runs[1], key=again.key, scorer_version="x", error="failed")
    assert runs[1].latest_scoring().error == "failed"
    with django_assert_num_queries(1):
        latest = Scoring.objects.latest_for(runs)
    assert latest == {runs[0].pk: again, **{r.pk: first[r.pk] for r in runs[1:]}}


def test_pending_runs_are_those_whose_key_is_stored_and_that_have_no_scoring(demo):
    run = next(iter(demo.values()))
    assert list(Run.objects.pending()) == []
    run.scorings.all().delete()
    assert list(Run.objects.pending()) == [run]
    CorpusKey.objects.all().delete()
    assert list(Run.objects.pending()) == []


def test_a_table_whose_columns_come_from_a_row_layout_names_it_and_the_schema_page():
    # A reader of the model finds every column: the layout it is generated from, and the
    # table's section of the schema page.
    generated = [m for m in apps.get_app_config("records").get_models() if hasattr(m, "row_layout")]
    assert {m.__name__ for m in generated} >= {"Run", "Attempt", "Call", "Verdict"}
    for model in generated:
        doc = model.__doc__ or ""
        assert f"`{model.row_layout.__name__}`" in doc, model
        assert f"`{model._meta.db_table}` in" in " ".join(doc.split()), model
        assert "docs/schema.md" in doc, model
