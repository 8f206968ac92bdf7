"""Large shards are parsed in a second process: the rows stored, the errors named and the
failures handled are exactly those of parsing in line."""

from __future__ import annotations

import hashlib
import io
import json
import multiprocessing.forkserver
import os
import signal
import threading
import time
from datetime import datetime
from multiprocessing.context import ForkServerProcess
from pathlib import Path

import pytest
from django.db import connection

from records import ingest as ing
from records.bulk import processes as beside
from records.bulk import readahead, tables
from records.bulk.apart import reader
from records.devtools.synth import MODELS, load_demo_key, write_run
from records.ingest import bytes_input, ingest, pipeline
from records.ingest import shards as ingest_shards
from records.models import Attempt, Call, Session, ShardFile, SurfaceSummary, Turn, Upload, Verify
from records.parser import parse_worker
from tests.builders import FIXTURE_SHARD, demo_key, encode, line, published_shard

pytestmark = pytest.mark.django_db
HOSTILE = Path(__file__).parent / "fixtures" / "hostile"


def _synth(run_id: str = "run-parser", seed: int = 7, attempts: int = 120) -> bytes:
    buf = io.BytesIO()
    write_run(
        buf,
        load_demo_key(),
        run_id=run_id,
        commit=f"{seed:040x}",
        started_at=datetime(2026, 11, seed % 27 + 1, 9),
        seed=seed,
        models=MODELS[:2],
        max_attempts=attempts,
    )
    return buf.getvalue()


def _ingest(name: str, data: bytes):
    return ingest([bytes_input(name, data)], Upload.objects.create(source=Upload.Source.CLI))


def _stored() -> dict[str, list]:
    """Every stored row of the one run, with ids replaced by what they stand for."""
    keys = dict(Attempt.objects.values_list("pk", "key"))
    sessions = dict(Session.objects.values_list("pk", "label"))

    def rows(model, *exclude):
        out = []
        for r in model.objects.values():
            r = {k: v for k, v in r.items() if k not in ("id", "run_id", *exclude)}
            if "attempt_id" in r:
                r["attempt_id"] = keys[r["attempt_id"]]
            if "session_id" in r:
                r["session_id"] = sessions.get(r["session_id"])
            out.append(r)
        return sorted(out, key=lambda r: json.dumps(r, sort_keys=True, default=str))

    return {
        "attempts": rows(Attempt),
        "turns": rows(Turn),
        "calls": rows(Call),
        "verifies": rows(Verify),
        "sessions": rows(Session),
        "summaries": rows(SurfaceSummary),
    }


def _as_each_alone_in_line(shards: dict[str, bytes], settings) -> None:
    """The rows stored are those of each shard stored alone, parsed in line."""
    together = _stored()
    ShardFile.objects.all().delete()
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 10**12
    for name, data in shards.items():
        assert _ingest(name, data).stored
    assert _stored() == together


def _through(way: str, settings, monkeypatch) -> list[str]:
    """Parse in line, in a forked process, or in a process from the forkserver; the start
    methods actually used are collected in the list returned."""
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 10**12 if way == "in line" else 0
    # One parser process, whose start method is the one asserted: a second starts from the
    # forkserver whatever `way` (the first one's threads are running by then).
    settings.EVALDASH_INGEST_PROCESSES = 1
    if way == "forkserver":
        # As if another thread were running (a web server's): workers come from the forkserver.
        real, other = threading.enumerate, threading.Thread()
        monkeypatch.setattr(threading, "enumerate", lambda: [*real(), other])
    return _starts(monkeypatch)


def _starts(monkeypatch) -> list[str]:
    """The start methods of the processes the calls start, in order."""
    used: list[str] = []
    real = beside._context

    def context(preload, **how):
        ctx = real(preload, **how)
        used.append(ctx.get_start_method())
        return ctx

    monkeypatch.setattr(beside, "_context", context)
    return used


@pytest.mark.parametrize("data", [FIXTURE_SHARD.read_bytes(), _synth()], ids=["fixture", "synth"])
def test_every_way_of_parsing_stores_the_same_rows(data, settings, monkeypatch):
    seen = {}
    for way in ("in line", "fork", "forkserver"):
        used = _through(way, settings, monkeypatch)
        report = _ingest("modeleval-p.jsonl", data)
        assert used == ([] if way == "in line" else [way])
        assert report.ok and len(report.stored) == 1, report.as_dict()
        seen[way] = (_stored(), report.stored[0]["attempts"], report.stored[0]["lines"])
        ShardFile.objects.all().delete()
        monkeypatch.undo()
    assert seen["fork"] == seen["in line"] == seen["forkserver"]
    assert seen["in line"][0]["turns"] and seen["in line"][0]["calls"]


@pytest.mark.parametrize("way", ["fork", "forkserver"])
def test_a_parser_process_names_the_same_file_line_and_field_for_each_bad_shard(
    way, settings, monkeypatch
):
    used = _through(way, settings, monkeypatch)
    expected = json.loads((HOSTILE / "expected.json").read_text())
    shards = {
        n: w for n, w in expected.items() if n.startswith("modeleval-") and not w.get("accepted")
    }
    assert len(shards) > 10
    report = ingest(
        [bytes_input(n, (HOSTILE / n).read_bytes()) for n in sorted(shards)],
        Upload.objects.create(source=Upload.Source.CLI),
    )
    got = {r["file"]: r for r in report.refused}
    for name, want in shards.items():
        assert want["message"] in got[name]["message"], (name, got[name])
        assert (got[name]["line"], got[name]["field"]) == (want["line"], want["field"]), name
    assert not ShardFile.objects.exists()
    assert set(used) == {way}


def test_lines_before_their_attempt_and_an_error_at_the_end_are_handled_alike(settings):
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    early = encode([line("verify"), line("turn"), line("attempt"), line("session"), line("run")])
    assert _ingest("modeleval-early.jsonl", early).ok
    assert Verify.objects.get().attempt.key == "a1" and Attempt.objects.get().turn_count == 1
    bad = encode(
        [line("attempt", id="a2"), line("session"), line("run"), line("call", attempt="zz")]
    )
    (refused,) = _ingest("modeleval-late.jsonl", bad).refused
    assert (refused["line"], refused["field"]) == (4, "call.attempt")
    assert Attempt.objects.count() == 1


@pytest.mark.parametrize("way", ["in line", "fork"])
def test_the_digest_is_the_shards_own_and_the_same_content_is_stored_once(
    way, settings, monkeypatch
):
    _through(way, settings, monkeypatch)
    data = FIXTURE_SHARD.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    (stored,) = _ingest("modeleval-a.jsonl", data).stored
    assert stored["sha256"] == ShardFile.objects.get().sha256 == digest
    again = _ingest("modeleval-b.jsonl", data)
    assert again.present == [{"file": "modeleval-b.jsonl", "sha256": digest}]
    assert not again.stored and ShardFile.objects.count() == 1


