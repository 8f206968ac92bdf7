"""What `gen_model_results` makes of one run's shard, followed where it decides: which session a
row's provenance is read from (record.go groupShard), the order it reports rows in (refusals.go
judge, main.go mergeRows and runWrite), a run whose every row it refuses before scoring, and a
run's own export, folded into an empty record."""

from __future__ import annotations

import json

import pytest

from records.models import Run
from tests.builders import SAMPLE_KEY, ingest_bytes, line, published_session, published_shard

pytestmark = pytest.mark.django_db

KEY = (
    "model=fake:perfect surface=dynamic mode=default tier=ultimate corpus=b519a10571ab2192 "
    "contract=k1 tools=t1 repeat=1"
)


@pytest.fixture(autouse=True)
def key():
    assert ingest_bytes(("key.json", SAMPLE_KEY.read_bytes())).ok


def _run(name: str, data: bytes) -> Run:
    report = ingest_bytes((name, data))
    assert report.ok, report.refused
    return Run.objects.get(shard__name=name)


def _get(client, url: str) -> str:
    r = client.get(url)
    assert r.status_code == 200, r.content
    return r.content.decode()


def _two_sessions(first: dict, second: dict) -> bytes:
    """One shard whose two sessions share a row key: its first attempt ran in the first."""
    return published_shard(
        line("attempt", id="a1", session="dynamic/a"),
        line("attempt", id="a2", case="MS-014", session="dynamic/b"),
        published_session(label="dynamic/a", **first),
        published_session(label="dynamic/b", **second),
    )


def test_a_row_of_two_sessions_is_refused_for_a_hole_in_its_first_attempts_session(client, viewer):
    run = _run("modeleval-a.jsonl", _two_sessions({"token_scopes": []}, {}))
    want = (
        f'refused [incomplete-provenance] {KEY}: the provenance field "token_scopes" is empty, '
        "so nothing says what the credential could reach\n"
    )
    assert _get(client, f"/runs/{run.pk}/scores.md") == want
    blocks = _get(client, f"/publish/blocks.md?run={run.pk}")
    assert blocks.endswith("\n" + want) and "`fake:perfect`" not in blocks


def test_a_row_of_two_sessions_publishes_the_tools_its_first_attempts_session_served(
    client, viewer
):
    run = _run("modeleval-a.jsonl", _two_sessions({"served_tools": 40}, {"served_tools": 41}))
    md = _get(client, f"/runs/{run.pk}/scores.md")
    assert "| `fake:perfect` | `real`   | `c0ffee` | 2026-11-01 | 19.3.0 ee | " in md
    assert "|           40 |" in md and "41" not in md
    record = client.get(f"/publish/model-results.json?run={run.pk}").json()
    (row,) = record["rows"]
    assert row["provenance"]["served_tools"] == 40
    assert row["counts"]["attempts"] == 2


def test_the_first_attempts_session_decides_even_when_it_is_declared_and_stored_last(
    client, viewer
):
    # groupShard reads the provenance of the session of the key's first attempt (by line), not
    # of the session declared or stored first: here the first attempt ran in dynamic/b.
    shard = published_shard(
        line("attempt", id="a1", session="dynamic/b"),
        line("attempt", id="a2", case="MS-014", session="dynamic/a"),
        published_session(label="dynamic/a", served_tools=40),
        published_session(label="dynamic/b", served_tools=41),
    )
    run = _run("modeleval-a.jsonl", shard)
    sessions = dict(run.sessions.values_list("label", "pk"))
    assert sessions["dynamic/b"] > sessions["dynamic/a"]  # stored last, the higher id
    (row,) = client.get(f"/publish/model-results.json?run={run.pk}").json()["rows"]
    assert row["provenance"]["served_tools"] == 41
    md = _get(client, f"/runs/{run.pk}/scores.md")
    assert "|           41 |" in md and "40" not in md


def _shard(*attempts: dict, commit: str = "c0ffee", **run: object) -> bytes:
    """A publishable shard of these attempts, one individual session serving each model they
    name (which no managed block publishes), the run line describing every model."""
    models = list(dict.fromkeys(a["attempt"]["model"] for a in attempts))
    session = published_session(
        label="individual/default",
        surface="individual",
        slice_size=96,
        tool_schema_digests=dict.fromkeys(models, "t1"),
    )
    lines = [json.loads(one) for one in published_shard(*attempts, session).splitlines()]
    lines[-1]["run"].update(
        commit=commit,
        providers=[
            {"spec": m, "name": "real", "model": "m", "options": {"t": "0"}} for m in models
        ],
        **run,
    )
    return ("\n".join(json.dumps(one) for one in lines) + "\n").encode()


