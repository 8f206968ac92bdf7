"""A committed model results record uploaded like any .json: its rows become published rows
with their provenance and per-case figures, compared with stored runs of the same key; another
schema version is refused as gen_model_results refuses it (record.go unmarshalDocument)."""

from __future__ import annotations

import json

import pytest

from records.formats.model_results import record_bytes
from records.models import PublishedRecord, PublishedRow, Run
from tests.builders import SAMPLE_KEY, ingest_bytes, line, published_shard

pytestmark = pytest.mark.django_db


@pytest.fixture
def exported(client, viewer) -> bytes:
    ingest_bytes(("key.json", SAMPLE_KEY.read_bytes()))
    shard = published_shard(line("attempt"), line("attempt", id="a2", case="MT-002"))
    assert ingest_bytes(("modeleval-a.jsonl", shard)).ok
    run = Run.objects.get()
    r = client.get(f"/publish/model-results.json?run={run.pk}")
    assert r.status_code == 200
    return r.content


def test_an_uploaded_record_becomes_published_rows_with_provenance_and_cases(exported):
    report = ingest_bytes(("model-results.json", exported))
    assert report.ok, report.refused
    assert report.records == [
        {
            "file": "model-results.json",
            "record": PublishedRecord.objects.get().pk,
            "rows": 1,
            "created": True,
        }
    ]
    row = PublishedRow.objects.get()
    want = json.loads(exported)["rows"][0]
    assert row.row_key.startswith("model=fake:perfect surface=dynamic") and row.date == "2026-11-01"
    assert row.provenance["request_options"] == {"t": "0"} and sorted(row.cases) == [
        "MS-001",
        "MT-002",
    ]
    assert row.cases["MT-002"]["run"] == want["cases"]["MT-002"]["run"]


def test_a_record_read_back_writes_the_same_bytes(exported):
    ingest_bytes(("model-results.json", exported))
    rows = [r.as_row() for r in PublishedRow.objects.all()]
    assert record_bytes(rows) == exported


def test_a_second_upload_of_the_same_record_is_already_present(exported):
    ingest_bytes(("model-results.json", exported))
    report = ingest_bytes(("again.json", exported))
    assert report.records[0]["created"] is False and PublishedRecord.objects.count() == 1


def test_the_record_page_compares_each_row_with_stored_runs_of_its_key(client, exported):
    ingest_bytes(("model-results.json", exported))
    record = PublishedRecord.objects.get()
    html = client.get(f"/publish/records/{record.pk}/").content.decode()
    run = Run.objects.get()
    assert f'href="/runs/{run.pk}/"' in html and "this record" in html
    assert "No stored run has a row with this key" not in html
    assert record.name in client.get("/publish/records/").content.decode()


def test_another_schema_version_is_refused_as_upstream_refuses_it(exported):
    doc = json.loads(exported)
    doc["schema_version"] = 2
    (refused,) = ingest_bytes(("model-results.json", json.dumps(doc).encode())).refused
    assert refused["field"] == "schema_version"
    assert refused["message"] == (
        "carries schema version 2 and this command writes 1; regenerate it with make "
        "gen-model-results"
    )
    assert not PublishedRecord.objects.exists()


def test_a_field_of_the_wrong_type_is_refused_by_name_and_nothing_is_stored(exported):
    doc = json.loads(exported)
    doc["rows"][0]["cases"]["MT-002"]["counts"]["attempts"] = "one"
    (refused,) = ingest_bytes(("model-results.json", json.dumps(doc).encode())).refused
    assert refused["field"] == "rows[0].cases.MT-002.counts.attempts"
    assert "whole number" in refused["message"] and not PublishedRow.objects.exists()


def test_keys_are_read_as_gos_unmarshal_reads_them(exported):
    doc = json.loads(exported)
    doc["Schema_Version"] = doc.pop("schema_version")
    doc["rows"][0]["key"]["Model"] = doc["rows"][0]["key"].pop("model")
    doc["rows"][0]["written_by"] = "a later version"  # Unmarshal ignores what its type lacks
    report = ingest_bytes(("model-results.json", json.dumps(doc).encode()))
    assert report.ok, report.refused
    assert PublishedRow.objects.get().model == "fake:perfect"


def test_a_published_row_is_shown_in_its_history(client, exported):
    ingest_bytes(("model-results.json", exported))
    record = PublishedRecord.objects.get()
    html = client.get(
        "/history/?digest=b519a10571ab2192&model=fake:perfect&surface=dynamic&mode=default"
    ).content.decode()
    assert "Published by uploaded records" in html
    assert f'href="/publish/records/{record.pk}/"' in html and "2026-11-01" in html
