"""Re-scoring as tasks: a key an upload brings queues one scoring task per run of its digest
(the command line still scores inline), the key page follows them, a worker's sweep picks up
runs left unscored within its bound, and `rescore --enqueue` queues a rebuild."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from records.devtools.servers import stop
from records.models import CorpusKey, Run, Scoring, Upload
from records.tasks import queue_upload, run_upload
from records.tasks import scoring as scoring_tasks
from records.tasks.scoring import SCORE_TASK, SWEEP_TASK, Sweeper, rescoring_progress
from tests.builders import demo_key, ingest_bytes, synth_run
from tests.servers import real_worker, until

pytestmark = pytest.mark.django_db
DATABASE = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
HTMX = {"HX-Request": "true"}


@pytest.fixture
def runs():
    """Three runs of the demo corpus stored before its key: unscored."""
    report = ingest_bytes(
        *(
            (f"modeleval-{i}.jsonl", synth_run(f"run-{i}", seed=i, max_attempts=24))
            for i in (1, 2, 3)
        )
    )
    assert report.ok and not Scoring.objects.exists()
    return list(Run.objects.order_by("pk"))


def _upload_key(settings) -> tuple[Upload, CorpusKey]:
    """The key sent as an upload and ingested as a worker ingests it (its tasks left queued)."""
    settings.TASKS = DATABASE
    up = queue_upload(
        Upload(source="api"),
        [("corpus-key.json", io.BytesIO(demo_key()))],
        allow_digest_mismatch=False,
    )
    assert run_upload(up.pk) == "done"
    DBTaskResult.objects.filter(task_path="records.tasks.ingest_upload").delete()  # it ran
    up.refresh_from_db()
    return up, CorpusKey.objects.get()


def _work() -> list[str]:
    """What a worker does with the queue until it is empty, in its order (here, in this
    process, on the test's connection); the task paths in the order they ran."""
    worker = Worker(
        queue_names=["default"],
        interval=0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id="test-worker",
        excluded_queue_names=[],
    )
    ran = []
    while (result := DBTaskResult.objects.ready().first()) is not None:
        result.claim(worker.worker_id)
        worker.run_task(result)
        ran.append(result.task_path)
    return ran


def test_a_key_an_upload_brings_queues_one_scoring_task_per_run_and_scores_none_itself(
    runs, settings
):
    up, key = _upload_key(settings)
    tasks = DBTaskResult.objects.filter(task_path=SCORE_TASK)
    assert sorted(t.args_kwargs["args"][0] for t in tasks) == [r.pk for r in runs]
    assert {t.args_kwargs["kwargs"]["key"] for t in tasks} == {key.pk}
    assert not Scoring.objects.exists()
    (entry,) = up.summary["keys"]
    assert entry["queued_runs"] == [r.pk for r in runs] and entry["rescored_runs"] == []
    assert rescoring_progress(key) == {"queued": 3, "running": 0, "scored": 0, "failed": 0}


def test_the_command_line_ingest_still_scores_a_new_keys_runs_inline(runs, settings):
    settings.TASKS = DATABASE
    report = ingest_bytes(("corpus-key.json", demo_key()))
    assert sorted(report.keys[0]["rescored_runs"]) == [r.pk for r in runs]
    assert Scoring.objects.count() == 3 and not DBTaskResult.objects.exists()


def test_the_key_page_follows_the_re_scoring_and_stops_polling_once_done(client, runs, settings):
    settings.EVALDASH_PUBLIC_READ = True
    _, key = _upload_key(settings)
    page = client.get(f"/keys/{key.pk}/")
    html = page.content.decode()
    assert page.status_code == 200 and 'hx-trigger="every 2s"' in html
    assert html.count('data-state="queued"') == 3 and "0 of 3 runs" in html
    assert page["Vary"] and "HX-Request" in page["Vary"]
    _work()
    part = client.get(f"/keys/{key.pk}/", headers=HTMX)
    html = part.content.decode()
    assert html.lstrip().startswith("<section") and "<h2>Cases</h2>" not in html
    assert html.count('data-state="scored"') == 3 and "3 of 3 runs" in html
    assert "hx-trigger" not in html  # nothing is pending: the section stops asking
    assert {s.key_id for s in Scoring.objects.all()} == {key.pk} and Scoring.objects.count() == 3


def test_a_scoring_task_that_fails_is_counted_failed_on_the_key_page(
    client, runs, settings, monkeypatch
):
    settings.EVALDASH_PUBLIC_READ = True
    _, key = _upload_key(settings)

    def broken(run, key):
        raise RuntimeError("the scorer broke")

    monkeypatch.setattr(scoring_tasks, "score_run", broken)
    _work()
    assert rescoring_progress(key) == {"queued": 0, "running": 0, "scored": 0, "failed": 3}
    html = client.get(f"/keys/{key.pk}/", headers=HTMX).content.decode()
    assert html.count('data-state="failed"') == 3 and "hx-trigger" not in html


def test_a_scoring_task_run_twice_stores_one_scoring(runs, settings):
    _, key = _upload_key(settings)
    task = DBTaskResult.objects.filter(task_path=SCORE_TASK).first()
    args = task.args_kwargs
    first = scoring_tasks.score_run_task.call(*args["args"], **args["kwargs"])
    again = scoring_tasks.score_run_task.call(*args["args"], **args["kwargs"])
    assert first == again and first["state"] == "scored" and first["key"] == key.pk
    assert Scoring.objects.filter(run_id=args["args"][0]).count() == 1


def test_a_rebuild_makes_a_scored_runs_scoring_again(runs, settings):
    ingest_bytes(("corpus-key.json", demo_key()))
    run = runs[0]
    before = run.scorings.get()
    done = scoring_tasks.score_run_task.call(run.pk, rebuild=True)
    assert done["scoring"] != before.pk and run.scorings.count() == 2


def test_rescore_enqueue_queues_one_rebuild_per_run_and_scores_nothing_itself(
    runs, settings, capsys
):
    ingest_bytes(("corpus-key.json", demo_key()))
    settings.TASKS = DATABASE
    call_command("rescore", "--enqueue")
    assert "3 runs queued" in capsys.readouterr().out
    tasks = DBTaskResult.objects.filter(task_path=SCORE_TASK)
    assert sorted(t.args_kwargs["args"][0] for t in tasks) == [r.pk for r in runs]
    assert all(t.args_kwargs["kwargs"] == {"rebuild": True} for t in tasks)
    assert Scoring.objects.count() == 3
    _work()
    assert Scoring.objects.count() == 6


def test_rescore_enqueue_refuses_a_chosen_key(runs):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--key"):
        call_command("rescore", "--enqueue", "--key", "1")


def test_the_sweep_is_queued_only_while_a_run_waits_and_scores_at_most_its_bound(
    runs, settings, monkeypatch
):
    settings.TASKS = DATABASE
    sweeper = Sweeper()
    assert not sweeper.maybe_enqueue()  # no key: nothing waits for a sweep
    ingest_bytes(("corpus-key.json", demo_key()))
    Scoring.objects.all().delete()  # as a killed ingest leaves them: key stored, runs unscored
    sweeper = Sweeper()
    assert sweeper.maybe_enqueue()
    assert not sweeper.maybe_enqueue()  # not due again yet
    assert not Sweeper().maybe_enqueue()  # one is queued already
    monkeypatch.setattr(scoring_tasks, "SWEEP_RUNS", 2)
    (sweep,) = DBTaskResult.objects.filter(task_path=SWEEP_TASK)
    assert scoring_tasks.sweep_unscored_runs.call() == 2
    assert Scoring.objects.count() == 2
    # It queued itself again for the run still waiting.
    assert DBTaskResult.objects.filter(task_path=SWEEP_TASK, status="READY").count() == 2
    DBTaskResult.objects.filter(pk=sweep.pk).delete()
    _work()
    assert Scoring.objects.count() == 3


def test_a_worker_takes_an_upload_before_scoring_tasks_and_the_sweep_last(runs, settings):
    _upload_key(settings)  # three scoring tasks queued
    Scoring.objects.all().delete()
    scoring_tasks.sweep_unscored_runs.enqueue()
    later = queue_upload(
        Upload(source="api"),
        [("modeleval-9.jsonl", io.BytesIO(synth_run("run-9", seed=9, max_attempts=24)))],
        allow_digest_mismatch=False,
    )
    ran = _work()
    assert ran == ["records.tasks.ingest_upload", SCORE_TASK, SCORE_TASK, SCORE_TASK, SWEEP_TASK]
    assert Upload.objects.get(pk=later.pk).status == "done"


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_scores_a_keys_runs_and_sweeps_one_a_killed_ingest_left(settings):

    stored = ingest_bytes(
        *((f"modeleval-{i}.jsonl", synth_run(f"run-{i}", seed=i, max_attempts=24)) for i in (1, 2))
    )
    assert stored.ok
    _, key = _upload_key(settings)
    # A run left as a killed ingest leaves it: stored with its key there, never scored.
    ingest_bytes(("modeleval-3.jsonl", synth_run("run-3", seed=3, max_attempts=24)))
    left = Run.objects.get(run_id="run-3")
    left.scorings.all().delete()
    worker = real_worker()
    try:
        until(lambda: Scoring.objects.values("run").distinct().count() == 3, "every scoring")
        until(lambda: not DBTaskResult.objects.exclude(status="SUCCESSFUL").exists(), "the queue")
    finally:
        stop(worker)
    assert rescoring_progress(key) == {"queued": 0, "running": 0, "scored": 2, "failed": 0}
    assert DBTaskResult.objects.filter(task_path=SWEEP_TASK, status="SUCCESSFUL").count() == 1
    assert Scoring.objects.count() == 3 and left.scorings.get().key_id == key.pk
