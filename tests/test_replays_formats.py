"""OCA-V0 against every pinned vector and the derived vectors of obscorpus.md."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from records.replays.formats import (
    ReplayError,
    capture,
    capture_all,
    capture_from,
    read_raw,
    read_result,
    replay,
    reuse,
    seal,
    secret_shaped,
)

FIX = Path(__file__).parent / "fixtures" / "obscorpus"
REPLAY = json.loads((FIX / "replay.json").read_text())
CAPTURE = json.loads((FIX / "capture.json").read_text())
R = "0123456789abcdef0123456789abcdef01234567"
PINNED = "446a534476e1201e6ff9fd5f2087f571a29c0e1cf41a2a340a2df97f381bb090"


def compact(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def one(label: str | None = "accept", sid: str = "s-1") -> dict:
    c = {
        "subjects": [{"id": sid, "revision": R}],
        "labels": {},
        "evaluatorRevision": R,
        "scoringRule": "exact-label-match",
    }
    if label is not None:
        c["labels"][sid] = label
    return c


def raw(identity="s-1", revision=R, i=10, o=10, latency=10) -> dict:
    return {
        "identity": identity,
        "revision": revision,
        "inputTokens": i,
        "outputTokens": o,
        "latencyMillis": latency,
    }


def test_the_fixture_corpus_seals_to_the_pinned_id():
    assert seal(REPLAY["corpus"]).seal_id == PINNED == REPLAY["sealId"]


def test_order_does_not_change_the_seal():
    c = copy.deepcopy(REPLAY["corpus"])
    c["subjects"].reverse()
    c["labels"] = dict(reversed(list(c["labels"].items())))
    assert seal(c).seal_id == PINNED


@pytest.mark.parametrize(
    ("corpus", "seal_id"),
    [
        (one(), "dc9da128c5f3b4c72b891e70c61cace3b265f7d0aaec7d1d91332bee49cb5d6a"),
        (one(None), "e0b84178b5b473447be47d6b6bf4e3d768aa2efad39ee23fc78f96d6574bb021"),
        (
            {
                "subjects": [
                    {"id": s, "revision": R}
                    for s in ("no-label", "no-verifier", "no-telemetry", "no-result")
                ],
                "labels": {
                    "no-verifier": "accept",
                    "no-telemetry": "accept",
                    "no-result": "accept",
                },
                "evaluatorRevision": R,
                "scoringRule": "exact-label-match",
            },
            "8f43cdf571c054bdd29d9485c13c07c6026af6151bc0486951619e0ca5986ea1",
        ),
        (one(sid="forged"), "c0dfb778f1ecf8c4534e65ae9480b9cc2a49525b67e4df49089049a6a704c0cb"),
    ],
)
def test_derived_seal_ids(corpus, seal_id):
    assert seal(corpus).seal_id == seal_id


@pytest.mark.parametrize(
    ("change", "seal_id"),
    [
        (
            lambda c: c["labels"].update({"s-pass": "reject"}),
            "ced0f587394cf1c67ea0a340666e01e1103d0e03f6c523e7d93e17f517022133",
        ),
        (
            lambda c: c["subjects"][0].update(revision="e" * 40),
            "4639e8579f1c12ae2c13c09771fa0864bbe4d0c79031c38ffe755adf0174dd09",
        ),
        (
            lambda c: c.update(evaluatorRevision="d" * 40),
            "fd0c5ce9fcf8da608139fefbf2bfbfa5786d87c781c21ce5f9cf53f8ddac2cf0",
        ),
        (
            lambda c: c["subjects"].append({"id": "s-new", "revision": R}),
            "65d9a946c06f820e993bcd49dbc7408dcd28197319ed73cedbe71d3c414884a4",
        ),
    ],
)
def test_a_changed_corpus_is_a_new_corpus(change, seal_id):
    candidate = copy.deepcopy(REPLAY["corpus"])
    change(candidate)
    assert seal(candidate).seal_id == seal_id
    with pytest.raises(ReplayError) as info:
        reuse(seal(REPLAY["corpus"]), candidate)
    assert info.value.message == (
        f"changed corpus inputs are a new corpus: sealed {PINNED}, candidate {seal_id}"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.update(subjects=[]), "invalid corpus: subject count 0 outside 1..1024"),
        (
            lambda c: c.update(
                subjects=[{"id": f"s{i}", "revision": R} for i in range(1025)], labels={}
            ),
            "invalid corpus: subject count 1025 outside 1..1024",
        ),
        (lambda c: c.update(scoringRule="fuzzy"), "invalid corpus: unknown scoring rule"),
        (
            lambda c: c.update(evaluatorRevision="main"),
            "invalid corpus: evaluator revision is not an immutable revision",
        ),
        (
            lambda c: c["subjects"].append({"id": "-x", "revision": R}),
            "invalid corpus: subject identity is not bounded",
        ),
        (
            lambda c: c["subjects"].append({"id": "AKIAABCDEFGHIJKLMNOP", "revision": R}),
            "invalid corpus: subject identity is not bounded",
        ),
        (
            lambda c: c["subjects"].append({"id": "s-1", "revision": R}),
            "invalid corpus: duplicate subject s-1",
        ),
        (
            lambda c: c["subjects"].append({"id": "s-2", "revision": R.upper()}),
            "invalid corpus: subject s-2 revision is not an immutable revision",
        ),
        (
            lambda c: c["labels"].update({"ghost": "x"}),
            "invalid corpus: label for unsealed subject",
        ),
        (
            lambda c: c["labels"].update({"s-1": "tokens:5"}),
            "invalid corpus: label for s-1 is secret-shaped",
        ),
        (lambda c: c["labels"].update({"s-1": ""}), "invalid corpus: label for s-1 is not bounded"),
    ],
)
def test_seal_validation_follows_upstreams_order_and_messages(change, message):
    c = one()
    change(c)
    with pytest.raises(ReplayError) as info:
        seal(c)
    assert info.value.message == message


@pytest.mark.parametrize(
    "text", ["AKIAABCDEFGHIJKLMNOP", "fix the login bug\nfunc main() {}", "password=hunter2"]
)
def test_secret_or_prose_text_never_reaches_an_error_or_an_observation(text):
    with pytest.raises(ReplayError) as info:
        seal(one(label=text))
    assert text not in info.value.message
    obs = capture(raw(identity=text, revision=text))
    assert obs.status == "NOT_OBSERVED" and text.encode() not in compact(obs.as_json())


@pytest.mark.parametrize("case", CAPTURE, ids=[c["name"] for c in CAPTURE])
def test_the_pinned_capture_vectors_byte_for_byte(case):
    assert compact(capture(read_raw(case["raw"])).as_json()) == compact(case["want"])


@pytest.mark.parametrize(
    ("r", "expect"),
    [
        (
            raw(identity="AKIAABCDEFGHIJKLMNOP"),
            {"status": "NOT_OBSERVED", "reason": "identity-not-observed"},
        ),
        (raw(identity="a" * 129), {"status": "NOT_OBSERVED"}),
        (raw(identity="-lead"), {"status": "NOT_OBSERVED"}),
        (
            raw(identity="t", revision=R.upper()),
            {"revision": {"status": "NOT_OBSERVED", "reason": "revision-not-immutable"}},
        ),
        (
            raw(identity="t", revision="f" * 64, i=10_000_000, o=10_000_001, latency=3_600_000),
            {
                "revision": {"status": "OBSERVED", "value": "f" * 64},
                "inputTokens": {"status": "OBSERVED", "value": 10_000_000},
                "outputTokens": {"status": "NOT_OBSERVED", "reason": "out-of-bounds"},
                "latencyMillis": {"status": "OBSERVED", "value": 3_600_000},
            },
        ),
    ],
)
def test_derived_capture_vectors(r, expect):
    got = capture(r).as_json()
    for key, value in expect.items():
        assert got[key] == value


def test_a_128_byte_identity_is_observed_and_the_rest_not_reported():
    got = capture({"identity": "a" * 128}).as_json()
    assert got["status"] == "OBSERVED" and got["identity"]["value"] == "a" * 128
    assert got["inputTokens"] == {"status": "NOT_OBSERVED", "reason": "not-reported"}


def test_the_worst_case_observation_stays_within_the_row_bound():
    obs = capture(
        raw(identity="a" * 128, revision="f" * 64, i=10_000_000, o=10_000_000, latency=3_600_000)
    )
    assert len(compact(obs.as_json())) == 462


def test_capture_from_fails_open():
    def broken():
        raise RuntimeError("source down")

    got = capture_from(broken).as_json()
    assert got["status"] == "NOT_OBSERVED" and got["identity"]["reason"] == "capture-failed"


def test_capture_all_keeps_256_and_counts_the_rest():
    batch = capture_all([raw(identity=f"t{i}") for i in range(263)])
    doc = batch.as_json()
    assert (
        len(doc["observations"]) == 256
        and doc["dropped"] == 7
        and doc["droppedReason"] == "count-bound"
    )
    assert capture_all([]).as_json() == {"observations": [], "dropped": 0}


@pytest.mark.parametrize("value", [1.5, True, "5", 1e3])
def test_non_integer_counts_are_refused(value):
    with pytest.raises(ReplayError) as info:
        read_raw(raw(i=value))
    assert info.value.field == "telemetry.inputTokens"


def _fixture_results():
    return [read_result(r, f"results[{i}]") for i, r in enumerate(REPLAY["results"])]


def test_the_fixture_replays_to_the_pinned_report_byte_for_byte():
    report = replay(seal(REPLAY["corpus"]), _fixture_results())
    assert report.encode() == compact(REPLAY["want"])


def test_results_with_captured_telemetry_replay_the_same():
    results = []
    for r in REPLAY["results"]:
        r = dict(r)
        r["telemetry"] = capture(read_raw(r["telemetry"])).as_json()
        results.append(read_result(r, "r"))
    assert replay(seal(REPLAY["corpus"]), results).encode() == compact(REPLAY["want"])


def test_no_results_is_not_run_everywhere():
    report = replay(seal(REPLAY["corpus"]), []).as_json()
    assert report["overall"] == "NOT_RUN" and report["notRun"] == 6
    assert {v["reason"] for v in report["verdicts"]} == {"result-missing"}


def _one_result(outcome: str, telemetry=None):
    sealed = seal(one())
    r = {
        "sealId": sealed.seal_id,
        "subjectId": "s-1",
        "outcome": outcome,
        "telemetry": raw() if telemetry is None else telemetry,
    }
    return replay(sealed, [read_result(r, "r")])


def test_a_single_pass_is_pass_with_the_constant_markers():
    assert _one_result("accept").encode() == (
        b'{"schema":"oca-replay/1","sealId":"dc9da128c5f3b4c72b891e70c61cace3b265f7d0aaec7d1d91332bee49cb5d6a",'
        b'"evidence":"owner-labelled","authority":"none","independentValidation":false,"overall":"PASS",'
        b'"pass":1,"fail":0,"notRun":0,"notObserved":0,"denominator":1,"verdicts":[{"subjectId":"s-1","verdict":"PASS"}]}'
    )


@pytest.mark.parametrize(
    ("outcome", "verdict", "reason"),
    [
        ("AKIAABCDEFGHIJKLMNOP", "NOT_OBSERVED", "secret-screened"),
        ("a" * 129, "NOT_OBSERVED", "unbounded-text"),
        ("Accept", "FAIL", None),
        ("", "NOT_OBSERVED", "verifier-result-missing"),
    ],
)
def test_outcomes_are_screened_bounded_and_compared_exactly(outcome, verdict, reason):
    report = _one_result(outcome)
    (v,) = report.as_json()["verdicts"]
    assert v["verdict"] == verdict and v.get("reason") == reason
    assert b"AKIA" not in report.encode()


def test_forged_observed_telemetry_never_counts_as_success():
    forged = capture(raw()).as_json()
    forged["revision"] = {"status": "OBSERVED", "value": "main"}
    v = _one_result("accept", forged).as_json()
    assert (v["pass"], v["notObserved"], v["verdicts"][0]["reason"]) == (
        0,
        1,
        "telemetry-not-observed",
    )
    missing = capture(raw()).as_json()
    missing["inputTokens"] = {"status": "OBSERVED"}
    assert _one_result("accept", missing).as_json()["pass"] == 0


def test_missing_label_telemetry_or_verifier_never_counts_as_success():
    corpus = {
        "subjects": [
            {"id": s, "revision": R}
            for s in ("no-label", "no-verifier", "no-telemetry", "no-result")
        ],
        "labels": {"no-verifier": "accept", "no-telemetry": "accept", "no-result": "accept"},
        "evaluatorRevision": R,
        "scoringRule": "exact-label-match",
    }
    sealed = seal(corpus)
    results = [
        {
            "sealId": sealed.seal_id,
            "subjectId": "no-label",
            "outcome": "accept",
            "telemetry": raw(),
        },
        {"sealId": sealed.seal_id, "subjectId": "no-verifier", "outcome": "", "telemetry": raw()},
        {"sealId": sealed.seal_id, "subjectId": "no-telemetry", "outcome": "accept"},
    ]
    report = replay(sealed, [read_result(r, "r") for r in results])
    assert report.encode() == (
        b'{"schema":"oca-replay/1","sealId":"8f43cdf571c054bdd29d9485c13c07c6026af6151bc0486951619e0ca5986ea1",'
        b'"evidence":"owner-labelled","authority":"none","independentValidation":false,"overall":"NOT_OBSERVED",'
        b'"pass":0,"fail":0,"notRun":1,"notObserved":3,"denominator":4,"verdicts":['
        b'{"subjectId":"no-label","verdict":"NOT_OBSERVED","reason":"label-missing"},'
        b'{"subjectId":"no-result","verdict":"NOT_RUN","reason":"result-missing"},'
        b'{"subjectId":"no-telemetry","verdict":"NOT_OBSERVED","reason":"telemetry-not-observed"},'
        b'{"subjectId":"no-verifier","verdict":"NOT_OBSERVED","reason":"verifier-result-missing"}]}'
    )


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r[0].update(sealId="0" * 64), "result is not bound to this sealed corpus"),
        (lambda r: r[0].update(subjectId="s-ghost"), "invalid replay results: unsealed subject"),
        (lambda r: r.append(dict(r[0])), "invalid replay results: duplicate subject result"),
    ],
)
def test_replay_refusals(mutate, message):
    results = copy.deepcopy(REPLAY["results"])
    mutate(results)
    with pytest.raises(ReplayError) as info:
        replay(seal(REPLAY["corpus"]), [read_result(r, "r") for r in results])
    assert info.value.message == message


@pytest.mark.parametrize(
    ("text", "screened"),
    [
        ("tokens:5", True),
        ("secretary:1", True),
        ("my.api-key:x", True),
        ("bypass:1", True),
        ("token::", True),
        ("token:", False),
        ("passage:1", False),
        ("fantasia1234567890123456", True),
        ("abcdefghij.abcdefghij.abcdefghij", True),
        ("observation.corpus-authority.replay-test", True),
        ("task0123456789abcdef0123456789abcdef", True),
        ("ask-abcdefghijabcdefghijabc", False),
        ("sk-abcdefghijabcdefghijabc", True),
        ("ghp_abcdefghijabcdefghij", True),
        ("session-7:turn-3", False),
        ("s-pass-turn-1", False),
        ("accept", False),
        (R, False),
        ("f" * 64, False),
    ],
)
def test_the_reachable_secret_screen(text, screened):
    assert secret_shaped(text) is screened
