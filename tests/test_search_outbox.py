"""The search index written after a shard's transaction: the outbox row the shard commits with,
what the search, the run page and the other pages say until the index is written, the follow-up
in the ingest's own process, and a lost or failed follow-up tried again by a worker's sweep."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from records.models import ApiToken, Call, PendingIndex, Run, Scoring, Upload
from records.search import engine
from records.search.index import inline_indexing
from records.search.models import SearchCall
from records.tasks.indexing import INDEX_TASK, index_run_task, queue_unindexed_runs
from tests.builders import demo_key, encode, ingest_bytes, line, synth_run

pytestmark = pytest.mark.django_db

FIXTURE = Path(__file__).parent / "fixtures" / "modelrecord" / "modeleval-dynamic.jsonl"
GOOD = FIXTURE.read_bytes()
DATABASE = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
PUBLIC = override_settings(EVALDASH_PUBLIC_READ=True)
LATER = timedelta(hours=1)  # past EVALDASH_TASK_STALE_SECONDS


class Killed(Exception):
    """The process ends between a shard's commit and its index."""


def _documents() -> dict[int, str]:
    key = "id" if connection.vendor == "postgresql" else "rowid"
    body = "body::text" if connection.vendor == "postgresql" else "body"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {key}, {body} FROM records_searchentry ORDER BY {key}")
        return dict(cursor.fetchall())


def _stored_but_not_indexed() -> Run:
    """The fixture shard stored, its follow-up lost with the process that stored it."""
    with pytest.raises(Killed), inline_indexing():
        report = ingest_bytes(("modeleval-dynamic.jsonl", GOOD))
        assert report.ok
        raise Killed
    return Run.objects.get(run_id="run-fixture-dynamic")


@PUBLIC
def test_until_its_index_is_written_a_run_is_named_by_every_search_answer_and_its_page(client):
    with inline_indexing():  # as an upload's task holds it: the index once the task is done
        report = ingest_bytes(("corpus-key.json", demo_key()), ("modeleval-s.jsonl", synth_run()))
        assert report.ok
        run = Run.objects.get(run_id="run-synth")
        # Committed whole, with its outbox row and none of its index.
        assert PendingIndex.objects.filter(run=run).exists()
        assert _documents() == {} and not SearchCall.objects.exists()
        word = engine.words(Call.objects.filter(attempt__run=run).exclude(text="")[0].text)[0]
        answer = client.get("/search.json", {"q": word}).json()
        assert answer["indexing"] == ["run-synth"] and answer["count"] == 0
        # Its attempts are listed as their own fields match; only what the index reads waits.
        assert client.get("/search.json").json()["count"] == run.attempt_count
        assert client.get("/search.json", {"run": "other"}).json()["indexing"] == []
        page = client.get("/search/", {"q": word}).content.decode()
        assert "Still being indexed" in page and "<bdi>run-synth</bdi>" in page
        assert 'class="badge indexing"' in client.get(f"/runs/{run.pk}/").content.decode()
        tab = client.get(f"/runs/{run.pk}/attempts/", {"q": word}).content.decode()
        assert "Still being indexed" in tab
        # Scores and the gate never wait for the index.
        assert Scoring.objects.get(run=run).verdict_count == run.attempt_count
        assert client.get(f"/runs/{run.pk}/scores/").status_code == 200
        _, raw = ApiToken.issue("ci")
        gate = client.get(
            f"/api/v1/runs/{run.run_id}/gate", headers={"Authorization": f"Bearer {raw}"}
        )
        assert gate.status_code == 200 and "passed" in gate.json()
    assert not PendingIndex.objects.exists()
    answer = client.get("/search.json", {"q": word}).json()
    assert answer["indexing"] == [] and answer["count"] > 0
    assert "indexing" not in client.get(f"/runs/{run.pk}/").content.decode()
    assert "Still being indexed" not in client.get("/search/", {"q": word}).content.decode()


def test_an_upload_task_marks_its_upload_done_before_it_indexes_its_runs(settings, monkeypatch):
    from records.search import index
    from records.tasks import queue_upload, run_upload

    settings.TASKS = DATABASE
    upload = queue_upload(
        Upload(source="api"),
        [("modeleval-1.jsonl", io.BytesIO(GOOD))],
        allow_digest_mismatch=False,
    )
    seen = []
    real = index.index_pending

    def noting(run_pk: int) -> bool:
        seen.append(Upload.objects.get(pk=upload.pk).status)
        return real(run_pk)

    monkeypatch.setattr(index, "index_pending", noting)
    assert run_upload(upload.pk) == "done"
    assert seen == ["done"]
    assert not PendingIndex.objects.exists()
    assert SearchCall.objects.count() == Call.objects.count() > 0
    # The index was written by the upload's own task: no task of its own was queued.
    assert not DBTaskResult.objects.filter(task_path=INDEX_TASK).exists()


