"""What `gen_model_results` makes of one run's shard, followed where it decides: which session a
row's provenance is read from (record.go groupShard), the order it reports rows in (refusals.go
judge, main.go mergeRows and runWrite), a run whose every row it refuses before scoring, and a
run's own export, folded into an empty record."""

from __future__ import annotations

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
