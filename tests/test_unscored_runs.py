"""A run left unscored: its shard committed, then its process killed before scoring it. Its key
is stored, so it is scored when it is next seen (a retried upload, its page, the gate, a sweep),
once however many callers race, and its page says what is true of it."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection

from records.devtools.synth import load_demo_key, widen_key, write_run
from records.models import ApiToken, CorpusKey, Run, Scoring
from records.queries.gate import gate, resolve
from records.scoring import run as scores_run
from records.scoring.run import score_if_unscored, score_pending_runs
from tests.builders import demo_key, ingest_bytes, synth_run
from tests.servers import database_url

pytestmark = pytest.mark.django_db


@pytest.fixture
def key():
    assert ingest_bytes(("corpus-key.json", demo_key())).ok
    return CorpusKey.objects.get()


@pytest.fixture
def killed(monkeypatch):
    """Store shards as a process killed after each shard's commit leaves them: stored, and
    not scored (the scoring step never runs)."""

    def store(*shards: tuple[str, bytes]) -> list[Run]:
        with monkeypatch.context() as m:
            m.setattr("records.ingest.shards.score_if_unscored", lambda run, *attempts: None)
            report = ingest_bytes(*shards)
        assert report.ok and len(report.stored) == len(shards)
        return [Run.objects.get(pk=s["run"]) for s in report.stored]

    return store


SHARD = ("modeleval-a.jsonl", synth_run("run-a", seed=3))


def test_a_shard_committed_but_not_scored_is_pending_while_its_key_is_stored(key, killed):
    (run,) = killed(SHARD)
    assert not run.scorings.exists()
    assert list(Run.objects.pending()) == [run]


def test_sending_the_shard_again_scores_the_run_it_left_unscored_and_says_so(key, killed):
    (run,) = killed(SHARD)
    again = ingest_bytes(SHARD)
    (present,) = again.present
    assert present["run"] == run.pk and present["scored_against"] == key.digest
    (scoring,) = run.scorings.all()
    assert scoring.verdict_count == run.attempt_count > 0 and not scoring.error
    # A third send finds it scored: it stores no second scoring and claims none.
    (third,) = ingest_bytes(SHARD).present
    assert "scored_against" not in third and run.scorings.count() == 1


def test_a_retried_api_upload_answers_json_naming_the_scoring_it_made(client, key, killed):
    (run,) = killed(SHARD)
    _, raw = ApiToken.issue("ci")
    r = client.post(
        "/api/v1/uploads",
        {"file": [SimpleUploadedFile(*SHARD)]},
        headers={"Authorization": f"Bearer {raw}"},
    )
    body = r.json()
    assert r.status_code == 200 and body["stored"] == []
    assert body["already_present"][0]["scored_against"] == key.digest
    assert body["already_present"][0]["run_id"] == "run-a" and run.scorings.count() == 1


def test_the_run_page_scores_a_small_unscored_run_and_says_it_did(client, viewer, key, killed):
    (run,) = killed(SHARD)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'data-state="scored-now"' in html and key.digest in html
    assert "No stored corpus key" not in html and run.scorings.get().verdict_count
    html = client.get(f"/runs/{run.pk}/scores/").content.decode()
    assert 'data-state="scored-now"' not in html and run.scorings.count() == 1


def test_the_page_of_a_run_too_large_to_score_inline_says_scoring_is_pending(
    client, viewer, key, killed, monkeypatch
):
    (run,) = killed(SHARD)
    monkeypatch.setattr("records.views.runs.PAGE_SCORING_MAX_ATTEMPTS", run.attempt_count - 1)
    for url in (f"/runs/{run.pk}/", f"/runs/{run.pk}/scores/"):
        html = client.get(url).content.decode()
        assert 'data-state="pending"' in html and key.digest in html, url
        assert "manage.py rescore --pending" in html and "No stored corpus key" not in html
    assert not run.scorings.exists()


def test_the_page_of_a_run_whose_key_is_not_stored_says_no_key_has_its_digest(
    client, viewer, killed
):
    (run,) = killed(SHARD)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'data-state="no-key"' in html and run.corpus_digest in html
    assert not run.scorings.exists() and list(Run.objects.pending()) == []


def test_the_gate_scores_both_runs_before_comparing_them(key, killed):
    killed(
        ("modeleval-a.jsonl", synth_run("run-a", seed=3)),
        ("modeleval-b.jsonl", synth_run("run-b", seed=4)),
    )
    result = gate(*resolve("run-b", "previous"), "Clean")
    assert result.baseline.run_id == "run-a"
    assert result.problem == "" and result.rows > 0
    assert Scoring.objects.filter(verdict_count__gt=0).count() == 2


def test_the_api_gate_answers_about_runs_a_killed_ingest_left_unscored(client, key, killed):
    killed(
        ("modeleval-a.jsonl", synth_run("run-a", seed=3)),
        ("modeleval-b.jsonl", synth_run("run-b", seed=4)),
    )
    _, raw = ApiToken.issue("ci")
    r = client.get(
        "/api/v1/runs/run-b/gate?baseline=run-a&column=Clean",
        headers={"Authorization": f"Bearer {raw}"},
    )
    assert r.status_code == 200 and "must be scored" not in r.json()["markdown"]


def test_the_sweep_scores_every_pending_run_once_and_skips_runs_without_a_key(key, killed):
    runs = killed(
        ("modeleval-a.jsonl", synth_run("run-a", seed=3)),
        ("modeleval-b.jsonl", synth_run("run-b", seed=4)),
    )
    (keyless,) = killed(("modeleval-c.jsonl", _run_of_another_corpus()))
    made = score_pending_runs()
    assert sorted(s.run_id for s in made) == [r.pk for r in runs]
    assert all(s.verdict_count for s in made) and not keyless.scorings.exists()
    assert score_pending_runs() == [] and Scoring.objects.count() == 2


def test_rescore_pending_scores_only_the_pending_runs(key, killed, capsys):
    (run,) = killed(SHARD)
    scored = ingest_bytes(("modeleval-b.jsonl", synth_run("run-b", seed=4))).stored[0]
    call_command("rescore", "--pending")
    assert "1 pending run scored, 0 failed" in capsys.readouterr().out
    assert run.scorings.count() == 1 and Scoring.objects.filter(run=scored["run"]).count() == 1


def test_a_scoring_interrupted_part_way_stores_no_scoring(key, killed, monkeypatch):
    (run,) = killed(SHARD)

    def killed_here(*args):
        raise KeyboardInterrupt  # what a signal raises in the middle of the work

    monkeypatch.setattr(scores_run, "store_failures", killed_here)
    with pytest.raises(KeyboardInterrupt):
        score_if_unscored(run)
    # Nothing of it is left (a scoring without its rows would read as scored, with nothing).
    assert not Scoring.objects.exists() and list(Run.objects.pending()) == [run]


@pytest.mark.django_db(transaction=True)
def test_two_callers_scoring_one_unscored_run_at_once_store_one_scoring(key, killed, monkeypatch):
    (run,) = killed(SHARD)
    # Both callers pass the first look (no scoring yet) before either scores: the race.
    both_looked = threading.Barrier(2, timeout=60)
    real = Run.key

    def key(r):
        both_looked.wait()
        return real(r)

    monkeypatch.setattr(Run, "key", key)
    results, errors = [], []

    def caller():
        try:
            results.append(score_if_unscored(Run.objects.get(pk=run.pk)))
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=caller) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(r is not None for r in results) == 1 and Scoring.objects.count() == 1


def _run_of_another_corpus() -> bytes:
    buf = io.BytesIO()
    other = widen_key(load_demo_key(), 3)  # its digest is not the stored key's
    write_run(buf, other, run_id="run-c", commit="c" * 40, started_at=datetime(2026, 11, 9), seed=5)
    return buf.getvalue()


# The ingest command's own code, run in a process of its own that is killed with SIGKILL the
# moment the shard is committed, before its scoring starts: what a killed worker leaves.
KILLED_AFTER_COMMIT = """
import os, signal, sys
import django
django.setup()
import records.ingest.shards as shards
shards.score_if_unscored = lambda run, *attempts: os.kill(os.getpid(), signal.SIGKILL)
from django.core.management import call_command
call_command("ingest", sys.argv[1])
"""


@pytest.mark.django_db(transaction=True)
def test_a_process_killed_after_the_commit_leaves_a_run_its_retry_scores(key, tmp_path: Path):
    path = tmp_path / SHARD[0]
    path.write_bytes(SHARD[1])
    env = {**os.environ, "DATABASE_URL": database_url()}
    env.setdefault("DJANGO_SETTINGS_MODULE", "evaldash.settings")
    out = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_COMMIT, str(path)],
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == -signal.SIGKILL, out.stderr
    run = Run.objects.get(run_id="run-a")
    assert not run.scorings.exists() and list(Run.objects.pending()) == [run]
    (present,) = ingest_bytes(SHARD).present
    assert present["scored_against"] == key.digest
    assert run.scorings.get().verdict_count == run.attempt_count
