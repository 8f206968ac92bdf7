"""Uploads as tasks: the API contract, the bytes kept in the uploads storage, retries and giving up, and
real `db_worker` processes (a killed one, two at once, a queue that outlives its workers)."""

from __future__ import annotations

import io
import signal
import socket
import subprocess
import sys
import time
import zipfile
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from records import tasks
from records.devtools.servers import stop
from records.devtools.synth import load_demo_key, widen_key, write_run
from records.models import ApiToken, Run, ShardFile, Upload
from records.models.intake import WorkerBeat
from records.tasks import run_upload
from records.tasks.liveness import earlier_try_stopped
from records.tasks.workers import queue_unqueued_uploads, requeue_orphans
from tests.conftest import files_under
from tests.servers import real_worker, until

GOOD = (Path(__file__).parent / "fixtures" / "modelrecord" / "modeleval-dynamic.jsonl").read_bytes()
DATABASE = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
DUMMY = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}


def task_shard(seed: int, attempts: int = 40) -> bytes:
    buf = io.BytesIO()
    write_run(
        buf,
        widen_key(load_demo_key(), attempts // 12 + 1),
        run_id=f"task-{seed}",
        commit=f"{seed:040x}",
        started_at=datetime(2026, 11, 1, 9),
        seed=seed,
        max_attempts=attempts,
    )
    return buf.getvalue()


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def _post(client, raw: str, *files: tuple[str, bytes], query: str = ""):
    return client.post(
        "/api/v1/uploads" + query,
        {"file": [SimpleUploadedFile(n, d) for n, d in files]},
        headers={"Authorization": f"Bearer {raw}"},
    )


@pytest.mark.django_db
class TestApiContract:
    def test_a_queued_upload_answers_202_with_its_address_and_nothing_ingested(
        self, client, settings
    ):
        settings.TASKS = DUMMY
        _, raw = ApiToken.issue("ci")
        r = _post(client, raw, ("modeleval-1.jsonl", GOOD))
        body = r.json()
        assert r.status_code == 202 and body["status"] == "queued"
        assert r["Location"] == f"/api/v1/uploads/{body['upload']}"
        assert body["url"].endswith(r["Location"]) and not Run.objects.exists()
        r = client.get(r["Location"], headers={"Authorization": f"Bearer {raw}"})
        assert r.status_code == 200 and r.json()["status"] == "queued"
        assert r.json()["progress"]["bytes_total"] == len(GOOD)

    def test_a_done_upload_names_the_run_of_every_stored_and_present_shard(self, client):
        _, raw = ApiToken.issue("ci")
        first = _post(client, raw, ("modeleval-1.jsonl", GOOD)).json()
        (stored,) = first["stored"]
        run = Run.objects.get()
        assert first["status"] == "done" and stored["run_id"] == run.run_id
        assert stored["url"] == f"http://testserver/runs/{run.pk}/"
        assert stored["gate"] == f"/api/v1/runs/{run.run_id}/gate"
        # A retried job's upload still names the run, so it can still gate.
        again = _post(client, raw, ("modeleval-1.jsonl", GOOD)).json()
        (present,) = again["already_present"]
        assert (present["run_id"], present["url"]) == (run.run_id, stored["url"])
        r = client.get(
            f"/api/v1/uploads/{again['upload']}", headers={"Authorization": f"Bearer {raw}"}
        )
        assert r.json()["already_present"][0]["gate"] == stored["gate"]

    def test_the_status_needs_a_token_and_answers_json_for_an_unknown_upload(self, client):
        _, raw = ApiToken.issue("ci")
        assert client.get("/api/v1/uploads/1").status_code == 401
        r = client.get("/api/v1/uploads/999", headers={"Authorization": f"Bearer {raw}"})
        assert r.status_code == 404 and "999" in r.json()["error"]

    def test_it_refuses_a_wait_beyond_600_seconds_by_name_and_stores_nothing(self, client):
        _, raw = ApiToken.issue("ci")
        r = _post(client, raw, ("modeleval-1.jsonl", GOOD), query="?wait=601")
        assert r.status_code == 400 and r.json()["field"] == "wait"
        assert not Upload.objects.exists()

    def test_waiters_beyond_the_bound_get_503_with_retry_after_before_anything_is_kept(
        self, client, settings, upload_dir
    ):
        settings.EVALDASH_API_WAITERS = 0
        _, raw = ApiToken.issue("ci")
        r = _post(client, raw, ("modeleval-1.jsonl", GOOD), query="?wait=5")
        assert r.status_code == 503 and r["Retry-After"] and "waiting" in r.json()["error"]
        assert not Upload.objects.exists() and files_under(upload_dir) == []

    def test_a_wait_on_a_queued_upload_answers_its_state_when_the_time_is_up(
        self, client, settings
    ):
        settings.TASKS = DUMMY
        _, raw = ApiToken.issue("ci")
        r = _post(client, raw, ("modeleval-1.jsonl", GOOD), query="?wait=1")
        assert r.status_code == 202 and r.json()["status"] == "queued"


@pytest.mark.django_db
class TestKeptBytes:
    def test_an_archive_kept_in_the_storage_is_read_back_whole_and_then_deleted(
        self, client, upload_dir
    ):
        shards = {f"modeleval-{i}.jsonl": task_shard(i) for i in range(3)}
        _, raw = ApiToken.issue("ci")
        body = _post(client, raw, ("artifact.zip", _zip(shards))).json()
        assert sorted(s["run_id"] for s in body["stored"]) == ["task-0", "task-1", "task-2"]
        # The bytes are gone once the upload is done.
        assert Upload.objects.get().files and files_under(upload_dir) == []

    def test_the_command_enqueues_what_a_worker_ingests_from_the_storage(
        self, tmp_path, upload_dir
    ):
        path = tmp_path / "modeleval-1.jsonl"
        path.write_bytes(GOOD)
        call_command("ingest", str(path), "--enqueue")
        up = Upload.objects.get()
        assert (up.source, up.status) == ("cli", "done") and Run.objects.count() == 1
        assert path.read_bytes() == GOOD and files_under(upload_dir) == []


@pytest.mark.django_db
class TestFaults:
    def test_a_task_that_keeps_failing_stops_after_its_tries_and_shows_its_error(
        self, client, monkeypatch, settings, upload_dir
    ):
        settings.EVALDASH_TASK_MAX_TRIES = 3
        calls = []

        def broken(*args, **kwargs):
            calls.append(1)
            raise OSError("the disk went away")

        monkeypatch.setattr("records.tasks.ingest", broken)
        _, raw = ApiToken.issue("ci")
        r = _post(client, raw, ("modeleval-1.jsonl", GOOD))
        assert r.status_code == 500 and r.json()["status"] == "failed"
        assert "OSError: the disk went away" in r.json()["error"]
        up = Upload.objects.get()
        assert len(calls) == 3 and up.tries == 3 and files_under(upload_dir) == []

    def test_a_shard_an_earlier_try_stored_is_reported_as_stored_by_the_repeat(self, settings):
        settings.TASKS = DUMMY
        from records.tasks import queue_upload

        up = queue_upload(
            Upload(source="api"),
            [("modeleval-1.jsonl", io.BytesIO(GOOD))],
            allow_digest_mismatch=False,
        )
        assert run_upload(up.pk) == "done"
        # The worker died before marking its task done: the task runs again, put back by
        # requeue_orphans with that worker judged gone.
        from records.tasks.pending import keep_files

        again = keep_files([("modeleval-1.jsonl", io.BytesIO(GOOD))])  # its bytes, still there
        Upload.objects.filter(pk=up.pk).update(status="running", files=again)
        assert run_upload(up.pk) == "running"  # not a reclaim: the running try is left alone
        assert run_upload(up.pk, reclaim=True) == "done"
        up.refresh_from_db()
        assert [s["run_id"] for s in up.summary["stored"]] == ["run-fixture-dynamic"]
        assert up.summary["already_present"] == [] and Run.objects.count() == 1

    def test_a_done_upload_is_left_alone_by_a_repeated_task(self, client):
        _, raw = ApiToken.issue("ci")
        pk = _post(client, raw, ("modeleval-1.jsonl", GOOD)).json()["upload"]
        assert run_upload(pk) == "done" and Upload.objects.get(pk=pk).tries == 1

    def test_an_orphaned_task_is_queued_again_and_given_up_after_its_tries(self, settings):
        settings.TASKS = DATABASE
        settings.EVALDASH_TASK_MAX_TRIES = 2
        from records.tasks import ingest_upload

        up = Upload.objects.create(source="api", status="running", tries=1)
        result = ingest_upload.enqueue(up.pk).db_result
        long_ago = timezone.now() - timedelta(seconds=600)
        WorkerBeat.objects.create(worker_id="dead", beat_at=long_ago)
        WorkerBeat.objects.create(worker_id="alive", beat_at=timezone.now())
        result.claim("alive")
        DBTaskResult.objects.filter(pk=result.pk).update(started_at=long_ago)
        assert requeue_orphans() == []  # its worker still beats
        DBTaskResult.objects.filter(pk=result.pk).update(worker_ids=["dead"])
        assert requeue_orphans() == [str(result.pk)]
        result.refresh_from_db()
        assert result.status == "READY"
        DBTaskResult.objects.filter(pk=result.pk).update(
            status="RUNNING", worker_ids=["dead", "dead"], started_at=long_ago
        )
        requeue_orphans()
        result.refresh_from_db()
        up.refresh_from_db()
        assert result.status == "FAILED" and "2 times" in result.traceback
        assert up.status == "failed" and "stopped before it was done" in up.error


@pytest.mark.django_db
class TestSupersededTries:
    """A try judged gone while it was only slow (its heartbeat waited behind a long write) is
    superseded by a reclaiming try; whatever the late one does then changes nothing."""

    def _queued(self, settings) -> Upload:
        from records.tasks import queue_upload

        settings.TASKS = DUMMY
        return queue_upload(
            Upload(source="api"),
            [("modeleval-1.jsonl", io.BytesIO(GOOD))],
            allow_digest_mismatch=False,
        )

    def test_a_superseded_try_that_fails_late_does_not_reopen_the_done_upload(
        self, settings, monkeypatch
    ):
        up = self._queued(settings)
        real, enqueued = tasks.ingest, []

        def slow_then_broken(*args, **kwargs):
            if not enqueued and Upload.objects.get(pk=up.pk).tries == 1:
                enqueued.append("reclaim")
                assert run_upload(up.pk, reclaim=True) == "done"
                raise OSError("its chunks were discarded under it")
            return real(*args, **kwargs)

        monkeypatch.setattr(tasks, "ingest", slow_then_broken)
        monkeypatch.setattr(tasks, "enqueue_upload", lambda u: enqueued.append("retry"))
        assert run_upload(up.pk) == "done"
        up.refresh_from_db()
        assert (up.status, up.tries, up.error) == ("done", 2, "")
        assert [s["run_id"] for s in up.summary["stored"]] == ["run-fixture-dynamic"]
        assert enqueued == ["reclaim"]  # the late failure queued no third try

    def test_a_superseded_try_finishing_late_leaves_the_newer_summary(self, settings, monkeypatch):
        up = self._queued(settings)
        real = tasks.ingest

        def slow(inputs, *args, **kwargs):
            if Upload.objects.get(pk=up.pk).tries == 1:
                assert run_upload(up.pk, reclaim=True) == "done"
                return real([], *args, **kwargs)  # what a try that read nothing reports
            return real(inputs, *args, **kwargs)

        monkeypatch.setattr(tasks, "ingest", slow)
        assert run_upload(up.pk) == "done"
        up.refresh_from_db()
        assert up.tries == 2 and up.progress["shards_done"] == 1
        assert [s["run_id"] for s in up.summary["stored"]] == ["run-fixture-dynamic"]
        # A reclaiming task that finds it done leaves it so.
        assert run_upload(up.pk, reclaim=True) == "done"
        assert Upload.objects.get(pk=up.pk).tries == 2

    def test_a_task_takes_over_a_running_upload_only_when_its_earlier_worker_is_gone(self):
        WorkerBeat.objects.create(worker_id="slow", beat_at=timezone.now())
        long_ago = timezone.now() - timedelta(seconds=600)
        WorkerBeat.objects.create(worker_id="dead", beat_at=long_ago)
        assert not earlier_try_stopped(["next"])  # a first try: nothing to take over
        assert not earlier_try_stopped(["slow", "next"])
        assert earlier_try_stopped(["dead", "next"])
        assert earlier_try_stopped(["same", "same"])  # an earlier process under this id


def _command_line_shown(pid: int) -> None:
    """Wait until a process just started shows its command line: Popen returns once the exec
    has begun, and for a moment before the new program's arguments are in place the kernel shows
    none (a loaded machine made that moment long enough for the liveness check to read it)."""
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.parent.exists():
        return  # no /proc: the check takes the pid alone
    for _ in range(500):
        if b"db_worker" in cmdline.read_bytes():
            return
        time.sleep(0.01)


@pytest.mark.django_db
@pytest.mark.skipif(
    connection.vendor != "sqlite", reason="beats wait for the write lock on SQLite only"
)
def test_on_sqlite_a_worker_whose_beat_is_late_but_whose_process_runs_keeps_its_task(settings):
    settings.TASKS = DATABASE
    from records.tasks import ingest_upload

    # A process of this machine whose command line names the worker, as a real one's does.
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "db_worker"])
    _command_line_shown(proc.pid)
    try:
        long_ago = timezone.now() - timedelta(seconds=600)
        host = socket.gethostname()
        WorkerBeat.objects.create(worker_id="blocked", beat_at=long_ago, host=host, pid=proc.pid)
        result = ingest_upload.enqueue(Upload.objects.create(source="api").pk).db_result
        result.claim("blocked")
        DBTaskResult.objects.filter(pk=result.pk).update(started_at=long_ago)
        # Only this task is looked at: a worker another test left may have orphans of its own.
        assert str(result.pk) not in requeue_orphans()
        assert not earlier_try_stopped(["blocked", "next"])
    finally:
        proc.kill()
        proc.wait()
    # Gone now: its task is put back, by this call or by a worker another test left running
    # on the same database, which may even have taken it since; "blocked" holds it no longer.
    requeued = str(result.pk) in requeue_orphans()
    result.refresh_from_db()
    assert requeued or result.status != "RUNNING" or result.worker_ids[-1] != "blocked"


