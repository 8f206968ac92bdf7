"""The calls' index documents the writer makes for PostgreSQL (`records.search.vectors`) are
the very vectors the index statement makes from the stored rows, and what Python cannot vouch
for is left to that statement."""

from __future__ import annotations

import io
from datetime import datetime

import pytest
from django.db import connection

from records.devtools.synth import MODELS, load_demo_key, write_run
from records.models import Call, Run
from records.search import engine
from records.search.vectors import INDEXED_CHARS, call_vector
from tests.builders import encode, ingest_bytes, line


def test_a_calls_vector_holds_the_words_of_its_values_and_text_and_not_its_keys():
    # A float reads as `numeric` prints it: 1e-07 as 0.0000001.
    vector = call_vector('{"Key": ["Alpha-beta", 7, true, null, 1e-07, 1e16]}', "12.5", "x_y")
    words = "0 0000001 10000000000000000 12 5 7 alpha beta x y".split()
    assert vector == " ".join(f"'{w}'" for w in words)
    assert call_vector(None, None, "") == ""


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


@pytest.mark.parametrize("parsed", ["in line", "in the parser process"])
@pytest.mark.django_db(transaction=True)
def test_the_vectors_written_with_the_calls_are_those_the_index_statement_makes(parsed, settings):
    if connection.vendor != "postgresql":
        pytest.skip("the writer makes the calls' documents on PostgreSQL only")
    settings.EVALDASH_PARSER_PROCESS_MIN_BYTES = 1 if parsed != "in line" else 1 << 40
    crafted = [
        line("call", index=i + 1, tool="gitlab_find_action", **call) for i, call in enumerate(CALLS)
    ]
    shard = encode([line("attempt"), line("turn"), *crafted, line("session"), line("run")])
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
    for run in Run.objects.all():
        engine.forget_run(run.pk)
        engine.index_run(run.pk)  # every document and call by the run's statements
    assert _index() == (documents, calls)