def _attempt(n: int, model: str, case: str = "MS-001") -> dict:
    return line(
        "attempt",
        id=f"a{n}",
        case=case,
        model=model,
        surface="individual",
        session="individual/default",
        shown_tools=96,
    )


def _row(model: str) -> str:
    return (
        KEY.replace("fake:perfect", model)
        .replace("surface=dynamic", "surface=individual")
        .replace("tier=ultimate ", "tier=ultimate slice=96 ")
    )


def test_a_run_reports_its_rows_in_the_order_its_shard_first_names_them(client, viewer):
    # groupShard orders candidates by their first attempt: judge refuses, and runWrite reports
    # the unpublished rows of a record folded into an empty one, in that order, not sorted.
    run = _run("modeleval-a.jsonl", _shard(_attempt(1, "zeta:m"), _attempt(2, "alpha:m")))
    want = [f"no managed block publishes the row {_row(m)}" for m in ("zeta:m", "alpha:m")]
    assert _get(client, f"/runs/{run.pk}/scores.md").splitlines() == want
    assert _get(client, f"/publish/blocks.md?run={run.pk}").splitlines()[-2:] == want


def test_refusals_come_in_candidate_order_with_their_markdown_punctuation_raw(client, viewer):
    attempts = (_attempt(1, "zeta:o1_mini_"), _attempt(2, "alpha:o1_mini_"))
    run = _run("modeleval-f.jsonl", _shard(*attempts, filter="MT-0.*"))
    assert _get(client, f"/runs/{run.pk}/scores.md").splitlines() == [
        f'refused [filtered-run] {_row(m)}: the run was filtered with -run "MT-0.*", so it put '
        "part of the corpus and the row would read as the whole of it"
        for m in ("zeta:o1_mini_", "alpha:o1_mini_")
    ]


def test_a_later_run_merges_in_its_own_order_into_the_record_read_back_sorted(client, viewer):
    first = _run("modeleval-a.jsonl", _shard(_attempt(1, "zeta:m"), _attempt(2, "alpha:m")))
    later = _shard(_attempt(1, "zeta:m", "MS-014"), _attempt(2, "alpha:m"), commit="c0ffee2")
    second = _run("modeleval-b.jsonl", later)
    report = _get(client, f"/publish/blocks.md?run={first.pk}&run={second.pk}").splitlines()
    assert report[-4:] == [
        f"merged into the published row {_row('zeta:m')}: 0 case(s) replaced (), 1 kept as "
        "they stood",
        f"merged into the published row {_row('alpha:m')}: 1 case(s) replaced (MS-001), 0 kept "
        "as they stood",
        # The second fold reads the record the first wrote, its rows sorted by key.
        f"no managed block publishes the row {_row('alpha:m')}",
        f"no managed block publishes the row {_row('zeta:m')}",
    ]


def test_a_run_whose_every_row_is_refused_before_scoring_publishes_its_refusals(client, viewer):
    # refusals.go judge refuses before score: the attempts' case, unknown to the key, is never
    # scored, and gen_model_results prints the refusal, writes "rows": null and exits 0.
    run = _run("modeleval-x.jsonl", _shard(_attempt(1, "o1_mini_", "XX-404"), filter="MT-0.*"))
    scoring = run.latest_scoring()
    assert scoring.verdict_count == 0 and "upstream refuses before scoring" in scoring.error
    want = (
        f'refused [filtered-run] {_row("o1_mini_")}: the run was filtered with -run "MT-0.*", '
        "so it put part of the corpus and the row would read as the whole of it\n"
    )
    assert _get(client, f"/runs/{run.pk}/scores.md") == want
    blocks = _get(client, f"/publish/blocks.md?run={run.pk}")
    assert blocks.endswith("<!-- END MODEL EVAL ENTERPRISE DYNAMIC RESULTS -->\n\n" + want)
    record = client.get(f"/publish/model-results.json?run={run.pk}")
    assert record.status_code == 200 and record.json()["rows"] is None


def test_a_run_whose_unscored_rows_upstream_would_score_is_still_not_scored(client, viewer):
    run = _run("modeleval-x.jsonl", _shard(_attempt(1, "o1_mini_", "XX-404")))
    assert run.latest_scoring().verdict_count == 0
    assert client.get(f"/runs/{run.pk}/scores.md").status_code == 404
    assert client.get(f"/publish/blocks.md?run={run.pk}").status_code == 400
