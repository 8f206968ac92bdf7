"""The index documents Python makes for PostgreSQL (`records.search.vectors`, the attempts' and
the calls') are the very vectors the index statements make from the stored rows, and what
Python cannot vouch for is left to those statements."""

from __future__ import annotations

import io
import json
from datetime import datetime

import pytest
from django.core.management import call_command
from django.db import connection

from records.bulk.apart import Reader
from records.devtools.synth import MODELS, load_demo_key, write_run
from records.models import Call, PendingIndex, Run
from records.search import engine, index
from records.search.vectors import INDEXED_CHARS, attempt_vector, call_vector
from tests.builders import encode, ingest_bytes, line


def test_a_calls_vector_holds_the_words_of_its_values_and_text_and_not_its_keys():
    # A float reads as `numeric` prints it: 1e-07 as 0.0000001.
    vector = call_vector('{"Key": ["Alpha-beta", 7, true, null, 1e-07, 1e16]}', "12.5", "x_y")
    words = "0 0000001 10000000000000000 12 5 7 alpha beta x y".split()
    assert vector == " ".join(f"'{w}'" for w in words)
    assert call_vector(None, None, "") == ""
    # A word of 2 kB or more is left out, as the database leaves it out.
    assert call_vector(None, None, "b " + "a" * 2048 + " " + "c" * 2047) == f"'b' '{'c' * 2047}'"


