"""The committed record (`docs/development/testing/model-results.json`) exported as
`gen_model_results -shards` writes it, several runs of one key merged case by case as `-refold`
merges them or refused by the merge guard (record.go, cases.go, mergeguard.go), and the nine
managed blocks drawn for a chosen set of runs."""

from __future__ import annotations

import copy
import json

import pytest

from records.formats.model_results import (
    BLOCKS,
    RECORD_NOTE,
    Row,
    merge_refusal,
    merge_rows,
    record_bytes,
    sum_cases,
)
from records.models import Run
from tests.builders import SAMPLE_KEY, ingest_bytes, line, published_shard

KEY = (
    "model=fake:perfect surface=dynamic mode=default tier=ultimate corpus=b519a10571ab2192 "
    "contract=k1 tools=t1 repeat=1"
)


def _case(run: str, attempts: int, clean: int, turns: int = 1) -> dict:
    ratio = {"numerator": clean, "denominator": attempts}
    zero = {"numerator": 0, "denominator": 0}
    return {
        "run": run,
        "date": "2026-11-01",
        "commit": "c0ffee",
        "counts": {
            "attempts": attempts,
            "skipped": 0,
            "unobserved": 0,
            "provider_errors": 0,
            "harness_errors": 0,
            "gitlab_refused": 0,
            "turns": turns,
            "outcomes": {"completed": clean, "failed": attempts - clean}
            if attempts > clean
            else {"completed": clean},
        },
        "columns": {
            "clean": ratio,
            "reached": zero,
            "accepted_first_time": zero,
            "argument_fidelity": zero,
            "confirmation": zero,
            "unaided": ratio,
            "completion": ratio,
            "overhead": {"discovery": 0, "invalid_params": 0, "steps": 0},
        },
        "tokens": {"input": 10, "output": 1, "cache_created": 0, "cache_read": 0},
    }


def _row(cases: dict, **provenance) -> Row:
    counts, columns, tokens = sum_cases(cases)
    return Row(
        key={
            "model": "fake:perfect",
            "surface": "dynamic",
            "mode": "default",
            "tier": "ultimate",
            "corpus_digest": "b519a10571ab2192",
            "contract_digest": "k1",
            "tool_schema_digest": "t1",
            "repeat": 1,
        },
        provenance={
            "gitlab_version": "19.3.0",
            "edition": "ee",
            "capability_surface": "full",
            "provider": "real",
            "tier_confirmed": False,
            "served_tools": 2,
            "token_scopes": ["api"],
            "request_options": {"t": "0"},
            **provenance,
        },
        counts=counts,
        columns=columns,
        tokens=tokens,
        cases=cases,
    )


# --- pure rules ----------------------------------------------------------------------------------


def test_a_row_is_the_sum_of_its_cases():
    counts, columns, tokens = sum_cases({"B": _case("r", 2, 1), "A": _case("r", 3, 3, turns=4)})
    assert counts["attempts"] == 5 and counts["turns"] == 5
    assert counts["outcomes"] == {"completed": 4, "failed": 1}
    assert columns["clean"] == {"numerator": 4, "denominator": 5} and tokens["input"] == 20


def test_a_merge_replaces_the_cases_it_names_and_keeps_the_rest():
    held = [_row({"A": _case("run-1", 1, 0), "B": _case("run-1", 1, 0)})]
    incoming = _row({"B": _case("run-2", 1, 1)})
    lines = merge_rows(held, [incoming])
    assert lines == [
        f"merged into the published row {KEY}: 1 case(s) replaced (B), 1 kept as they stood"
    ]
    (row,) = held
    assert {name: c["run"] for name, c in row.cases.items()} == {"A": "run-1", "B": "run-2"}
    assert row.columns["clean"] == {"numerator": 1, "denominator": 2}


def test_the_merge_guard_refuses_a_row_without_per_case_figures():
    standing = _row({"A": _case("run-1", 3, 0)})
    standing.cases = {}
    why = merge_refusal(standing, _row({"A": _case("run-2", 1, 1)}))
    assert why.startswith(
        "the standing row records no per-case figures, so merging into it would replace 3 "
        "case(s) of measurement with the 1 this run carries"
    )


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"gitlab_version": "19.4.0"}, 'the GitLab version ("19.3.0" and "19.4.0")'),
        ({"edition": "ce"}, 'the instance edition ("ee" and "ce")'),
        ({"provider": "other"}, 'the provider ("real" and "other")'),
        ({"tier_confirmed": True}, "whether the tier was confirmed (false and true)"),
        ({"served_tools": 9}, "how many tools the session served (2 and 9)"),
        ({"token_scopes": ["api", "read_user"]}, "the credential's scopes (api and api+read_user)"),
        ({"request_options": {"t": "1"}}, "the request options (t=0 and t=1)"),
    ],
)
def test_the_merge_guard_refuses_runs_that_disagree_about_what_was_measured(change, words):
    why = merge_refusal(_row({"A": _case("r", 1, 1)}), _row({"A": _case("r", 1, 1)}, **change))
    assert why == (
        f"the two runs disagree about {words}, which the row key does not hold and the merged "
        "figures would carry only one of; re-fold the whole run rather than merging part of it"
    )


def test_the_record_is_written_with_one_space_of_indent_and_rows_sorted_by_key():
    one = _row({"A": _case("r", 1, 1)})
    other = copy.deepcopy(one)
    other.key["model"] = "anthropic:m"
    text = record_bytes([one, other]).decode()
    assert text.startswith('{\n "schema_version": 1,\n "note": ')
    assert (
        text.endswith("\n}\n")
        and '\n "rows": [\n  {\n   "key": {\n    "model": "anthropic:m",' in text
    )
    doc = json.loads(text)
    assert doc["note"] == RECORD_NOTE and [r["key"]["model"] for r in doc["rows"]] == [
        "anthropic:m",
        "fake:perfect",
    ]
    assert list(doc["rows"][0]) == ["key", "provenance", "counts", "columns", "tokens", "cases"]
    assert "tier_pin" not in doc["rows"][0]["key"] and "declines" not in doc["rows"][0]["counts"]


