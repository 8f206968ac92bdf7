"""A row's identity is its key's parts, never the key string split apart: model specs may hold
spaces, `=`, quotes and any script, and the comparison page, its exports and the gate must see
the same rows, one per spec."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from django.db import transaction
from django.utils.html import escape
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from records.devtools.synth import ModelSpec
from records.models import ApiToken, Run
from records.queries.compare import compare_runs
from records.queries.gate import gate
from records.scoring.tables import score_groups, score_rows
from tests.builders import demo_key, ingest_bytes, synth_run

pytestmark = pytest.mark.django_db


def store_runs(specs: list[str], regress: str | None = None, tag: str = "") -> tuple[Run, Run]:
    """A baseline run and a candidate a week later, both of these model specs on the dynamic
    surface; in the candidate, `regress` (a spec) gets almost every argument wrong."""
    models = tuple(ModelSpec(s, 0.99, (1.0, 2.0, 0.0, 0.0)) for s in specs)
    runs = []
    for n, day in enumerate((1, 8)):
        data = synth_run(
            f"run-{tag}{n}",
            seed=3,
            models=models,
            surfaces=("dynamic",),
            started_at=datetime(2026, 11, day, 9),
            regress={(regress, "dynamic"): 0.98} if regress and n else None,
        )
        report = ingest_bytes((f"modeleval-{tag}{n}.jsonl", data))
        assert not report.refused, report.refused
        runs.append(Run.objects.get(run_id=f"run-{tag}{n}"))
    return runs[0], runs[1]


@pytest.fixture
def key(db):
    report = ingest_bytes(("key.json", demo_key()))
    assert not report.refused


def test_a_model_whose_spec_extends_anothers_with_a_space_is_a_row_of_its_own(key):
    base, cand = store_runs(
        ["openai:gpt-5", "openai:gpt-5 preview"], regress="openai:gpt-5 preview"
    )
    rows, problem = compare_runs(base, cand, page=None)
    assert problem == ""
    assert sorted(c.key.model for c in rows) == ["openai:gpt-5", "openai:gpt-5 preview"]
    assert all(c.baseline and c.candidate for c in rows)
    preview = next(c for c in rows if c.key.model == "openai:gpt-5 preview")
    assert preview.baseline.row.model == preview.candidate.row.model == "openai:gpt-5 preview"

    result = gate(cand, base, "Clean")
    assert result.rows == 2
    assert not result.passed
    (row,) = result.regressed
    assert row["key"]["model"] == "openai:gpt-5 preview" and row["delta_points"] < -50


def test_the_two_specs_are_two_rows_of_one_score_table(key):
    base, _ = store_runs(["openai:gpt-5", "openai:gpt-5 preview"])
    (group,) = score_groups(base.latest_scoring())
    assert [r.model for r in group.rows] == ["openai:gpt-5", "openai:gpt-5 preview"]


# Specs a shard may carry: spaces, `=`, `;`, quotes, markup and other scripts, never NUL.
_piece = st.text(
    alphabet=st.one_of(
        st.sampled_from(list(" =;:\"'`<>|[]()&\\")),
        st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
    ),
    min_size=1,
    max_size=8,
)


@st.composite
def near_duplicate_specs(draw: st.DrawFn) -> list[str]:
    """A spec and one to three more: each the first plus a space and more, or drawn afresh."""
    first = "p:" + draw(_piece)
    more = draw(
        st.lists(
            st.one_of(
                _piece.map(lambda s: f"{first} {s}"),
                _piece.map(lambda s: f"{first}={s}"),
                _piece.map(lambda s: f"q:{s}"),
            ),
            min_size=1,
            max_size=3,
        )
    )
    return list(dict.fromkeys([first, *more]))


def test_pages_exports_and_the_gate_see_one_row_per_spec_whatever_it_holds(key, client, viewer):
    _, raw = ApiToken.issue("ci")
    auth = {"Authorization": f"Bearer {raw}"}
    seen = []

    @settings(
        max_examples=5,
        deadline=None,
        database=None,
        # Each example stores and scores two runs: generate a bounded few, shrink none.
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(specs=near_duplicate_specs(), regress=st.booleans())
    def check(specs: list[str], regress: bool) -> None:
        sid = transaction.savepoint_create()
        try:
            base, cand = store_runs(specs, regress=specs[-1] if regress else None)
            seen.append(specs)
            for run in (base, cand):
                rows = score_rows(run.latest_scoring())
                assert sorted(r.model for r in rows) == sorted(specs)
                # The parts rebuild the very string the scorer wrote.
                assert all(r.key.text == r.row_key for r in rows)

            rows, _ = compare_runs(base, cand, page=None)
            assert sorted(c.key.model for c in rows) == sorted(specs)
            assert all(c.baseline and c.candidate for c in rows)

            query = f"kind=runs&baseline={base.pk}&candidate={cand.pk}"
            page = client.get(f"/compare/?{query}").content.decode()
            assert page.count('href="#cmp-1-') == len(specs)  # a summary line each
            for spec in specs:
                assert escape(spec) in page

            exported = json.loads(client.get(f"/compare.json?{query}").content)
            exported = exported.get("rows", exported)
            assert sorted(r["model"] for r in exported) == sorted(specs)

            answer = client.get(
                f"/api/v1/runs/{cand.run_id}/gate?baseline={base.run_id}", headers=auth
            )
            body = answer.json()
            assert body["rows_compared"] == len(specs)
            if regress:
                assert body["passed"] is False
                assert [r["key"]["model"] for r in body["regressed"]] == [specs[-1]]
        finally:
            transaction.savepoint_rollback(sid)

    check()
    assert len(seen) == 5