@pytest.mark.django_db
def test_a_queued_upload_whose_task_was_never_written_is_queued_by_a_worker(settings):
    settings.TASKS = DATABASE
    long_ago = timezone.now() - timedelta(seconds=600)
    lost = Upload.objects.create(source="api", status="queued", created_at=long_ago)
    Upload.objects.create(source="api", status="queued")  # its enqueue may be under way
    Upload.objects.create(source="api", status="done", created_at=long_ago)
    assert queue_unqueued_uploads() == [lost.pk]
    (task,) = DBTaskResult.objects.all()
    assert task.status == "READY" and task.args_kwargs["args"] == [lost.pk]
    assert queue_unqueued_uploads() == []  # its task names it now


@pytest.mark.django_db
def test_the_ingest_runs_once_the_storing_transaction_commits_not_inside_it():
    from django.db import transaction

    from records.tasks import queue_upload

    with transaction.atomic():
        up = queue_upload(
            Upload(source="api"),
            [("modeleval-1.jsonl", io.BytesIO(GOOD))],
            allow_digest_mismatch=False,
        )
        assert up.status == "queued" and not Run.objects.exists()
    up.refresh_from_db()
    assert up.status == "done" and Run.objects.count() == 1


# --- real worker processes -----------------------------------------------------------------------