def test_two_uploads_of_the_same_content_racing_store_it_once(settings, monkeypatch):
    """The second upload finds no stored shard of its size (as when the first commits while it
    reads), so it is not hashed first: the parser's digest meets the first's at the end."""
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    data = FIXTURE_SHARD.read_bytes()
    (first,) = _ingest("modeleval-a.jsonl", data).stored
    ShardFile.objects.update(size=0)
    hashed_first = []
    monkeypatch.setattr(ingest_shards, "_sha256", lambda stream: hashed_first.append(stream))
    report = _ingest("modeleval-b.jsonl", data)
    assert not hashed_first and not report.stored
    assert report.present == [
        {"file": "modeleval-b.jsonl", "sha256": hashlib.sha256(data).hexdigest()}
    ]
    assert ShardFile.objects.count() == 1 and Attempt.objects.count() == first["attempts"]


@pytest.mark.django_db(transaction=True)
def test_on_sqlite_a_large_shards_checkpoint_runs_beside_the_next_and_ends_with_the_call(
    settings, monkeypatch
):
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's write-ahead log")
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    started = []
    real = beside.in_background
    monkeypatch.setattr(beside, "in_background", lambda f: started.append(1) or real(f))
    report = ingest(
        [
            bytes_input("modeleval-a.jsonl", _synth()),
            bytes_input("modeleval-b.jsonl", _synth("run-other", seed=8)),
        ],
        Upload.objects.create(source=Upload.Source.CLI),
    )
    assert len(report.stored) == 2 and Attempt.objects.count() == sum(
        s["attempts"] for s in report.stored
    )
    assert started == [1, 1]  # each shard's, beside what comes next; the call waits for the last
    with connection.cursor() as cur:
        cur.execute("PRAGMA wal_autocheckpoint")
        assert cur.fetchone()[0] == 1000
        cur.execute("PRAGMA wal_checkpoint(PASSIVE)")
        busy, log, done = cur.fetchone()
    assert busy == 0 and log == done  # nothing left in the log to copy


@pytest.mark.django_db(transaction=True)
def test_on_sqlite_a_large_scorings_checkpoint_runs_beside_and_the_rescore_command_waits_for_it(
    settings, monkeypatch
):
    from django.core.management import call_command
    from django.db import connection

    from tests.builders import demo_key

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's write-ahead log")
    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0  # every run is large
    started, ended = [], []
    real = beside.in_background

    def slow(checkpoint):
        time.sleep(0.3)  # a checkpoint long enough that a caller not waiting returns before it
        checkpoint()
        ended.append(1)

    monkeypatch.setattr(
        beside, "in_background", lambda f: started.append(1) or real(lambda: slow(f))
    )
    report = ingest(
        [bytes_input("key.json", demo_key()), bytes_input("modeleval-a.jsonl", _synth())],
        Upload.objects.create(source=Upload.Source.CLI),
    )
    assert len(report.stored) == 1 and started == ended == [1]  # the scoring on arrival's
    call_command("rescore", stdout=io.StringIO())
    assert started == ended == [1, 1]
    with connection.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM records_scoring")
        assert cur.fetchone()[0] == 2
        cur.execute("PRAGMA wal_autocheckpoint")
        assert cur.fetchone()[0] == 1000
        cur.execute("PRAGMA wal_checkpoint(PASSIVE)")
        busy, log, done = cur.fetchone()
    assert busy == 0 and log == done  # the command returned with nothing left in the log