def test_an_empty_record_has_no_rows():
    assert json.loads(record_bytes([]))["rows"] is None


def test_the_record_escapes_as_gos_encoder_does():
    row = _row({"A": _case("r", 1, 1)})
    row.key["model"] = "a<b>&c"
    assert '"model": "a\\u003cb\\u003e\\u0026c"' in record_bytes([row]).decode()


# --- stored runs ---------------------------------------------------------------------------------


@pytest.fixture
def runs(db):
    ingest_bytes(("key.json", SAMPLE_KEY.read_bytes()))

    def add(name: str, *lines, run_id: str = "run-1", commit: str = "c0ffee", **edits) -> Run:
        data = published_shard(*lines).replace(b'"run-1"', f'"{run_id}"'.encode())
        data = data.replace(b'"c0ffee"', f'"{commit}"'.encode())
        for old, new in edits.items():
            data = data.replace(old.encode(), new.encode())
        report = ingest_bytes((name, data))
        assert report.ok, report.refused
        return Run.objects.get(shard__name=name)

    return add


def _query(*runs: Run) -> str:
    return "&".join(f"run={r.pk}" for r in runs)


def test_a_run_exports_as_the_record_gen_model_results_writes(client, viewer, runs):
    a = runs("modeleval-a.jsonl", line("attempt"), line("attempt", id="a2", case="MT-002"))
    r = client.get(f"/publish/model-results.json?{_query(a)}")
    assert r.status_code == 200 and r["Content-Type"] == "application/json"
    doc = json.loads(r.content)
    assert r.content.endswith(b"\n}\n") and doc["schema_version"] == 1
    (row,) = doc["rows"]
    assert row["key"]["model"] == "fake:perfect" and sorted(row["cases"]) == ["MS-001", "MT-002"]
    assert row["cases"]["MS-001"]["run"] == "run-1" and row["counts"]["attempts"] == 2
    assert row["provenance"]["request_options"] == {"t": "0"}


def test_a_later_run_of_one_key_is_merged_case_by_case(client, viewer, runs):
    a = runs("modeleval-a.jsonl", line("attempt"), line("attempt", id="a2", case="MT-002"))
    b = runs("modeleval-b.jsonl", line("attempt", case="MT-002"), run_id="run-2", commit="beef")
    doc = client.get(f"/publish/model-results.json?{_query(a, b)}").json()
    (row,) = doc["rows"]
    assert {c: f["run"] for c, f in row["cases"].items()} == {"MS-001": "run-1", "MT-002": "run-2"}
    assert row["provenance"]["commit"] == "beef" and row["counts"]["attempts"] == 2
    blocks = client.get(f"/publish/blocks.md?{_query(a, b)}").content.decode()
    assert blocks.endswith(
        f"\nmerged into the published row {KEY}: 1 case(s) replaced (MT-002), 1 kept as they stood\n"
    )


def test_a_later_run_that_disagrees_is_refused_by_the_merge_guard(client, viewer, runs):
    a = runs("modeleval-a.jsonl", line("attempt"))
    b = runs(
        "modeleval-b.jsonl",
        line("attempt"),
        run_id="run-2",
        commit="beef",
        **{'"19.3.0"': '"19.4.0"'},
    )
    doc = client.get(f"/publish/model-results.json?{_query(a, b)}").json()
    assert doc["rows"][0]["provenance"]["gitlab_version"] == "19.3.0"
    blocks = client.get(f"/publish/blocks.md?{_query(a, b)}").content.decode()
    assert (
        f"\nrefused to merge into the published row {KEY}: the two runs disagree about the GitLab "
        'version ("19.3.0" and "19.4.0"), which the row key does not hold' in blocks
    )


def test_the_nine_blocks_are_exported_with_their_markers(client, viewer, runs):
    a = runs("modeleval-a.jsonl", line("attempt"))
    fake = runs(
        "modeleval-f.jsonl",
        line("attempt", model="fake:other"),
        run_id="run-f",
        **{'"spec": "fake:perfect", "name": "real"': '"spec": "fake:other", "name": "fake"'},
    )
    text = client.get(f"/publish/blocks.md?{_query(a, fake)}").content.decode()
    starts = [text.index(b.start) for b in BLOCKS]
    assert starts == sorted(starts) and all(b.end in text for b in BLOCKS)
    free = BLOCKS[0]
    assert f"{free.start}\n\n{free.empty}\n{free.end}\n\n" in text
    assert "<!-- START MODEL EVAL LEGEND -->\n\n**How to read the tables below.**" in text
    licensed_summary = BLOCKS[3]
    body = text.split(licensed_summary.start, 1)[1].split(licensed_summary.end, 1)[0]
    assert body.startswith("\n\nCompared as one table") and "Token scopes" not in body
    after = text.rsplit(BLOCKS[-1].end, 1)[1]
    assert after.startswith("\n\nrefused [fake-provider] model=fake:other surface=dynamic")


def test_the_exports_refuse_a_run_that_is_not_there_or_not_scored(client, viewer, runs):
    assert client.get("/publish/blocks.md?run=999").status_code == 400
    assert client.get("/publish/model-results.json").status_code == 400
    assert client.get("/publish/model-results.json?run=x").status_code == 400