def test_the_command_line_ingest_indexes_its_runs_in_its_own_process(settings, tmp_path):
    settings.TASKS = DATABASE
    path = tmp_path / "modeleval-dynamic.jsonl"
    path.write_bytes(GOOD)
    call_command("ingest", "--quiet", str(path))
    assert not PendingIndex.objects.exists() and not DBTaskResult.objects.exists()
    assert SearchCall.objects.count() == Call.objects.count() > 0


def test_a_follow_up_lost_with_its_process_is_queued_by_the_sweep_and_writes_the_index_once(
    settings,
):
    settings.TASKS = DATABASE
    run = _stored_but_not_indexed()
    assert _documents() == {}
    assert queue_unindexed_runs() == []  # just stored: its follow-up may be under way
    assert queue_unindexed_runs(timezone.now() + LATER) == [run.pk]
    assert queue_unindexed_runs(timezone.now() + LATER) == []  # its task names it now
    (task,) = DBTaskResult.objects.filter(task_path=INDEX_TASK)
    assert task.status == "READY" and task.args_kwargs["args"] == [run.pk]
    assert index_run_task.call(run.pk) is True
    written = _documents()
    calls = SearchCall.objects.count()
    assert calls == Call.objects.count() and len(written) == calls + run.attempt_count
    assert index_run_task.call(run.pk) is False  # a second try writes nothing twice
    engine.forget_run(run.pk)
    engine.index_run(run.pk)
    assert _documents() == written  # what a rebuild writes
    assert SearchCall.objects.count() == calls


def test_forgetting_a_run_looks_first_and_deletes_only_what_the_index_holds_of_it():
    run = _stored_but_not_indexed()
    with CaptureQueriesContext(connection) as seen:
        engine.forget_run(run.pk)  # as its first follow-up does: nothing of it to delete
    assert [q["sql"] for q in seen.captured_queries if "DELETE" in q["sql"]] == []
    assert index_run_task.call(run.pk) is True
    assert SearchCall.objects.filter(run=run).exists() and _documents()
    engine.forget_run(run.pk)
    assert _documents() == {} and not SearchCall.objects.exists()


def test_a_failed_follow_up_is_counted_and_tried_again_until_it_has_failed_too_often(
    settings, monkeypatch
):
    settings.TASKS = DATABASE
    settings.EVALDASH_TASK_MAX_TRIES = 2
    real = engine.index_new_run
    failures = [DatabaseError("database or disk is full")] * 2

    def full_disk(run_pk: int, reach: Any = None) -> int:
        if failures:
            raise failures.pop()
        return real(run_pk, reach)

    monkeypatch.setattr(engine, "index_new_run", full_disk)
    report = ingest_bytes(("modeleval-dynamic.jsonl", GOOD))
    assert report.ok and report.stored[0]["run_id"] == "run-fixture-dynamic"
    (row,) = PendingIndex.objects.all()
    assert row.tries == 1 and "database or disk is full" in row.error
    assert _documents() == {}
    assert queue_unindexed_runs(timezone.now() + LATER) == [row.run_id]
    with pytest.raises(DatabaseError):
        index_run_task.call(row.run_id)
    row.refresh_from_db()
    assert row.tries == 2
    # Failed as often as a task may: left to `manage.py search_index`, still named meanwhile.
    DBTaskResult.objects.all().delete()
    assert queue_unindexed_runs(timezone.now() + LATER) == []
    call_command("search_index")
    assert not PendingIndex.objects.exists()
    assert SearchCall.objects.count() == Call.objects.count() > 0


class Lost(BaseException):
    """The worker is killed while it indexes (kill -9, out of memory): nothing after it runs."""