def test_two_threads_settling_at_once_each_return_with_the_background_work_ended():
    # A server's two requests, each after a scoring whose checkpoint runs in the background.
    ended = threading.Event()
    beside.in_background(lambda: (time.sleep(0.3), ended.set()))
    saw, errors = [], []

    def settle():
        try:
            beside.settle()
            saw.append(ended.is_set())
        except Exception as exc:  # noqa: BLE001 (the test reports it)
            errors.append(exc)

    threads = [threading.Thread(target=settle) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and saw == [True, True]


def _dies(source, sink):
    os._exit(3)


def test_a_parser_process_that_dies_leaves_nothing_and_says_so(settings, monkeypatch):
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    monkeypatch.setattr(pipeline, "parse_worker", _dies)
    (refused,) = _ingest("modeleval-dies.jsonl", FIXTURE_SHARD.read_bytes()).refused
    assert "exit code 3" in refused["message"]  # that shard's refusal, not a crash
    assert not ShardFile.objects.exists() and not Attempt.objects.exists()
    monkeypatch.undo()
    assert _ingest("modeleval-dies.jsonl", FIXTURE_SHARD.read_bytes()).stored


# --- scoring beside the writer --------------------------------------------------------------------


def _key() -> bytes:
    from records.formats.corpus_key import key_to_json

    return json.dumps(key_to_json(load_demo_key())).encode()


def _verdicts() -> list[tuple]:
    from records.models import ScoreCase, ScoreRow, Verdict

    keys = dict(Attempt.objects.values_list("pk", "key"))
    verdicts = sorted(
        (
            keys[v["attempt_id"]],
            *sorted((k, x) for k, x in v.items() if k not in ("id", "attempt_id", "scoring_id")),
        )
        for v in Verdict.objects.values()
    )
    rows = sorted(ScoreRow.objects.values_list("row_key", "figures", "case_count", "coverage"))
    cases = sorted(
        ScoreCase.objects.values_list("row_key", "case", "completed", "counted", "total")
    )
    return [verdicts, rows, cases]


def test_a_shard_scored_on_arrival_is_scored_from_its_rows_as_written(settings, monkeypatch):
    """The attempts just written go to the scoring as they were written, not read back, and
    give the verdicts a re-score of the stored run (which reads them back) gives."""
    from records.models import Run, Scoring
    from records.scoring import run as scoring_run

    _ingest("key.json", _key())
    read_back = scoring_run._attempt_rows
    monkeypatch.setattr(
        scoring_run, "_attempt_rows", lambda *a, **k: pytest.fail("the attempts were read back")
    )
    assert _ingest("modeleval-s.jsonl", _synth()).stored
    arrived = _verdicts()
    assert arrived[0] and Scoring.objects.get().verdict_count == len(arrived[0])
    monkeypatch.setattr(scoring_run, "_attempt_rows", read_back)
    run, key = Run.objects.get(), Scoring.objects.get().key
    Scoring.objects.all().delete()
    assert not scoring_run.score_run(run, key).error
    assert _verdicts() == arrived


@pytest.mark.parametrize("way", ["fork", "forkserver"])
def test_a_run_scored_in_a_second_process_gets_the_same_verdicts(way, settings, monkeypatch):
    from records.models import Run, Scoring
    from records.scoring.run import score_run

    _ingest("key.json", _key())
    assert _ingest("modeleval-s.jsonl", _synth()).stored
    run, key = Run.objects.get(), Scoring.objects.get().key
    inline = _verdicts()
    assert inline[0] and Scoring.objects.get().verdict_count == len(inline[0])
    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    used = _through(way, settings, monkeypatch)
    Scoring.objects.all().delete()
    scoring = score_run(run, key)
    assert used == [way] and not scoring.error
    assert _verdicts() == inline


def _servers_and_scorers(monkeypatch) -> list[tuple]:
    """In order: each start of the workers' server asked for ahead (`processes.prepare`), as
    ("server", whether the run's attempts are stored yet), and each start of scorer processes,
    as ("scorers", whether they were started from that server rather than forked from here).
    (A worker's own start reaches the server by another way than the one recorded here.)"""
    events: list[tuple] = []
    real_ensure, real_several = multiprocessing.forkserver.ensure_running, beside.Beside.several

    def ensure_running():
        events.append(("server", Attempt.objects.exists()))
        real_ensure()

    def several(n, target, args, what, **kw):
        workers = real_several(n, target, args, what, **kw)
        if target is not parse_worker:  # the parser processes start together too
            events.append(("scorers", isinstance(workers[0].proc, ForkServerProcess)))
        return workers

    monkeypatch.setattr(multiprocessing.forkserver, "ensure_running", ensure_running)
    monkeypatch.setattr(beside.Beside, "several", several)
    return events


@pytest.mark.parametrize("parse", ["parser process", "in line"])
@pytest.mark.django_db(transaction=True)
def test_a_large_run_scored_on_arrival_has_its_scorers_server_started_during_the_store(
    parse, settings, monkeypatch
):
    # The server's start (a fresh interpreter importing the scorer) overlaps the rest of the
    # store instead of delaying the first scorer; where the scorers are forked from the writer
    # instead (PostgreSQL with no other thread running: the shard parsed in line), no server
    # is started for nothing.
    from records.models import Scoring

    _ingest("key.json", _key())
    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0 if parse == "parser process" else 1 << 40
    events = _servers_and_scorers(monkeypatch)
    assert _ingest("modeleval-s.jsonl", _synth()).stored
    assert not Scoring.objects.get().error
    (served,) = [e[1] for e in events if e[0] == "scorers"]
    if connection.vendor == "sqlite":  # a WAL file the scorers read themselves: never forked
        assert served
    if served:  # asked for before the shard's attempts were written (and by the scoring)
        assert events == [("server", False), ("server", True), ("scorers", True)]
    else:
        assert events == [("scorers", False)]


def test_a_run_with_no_key_stored_starts_no_scorers_server(settings, monkeypatch):
    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    events = _servers_and_scorers(monkeypatch)
    assert _ingest("modeleval-s.jsonl", _synth()).stored
    assert events == []


@pytest.mark.django_db(transaction=True)
def test_a_shard_is_stored_and_scored_when_its_scorers_server_cannot_start_ahead(
    settings, monkeypatch
):
    # Starting the server ahead is only a head start, made inside the shard's transaction: its
    # failure loses nothing, and the scorers' own start then starts it.
    from records.models import Scoring

    def fails():
        raise OSError(11, "Resource temporarily unavailable")

    _ingest("key.json", _key())
    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    monkeypatch.setattr(multiprocessing.forkserver, "ensure_running", fails)
    report = _ingest("modeleval-s.jsonl", _synth())
    assert report.stored and not report.refused
    assert Attempt.objects.count() == report.stored[0]["attempts"] > 0
    assert not Scoring.objects.get().error


@pytest.mark.django_db(transaction=True)
def test_a_rescore_starts_its_scorers_server_before_reading_the_run(settings, monkeypatch):
    # `manage.py rescore`: the server's start overlaps the key's parse and the attempts' read.
    from records.models import Run, Scoring
    from records.scoring.run import score_run

    _ingest("key.json", _key())
    assert _ingest("modeleval-s.jsonl", _synth()).stored
    run, key = Run.objects.get(), Scoring.objects.get().key
    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    events = _servers_and_scorers(monkeypatch)
    assert not score_run(run, key).error
    (served,) = [e[1] for e in events if e[0] == "scorers"]
    if connection.vendor == "sqlite":
        assert served
    assert events == ([("server", True)] if served else []) + [("scorers", served)]


@pytest.mark.parametrize("forced", [False, True], ids=["as started here", "forkserver"])
@pytest.mark.django_db(transaction=True)
def test_scorer_processes_that_read_their_own_rows_get_the_verdicts_of_scoring_in_line(
    forced, settings, monkeypatch
):
    # Committed rows: each scorer process reads its chunks on a connection of its own. (A
    # transactional test may run beside another thread, so the start method is not chosen.)
    from records.models import Run, Scoring
    from records.scoring import run as scores

    _ingest("key.json", _key())
    assert _ingest("modeleval-s.jsonl", _synth()).stored
    run, key = Run.objects.get(), Scoring.objects.get().key
    inline = _verdicts()
    assert inline[0]
    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    used = _through("forkserver" if forced else "fork", settings, monkeypatch)
    reads = []
    real = scores._read_here
    monkeypatch.setattr(scores, "_read_here", lambda spec: reads.append(spec) or real(spec))
    assert reader(connection) is not None
    Scoring.objects.all().delete()
    scoring = scores.score_run(run, key)
    # A scorer opening the SQLite file itself is never forked from this process, which holds it.
    sqlite = connection.vendor == "sqlite"
    assert len(used) == 1 and (used == ["forkserver"] or not (forced or sqlite))
    assert not scoring.error and reads == []  # none read here
    assert _verdicts() == inline


@pytest.mark.django_db(transaction=True)
def test_a_scorer_that_cannot_read_the_run_fails_the_scoring_saying_so(settings, monkeypatch):
    from django.db import transaction

    from records.bulk.apart import Reader
    from records.models import Run, Scoring, Verdict
    from records.scoring import run as scores

    _ingest("key.json", _key())
    assert _ingest("modeleval-s.jsonl", _synth()).stored
    run, key = Run.objects.get(), Scoring.objects.get().key
    # Rows not yet committed (autocommit off) are read here, never by another connection.
    transaction.set_autocommit(False)
    try:
        assert reader(connection) is None
    finally:
        transaction.set_autocommit(True)
    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    monkeypatch.setattr(scores, "reader", lambda c: Reader("sqlite", "/nonexistent/db", 1.0))
    Scoring.objects.all().delete()
    scoring = scores.score_run(run, key)
    assert "a scorer could not read the run" in scoring.error and scoring.verdict_count == 0
    assert not Verdict.objects.exists()


def test_inside_a_transaction_the_rows_are_read_here_and_sent_to_the_scorers(settings, monkeypatch):
    # The rows may not be committed (the caller's own transaction): no other connection
    # could see them, so this process reads them.
    from records.models import Run, Scoring
    from records.scoring import run as scores

    _ingest("key.json", _key())
    assert _ingest("modeleval-s.jsonl", _synth()).stored
    run, key = Run.objects.get(), Scoring.objects.get().key
    inline = _verdicts()
    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    reads = []
    real = scores._read_here
    monkeypatch.setattr(scores, "_read_here", lambda spec: reads.append(spec) or real(spec))
    assert reader(connection) is None
    Scoring.objects.all().delete()
    scoring = scores.score_run(run, key)
    assert not scoring.error and reads and _verdicts() == inline


def test_each_verdict_carries_its_attempts_session_tries_and_tokens():
    from records.models import Verdict

    _ingest("key.json", _key())
    assert _ingest("modeleval-s.jsonl", _synth()).stored
    tokens = ("input_tokens", "output_tokens", "cache_created_tokens", "cache_read_tokens")
    got = {
        v[0]: v[1:]
        for v in Verdict.objects.values_list("attempt_id", "session_id", "tries", *tokens)
    }
    want = {
        a[0]: a[1:] for a in Attempt.objects.values_list("pk", "session_id", "try_count", *tokens)
    }
    assert len(got) > 40 and any(v[1] for v in got.values())
    assert got == {pk: want[pk] for pk in got}


def test_every_verdict_row_the_scorer_builds_is_the_declared_layout_of_the_table():
    """The verdict table takes its columns from VerdictRow; the scorer builds plain tuples."""
    import msgspec

    from records.formats.rows import VerdictRow
    from records.models import Run
    from records.scorer.batch import score_chunk
    from records.scoring import run as scores

    assert _ingest("modeleval-s.jsonl", _synth()).stored
    doc, built = load_demo_key(), []
    for chunk in scores.chunks(Run.objects.get(), doc):
        built += score_chunk(doc, False, chunk)[0]
    assert len(built) > 40
    for row in built:
        assert len(row) == len(VerdictRow.__struct_fields__)
        msgspec.convert(list(row), VerdictRow)  # field by field, with its declared type


def test_a_chunk_holds_the_rows_of_its_own_attempts_where_another_runs_ids_lie_between():
    """Chunks are read by id range; attempts of another run inside the range (ids taken by
    two ingests at once) must not lend their calls, facts or failed checks."""
    from records.models import Run
    from records.scorer.score import CALL_COLUMNS
    from records.scoring import run as scores

    assert _ingest("modeleval-a.jsonl", _synth()).stored
    assert _ingest("modeleval-b.jsonl", _synth("run-other", seed=8)).stored
    first, second = Run.objects.order_by("pk")
    # Every third attempt of the first run becomes the second run's: both runs' ids interleave.
    moved = list(Attempt.objects.filter(run=first).order_by("pk").values_list("pk", flat=True))
    Attempt.objects.filter(pk__in=moved[::3]).update(run=second)
    for run in (first, second):
        mine = Attempt.objects.filter(run=run)
        ids = set(mine.values_list("pk", flat=True))
        want_calls = sorted(Call.objects.filter(attempt__in=ids).values_list("attempt_id", "line"))
        want_facts = sorted(mine.filter(facts__isnull=False).values_list("pk", flat=True))
        failed = Verify.objects.filter(attempt__in=ids, passed=False)
        want_checks = sorted(failed.values_list("attempt_id", "name"))
        seen, calls, facts, checks = [], [], [], []
        for attempts, chunk_facts, chunk_calls, chunk_checks in scores.chunks(
            run, load_demo_key(), chunk=7
        ):
            seen += [a[0] for a in attempts]
            calls += [(c[0], c[1 + CALL_COLUMNS.index("line")]) for c in chunk_calls]
            facts += [f[0] for f in chunk_facts]
            checks += chunk_checks
        assert sorted(seen) == sorted(ids)
        assert sorted(calls) == want_calls and want_calls
        assert sorted(facts) == want_facts and want_facts
        assert sorted(checks) == want_checks


def _last_turns_and_checks() -> bytes:
    """Attempts whose verdicts turn on the last turn (retried at the last index, the tries
    disagreeing on a tool call; no turn at all) and on failed checks."""
    call = [{"kind": "tool_call", "tool": "gitlab_find_action", "arguments": {}}]
    text = [{"kind": "text", "text": "done"}]
    lines = []
    for n, (first, second) in enumerate([(call, text), (text, call), (call, call)], 1):
        a = f"t{n}"
        lines += [
            line("attempt", id=a, case="MT-002"),
            line("turn", attempt=a, index=1, blocks=call),
            line("call", attempt=a),
            line("turn", attempt=a, index=2, blocks=first, status="rate_limited"),
            line("turn", attempt=a, index=2, blocks=second, **{"try": 2}),
        ]
    lines += [line("attempt", id="none", case="MT-002"), line("call", attempt="none")]
    for n, passed in enumerate([True, False, False]):
        a = f"v{n}"
        lines += [line("attempt", id=a, case="MT-002"), line("turn", attempt=a, blocks=text)]
        lines += [line("call", attempt=a), line("verify", attempt=a, passed=True)]
        lines.append(line("verify", attempt=a, passed=passed, detail="" if passed else "no"))
    digest = load_demo_key().declared_digest
    return encode([*lines, line("session"), line("run", corpus_digest=digest)])


@pytest.mark.parametrize("data", [_synth(), _last_turns_and_checks()], ids=["synth", "edges"])
def test_verdicts_scored_from_the_database_are_those_of_the_shard_read_into_memory(data):
    """The scorer reads attempts from their stored rows (the last turn and failed checks settled
    at ingest); scoring the same shard read whole gives the same verdict for every attempt."""
    from records.formats.shard import read_shard_bytes
    from records.models import Verdict
    from records.scorer.score import attempt_inputs, score_attempt
    from records.scoring.run import account

    _ingest("key.json", _key())
    assert _ingest("modeleval-s.jsonl", data).stored
    doc = load_demo_key()
    want = {
        a.id: score_attempt(a, doc).as_dict()
        for a in attempt_inputs(read_shard_bytes(data, "modeleval-s.jsonl"))
    }
    got = {
        v.attempt.key: account(v).told for v in Verdict.objects.select_related("attempt", "scoring")
    }
    assert len(got) == len(want) > 6
    assert got == want
    if b'"id": "t1"' in data:  # the edges shard: both answers of each question occur
        assert {v["ended_in_text"] for v in got.values()} == {True, False}
        assert {v["verified"] for v in got.values()} == {True, False}


def test_deleting_a_scored_run_leaves_nothing_of_it(settings):
    """Attempts, sessions and verdicts refer to their run and to each other without database
    constraints: deleting the run must still take every row of it, through its scorings too."""
    from records import models as m

    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    _ingest("key.json", _key())
    assert _ingest("modeleval-s.jsonl", _synth()).stored
    run = m.Run.objects.get()
    tables = (m.Attempt, m.Turn, m.Call, m.Verify, m.Session, m.Provider, m.SurfaceSummary)
    tables += (m.Scoring, m.Verdict, m.ScoreRow, m.ScoreCase)
    assert all(t.objects.exists() for t in tables)
    run.delete()
    assert [t.__name__ for t in tables if t.objects.exists()] == []
    assert m.CorpusKey.objects.exists()


def test_a_scoring_error_in_the_second_process_fails_the_scoring_as_in_line(settings):
    from records.models import Scoring, Verdict

    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    _ingest("key.json", _key())
    data = published_shard(
        line("attempt", case="MT-002"),
        line("attempt", id="a2", case="ZZ-999"),
        corpus=load_demo_key().declared_digest,
    )
    _ingest("modeleval-z.jsonl", data)
    scoring = Scoring.objects.get()
    assert scoring.verdict_count == 0 and "names case 'ZZ-999'" in scoring.error
    assert not Verdict.objects.exists()


def test_chunks_go_to_the_scorers_in_turn_and_the_first_error_is_that_of_scoring_in_line(
    settings, monkeypatch
):
    """One attempt a chunk, so the scorers alternate: the first bad case (a chunk the second
    scorer has) is the one named, though the first scorer meets a later bad case too."""
    import functools

    from records.models import Run, Scoring
    from records.scoring import run as scores

    _ingest("key.json", _key())
    cases = ["MT-002", "ZZ-801", "ZZ-802", "MT-002"]
    data = published_shard(
        *[line("attempt", id=f"a{i}", case=c) for i, c in enumerate(cases)],
        corpus=load_demo_key().declared_digest,
    )
    _ingest("modeleval-z.jsonl", data)
    inline = Scoring.objects.get().error
    assert "names case 'ZZ-801'" in inline
    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    monkeypatch.setattr(scores, "_chunk_reads", functools.partial(scores._chunk_reads, chunk=1))
    started = []
    real = beside.Beside.several

    def several(n, *args, **how):
        workers = real(n, *args, **how)
        started.append(len(workers))
        return workers

    monkeypatch.setattr(beside.Beside, "several", several)
    run, key = Run.objects.get(), Scoring.objects.get().key
    scoring = scores.score_run(run, key)
    assert started == [scores.SCORER_PROCESSES] and scores.SCORER_PROCESSES == 2
    assert scoring.verdict_count == 0 and scoring.error == inline


def test_a_scorer_process_that_dies_leaves_no_verdict_and_says_so(settings, monkeypatch):
    from records.models import Run, Scoring, Verdict
    from records.scoring import run as scores

    _ingest("modeleval-s.jsonl", _synth())
    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    monkeypatch.setattr(scores, "score_worker", _dies_scoring)
    report = _ingest("key.json", _key())
    # The key is stored; its scoring of the run failed, says why, and kept no verdict.
    assert report.ok and report.keys
    (scoring,) = Scoring.objects.all()
    assert "exit code 3" in scoring.error and scoring.verdict_count == 0
    assert not Verdict.objects.exists()
    monkeypatch.undo()
    assert Run.objects.count() == 1


def _dies_scoring(*args):
    os._exit(3)


def test_the_summaries_settled_by_the_parser_agree_with_the_attempts_summed_in_sql():
    from django.db.models import Count, Q, Sum

    assert _ingest("modeleval-s.jsonl", _synth()).stored
    endings = ("completed", "over_budget", "malformed", "no_tool_call", "provider_error")
    endings += ("harness_error", "skipped")
    summed = {
        (r.pop("model"), r.pop("effective_surface"), r.pop("effective_mode")): r
        for r in Attempt.objects.values("model", "effective_surface", "effective_mode").annotate(
            attempts=Count("id"),
            turns=Sum("turn_count"),
            tries=Sum("try_count"),
            calls=Sum("call_count"),
            input_tokens=Sum("input_tokens"),
            output_tokens=Sum("output_tokens"),
            cache_read_tokens=Sum("cache_read_tokens"),
            **{e: Count("id", filter=Q(ended_by=e)) for e in endings},
        )
    }
    stored = {
        (s.model, s.surface, s.mode): {k: getattr(s, k) for k in next(iter(summed.values()))}
        for s in SurfaceSummary.objects.all()
    }
    assert stored == summed and len(stored) > 2
    # Per-attempt totals agree with the turn and call rows themselves.
    for a in Attempt.objects.annotate(t=Count("turns", distinct=True)).filter(t__gt=0)[:50]:
        assert a.try_count == a.t
        assert a.call_count == a.calls.count()
        assert a.turn_count == a.turns.values("index").distinct().count()
        assert a.input_tokens == a.turns.aggregate(n=Sum("input_tokens"))["n"]
    assert Session.objects.filter(call_count__gt=0).exists()
    for s in Session.objects.all():
        assert s.call_count == Call.objects.filter(attempt__session=s).count()
        assert (
            s.observed_call_count
            == Call.objects.filter(attempt__session=s, dispatch_observed=True).count()
        )


@pytest.mark.parametrize("way", ["in line", "fork"])
def test_lines_before_their_attempt_are_kept_across_batches(way, settings, monkeypatch):
    from records.formats import shard_rows

    _through(way, settings, monkeypatch)
    monkeypatch.setattr(shard_rows, "BATCH_LINES", 1)
    data = encode(
        [
            line("verify"),
            line("call"),
            line("turn"),
            line("attempt", id="a2", session="dynamic/default"),
            line("turn", attempt="a2"),
            line("attempt"),
            line("session"),
            line("run"),
        ]
    )
    assert _ingest("modeleval-orphans.jsonl", data).ok
    a1 = Attempt.objects.get(key="a1")
    assert (a1.turns.count(), a1.calls.count(), a1.verifies.count()) == (1, 1, 1)
    assert (a1.turn_count, a1.call_count) == (1, 1)
    assert Attempt.objects.get(key="a2").turns.count() == 1


# --- one parser process for a call's large shards, the next read while the last is stored -------


def test_a_calls_large_shards_go_through_one_process_the_next_read_while_the_last_is_stored(
    settings, monkeypatch
):
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    settings.EVALDASH_INGEST_PROCESSES = 1
    shards = {f"modeleval-{c}.jsonl": _synth(f"run-{c}", seed=i) for i, c in enumerate("abc", 7)}
    events: list[tuple[str, object]] = []
    start, write = readahead.Parser.start, ingest_shards._Writer.write_attempts
    monkeypatch.setattr(
        readahead.Parser,
        "start",
        lambda p, s, name, **how: events.append(("read", name)) or start(p, s, name, **how),
    )
    monkeypatch.setattr(
        ingest_shards._Writer,
        "write_attempts",
        lambda w, *a: events.append(("attempts of", w.run_id)) or write(w, *a),
    )
    used = _starts(monkeypatch)
    report = ingest(
        [bytes_input(n, d) for n, d in shards.items()],
        Upload.objects.create(source=Upload.Source.CLI),
    )
    assert [s["file"] for s in report.stored] == list(shards) and used == ["fork"]
    names = {s["run"]: s["file"] for s in report.stored}
    order = []
    for kind, what in events:
        step = (kind, names.get(what, what))
        if not order or order[-1] != step:
            order.append(step)
    a, b, c = shards
    assert order == [
        ("read", a),
        ("read", b),  # once a is read, before its attempt rows are written and it commits
        ("attempts of", a),
        ("read", c),
        ("attempts of", b),
        ("attempts of", c),
    ]
    # The same rows as each shard alone, parsed in line.
    _as_each_alone_in_line(shards, settings)


# --- several parser processes: the shards after the one stored parsed at once, spooled ---------


def _parsed_ahead(monkeypatch) -> list[str]:
    """The shards whose parse starts while the writer stores another, in order."""
    ahead: list[str] = []
    start = readahead.Parser.start

    def started(parser, stream, name, **how):
        if how.get("ahead"):
            ahead.append(name)
        return start(parser, stream, name, **how)

    monkeypatch.setattr(readahead.Parser, "start", started)
    return ahead


def test_with_two_processes_the_next_shards_are_parsed_beside_the_one_stored(settings, monkeypatch):
    """Each shard after the first starts its parse while the one before is stored; their
    messages wait in a spool; every row is as each shard stored alone, in line."""
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    settings.EVALDASH_INGEST_PROCESSES = 2
    shards = {f"modeleval-{c}.jsonl": _synth(f"run-{c}", seed=i) for i, c in enumerate("abcd", 7)}
    ahead = _parsed_ahead(monkeypatch)
    spooled: list[int] = []
    keep = readahead.Feed.keep

    def kept(feed, data):
        took = keep(feed, data)
        spooled.append(took)
        return took

    monkeypatch.setattr(readahead.Feed, "keep", kept)
    report = ingest(
        [bytes_input(n, d) for n, d in shards.items()],
        Upload.objects.create(source=Upload.Source.CLI),
    )
    assert [s["file"] for s in report.stored] == list(shards), report.as_dict()
    assert ahead == list(shards)[1:]
    assert any(spooled)  # messages did wait in a spool
    for got, data in zip(report.stored, shards.values(), strict=True):
        assert got["sha256"] == hashlib.sha256(data).hexdigest()
    _as_each_alone_in_line(shards, settings)


def test_parser_processes_end_once_a_shard_is_read_that_no_parse_follows(settings, monkeypatch):
    """The parser processes end once a shard is read with no parse after it (the last shard,
    or one a corpus key follows), before its commit and its scoring start processes of their
    own; while another large shard follows, they go on; a large shard after the key starts
    them again."""
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    settings.EVALDASH_INGEST_PROCESSES = 2
    started: list[beside.Beside] = []
    alive_at_end: dict[str, list[bool]] = {}
    made, queued = beside.Beside.__init__, ingest_shards.queue_index

    def init(worker, target, args, what, **how):
        made(worker, target, args, what, **how)
        if what == "the shard parser":
            started.append(worker)

    def queue_index(run):
        alive_at_end[run.run_id] = [w.proc.is_alive() for w in started]
        return queued(run)

    monkeypatch.setattr(beside.Beside, "__init__", init)
    monkeypatch.setattr(ingest_shards, "queue_index", queue_index)
    report = _ingest("modeleval-alone.jsonl", _synth("run-alone", seed=7))
    assert report.ok and alive_at_end == {"run-alone": [False, False]}

    started.clear()
    inputs = [
        bytes_input("modeleval-a.jsonl", _synth("run-a", seed=8)),
        bytes_input("modeleval-b.jsonl", _synth("run-b", seed=9)),
        bytes_input("key.json", demo_key()),
        bytes_input("modeleval-c.jsonl", _synth("run-c", seed=10)),
    ]
    report = ingest(inputs, Upload.objects.create(source=Upload.Source.CLI))
    assert report.ok and len(report.stored) == 3, report.as_dict()
    assert all(alive_at_end["run-a"])  # run-b is parsed beside it
    assert not any(alive_at_end["run-b"])  # a key follows: ended
    assert len(started) > 2 and not any(alive_at_end["run-c"][2:])  # started again, ended


def test_no_server_is_started_ahead_for_scorers_this_process_will_fork(monkeypatch):
    """Scorers that may fork (PostgreSQL's, which open no database file of this process's)
    are forked from the writer once the parser processes have ended, so no forkserver is
    started ahead for them; SQLite's scorers always start from it, so it is."""
    from records.bulk.apart import Reader
    from records.scoring import run as scoring_run

    asked: list[bool] = []
    monkeypatch.setattr(beside, "prepare", lambda target, *, fork: asked.append(fork))
    pg, lite = Reader("postgresql", "dbname=x", 0), Reader("sqlite", "x.sqlite3", 5)
    assert scoring_run.prepare_scorers(pg, parsers_end=True)  # to be asked again, after them
    assert asked == []
    assert not scoring_run.prepare_scorers(pg, parsers_end=False)
    assert not scoring_run.prepare_scorers(pg, in_thread=True, parsers_end=True)
    assert not scoring_run.prepare_scorers(lite, parsers_end=True)
    assert asked == [True, False, False]


def test_a_spool_that_cannot_be_written_leaves_the_rest_in_memory(settings, monkeypatch):
    """A full disk under the spool: the messages written stay, the rest wait in memory, in
    order, and the shard is stored as any other."""
    import tempfile

    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    settings.EVALDASH_INGEST_PROCESSES = 2
    made = tempfile.TemporaryFile

    class Full:
        """A spool with room for one message: the next is written in part, then the disk is
        full."""

        def __init__(self, *a, **kw):
            self.file = made(*a, **kw)
            self.writes = 0

        def write(self, data):
            self.writes += 1
            if self.writes == 4:  # the second message, after its length
                self.file.write(data[: len(data) // 2])
                raise OSError(28, "No space left on device")
            return self.file.write(data)

        def __getattr__(self, name):
            return getattr(self.file, name)

    monkeypatch.setattr(readahead.tempfile, "TemporaryFile", Full)
    first, second = _synth("run-first", seed=7), _synth("run-second", seed=8)
    report = ingest(
        [bytes_input("modeleval-1.jsonl", first), bytes_input("modeleval-2.jsonl", second)],
        Upload.objects.create(source=Upload.Source.CLI),
    )
    assert len(report.stored) == 2 and report.ok, report.as_dict()
    _as_each_alone_in_line({"modeleval-1.jsonl": first, "modeleval-2.jsonl": second}, settings)


def test_with_two_processes_bad_shards_between_good_ones_are_named_as_in_line(settings):
    """Bad shards parsed ahead of the writer report the file, line and field they report in
    line, and the good shards after them are stored."""
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    settings.EVALDASH_INGEST_PROCESSES = 2
    expected = json.loads((HOSTILE / "expected.json").read_text())
    bad = sorted(
        n for n, w in expected.items() if n.startswith("modeleval-") and not w.get("accepted")
    )[:6]
    inputs = []
    for i, name in enumerate(bad):
        inputs.append(bytes_input(name, (HOSTILE / name).read_bytes()))
        inputs.append(bytes_input(f"modeleval-good-{i}.jsonl", _synth(f"run-good-{i}", seed=i)))
    report = ingest(inputs, Upload.objects.create(source=Upload.Source.CLI))
    got = {r["file"]: r for r in report.refused}
    assert set(got) == set(bad)
    for name in bad:
        want = expected[name]
        assert want["message"] in got[name]["message"], (name, got[name])
        assert (got[name]["line"], got[name]["field"]) == (want["line"], want["field"]), name
    assert [s["file"] for s in report.stored] == [f"modeleval-good-{i}.jsonl" for i in range(6)]


@pytest.mark.parametrize("processes", [1, 2])
def test_a_shard_whose_bytes_cannot_all_be_read_is_refused_not_stored_cut(
    processes, settings, monkeypatch
):
    """A read error part-way through the bytes sent to the parser (a failing disk) stops that
    process: the shard is refused with the error, nothing of it stored, where a parse of the
    bytes read so far could have stored a cut shard as whole; the shard after it is stored."""
    from records.ingest.inputs import Input

    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    settings.EVALDASH_INGEST_PROCESSES = processes
    monkeypatch.setattr(readahead, "CHUNK", 4096)
    first, second = _synth("run-first", seed=7), _synth("run-second", seed=8)
    cut = first.rfind(b"\n", 0, len(first) // 2) + 1  # a line's end: the bytes before it parse

    class Failing(io.BytesIO):
        def read(self, n=-1):
            if self.tell() >= cut:
                raise OSError(5, "Input/output error")
            return super().read(min(n, cut - self.tell()) if n >= 0 else cut - self.tell())

    report = ingest(
        [
            Input("modeleval-1.jsonl", lambda: Failing(first), len(first)),
            bytes_input("modeleval-2.jsonl", second),
        ],
        Upload.objects.create(source=Upload.Source.CLI),
    )
    (refused,) = report.refused
    assert refused["file"] == "modeleval-1.jsonl" and "Input/output error" in refused["message"]
    assert [s["file"] for s in report.stored] == ["modeleval-2.jsonl"]
    assert ShardFile.objects.count() == 1
    assert Attempt.objects.count() == report.stored[0]["attempts"]


@pytest.mark.parametrize("processes", [1, 2])
def test_errors_documents_and_repeats_between_large_shards_keep_their_turn(
    processes, settings, monkeypatch
):
    """A shard's error ends the process and the next large shard starts another; a small shard,
    a corpus key and the same content twice keep their places in the call."""
    first, second = _synth("run-first", seed=7), _synth("run-second", seed=8)
    small = _synth("run-small", seed=9, attempts=10)
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = len(small) + 1
    settings.EVALDASH_INGEST_PROCESSES = processes
    bad = first.replace(b'"type":"call"', b'"type":"call","extra":1', 1)
    assert bad != first
    used = _starts(monkeypatch)
    report = ingest(
        [
            bytes_input("modeleval-1.jsonl", first),
            bytes_input("modeleval-2.jsonl", bad),
            bytes_input("modeleval-3.jsonl", second),
            bytes_input("key.json", _key()),
            bytes_input("modeleval-4.jsonl", small),
            bytes_input("modeleval-5.jsonl", first),
        ],
        Upload.objects.create(source=Upload.Source.CLI),
    )
    assert [s["file"] for s in report.stored] == [
        "modeleval-1.jsonl",
        "modeleval-3.jsonl",
        "modeleval-4.jsonl",
    ]
    (refused,) = report.refused
    assert refused["file"] == "modeleval-2.jsonl" and refused["field"] == "extra"
    assert report.present == [
        {"file": "modeleval-5.jsonl", "sha256": hashlib.sha256(first).hexdigest()}
    ]
    # The key came after modeleval-3 (it re-scored it) and before modeleval-4 (scored on arrival).
    (key,) = report.keys
    assert sorted(key["rescored_runs"]) == sorted(s["run"] for s in report.stored[:2])
    assert [s["scored_against"] for s in report.stored] == [None, None, key["digest"]]
    if processes == 1:  # the second process for modeleval-3, after the error
        assert used == ["fork", "fork"]
    else:  # both processes forked at once; modeleval-2's error ends the second, and
        # modeleval-3 follows modeleval-1 in the first
        assert used == ["fork"]
    assert ShardFile.objects.count() == 3
    assert Attempt.objects.count() == sum(s["attempts"] for s in report.stored)


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("where", ["children", "write_attempts"])
def test_a_shard_the_database_refuses_leaves_the_next_one_whole(
    where, processes, settings, monkeypatch
):
    """Refused while the parser still reads it (its rows), the process is stopped and the next
    shard starts another; refused once read (its attempt rows), what the parser still sends of
    it is dropped and the next shard, already under way, is stored from the same process. With
    two processes, the next shard is parsed in the second from the start."""
    from django.db import DatabaseError

    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    settings.EVALDASH_INGEST_PROCESSES = processes
    real = getattr(ingest_shards._Writer, where)
    refused_by: list[object] = []

    def refuse(writer, *args):
        if not refused_by or refused_by[0] is writer:  # the first shard's writer
            refused_by.append(writer)
            raise DatabaseError("value too long")
        return real(writer, *args)

    monkeypatch.setattr(ingest_shards._Writer, where, refuse)
    used = _starts(monkeypatch)
    second = _synth("run-second", seed=8)
    report = ingest(
        [
            bytes_input("modeleval-1.jsonl", _synth()),
            bytes_input("modeleval-2.jsonl", second),
        ],
        Upload.objects.create(source=Upload.Source.CLI),
    )
    (refused,) = report.refused
    assert refused["file"] == "modeleval-1.jsonl" and "value too long" in refused["message"]
    (stored,) = report.stored
    assert stored["file"] == "modeleval-2.jsonl"
    assert stored["sha256"] == hashlib.sha256(second).hexdigest()
    if processes == 1:
        assert used == (["fork", "fork"] if where == "children" else ["fork"])
    else:  # both forked at once, before any thread ran
        assert used == ["fork"]
    monkeypatch.undo()
    alone = _stored()
    ShardFile.objects.all().delete()
    assert _ingest("modeleval-2.jsonl", second).stored and _stored() == alone


def test_an_input_that_cannot_be_opened_is_raised_in_its_turn_after_the_shard_before(settings):
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0

    def cannot():
        raise PermissionError("permission denied")

    report = ingest(
        [
            bytes_input("modeleval-1.jsonl", _synth()),
            ing.Input("modeleval-2.jsonl", cannot, 10),
        ],
        Upload.objects.create(source=Upload.Source.CLI),
    )
    # Refused in its turn, as that input's own refusal, once the shard before it is stored.
    (refused,) = report.refused
    assert refused["file"] == "modeleval-2.jsonl"
    assert "unexpected PermissionError (permission denied)" in refused["message"]
    assert [s["file"] for s in report.stored] == ["modeleval-1.jsonl"]
    assert ShardFile.objects.count() == 1 and Attempt.objects.exists()


def test_on_sqlite_json_checks_hold_again_after_a_shard_is_written(settings):
    from django.db import IntegrityError, connection, transaction

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's CHECK constraints")
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    assert _ingest("modeleval-1.jsonl", _synth()).stored
    call = Call.objects.first()
    with connection.cursor() as cur:
        cur.execute("PRAGMA ignore_check_constraints")
        assert cur.fetchone()[0] == 0
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cur:
        cur.execute("UPDATE records_call SET result = 'not json' WHERE id = %s", [call.pk])


def test_on_postgresql_binary_copy_stores_what_text_copy_stores(settings, monkeypatch):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's COPY")
    data = _synth()
    real = tables.Table._binary
    chosen: list[bool] = []
    monkeypatch.setattr(tables.Table, "_binary", lambda t: chosen.append(real(t)) or chosen[-1])
    assert _ingest("modeleval-1.jsonl", data).stored
    binary = _stored()
    assert chosen and all(chosen)  # every table of this shard went in binary
    ShardFile.objects.all().delete()
    monkeypatch.setattr(tables.Table, "_binary", lambda t: False)
    assert _ingest("modeleval-1.jsonl", data).stored
    assert _stored() == binary and binary["calls"] and binary["turns"]


@pytest.mark.parametrize("shape", ["synthetic", "attempt lines only"])
def test_the_parser_reads_no_further_ahead_of_the_writer_than_allowed(shape, settings, monkeypatch):
    """The bytes sent to the parser never run more than AHEAD_BYTES (and one chunk) past the
    bytes whose rows the writer took, and a shard whose lines give no child rows still flows."""
    from records.formats import shard_rows

    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    monkeypatch.setattr(readahead, "CHUNK", 2048)
    monkeypatch.setattr(readahead, "AHEAD_BYTES", 8192)
    monkeypatch.setattr(shard_rows, "BATCH_BYTES", 4096)  # the forked parser inherits it
    if shape == "synthetic":
        data = _synth()
    else:
        data = encode(
            [line("attempt", id=f"a{i}", ended_by="skipped", reason="x" * 40) for i in range(400)]
            + [line("session"), line("run")]
        )
    gaps: list[float] = []
    real = readahead.Feed._send

    def send(feed, stream, name):
        sent = [0]
        proc_send = feed.proc.send

        def counted(chunk: bytes) -> bool:
            if not chunk.startswith(b"n") or sent[0]:
                sent[0] += len(chunk)
                gaps.append(sent[0] - feed.taken)
            return proc_send(chunk)

        feed.proc.send = counted
        real(feed, stream, name)

    monkeypatch.setattr(readahead.Feed, "_send", send)

    def stuck(signum, frame):
        raise TimeoutError("the ingest did not finish: writer and parser wait for each other")

    signal.signal(signal.SIGALRM, stuck)
    signal.alarm(120)
    try:
        report = _ingest("modeleval-1.jsonl", data)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
    assert report.stored, report.as_dict()
    assert len(data) > 10 * 8192 and max(gaps) <= 8192 + 2 * 2048
    assert report.stored[0]["sha256"] == hashlib.sha256(data).hexdigest()


def test_a_worker_start_waits_for_background_work_only_where_it_forks(monkeypatch):
    # A large shard's checkpoint runs in the background; the scoring's workers start meanwhile.
    release, finished = threading.Event(), threading.Event()

    def checkpoint():
        release.wait(30)
        finished.set()

    # Another thread running (the ingest's parser receiver, a server's): from the forkserver,
    # at once, the checkpoint still under way.
    beside.in_background(checkpoint)
    real, other = threading.enumerate, threading.Thread()
    monkeypatch.setattr(threading, "enumerate", lambda: [*real(), other])
    assert beside._context("records.parser").get_start_method() == "forkserver"
    assert not finished.is_set()
    monkeypatch.undo()
    # No other thread: it forks, once the checkpoint has ended (no thread in the child).
    release.set()
    assert beside._context("records.parser").get_start_method() == "fork"
    assert finished.is_set()


@pytest.mark.parametrize(
    ("rows", "counted", "behind"),
    [
        (10, None, True),  # a table PostgreSQL never counted
        (10, -1, True),
        (10, 0, True),
        (10, 100, True),  # a tenth of what it counted
        (9, 100, False),
        (100, 1_000_000, False),
    ],
)
def test_a_small_load_refreshes_statistics_only_where_they_fall_behind(rows, counted, behind):
    assert tables.stale(rows, counted) is behind


@pytest.mark.django_db(transaction=True)
def test_the_first_upload_to_a_new_store_leaves_its_tables_and_index_counted():
    """A shard far below the large-load threshold, into tables PostgreSQL never counted: the
    shard's tables and the index's are counted once it is stored and indexed, so the first
    queries plan on its rows, not on an empty guess (a text query took 7 s uncounted)."""
    from records.search.models import SearchCall, SearchEntry

    if connection.vendor != "postgresql":
        pytest.skip("statistics are PostgreSQL's")
    report = ingest(
        [bytes_input("modeleval-a.jsonl", FIXTURE_SHARD.read_bytes())],
        Upload.objects.create(source="test"),
    )
    assert report.ok and report.stored
    assert report.stored[0]["lines"] < tables.ANALYZE_AFTER_LINES
    counted = {}
    with connection.cursor() as cur:
        for model in (Attempt, Call, Turn, SearchCall, SearchEntry):
            cur.execute(
                "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", [model._meta.db_table]
            )
            counted[model.__name__] = cur.fetchone()[0]
    assert counted == {
        "Attempt": Attempt.objects.count(),
        "Call": Call.objects.count(),
        "Turn": Turn.objects.count(),
        "SearchCall": SearchCall.objects.count(),
        "SearchEntry": SearchEntry.objects.count(),
    }
