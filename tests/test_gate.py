"""The CI gate, by API and command: a regression with evidence fails it, noise does not."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from records.models import ApiToken
from records.queries.gate import gate, previous_comparable, resolve

pytestmark = pytest.mark.django_db
REGRESSED, BEFORE = "run-2026-11-23-f00dfa", "run-2026-11-16-a1b2c3"


def test_previous_is_the_latest_earlier_run_of_the_same_corpus_models_and_surfaces(demo):
    run, baseline = resolve(REGRESSED, "previous")
    assert baseline.run_id == BEFORE
    assert previous_comparable(baseline) is None


def test_a_regression_with_evidence_fails_the_gate_and_names_its_row(demo):
    result = gate(*resolve(REGRESSED, BEFORE), "Clean")
    assert not result.passed and result.rows > 1
    (row,) = result.regressed
    assert "surface=meta" in row["row"] and row["p_value"] < 0.05 and row["delta_points"] < 0
    assert row["interval_points"][1] < 0
    assert "| `openai:gpt-5.4-nano` | `meta` |" in result.markdown()


def test_the_api_answers_json_for_an_upload_token(client, demo):
    _, raw = ApiToken.issue("ci")
    auth = {"Authorization": f"Bearer {raw}"}
    r = client.get(f"/api/v1/runs/{REGRESSED}/gate?baseline=previous&column=Clean", headers=auth)
    body = r.json()
    assert r.status_code == 200 and body["passed"] is False and body["baseline"] == BEFORE
    assert body["regressed"] and body["markdown"].startswith("**evaldash gate: failed**")
    assert client.get(f"/api/v1/runs/{REGRESSED}/gate").status_code == 401
    assert client.get("/api/v1/runs/nope/gate", headers=auth).status_code == 404
    r = client.get(f"/api/v1/runs/{REGRESSED}/gate?column=Speed", headers=auth)
    assert r.status_code == 400 and "Clean" in r.json()["error"]
    r = client.get(f"/api/v1/runs/{BEFORE}/gate", headers=auth)
    assert r.status_code == 200 and r.json()["baseline"] is None
    assert "no earlier run" in r.json()["reason"]


def test_the_command_exits_1_on_a_regression_and_0_otherwise(demo, capsys):
    with pytest.raises(SystemExit) as info:
        call_command("gate", REGRESSED, "--baseline", BEFORE, "--column", "Clean")
    assert info.value.code == 1 and "failed" in capsys.readouterr().out
    call_command("gate", REGRESSED, "--baseline", REGRESSED, "--column", "Clean")
    assert "passed" in capsys.readouterr().out


def test_the_gate_reads_each_rows_counts_and_no_list_of_changed_cases(demo):
    from records.queries.compare import compare_runs

    run, baseline = resolve(REGRESSED, BEFORE)
    rows, _ = compare_runs(baseline, run, flip_limit=0, page=None)
    compared = [c for c in rows if c.baseline and c.candidate and not c.refused]
    assert compared and any(c.regressions for c in compared)  # the counts are there ...
    assert all(c.flips == [] for c in compared)  # ... and no case was listed
    everything, _ = compare_runs(baseline, run, flip_limit=None, page=None)
    assert sum(len(c.flips) for c in everything) >= sum(c.regressions for c in compared)