@pytest.mark.parametrize(
    "arguments,text",
    [
        ('{"name": "café"}', ""),  # a letter outside ASCII: the database's locale decides
        ('{"name": "a\\u0000b"}', ""),  # a NUL, which the database refuses
        (None, "word " * (INDEXED_CHARS // 5)),  # a document whose head the database cuts
    ],
)
def test_what_only_the_database_can_say_is_left_to_it(arguments, text):
    assert call_vector(arguments, None, text) is None


def test_a_value_nested_past_any_recursion_limit_is_read_or_left_to_the_database():
    # A shard may nest arguments as deep as it likes: the walk does not recurse, and what
    # orjson will not read (past 1,024 levels) is the statement's to index.
    assert call_vector("[" * 1000 + '"deep"' + "]" * 1000, None, "x") == "'deep' 'x'"
    assert call_vector("[" * 5000 + "]" * 5000, None, "x") is None


def _synth() -> bytes:
    buf = io.BytesIO()
    write_run(
        buf,
        load_demo_key(),
        run_id="run-vectors",
        commit=f"{5:040x}",
        started_at=datetime(2026, 11, 5, 9),
        seed=5,
        models=MODELS[:2],
        max_attempts=60,
    )
    return buf.getvalue()


CALLS = [
    {"arguments": {"n": [1.5e-7, 1e16, 123.0, -0.0, 2**70, 10**30]}, "text": "Mixed CASE_words"},
    {"arguments": {"k": "naïve Straße"}, "text": "ünïcode"},
    {"result": {"long": "w " * INDEXED_CHARS}, "text": "the head is cut"},
    {"arguments": {"deep": [[{"x": ["y", {"z": "Deep.Value"}]}]]}, "result": [3, "v"]},
]


def _text(text: str) -> list[dict[str, str]]:
    return [{"kind": "text", "text": text}]


# Attempts whose documents the writer makes from their rows, or leaves to the statement: text
# in several turns and checks, a letter outside ASCII, no turn at all, a head past the cut.
ATTEMPTS = [
    line("attempt", id="a2", stimulus="Open ISSUE-7", reason="max_turns"),
    line("turn", attempt="a2", index=1, blocks=_text("Looking up issue.create")),
    line("turn", attempt="a2", index=2, blocks=[*_text("then"), {"kind": "text", "text": ""}]),
    line("verify", attempt="a2", name="one", passed=False, detail="label missing: bug"),
    line("verify", attempt="a2", name="two", passed=True, detail="ok 200"),
    line("attempt", id="a3", stimulus="Crée le ticket"),
    line("turn", attempt="a3", index=1, blocks=_text("voilà")),
    line("attempt", id="a4", stimulus="no turns here"),
    line("attempt", id="a5", stimulus="long"),
    line("turn", attempt="a5", index=1, blocks=_text("word " * (INDEXED_CHARS // 5))),
]


@pytest.mark.parametrize("parsed", ["in line", "in the parser process"])
@pytest.mark.django_db(transaction=True)
def test_the_vectors_written_with_the_calls_and_attempts_are_those_the_index_statement_makes(
    parsed, settings
):
    if connection.vendor != "postgresql":
        pytest.skip("the writer makes the calls' documents on PostgreSQL only")
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 1 if parsed != "in line" else 1 << 40
    crafted = [
        line("call", index=i + 1, tool="gitlab_find_action", **call) for i, call in enumerate(CALLS)
    ]
    shard = encode(
        [line("attempt"), line("turn"), *crafted, line("session"), line("run"), *ATTEMPTS]
    )
    report = ingest_bytes(("modeleval-vectors.jsonl", shard), ("modeleval-synth.jsonl", _synth()))
    assert report.ok and len(report.stored) == 2

    def vectors() -> dict[int, str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT id, body::text FROM records_searchentry ORDER BY id")
            return dict(cursor.fetchall())

    written = vectors()
    for run in Run.objects.all():
        engine.forget_run(run.pk)
        engine.index_run(run.pk)  # every document made by the statement
    assert vectors() == written
    assert len(written) > len(CALLS) + 60


def _index() -> tuple[dict[int, str], list[tuple]]:
    """The index as stored: each document's text, and each call's filtered columns."""
    key = "id" if connection.vendor == "postgresql" else "rowid"
    body = "body::text" if connection.vendor == "postgresql" else "body"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {key}, {body} FROM records_searchentry ORDER BY {key}")
        documents = dict(cursor.fetchall())
        cursor.execute("SELECT * FROM records_searchcall ORDER BY id")
        calls = cursor.fetchall()
    return documents, calls


@pytest.mark.parametrize("parsed", ["in line", "in the parser process"])
@pytest.mark.django_db(transaction=True)
def test_the_calls_indexed_batch_by_batch_are_indexed_as_a_rebuild_indexes_them(
    parsed, settings, monkeypatch
):
    # Small batches: each shard's calls are indexed in many statements as they are written.
    monkeypatch.setattr("records.formats.shard_rows.BATCH_LINES", 7)
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 1 if parsed != "in line" else 1 << 40
    crafted = [
        line("call", index=i + 1, tool="gitlab_find_action", **call) for i, call in enumerate(CALLS)
    ]
    shard = encode([line("attempt"), line("turn"), *crafted, line("session"), line("run")])
    report = ingest_bytes(("modeleval-batches.jsonl", shard), ("modeleval-synth.jsonl", _synth()))
    assert report.ok and len(report.stored) == 2
    documents, calls = _index()
    assert len(calls) == Call.objects.count() > 60  # every call, in many batches
    # One run of odd id, one of even: on PostgreSQL one's statements ran before its vectors
    # were made, the other's after (`engine.index_new_run`); both are indexed as a rebuild.
    assert sorted(run.pk % 2 for run in Run.objects.all()) == [0, 1]
    for run in Run.objects.all():
        engine.forget_run(run.pk)
        engine.index_run(run.pk)  # every document and call by the run's statements
    assert _index() == (documents, calls)


def test_an_attempts_vector_holds_its_texts_and_leaves_what_only_the_database_reads():
    blocks = json.dumps([{"kind": "text", "text": "Hello World"}, {"kind": "tool_call"}])
    assert (
        attempt_vector("Open it", "done", [blocks], ["HTTP 404"])
        == "'404' 'done' 'hello' 'http' 'it' 'open' 'world'"
    )
    assert attempt_vector("only the stimulus", "", [], []) == "'only' 'stimulus' 'the'"
    # `->>` reads a text that is not a string as JSON ("12", '{"a": 1}'): the database's.
    for odd in (12, {"a": 1}, ["b"]):
        assert attempt_vector("x", "", [json.dumps([{"kind": "text", "text": odd}])], []) is None
    # A block that is no object has no text, as `->>` finds none in it.
    assert attempt_vector("x", "", [json.dumps(["y", 3])], []) == "'x'"
    assert attempt_vector("x", "", [json.dumps({"not": "a list"})], []) is None
    assert attempt_vector("x", "", ["[" * 5000 + "]" * 5000], []) is None
    assert attempt_vector("Crée", "", [], []) is None  # outside ASCII: the locale decides


@pytest.mark.django_db(transaction=True)
def test_a_runs_vectors_are_made_by_a_process_of_their_own_and_its_failure_fails_the_try(
    monkeypatch,
):
    if connection.vendor != "postgresql":
        pytest.skip("the index is made by statements on SQLite")
    # Made by the worker process alone: the writing process would fail to make any itself.
    monkeypatch.setattr(engine, "VECTOR_BYTES", 4096)  # many batches, some on their way at once
    monkeypatch.setattr(engine, "VECTOR_PROCESS_MIN_ATTEMPTS", 1)

    def not_here(*args):
        raise AssertionError("made in the writing process")

    monkeypatch.setattr(engine, "documents", not_here)
    report = ingest_bytes(("modeleval-synth.jsonl", _synth()))
    assert report.ok
    (run,) = Run.objects.all()
    assert not PendingIndex.objects.exists()  # indexed
    documents, calls = _index()
    engine.forget_run(run.pk)
    engine.index_run(run.pk)  # every document by the statements
    assert _index() == (documents, calls)
    assert len(documents) == run.attempt_count + Call.objects.count()
    call_command("search_index")  # a rebuild makes them as a run just stored has them made
    assert _index() == (documents, calls)

    # A worker that cannot read the run fails the try, saying why; the run waits for the next.
    PendingIndex.objects.create(run=run)
    nowhere = Reader("postgresql", "host=127.0.0.1 port=1 connect_timeout=2", 0)
    monkeypatch.setattr(index, "reader", lambda connection: nowhere)
    assert index.follow_up(run.pk)  # settled: its failure written on its outbox row
    row = PendingIndex.objects.get(run=run)
    assert row.tries == 1 and "the index's vectors could not be made" in row.error
    assert _index() == (documents, calls)  # the failed try's transaction left nothing
