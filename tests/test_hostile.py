"""The committed corpus of bad files: each gets its error, nothing of it is stored, and the
good file uploaded beside them is stored. Plus script-injection payloads in every output."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from records.models import ApiToken, ConformanceRun, ConformanceSuite, CorpusKey, ObsCorpus, Run

pytestmark = pytest.mark.django_db
HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
EXPECTED = json.loads((HOSTILE / "expected.json").read_text())
GOOD = (Path(__file__).parent / "fixtures" / "modelrecord" / "modeleval-dynamic.jsonl").read_bytes()


def test_every_hostile_file_gets_its_error_and_the_good_file_beside_them_is_stored(client):
    _, raw = ApiToken.issue("ci")
    files = [SimpleUploadedFile(name, (HOSTILE / name).read_bytes()) for name in sorted(EXPECTED)]
    files.append(SimpleUploadedFile("modeleval-good.jsonl", GOOD))
    r = client.post("/api/v1/uploads", {"file": files}, headers={"Authorization": f"Bearer {raw}"})
    assert r.status_code == 422
    body = r.json()
    refused: dict[str, list[dict]] = {}
    for item in body["refused"]:
        refused.setdefault(item["file"].split("!")[0], []).append(item)
    for name, want in EXPECTED.items():
        if want.get("accepted"):
            assert name not in refused, refused.get(name)
            continue
        got = refused.get(name)
        assert got, f"{name} was not refused"
        assert any(want["message"] in g["message"] for g in got), (name, got)
        first = next(g for g in got if want["message"] in g["message"])
        assert (first["line"], first["field"]) == (want["line"], want["field"]), (name, first)
    stored = {s["file"] for s in body["stored"]}
    assert stored == {"modeleval-good.jsonl", "modeleval-duplicate-keys.jsonl"}
    assert Run.objects.count() == 2
    # Duplicate keys: the last one wins, as in Go.
    dup = Run.objects.get(shard__name="modeleval-duplicate-keys.jsonl")
    assert dup.attempts.order_by("line").first().case == "MT-002"
    assert not CorpusKey.objects.exists() and not ObsCorpus.objects.exists()
    assert not ConformanceSuite.objects.exists()


def test_a_line_over_the_cap_is_refused_through_the_upload(client):
    _, raw = ApiToken.issue("ci")
    big = (
        b'{"schema":1,"type":"verify","verify":{"attempt":"a1","name":"'
        + b"x" * 1_048_600
        + b'"}}\n'
    )
    r = client.post(
        "/api/v1/uploads",
        {"file": [SimpleUploadedFile("modeleval-big.jsonl", big)]},
        headers={"Authorization": f"Bearer {raw}"},
    )
    assert r.json()["refused"][0]["line"] == 1 and "line cap" in r.json()["refused"][0]["message"]


XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_no_output_renders_untrusted_text_as_html(client, django_user_model, tmp_path):
    from records.conformance_runs import RunMeta, store_run
    from records.formats.corpus_key import read_corpus_key
    from records.ingest import bytes_input, ingest
    from records.models import Upload

    client.force_login(django_user_model.objects.create_user("v", password="pw-123456789"))
    fixtures = Path(__file__).parent / "fixtures"
    key = json.loads((fixtures / "corpus" / "corpus-key-sample.json").read_text())
    key["cases"][0]["prompt"] = XSS + " {{ .Facts.project_path }}"
    key["source"] = XSS
    key["corpus_digest"] = read_corpus_key(
        json.dumps(key).encode(), "k", allow_digest_mismatch=True
    ).digest
    shard = (fixtures / "modelrecord" / "modeleval-dynamic.jsonl").read_text()
    shard = shard.replace("fake:wrong-args", XSS.replace('"', '\\"')).replace(
        "fixture-corpus", key["corpus_digest"]
    )
    shard = shard.replace(
        '"repeat":1}}',
        '"repeat":1,"commit":"<b>c</b>","providers":[{"spec":"fake:perfect","name":"'
        + XSS.replace('"', '\\"')
        + '","model":"m","options":{"'
        + XSS.replace('"', '\\"')
        + '":"v"},"price":{"input_per_million_usd":1,"output_per_million_usd":1,"cache_write_per_million_usd":1,"cache_read_per_million_usd":1,"retrieved_on":"'
        + XSS.replace('"', '\\"')
        + '"}}]}}',
    )
    up = Upload.objects.create(source="cli")
    report = ingest(
        [
            bytes_input("key.json", json.dumps(key).encode()),
            bytes_input("modeleval-x.jsonl", shard.encode()),
        ],
        up,
    )
    assert report.ok, report.refused
    suite = (fixtures / "conformance" / "cases.json").read_bytes()
    ingest([bytes_input("cases.json", suite)], up)
    out = (
        (fixtures / "conformance" / "run-two-failures.jsonl")
        .read_text()
        .replace("memory message 0 is not marked untrusted", XSS.replace('"', '\\"'))
    )
    store_run(out.encode(), "o.jsonl", RunMeta(XSS, 1, adapter_version=XSS, commit=XSS), up)
    run = Run.objects.get()
    attempt = run.attempts.order_by("line").last()
    urls = [
        "/",
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/matrix/?surface=dynamic",
        f"/attempts/{attempt.pk}/",
        f"/keys/{CorpusKey.objects.get().pk}/",
        "/keys/",
        f"/compare/?kind=models&run={run.pk}",
        f"/compare/?kind=surfaces&run={run.pk}",
        "/conformance/",
        "/conformance/failures/",
        f"/conformance/runs/{ConformanceRun.objects.get().pk}/",
        "/conformance/adapter/?name=" + quote(XSS),
    ]
    for url in urls:
        for headers in ({}, {"HX-Request": "true"}):
            r = client.get(url, headers=headers)
            assert r.status_code == 200, url
            html = r.content.decode()
            assert "<script>alert" not in html and "<img src=x" not in html, url
    md = client.get(f"/runs/{run.pk}/scores.md").content.decode()
    assert "<script" not in md and "<img" not in md and "&lt;script&gt;" in md
    csv_text = b"".join(client.get(f"/runs/{run.pk}/scores.csv").streaming_content).decode()
    assert XSS.split(">")[0] in csv_text  # data stays data in CSV (served as text/csv)
    doc = client.get(f"/runs/{run.pk}/scores.json")
    assert doc["Content-Type"] == "application/json"