def test_an_index_try_lost_with_its_worker_is_counted_and_the_sweep_stops_after_the_last(
    settings, monkeypatch
):
    settings.TASKS = DATABASE
    settings.EVALDASH_TASK_MAX_TRIES = 2
    run = _stored_but_not_indexed()

    def out_of_memory(run_pk: int, reach: Any = None) -> int:
        raise Lost

    monkeypatch.setattr(engine, "index_new_run", out_of_memory)
    for tries in (1, 2):
        assert queue_unindexed_runs(timezone.now() + LATER) == [run.pk]
        with pytest.raises(Lost):
            index_run_task.call(run.pk)
        DBTaskResult.objects.all().delete()  # its task given up once its workers died
        row = PendingIndex.objects.get(run=run)
        assert row.tries == tries and "lost with its process" in row.error
    # Its tries spent, no task is queued again, and one queued before does not try.
    assert queue_unindexed_runs(timezone.now() + LATER) == []
    assert index_run_task.call(run.pk) is False
    assert PendingIndex.objects.get(run=run).tries == 2
    monkeypatch.undo()
    call_command("search_index")
    assert not PendingIndex.objects.exists()
    assert SearchCall.objects.count() == Call.objects.count() > 0


def _two_runs_stored_by_worker_w1() -> None:
    """Two runs stored by an upload's task in worker w1, which lives on, and then indexed."""
    from records.models.intake import WorkerBeat
    from records.search.index import indexed_by

    WorkerBeat.objects.create(worker_id="w1", beat_at=timezone.now() + LATER, host="here")
    with inline_indexing(), indexed_by("w1"):
        report = ingest_bytes(
            ("modeleval-dynamic.jsonl", GOOD),
            ("corpus-key.json", demo_key()),
            ("modeleval-s.jsonl", synth_run()),
        )
        assert report.ok and len(report.stored) == 2
        assert set(PendingIndex.objects.values_list("worker", flat=True)) == {"w1"}


def test_a_follow_up_whose_failure_cannot_be_written_hands_its_run_to_the_sweep_and_goes_on(
    settings, monkeypatch
):
    from records.search import index

    settings.TASKS = DATABASE
    real = index.index_pending
    failed = []

    def connection_lost(run_pk: int) -> bool:
        if not failed:
            failed.append(run_pk)
            raise DatabaseError("server closed the connection unexpectedly")
        return real(run_pk)

    def nor_written(run_pk: int, exc: BaseException) -> int:
        raise DatabaseError("server closed the connection unexpectedly")

    monkeypatch.setattr(index, "index_pending", connection_lost)
    monkeypatch.setattr(index, "failed_try", nor_written)
    _two_runs_stored_by_worker_w1()
    # The next run was indexed all the same, and the failed one is the sweep's, not w1's.
    (row,) = PendingIndex.objects.all()
    assert row.run_id == failed[0] and row.worker == ""
    assert queue_unindexed_runs(timezone.now() + LATER) == failed


def test_runs_a_stopped_follow_up_leaves_unindexed_are_handed_to_the_sweep(settings, monkeypatch):
    from records.search import index

    settings.TASKS = DATABASE

    def stopped(run_pk: int) -> bool:
        raise Lost

    monkeypatch.setattr(index, "index_pending", stopped)
    with pytest.raises(Lost):
        _two_runs_stored_by_worker_w1()
    rows = PendingIndex.objects.order_by("run_id")
    assert [r.worker for r in rows] == ["", ""]
    assert queue_unindexed_runs(timezone.now() + LATER) == [r.run_id for r in rows]


def test_a_run_deleted_before_its_index_is_written_leaves_no_outbox_row():
    run = _stored_but_not_indexed()
    run.delete()
    assert not PendingIndex.objects.exists()
    assert index_run_task.call(run.pk) is False


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite has one writer at a time")
@pytest.mark.django_db(transaction=True)
def test_a_run_deleted_while_it_is_being_indexed_leaves_no_document_behind(monkeypatch):
    import threading

    from records.search.index import index_pending
    from records.search.models import SearchEntry

    run = _stored_but_not_indexed()
    written, go = threading.Event(), threading.Event()
    real = engine.index_new_run

    def slow(run_pk: int, reach: Any = None) -> int:
        calls = real(run_pk, reach)
        written.set()  # its documents written, not yet committed
        assert go.wait(30)
        return calls

    monkeypatch.setattr(engine, "index_new_run", slow)
    done = []

    def in_a_thread(work):
        def run_it() -> None:
            try:
                done.append(work())
            finally:
                connection.close()

        thread = threading.Thread(target=run_it)
        thread.start()
        return thread

    indexer = in_a_thread(lambda: index_pending(run.pk))
    assert written.wait(30)
    deleter = in_a_thread(lambda: Run.objects.filter(pk=run.pk).delete())
    deleter.join(0.5)
    go.set()
    indexer.join(30)
    deleter.join(30)
    assert len(done) == 2 and not Run.objects.exists()
    assert not SearchEntry.objects.exists() and not SearchCall.objects.exists()


