"""Sealed replays uploaded as a user would, and every refusal of the ingest."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from records.ingest import bytes_input, ingest
from records.models import ObsCorpus, ObsReplay, Upload

pytestmark = pytest.mark.django_db
FIX = Path(__file__).parent / "fixtures" / "obscorpus"
DOC = json.loads((FIX / "replay.json").read_text())
PINNED = "446a534476e1201e6ff9fd5f2087f571a29c0e1cf41a2a340a2df97f381bb090"


def _ingest(name: str, doc) -> dict:
    report = ingest(
        [bytes_input(name, json.dumps(doc).encode())], Upload.objects.create(source="cli")
    )
    return report.as_dict()


def test_the_fixture_document_stores_its_corpus_and_the_pinned_report(client, viewer):
    out = _ingest("replay.json", DOC)
    assert out["refused"] == [] and out["replays"][0]["overall"] == "FAIL"
    replay = ObsReplay.objects.get()
    assert replay.corpus.seal_id == PINNED
    assert replay.report.encode() == json.dumps(DOC["want"], separators=(",", ":")).encode()
    r = client.get(f"/replays/{replay.pk}/report.json")
    assert r.content == replay.report.encode()
    html = client.get(f"/replays/{replay.pk}/").content.decode()
    assert (
        "<strong>1 / 6</strong>" in html
        and "owner-labelled" in html
        and "authority: <code>none</code>" in html
    )
    assert (
        "telemetry-not-observed" in html
        and 'NOT_OBSERVED</span> <span class="muted">not-reported' in html
    )


def test_corpus_first_then_results_through_the_command(tmp_path, capsys):
    (tmp_path / "corpus.json").write_text(json.dumps(DOC["corpus"]))
    (tmp_path / "results.json").write_text(
        json.dumps({"sealId": PINNED, "results": DOC["results"]})
    )
    call_command("ingest", str(tmp_path / "corpus.json"), str(tmp_path / "results.json"), "--quiet")
    assert ObsCorpus.objects.count() == 1 and ObsReplay.objects.get().overall == "FAIL"


def test_a_changed_corpus_is_a_new_seal_and_never_overwrites():
    _ingest("a.json", DOC["corpus"])
    changed = copy.deepcopy(DOC["corpus"])
    changed["labels"]["s-pass"] = "reject"
    _ingest("b.json", changed)
    assert sorted(ObsCorpus.objects.values_list("seal_id", flat=True)) == sorted(
        [PINNED, "ced0f587394cf1c67ea0a340666e01e1103d0e03f6c523e7d93e17f517022133"]
    )
    _ingest("a-again.json", DOC["corpus"])
    assert ObsCorpus.objects.count() == 2


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (
            lambda d: d["results"][0].update(sealId="0" * 64),
            None,
            "result is not bound to this sealed corpus",
        ),
        (lambda d: d["results"][0].update(subjectId="ghost"), None, "unsealed subject"),
        (lambda d: d["results"].append(dict(d["results"][0])), None, "duplicate subject result"),
        (
            lambda d: d["results"][0]["telemetry"].update(inputTokens=1.5),
            "results[0].telemetry.inputTokens",
            "whole number",
        ),
        (
            lambda d: d["results"][0]["telemetry"].update(inputTokens=True),
            "results[0].telemetry.inputTokens",
            "whole number",
        ),
        (lambda d: d["results"][0].update(extra=1), "results[0].extra", "unknown field"),
        (lambda d: d["want"].update(overall="PASS"), "want", "does not match the one recomputed"),
        (lambda d: d.update(sealId="f" * 64), "sealId", "is not the seal of the corpus"),
        (
            lambda d: d["corpus"]["labels"].update({"s-pass": "AKIAABCDEFGHIJKLMNOP"}),
            None,
            "secret-shaped",
        ),
    ],
)
def test_hostile_documents_are_refused_and_nothing_is_stored(mutate, field, words):
    doc = copy.deepcopy(DOC)
    mutate(doc)
    out = _ingest("bad.json", doc)
    (err,) = out["refused"]
    assert err["file"] == "bad.json" and err["field"] == field and words in err["message"]
    assert "AKIA" not in err["message"]
    assert not ObsCorpus.objects.exists() and not ObsReplay.objects.exists()


def test_results_for_an_unknown_seal_are_refused():
    out = _ingest("r.json", {"sealId": PINNED, "results": DOC["results"]})
    assert "no stored corpus has seal" in out["refused"][0]["message"]


def test_a_secret_shaped_outcome_is_never_stored_or_shown(client, viewer):
    doc = copy.deepcopy(DOC)
    doc.pop("want")
    doc["results"][0]["outcome"] = "AKIAABCDEFGHIJKLMNOP"
    _ingest("s.json", doc)
    replay = ObsReplay.objects.get()
    assert "AKIA" not in json.dumps(replay.results) and "AKIA" not in replay.report
    html = client.get(f"/replays/{replay.pk}/").content.decode()
    assert "AKIA" not in html and "secret-screened" in html


def test_forged_observed_telemetry_is_not_observed():
    doc = copy.deepcopy(DOC)
    doc.pop("want")
    doc["results"][0]["telemetry"] = {
        "status": "OBSERVED",
        "identity": {"status": "OBSERVED", "value": "t"},
        "revision": {"status": "OBSERVED", "value": "main"},
        "inputTokens": {"status": "OBSERVED", "value": 1},
        "outputTokens": {"status": "OBSERVED", "value": 1},
        "latencyMillis": {"status": "OBSERVED", "value": 1},
    }
    _ingest("f.json", doc)
    verdicts = json.loads(ObsReplay.objects.get().report)["verdicts"]
    assert {
        "subjectId": "s-pass",
        "verdict": "NOT_OBSERVED",
        "reason": "telemetry-not-observed",
    } in verdicts


def test_replays_of_one_seal_sit_side_by_side(client, viewer):
    _ingest("one.json", DOC)
    second = copy.deepcopy(DOC)
    second.pop("want")
    second["results"][1]["outcome"] = "accept"  # s-fail now passes
    _ingest("two.json", second)
    corpus = ObsCorpus.objects.get()
    r = client.get(f"/replays/corpus/{corpus.pk}/")
    assert len(r.context["runs"]) == 2
    cells = dict((sid, [c["verdict"] for c in cells]) for sid, _, _, cells in r.context["rows"])
    assert cells["s-fail"] == ["FAIL", "PASS"]
    assert "/ 6" in client.get("/replays/").content.decode()


def _ingest_bytes(name: str, data: bytes) -> dict:
    return ingest([bytes_input(name, data)], Upload.objects.create(source="cli")).as_dict()


def _with_want(want_text: str) -> bytes:
    doc = {k: v for k, v in DOC.items() if k != "want"}
    return json.dumps(doc).encode()[:-1] + b', "want": ' + want_text.encode() + b"}"


def test_a_supplied_report_is_compared_byte_for_byte_once_compacted():
    """Upstream's test compacts `want` and compares bytes with json.Marshal of the report:
    the same values spelled or ordered otherwise are a mismatch, white space is not."""
    exact = json.dumps(DOC["want"], separators=(",", ":"))
    spaced = json.dumps(DOC["want"], indent=3)
    assert _ingest_bytes("spaced.json", _with_want(spaced))["refused"] == []
    reordered = json.dumps(dict(reversed(list(DOC["want"].items()))))
    one_point_o = exact.replace('"denominator":6', '"denominator":6.0')
    missing = json.dumps({k: v for k, v in DOC["want"].items() if k != "pass"})
    as_bool = exact.replace('"independentValidation":false', '"independentValidation":0')
    for text in (reordered, one_point_o, missing, as_bool):
        (err,) = _ingest_bytes("bad.json", _with_want(text))["refused"]
        assert err["field"] == "want" and "differ at byte" in err["message"], text
    assert not ObsReplay.objects.filter(name="bad.json").exists()


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["corpus"].update(labels=[]), "corpus.labels"),
        (lambda d: d["corpus"].update(labels=""), "corpus.labels"),
        (lambda d: d["corpus"].update(labels=False), "corpus.labels"),
        (lambda d: d["corpus"].update(subjects=""), "corpus.subjects"),
        (
            lambda d: d["results"][0].update(telemetry=_captured(identity=[])),
            "results[0].telemetry.identity",
        ),
        (
            lambda d: d["results"][0].update(telemetry=_captured(inputTokens=0)),
            "results[0].telemetry.inputTokens",
        ),
        (
            lambda d: d["results"][0].update(
                telemetry=_captured(inputTokens={"status": "OBSERVED", "value": 2**63})
            ),
            "results[0].telemetry.inputTokens.value",
        ),
        (
            lambda d: d["results"][0]["telemetry"].update(inputTokens=2**63),
            "results[0].telemetry.inputTokens",
        ),
    ],
)
def test_documents_are_decoded_as_strictly_as_go_decodes_them(mutate, field):
    doc = copy.deepcopy(DOC)
    doc.pop("want")
    mutate(doc)
    (err,) = _ingest("strict.json", doc)["refused"]
    assert err["field"] == field, err
    assert not ObsReplay.objects.exists() and not ObsCorpus.objects.exists()


def _captured(**fields):
    telemetry = {
        "status": "OBSERVED",
        "identity": {"status": "OBSERVED", "value": "turn-1"},
        "revision": {"status": "NOT_OBSERVED", "reason": "not-reported"},
        "inputTokens": {"status": "OBSERVED", "value": 5},
        "outputTokens": {"status": "OBSERVED", "value": 0},
        "latencyMillis": {"status": "NOT_OBSERVED"},
    }
    telemetry.update(fields)
    return telemetry


def test_telemetry_that_arrives_captured_is_kept_exactly_as_go_encodes_it():
    # No "reason": "" added where none came, a zero count kept, nothing dropped; a null field
    # is Go's zero value, encoded with its status only.
    doc = copy.deepcopy(DOC)
    doc.pop("want")
    doc["results"][0]["telemetry"] = _captured(revision=None)
    assert _ingest("captured.json", doc)["refused"] == []
    stored = ObsReplay.objects.get().results[doc["results"][0]["subjectId"]]["telemetry"]
    assert stored == {
        "status": "OBSERVED",
        "identity": {"status": "OBSERVED", "value": "turn-1"},
        "revision": {"status": ""},
        "inputTokens": {"status": "OBSERVED", "value": 5},
        "outputTokens": {"status": "OBSERVED", "value": 0},
        "latencyMillis": {"status": "NOT_OBSERVED"},
    }
