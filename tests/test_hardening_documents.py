"""A .json document's shape is checked before it is built (issue 45, B23): 64 MiB of `{}` is
refused by name, in bounded memory, and a document of many brackets inside its strings is not."""

from __future__ import annotations

import tracemalloc

import pytest

from records.ingest.documents import MAX_DOCUMENT_CONTAINERS, containers
from records.models import CorpusKey
from tests.builders import SAMPLE_KEY, ingest_bytes

pytestmark = pytest.mark.django_db
MiB = 1024 * 1024


def test_a_64_mib_document_of_millions_of_empty_objects_is_refused_by_name_in_bounded_memory():
    data = b"[" + b"{}," * (64 * MiB // 3 - 1) + b"{}]"
    assert len(data) <= 64 * MiB
    tracemalloc.start()
    try:
        report = ingest_bytes(("many-objects.json", data))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (refused,) = report.refused
    assert refused["file"] == "many-objects.json"
    assert f"a document holds at most {MAX_DOCUMENT_CONTAINERS:,}" in refused["message"]
    assert peak < 300 * MiB, f"{peak / MiB:.0f} MiB"
    assert not CorpusKey.objects.exists()


def test_brackets_inside_strings_are_not_counted_as_objects():
    text = b'{"note": "' + b"{[" * MAX_DOCUMENT_CONTAINERS + b'", "x": [{}]}'
    assert containers(text) == 3


def test_a_corpus_key_is_stored_as_before():
    report = ingest_bytes(("corpus-key.json", SAMPLE_KEY.read_bytes()))
    assert report.refused == [] and CorpusKey.objects.count() == 1