def _queue_api(settings, *files: tuple[str, bytes]) -> Upload:
    from records.tasks import queue_upload

    settings.TASKS = DATABASE
    return queue_upload(
        Upload(source="api"), [(n, io.BytesIO(d)) for n, d in files], allow_digest_mismatch=False
    )


@pytest.mark.django_db(transaction=True)
class TestRealWorkers:
    def test_what_was_queued_with_no_worker_running_is_ingested_by_one_started_later(
        self, settings, upload_dir
    ):
        up = _queue_api(settings, ("modeleval-1.jsonl", GOOD))
        assert Upload.objects.get(pk=up.pk).status == "queued"
        worker = real_worker()
        try:
            until(lambda: Upload.objects.get(pk=up.pk).finished, "the upload")
        finally:
            stop(worker)
        up.refresh_from_db()
        assert up.status == "done" and up.summary["stored"][0]["run_id"] == "run-fixture-dynamic"
        assert DBTaskResult.objects.get().status == "SUCCESSFUL"
        assert files_under(upload_dir) == []  # the worker deleted them from the storage

    def test_a_worker_killed_mid_ingest_leaves_the_upload_to_the_next_exactly_once(self, settings):
        shards = {f"modeleval-{i:02}.jsonl": task_shard(i, attempts=300) for i in range(16)}
        up = _queue_api(settings, ("artifact.zip", _zip(shards)))
        first = real_worker()
        try:
            until(
                lambda: (
                    ShardFile.objects.filter(upload=up)
                    .exclude(sha256__startswith="pending")
                    .exists()
                ),
                "the first shard",
            )
            first.send_signal(signal.SIGKILL)
            first.wait()
        finally:
            stop(first)
        up.refresh_from_db()
        assert up.status == "running" and Run.objects.count() < len(shards)
        second = real_worker()
        try:
            until(lambda: Upload.objects.get(pk=up.pk).finished, "the upload", seconds=180)
        finally:
            stop(second)
        up.refresh_from_db()
        assert up.status == "done" and up.tries == 2
        assert sorted(s["file"] for s in up.summary["stored"]) == sorted(
            f"artifact.zip!{n}" for n in shards
        ), up.summary
        assert up.summary["already_present"] == [] and up.summary["refused"] == []
        # Nothing partial, nothing twice.
        assert Run.objects.count() == len(shards) == ShardFile.objects.count()
        assert not Run.objects.filter(run_id="").exists()
        (task,) = DBTaskResult.objects.all()
        assert task.status == "SUCCESSFUL" and len(task.worker_ids) == 2

    def test_two_workers_share_the_queue_and_no_upload_is_ingested_twice(self, settings):
        uploads = [_queue_api(settings, (f"modeleval-{i}.jsonl", task_shard(i))) for i in range(8)]
        workers = [real_worker(), real_worker()]
        try:
            until(
                lambda: not Upload.objects.exclude(status__in=["done", "failed"]).exists(),
                "every upload",
                seconds=120,
            )
        finally:
            for w in workers:
                stop(w)
        for up in uploads:
            up.refresh_from_db()
            assert (up.status, up.tries, len(up.summary["stored"])) == ("done", 1, 1)
        assert Run.objects.count() == 8
        tasks = DBTaskResult.objects.all()
        assert all(t.status == "SUCCESSFUL" and len(t.worker_ids) == 1 for t in tasks)
