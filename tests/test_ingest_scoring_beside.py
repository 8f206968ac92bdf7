"""A shard's scoring on its arrival, beside the next shard's store: outside a caller's
transaction, a run the scorer processes score is scored by a thread on a connection of its own
while the next shard is stored (on SQLite its verdicts are computed then and written once that
shard has committed); elsewhere in line. Either way the verdicts are those a re-score gives, and
a scoring that fails is that shard's refusal, no other's."""

from __future__ import annotations

import gc
import threading
import time

import pytest
from django.db import connection, transaction

from records.bulk.tables import gc_paused
from records.ingest import pipeline
from records.ingest import shards as ingest_shards
from records.models import Attempt, CorpusKey, Run, ScoreRow, Scoring, Verdict
from records.scoring import run as scoring_run
from records.scoring.run import score_run
from tests.builders import demo_key, ingest_bytes, synth_run

SHARDS = (
    ("modeleval-first.jsonl", synth_run("run-first", seed=7)),
    ("modeleval-second.jsonl", synth_run("run-second", seed=8)),
)


def _scored(run: Run) -> list[list]:
    """A run's verdicts by attempt key, and its score rows: what its scoring says."""
    keys = dict(Attempt.objects.filter(run=run).values_list("pk", "key"))
    verdicts = []
    for v in Verdict.objects.filter(scoring__run=run).values():
        del v["id"], v["scoring_id"]
        verdicts.append([keys[v.pop("attempt_id")], *sorted(v.items())])
    verdicts.sort()
    rows = sorted(
        ScoreRow.objects.filter(scoring__run=run).values_list(
            "row_key", "figures", "case_count", "coverage"
        )
    )
    return [verdicts, rows]


@pytest.fixture
def watched(monkeypatch, settings):
    """Every run large enough for the scorer processes; records, per run id, the thread each
    scoring ran in, whether the next shard's store began while it was under way (the first
    scoring, beside, waits up to 20 s for that; in line, it cannot have), when its scoring's
    row was made, and when each shard was committed."""
    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    settings.EVALDASH_INGEST_PROCESSES = 2  # the cores for it
    seen: dict[str, dict] = {"committed": {}}
    second_began = threading.Event()
    real_score, real_ingest_shard = ingest_shards.score_if_unscored, pipeline.ingest_shard
    real_after_commit, real_create = ingest_shards.after_commit, Scoring.objects.create

    def score(run, *attempts):
        beside = threading.current_thread() is not threading.main_thread()
        if run.run_id != "run-first":
            overlapped = None
        else:
            overlapped = second_began.wait(20) if beside else second_began.is_set()
        seen[run.run_id] = {"thread": threading.current_thread(), "overlapped": overlapped}
        return real_score(run, *attempts)

    def ingest_shard(unit, *args):
        if unit.name == SHARDS[1][0]:
            second_began.set()
        return real_ingest_shard(unit, *args)

    def after_commit(run_pk):
        seen["committed"][Run.objects.get(pk=run_pk).run_id] = time.monotonic()
        return real_after_commit(run_pk)

    def create(**fields):
        seen.setdefault(fields["run"].run_id, {})["scoring made"] = time.monotonic()
        return real_create(**fields)

    monkeypatch.setattr(ingest_shards, "score_if_unscored", score)
    monkeypatch.setattr(pipeline, "ingest_shard", ingest_shard)
    monkeypatch.setattr(ingest_shards, "after_commit", after_commit)
    monkeypatch.setattr(Scoring.objects, "create", create)
    return seen


@pytest.mark.parametrize("ahead", ["the whole run", "one chunk"])
@pytest.mark.django_db(transaction=True)
def test_a_run_is_scored_beside_the_next_shards_store_as_a_rescore_scores_it(
    ahead, watched, monkeypatch
):
    if ahead == "one chunk":  # the scorers wait after their first chunks until told to write
        monkeypatch.setattr(scoring_run, "AHEAD_ATTEMPTS", 1)
    assert ingest_bytes(("corpus-key.json", demo_key())).ok
    report = ingest_bytes(*SHARDS)
    key = CorpusKey.objects.get()
    assert report.ok and [s["scored_against"] for s in report.stored] == [key.digest] * 2
    first = watched["run-first"]
    assert first["overlapped"] is True  # under way as the second shard began
    assert first["thread"] is not threading.main_thread()
    if connection.vendor == "sqlite":  # one writer: its verdicts written after that commit
        assert first["scoring made"] > watched["committed"]["run-second"]
    # The last shard has no store after it to be scored beside: in line.
    assert watched["run-second"]["thread"] is threading.main_thread()
    for run_id in ("run-first", "run-second"):
        run = Run.objects.get(run_id=run_id)
        arrived = _scored(run)
        assert arrived[0] and run.scorings.get().verdict_count == run.attempt_count
        Scoring.objects.filter(run=run).delete()
        assert not score_run(run, key).error  # in line, here
        assert _scored(run) == arrived


@pytest.mark.django_db(transaction=True)
def test_a_scoring_that_fails_beside_is_its_own_shards_refusal(monkeypatch, watched):
    assert ingest_bytes(("corpus-key.json", demo_key())).ok
    real = ingest_shards.score_if_unscored

    def fails_first(run, *attempts):
        if run.run_id == "run-first":
            raise RuntimeError("the scorer broke")
        return real(run, *attempts)

    monkeypatch.setattr(ingest_shards, "score_if_unscored", fails_first)
    report = ingest_bytes(*SHARDS)
    (refused,) = report.refused
    assert refused["file"] == SHARDS[0][0] and "the scorer broke" in refused["message"]
    (stored,) = report.stored
    assert stored["file"] == SHARDS[1][0]
    assert stored["scored_against"] == CorpusKey.objects.get().digest
    assert not Run.objects.get(run_id="run-first").scorings.exists()


@pytest.mark.parametrize("where", ["in a transaction", "one core"])
@pytest.mark.django_db(transaction=True)
def test_in_a_callers_transaction_or_on_one_core_each_shard_is_scored_in_line(
    where, watched, settings
):
    if where == "one core":
        settings.EVALDASH_INGEST_PROCESSES = 1
    assert ingest_bytes(("corpus-key.json", demo_key())).ok
    if where == "in a transaction":
        with transaction.atomic():  # its rows are no other connection's to read yet
            report = ingest_bytes(*SHARDS)
    else:
        report = ingest_bytes(*SHARDS)
    assert report.ok and all(s["scored_against"] for s in report.stored)
    first = watched["run-first"]
    assert first["thread"] is threading.main_thread() and first["overlapped"] is False
    assert watched["run-second"]["thread"] is threading.main_thread()


def test_two_threads_pausing_the_collector_at_once_leave_it_as_it_was():
    assert gc.isenabled()
    inside, leave = threading.Event(), threading.Event()

    def other():
        with gc_paused():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    with gc_paused():
        thread.start()
        inside.wait(10)
    assert not gc.isenabled()  # the other thread's pause is still under way
    leave.set()
    thread.join()
    assert gc.isenabled()
