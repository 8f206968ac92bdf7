"""Large shards are parsed in a second process: the rows stored, the errors named and the
failures handled are exactly those of parsing in line."""

from __future__ import annotations

import io
import json
import os
import threading
from datetime import datetime
from pathlib import Path

import pytest

from records import beside
from records import ingest as ing
from records.ingest import bytes_input, ingest
from records.models import Attempt, Call, Session, ShardFile, SurfaceSummary, Turn, Upload, Verify
from records.synth import MODELS, load_demo_key, write_run
from tests.builders import FIXTURE_SHARD, encode, line

pytestmark = pytest.mark.django_db
HOSTILE = Path(__file__).parent / "fixtures" / "hostile"


def _synth() -> bytes:
    buf = io.BytesIO()
    write_run(
        buf,
        load_demo_key(),
        run_id="run-parser",
        commit="c" * 40,
        started_at=datetime(2026, 11, 2, 9),
        seed=7,
        models=MODELS[:2],
        max_attempts=120,
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


def _through(way: str, settings, monkeypatch) -> list[str]:
    """Parse in line, in a forked process, or in a process from the forkserver; the start
    methods actually used are collected in the list returned."""
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 10**12 if way == "in line" else 0
    if way == "forkserver":
        monkeypatch.setattr(threading, "active_count", lambda: 2)
    used: list[str] = []
    real = beside._context

    def context(preload):
        ctx = real(preload)
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


def _dies(source, sink, name):
    os._exit(3)


def test_a_parser_process_that_dies_leaves_nothing_and_says_so(settings, monkeypatch):
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 0
    monkeypatch.setattr(ing, "worker", _dies)
    with pytest.raises(RuntimeError, match="exit code 3"):
        _ingest("modeleval-dies.jsonl", FIXTURE_SHARD.read_bytes())
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


@pytest.mark.parametrize("way", ["fork", "forkserver"])
def test_a_run_scored_in_a_second_process_gets_the_same_verdicts(way, settings, monkeypatch):
    from records.models import Run, Scoring
    from records.scores import score_run

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


def test_a_scoring_error_in_the_second_process_fails_the_scoring_as_in_line(settings):
    from records.models import Scoring, Verdict

    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    _ingest("key.json", _key())
    data = encode(
        [
            line("attempt", case="MT-002"),
            line("attempt", id="a2", case="ZZ-999"),
            line("session"),
            line("run", corpus_digest=load_demo_key().declared_digest),
        ]
    )
    _ingest("modeleval-z.jsonl", data)
    scoring = Scoring.objects.get()
    assert scoring.verdict_count == 0 and "names case 'ZZ-999'" in scoring.error
    assert not Verdict.objects.exists()


def test_a_scorer_process_that_dies_leaves_no_verdict_and_says_so(settings, monkeypatch):
    from records import scores
    from records.models import Run, Scoring, Verdict

    _ingest("modeleval-s.jsonl", _synth())
    settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = 0
    monkeypatch.setattr(scores, "batch_worker", _dies_scoring)
    with pytest.raises(RuntimeError, match="exit code 3"):
        _ingest("key.json", _key())
    assert not Verdict.objects.exists() and not Scoring.objects.filter(verdict_count__gt=0)
    monkeypatch.undo()
    assert Run.objects.count() == 1


def _dies_scoring(source, sink, doc, stale):
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