def _peak_kb() -> int:
    for row in Path("/proc/self/status").read_text().splitlines():
        if row.startswith("VmHWM:"):
            return int(row.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.skipif(connection.vendor != "sqlite", reason="PostgreSQL joins it in its server")
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc")
def test_an_attempt_of_thirty_megabytes_is_indexed_in_a_few_megabytes_of_memory():
    # Thirty turns of a megabyte of text: joined whole, then cut to its indexed head, the
    # document took five times the attempt's size; each piece past the head is left out first.
    text = "lorem " * 170_000
    turns = [
        line("turn", index=n + 1, blocks=[{"kind": "text", "text": f"t{n} {text}"}])
        for n in range(30)
    ]
    data = encode(
        [line("attempt"), *turns, line("call"), line("verify"), line("session"), line("run")]
    )
    del turns
    run = None
    with pytest.raises(Killed), inline_indexing():
        assert ingest_bytes(("modeleval-huge.jsonl", data)).ok
        run = Run.objects.get()
        raise Killed
    del data
    Path("/proc/self/clear_refs").write_text("5")  # the peak from here on
    before = _peak_kb()
    assert index_run_task.call(run.pk) is True
    assert _peak_kb() - before < 40_000  # kB; joined whole it was some 140,000
    (body,) = (b for i, b in _documents().items() if i % 2 == 0)
    assert len(body) == engine.INDEXED_CHARS and " t0 lorem lorem" in body and " t1 " not in body


def _stored_calls(texts: list[str]) -> Run:
    """A run of one attempt with a call of each text, stored and not yet indexed."""
    calls = [line("call", index=n + 1, text=text) for n, text in enumerate(texts)]
    data = encode([line("attempt"), line("turn"), *calls, line("session"), line("run")])
    del calls
    with pytest.raises(Killed), inline_indexing():
        assert ingest_bytes(("modeleval-wide.jsonl", data)).ok
        raise Killed
    return Run.objects.get()


def _indexing_peak(run: Run) -> int:
    """The most Python held at once (tracemalloc) while the run's index was written, in bytes;
    and the index written is what a rebuild writes."""
    import tracemalloc

    from records.search.index import index_pending

    tracemalloc.start()
    try:
        assert index_pending(run.pk) is True
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    written = _documents()
    assert SearchCall.objects.count() == Call.objects.count() == len(written) - 1
    engine.forget_run(run.pk)
    engine.index_run(run.pk)
    assert _documents() == written
    return peak


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite indexes it all in SQL")
def test_calls_of_a_megabyte_of_text_each_are_indexed_without_reading_them_into_python():
    # Read whole, 2,000 calls at a time, twenty calls of a megabyte came into Python at once
    # (a peak of 20 MB here, 896 MB of memory for 400 of them); only their head is indexed,
    # which the database's statement cuts before anything is read.
    run = _stored_calls([f"c{n} " + "lorem " * 170_000 for n in range(20)])
    assert _indexing_peak(run) < 4_000_000
    # Its first 100,000 characters, cut in the middle of a word.
    assert _documents()[2 * Call.objects.get(index=8).pk + 1] == "'c7' 'l' 'lorem'"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite indexes it all in SQL")
def test_the_calls_read_for_their_vectors_are_read_a_few_megabytes_at_a_time(monkeypatch):
    # Sixty calls of 90 kB each, every one read for its vector: 5.4 MB in all, 1 MB at a time.
    monkeypatch.setattr(engine, "VECTOR_BYTES", 1_000_000)
    run = _stored_calls([f"c{n} " + "lorem " * 15_000 for n in range(60)])
    assert _indexing_peak(run) < 3_000_000


def test_the_sweep_leaves_a_run_to_the_live_worker_that_stored_it_and_takes_it_once_it_is_gone(
    settings,
):
    from records.models.intake import WorkerBeat

    settings.TASKS = DATABASE
    run = _stored_but_not_indexed()
    PendingIndex.objects.filter(run=run).update(worker="w1")
    WorkerBeat.objects.create(worker_id="w1", beat_at=timezone.now() + LATER, host="elsewhere")
    assert queue_unindexed_runs(timezone.now() + LATER) == []  # its worker indexes it
    WorkerBeat.objects.filter(worker_id="w1").update(beat_at=timezone.now() - LATER)
    assert queue_unindexed_runs(timezone.now() + LATER) == [run.pk]


def test_a_run_an_earlier_killed_try_stored_is_left_by_the_sweep_to_the_try_that_finds_it(
    settings, monkeypatch
):
    import records.tasks as tasks
    from records.models.intake import WorkerBeat
    from records.search import index

    settings.TASKS = DATABASE
    upload = tasks.queue_upload(
        Upload(source="api"),
        [("modeleval-1.jsonl", io.BytesIO(GOOD))],
        allow_digest_mismatch=False,
    )

    def killed(*args, **kwargs):
        raise Killed

    # The first try (worker w1) stores the run and dies before it marks its upload done.
    with monkeypatch.context() as patch:
        patch.setattr(tasks, "finish", killed)
        with pytest.raises(Killed):
            tasks.run_upload(upload.pk, worker="w1")
    assert Upload.objects.get(pk=upload.pk).status == "running"
    run = Run.objects.get(run_id="run-fixture-dynamic")
    # An exception hands the row to the sweep; kill -9 leaves it naming the dead worker.
    PendingIndex.objects.filter(run=run).update(worker="w1")
    WorkerBeat.objects.create(worker_id="w2", beat_at=timezone.now() + LATER, host="here")
    swept = []
    real = index.index_pending

    def sweeping_first(run_pk: int) -> bool:
        # A heartbeat between the upload's end and its index: w1 is gone, the upload is done.
        swept.extend(queue_unindexed_runs(timezone.now() + LATER))
        return real(run_pk)

    monkeypatch.setattr(index, "index_pending", sweeping_first)
    assert tasks.run_upload(upload.pk, reclaim=True, worker="w2") == "done"
    assert swept == []  # the second try took the run as its own
    assert not DBTaskResult.objects.filter(task_path=INDEX_TASK).exists()
    assert not PendingIndex.objects.exists()
    assert SearchCall.objects.count() == Call.objects.count() > 0


@PUBLIC
def test_a_run_whose_index_was_tried_too_often_says_its_index_failed_and_how_to_write_it(
    client, settings
):
    run = _stored_but_not_indexed()
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'class="badge indexing"' in page and "index failed" not in page
    PendingIndex.objects.filter(run=run).update(
        tries=settings.EVALDASH_TASK_MAX_TRIES, error="OperationalError: out of memory"
    )
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert ">index failed</span>" in page and "out of memory" in page
    assert "manage.py search_index run-fixture-dynamic" in page


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("fails", [False, True])
def test_on_postgresql_a_zips_runs_are_indexed_side_by_side_each_in_its_transaction(
    settings, monkeypatch, fails
):
    """Outside a transaction, PostgreSQL indexes the runs stored together on threads of their
    own (`records.bulk.threads`), each run in its own transaction as in turn: a run whose
    index fails keeps its outbox row, with the error, for the sweep; the other is indexed."""
    import threading

    from records.search import index

    if connection.vendor != "postgresql":
        pytest.skip("SQLite indexes one run after the other, one writer at a time")
    settings.TASKS = DATABASE
    real = index.index_pending
    where: dict[int, int] = {}
    failed: list[int] = []
    one_at_a_time = threading.Lock()

    def noted(run_pk: int) -> bool:
        with one_at_a_time:
            where[run_pk] = threading.get_ident()
            failing = fails and not failed
            if failing:
                failed.append(run_pk)
        if failing:
            raise DatabaseError("the index could not be written")
        return real(run_pk)

    monkeypatch.setattr(index, "index_pending", noted)
    _two_runs_stored_by_worker_w1()
    assert len(where) == 2 and len(set(where.values())) == 2
    assert threading.get_ident() not in where.values()
    left = list(PendingIndex.objects.values_list("run_id", "worker", "tries"))
    assert left == [(pk, "", 1) for pk in failed]
    if fails:
        assert "could not be written" in PendingIndex.objects.get().error
    for pk in set(where) - set(failed):
        run = Run.objects.get(pk=pk)
        assert (
            SearchCall.objects.filter(run=run).count()
            == Call.objects.filter(attempt__run=run).count()
        )
