"""Browsing: runs, run, attempt trace, cost, exports; HTMX partials; query counts; escaping."""

from __future__ import annotations

import csv
import io
import json
from html import escape as escape_html

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from records.ingest import bytes_input, ingest
from records.models import ENDINGS, Attempt, Run, Upload
from tests.builders import FIXTURE_SHARD, PRICE, encode, line

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("viewer")]


class TestAccess:
    def test_browsing_needs_a_login_by_default(self, client):
        client.logout()
        r = client.get("/")
        assert r.status_code == 302 and r["Location"].startswith("/login/")

    def test_the_operator_can_open_read_access(self, client, settings):
        client.logout()
        settings.EVALDASH_PUBLIC_READ = True
        assert client.get("/").status_code == 200


XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def store(data: bytes, name: str = "modeleval-t.jsonl") -> Run:
    report = ingest([bytes_input(name, data)], Upload.objects.create(source="cli"))
    assert report.ok, report.refused
    return Run.objects.get(pk=report.stored[0]["run"])


def priced_shard(
    run_id: str = "run-p",
    commit: str = "c0ffee",
    n: int = 1,
    model: str = "m:priced",
    surface: str = "dynamic",
    started: str = "2026-11-20T10:00:00Z",
) -> bytes:
    lines = []
    for i in range(n):
        aid = f"{run_id}-a{i}"
        lines += [
            line("attempt", id=aid, model=model, surface=surface, case="MT-002"),
            {
                "schema": 1,
                "type": "turn",
                "turn": {
                    "attempt": aid,
                    "index": 1,
                    "try": 1,
                    "status": "rate_limited",
                    "usage": {"input": 0, "output": 0},
                    "detail": "429",
                },
            },
        ]
        lines.append(
            {
                "schema": 1,
                "type": "turn",
                "turn": {
                    "attempt": aid,
                    "index": 1,
                    "try": 2,
                    "status": "ok",
                    "latency_ms": 900,
                    "usage": {
                        "input": 1000,
                        "output": 200,
                        "cache_created": 400,
                        "cache_read": 600,
                    },
                    "blocks": [
                        {
                            "kind": "tool_call",
                            "tool": "gitlab_execute_action",
                            "arguments": {"action": "project.get", "params": {"project_id": "x"}},
                        }
                    ],
                },
            }
        )
        lines.append(
            line(
                "call",
                attempt=aid,
                tool="gitlab_execute_action",
                requested_action="environment.get",
                dispatched_action="environment.protected_get",
                outcome="ok",
            )
        )
    lines += [
        line("session"),
        line(
            "run",
            run_id=run_id,
            commit=commit,
            started_at=started,
            providers=[{"spec": model, "name": "x", "model": "y", "price": PRICE}],
        ),
    ]
    return encode(lines)


class TestRuns:
    def test_it_lists_runs_with_provenance_tokens_and_cost(self, client):
        store(priced_shard())
        html = client.get("/").content.decode()
        assert "run-p" in html and "c0ffee" in html and "2026-11-20 10:00" in html
        # 2 tries: 0 + (1000, 200, 400, 600) tokens; cost 1000*1 + 200*5 + 400*1.25 + 600*0.1 per M
        assert "2,200" in html and "$0.00" in html

    def test_a_run_whose_models_are_all_unpriced_shows_unknown_cost_not_zero(self, client):
        store(FIXTURE_SHARD.read_bytes(), FIXTURE_SHARD.name)
        html = client.get("/").content.decode()
        assert "unknown" in html and "$0.00" not in html

    def test_filters_live_in_the_url(self, client):
        store(priced_shard("run-a", "aaaa111", model="m:a", surface="meta"), "modeleval-a.jsonl")
        store(
            priced_shard("run-b", "bbbb222", model="m:b", started="2026-11-25T10:00:00Z"),
            "modeleval-b.jsonl",
        )

        def ids(q):
            return [r.run_id for r, _ in client.get("/?" + q).context["rows"]]

        assert ids("") == ["run-b", "run-a"]
        assert ids("model=m:a") == ["run-a"]
        assert ids("surface=dynamic") == ["run-b"]
        assert ids("commit=bbbb") == ["run-b"]
        assert ids("since=2026-11-21") == ["run-b"]
        assert ids("until=2026-11-21") == ["run-a"]
        assert ids("sort=started") == ["run-a", "run-b"]
        assert ids("corpus_digest=b519a10571ab2192") == ["run-b", "run-a"]
        assert ids("corpus_digest=other") == []

    @pytest.mark.parametrize(
        "q",
        [
            "sort=bogus",
            "since=yesterday",
            "page=0",
            "since=2026-12-01&until=2026-01-01",
            "surface=moon",
        ],
    )
    def test_invalid_query_state_is_a_400(self, client, q):
        r = client.get("/?" + q)
        assert r.status_code == 400

    def test_an_htmx_request_gets_only_the_table(self, client):
        store(priced_shard())
        r = client.get("/?model=m:priced", headers={"HX-Request": "true"})
        body = r.content.decode()
        assert body.lstrip().startswith('<section id="runs-table">') and "<html" not in body
        assert r["Vary"] and "HX-Request" in r["Vary"]

    def test_the_query_count_does_not_grow_with_the_number_of_runs(self, client):
        store(priced_shard("r1"), "modeleval-1.jsonl")
        with CaptureQueriesContext(connection) as one:
            client.get("/")
        for i in range(2, 6):
            store(priced_shard(f"r{i}", model=f"m:{i}"), f"modeleval-{i}.jsonl")
        with CaptureQueriesContext(connection) as five:
            client.get("/")
        assert len(one) == len(five) <= 10  # the page, its runs, headline scores, suggestions

    def test_runs_export_as_csv_and_json(self, client):
        store(priced_shard())
        rows = list(
            csv.DictReader(
                io.StringIO(b"".join(client.get("/runs.csv").streaming_content).decode())
            )
        )
        assert rows[0]["run_id"] == "run-p" and rows[0]["input_tokens"] == "1000"
        doc = client.get("/runs.json").json()
        assert doc["rows"][0]["priced_cost_usd"] == pytest.approx(0.00256)


class TestRunPage:
    def test_it_shows_providers_prices_sessions_and_the_seven_endings(self, client):
        run = store(priced_shard())
        html = client.get(f"/runs/{run.pk}/sessions/").content.decode()
        assert "retrieved on 2026-09-16" in html and "dynamic/default" in html
        for ending in ENDINGS:
            assert f">{ending}</a></th>" in html  # each ending a column, sortable
        assert 'id="cost-chart-data"' in client.get(f"/runs/{run.pk}/cost/").content.decode()

    def test_cost_splits_four_ways_and_compares_with_no_cache(self, client):
        run = store(priced_shard())
        row = client.get(f"/runs/{run.pk}/cost/").context["figures"].by_model["m:priced"]
        assert row.cost.input == pytest.approx(0.001)
        assert row.cost.output == pytest.approx(0.001)
        assert row.cost.cache_write == pytest.approx(0.0005)
        assert row.cost.cache_read == pytest.approx(0.00006)
        assert row.without_cache == pytest.approx((2000 * 1.0 + 200 * 5.0) / 1e6)
        assert row.tokens.cache_read_share == pytest.approx(600 / 2000)
        assert row.cost_per_attempt == pytest.approx(0.00256)
        # Per completed divides by the attempts the scorer found Completed: none, unscored.
        assert row.cost_per_completed is None
        assert "not scored" in client.get(f"/runs/{run.pk}/cost/").content.decode()

    def test_an_unpriced_model_has_unknown_cost_and_the_page_says_why(self, client):
        run = store(FIXTURE_SHARD.read_bytes(), FIXTURE_SHARD.name)
        r = client.get(f"/runs/{run.pk}/cost/")
        assert r.context["figures"].by_model["fake:perfect"].cost is None
        html = r.content.decode()
        assert "unknown: the run line lists no provider with this spec" in html
        # No model is priced: no chart with empty axes, but the words "cost unknown".
        assert r.context["chart"] is None and "data-plotly=" not in html
        assert "Cost unknown." in html

    def test_the_chart_is_a_stacked_bar_of_the_four_components(self, client):
        run = store(priced_shard())
        chart = client.get(f"/runs/{run.pk}/cost/").context["chart"]
        assert chart["layout"]["barmode"] == "stack"
        assert [t["name"] for t in chart["data"]] == [
            "Input",
            "Output",
            "Cache write",
            "Cache read",
        ]
        assert chart["data"][1]["y"] == [pytest.approx(0.001)]

    def test_the_attempt_list_filters_in_place(self, client):
        run = store(FIXTURE_SHARD.read_bytes(), FIXTURE_SHARD.name)
        r = client.get(
            f"/runs/{run.pk}/attempts/?model=fake:wrong-args",
            headers={"HX-Request": "true", "HX-Target": "attempt-list"},
        )
        body = r.content.decode()
        assert body.lstrip().startswith('<section id="attempt-list">')
        assert "MT-002/dynamic/2" in body and "MT-002/dynamic/1" not in body
        # An attempt-list address of before the tabs still leads there.
        old = client.get(f"/runs/{run.pk}/?model=fake:wrong-args")
        assert old.status_code == 302
        assert old["Location"] == f"/runs/{run.pk}/attempts/?model=fake%3Awrong-args"

    def test_the_run_page_query_count_does_not_grow_with_attempts(self, client):
        small = store(priced_shard("s", n=2), "modeleval-s.jsonl")
        big = store(priced_shard("b", n=120), "modeleval-b.jsonl")
        for tab in ("", "scores/", "cost/", "attempts/", "sessions/"):
            counts = []
            for run in (small, big):
                with CaptureQueriesContext(connection) as q:
                    assert client.get(f"/runs/{run.pk}/{tab}").status_code == 200
                counts.append(len(q))
            assert counts[0] == counts[1], tab

    def test_attempts_export_as_csv_and_json(self, client):
        run = store(FIXTURE_SHARD.read_bytes(), FIXTURE_SHARD.name)
        text = b"".join(client.get(f"/runs/{run.pk}/attempts.csv").streaming_content).decode()
        rows = list(csv.DictReader(io.StringIO(text)))
        assert [r["attempt"] for r in rows] == ["MT-002/dynamic/1", "MT-002/dynamic/2"]
        doc = client.get(f"/runs/{run.pk}/attempts.json?model=fake:perfect").json()
        assert [r["input_tokens"] for r in doc["rows"]] == [4600]

    def test_an_unknown_run_is_a_404(self, client):
        assert client.get("/runs/999/").status_code == 404


class TestAttemptPage:
    def test_the_trace_pairs_tool_calls_with_their_call_lines(self, client):
        store(FIXTURE_SHARD.read_bytes(), FIXTURE_SHARD.name)
        a = Attempt.objects.get(key="MT-002/dynamic/1")
        r = client.get(f"/attempts/{a.pk}/")
        turns = r.context["turns"]
        assert [t.turn.index for t in turns] == [1, 2, 3]
        assert turns[0].blocks[1].call.tool == "gitlab_find_action"
        assert turns[1].blocks[0].call.dispatched_action == "project.get"
        html = r.content.decode()
        assert "trace <code><bdi>aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2</bdi></code>" in html
        assert "&quot;project_id&quot;: &quot;eval-group/eval-project&quot;" in html

    def test_a_rate_limited_try_and_a_rewrite_stand_out_and_every_try_is_costed(self, client):
        store(priced_shard())
        a = Attempt.objects.get()
        r = client.get(f"/attempts/{a.pk}/")
        html = r.content.decode()
        assert "rate-limited, charged as a try" in html
        assert "rewritten by the server" in html
        assert [t.cost.total for t in r.context["turns"]] == [0, pytest.approx(0.00256)]

    def test_thinking_is_folded_and_a_malformed_call_shows_its_raw_text(self, client):
        data = encode(
            [
                line("attempt"),
                {
                    "schema": 1,
                    "type": "turn",
                    "turn": {
                        "attempt": "a1",
                        "index": 1,
                        "try": 1,
                        "status": "ok",
                        "blocks": [
                            {"kind": "thinking", "text": "let me think"},
                            {"kind": "tool_call", "raw": "{not json"},
                        ],
                    },
                },
                line("session"),
                line("run"),
            ]
        )
        store(data)
        html = client.get(f"/attempts/{Attempt.objects.get().pk}/").content.decode()
        assert '<details class="block thinking"><summary>Thinking' in html
        assert "malformed call, raw text" in html and "{not json" in html

    def test_the_trace_exports_as_json_and_csv(self, client):
        store(FIXTURE_SHARD.read_bytes(), FIXTURE_SHARD.name)
        a = Attempt.objects.get(key="MT-002/dynamic/1")
        doc = json.loads(b"".join(client.get(f"/attempts/{a.pk}.json").streaming_content))
        assert doc["turns"][1]["calls"][0]["result"]["project"]["id"] == 42
        text = b"".join(client.get(f"/attempts/{a.pk}.csv").streaming_content).decode()
        assert len(list(csv.DictReader(io.StringIO(text)))) == 3


class TestUntrustedText:
    @pytest.fixture
    def hostile(self):
        data = encode(
            [
                line(
                    "attempt",
                    id=XSS,
                    case=XSS,
                    model=XSS,
                    stimulus=XSS,
                    facts={XSS: XSS},
                    ended_by="completed",
                    reason=XSS,
                ),
                {
                    "schema": 1,
                    "type": "turn",
                    "turn": {
                        "attempt": XSS,
                        "index": 1,
                        "try": 1,
                        "status": "ok",
                        "detail": XSS,
                        "blocks": [
                            {"kind": "text", "text": XSS},
                            {"kind": "thinking", "text": XSS},
                            {"kind": "tool_call", "tool": XSS, "arguments": {XSS: XSS}},
                        ],
                    },
                },
                line(
                    "call",
                    attempt=XSS,
                    tool=XSS,
                    requested_action=XSS,
                    dispatched_action=XSS,
                    outcome="refused:" + XSS,
                    text=XSS,
                    result={XSS: XSS},
                    refusal_reason=XSS,
                ),
                line("verify", attempt=XSS, name=XSS, passed=False, detail=XSS),
                line("session", label="dynamic/default"),
                line(
                    "run",
                    run_id=XSS,
                    commit=XSS,
                    providers=[
                        {
                            "spec": XSS,
                            "name": XSS,
                            "model": XSS,
                            "options": {XSS: XSS},
                            "price": PRICE,
                        }
                    ],
                ),
            ]
        )
        return store(data)

    def test_no_page_renders_model_or_tool_text_as_html(self, client, hostile):
        a = Attempt.objects.get()
        for url in (
            "/",
            f"/runs/{hostile.pk}/",
            f"/runs/{hostile.pk}/scores/",
            f"/runs/{hostile.pk}/cost/",
            f"/runs/{hostile.pk}/attempts/",
            f"/runs/{hostile.pk}/sessions/",
            f"/attempts/{a.pk}/",
            f"/uploads/{hostile.shard.upload_id}/",
        ):
            html = client.get(url).content.decode()
            assert "<script>alert" not in html and "<img src=x" not in html, url
        html = client.get(f"/attempts/{a.pk}/").content.decode()
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html

    def test_table_rows_escape_every_value(self, hostile):
        from django.template.loader import render_to_string

        from records.queries import cost as pages
        from records.scoring.tables import TableRow

        figures = pages.run_figures(hostile)
        counts = ("clean", "attempts", "unaided", "completed", "steps", "discovery")
        counts += ("invalid_params", "turns", "skipped", "unobserved", "provider_error")
        counts += ("harness_error", "gitlab_refused", "input_tokens", "output_tokens")
        counts += ("cache_created_tokens", "cache_read_tokens")
        ratios = [f"{c}_{e}" for c in ("reached", "aft", "fidelity", "confirmation") for e in "nd"]
        row = TableRow(XSS, XSS, XSS, dict.fromkeys(counts + tuple(ratios), 1), refusal=(XSS, XSS))
        html = "".join(
            render_to_string(f"records/runs/_{name}_rows.html", {"rows": rows, "total": total})
            for name, rows, total in (
                ("endings", figures.rows, False),
                ("cost", figures.rows, False),
                ("cost", figures.rows, True),
                ("score", [row], False),
                ("counted_apart", [row], False),
            )
        )
        assert XSS in str(figures.rows[0].model) and "<script>alert" not in html
        assert "<img src=x" not in html and "&lt;script&gt;alert(&quot;x&quot;)" in html
        assert "?model=%3Cscript%3Ealert%28%22x%22%29" in html  # links carry it encoded
        assert "?row=%3Cscript%3Ealert%28%22x%22%29" in html

    def test_partials_escape_too(self, client, hostile):
        for url in (
            "/?page=1",
            f"/runs/{hostile.pk}/attempts/?page=1",
            f"/runs/{hostile.pk}/cost/",
        ):
            body = client.get(url, headers={"HX-Request": "true"}).content.decode()
            assert "<script>alert" not in body

    def test_the_chart_data_cannot_close_its_script_element(self, client, hostile):
        html = client.get(f"/runs/{hostile.pk}/cost/").content.decode()
        start = html.index('id="cost-chart-data"')
        block = html[start : html.index("</script>", start)]
        assert "<script" not in block
        data = json.loads(block.split(">", 1)[1])
        # Escaped for Plotly, which reads HTML in labels: it shows the text as it is.
        assert data["data"][0]["x"] == [escape_html(XSS, quote=False)]

    def test_csv_exports_neutralise_formulas_and_json_keeps_the_text(self, client, hostile):
        Attempt.objects.update(case='=HYPERLINK("http://evil")')
        text = b"".join(client.get(f"/runs/{hostile.pk}/attempts.csv").streaming_content).decode()
        row = next(csv.DictReader(io.StringIO(text)))
        assert row["case"].startswith("'=")
        doc = client.get(f"/runs/{hostile.pk}/attempts.json")
        assert doc["Content-Type"] == "application/json" and doc.json()["rows"][0]["reason"] == XSS


def test_every_page_carries_a_content_security_policy_without_inline_script(client):
    r = client.get("/")
    csp = r["Content-Security-Policy"]
    assert (
        "script-src 'self'" in csp
        and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    )
    assert "object-src 'none'" in csp and "frame-ancestors 'none'" in csp
    html = r.content.decode()
    assert "<script>" not in html  # every script is a file; data rides in json_script blocks
    assert r["X-Frame-Options"] == "DENY"


def test_the_runs_list_filters_by_part_of_a_model_and_a_digest_prefix(client, viewer, demo):
    assert len(client.get("/?model=gpt-5.4").context["rows"]) == 3
    assert len(client.get("/?model=no-such-model").context["rows"]) == 0
    digest = demo["run-2026-11-16-a1b2c3"].corpus_digest
    assert len(client.get(f"/?corpus_digest={digest[:6]}").context["rows"]) == 3
    assert len(client.get("/?corpus_digest=ffff").context["rows"]) == 0
    page = client.get("/")
    assert "openai:gpt-5.4-nano" in page.context["model_suggestions"]
    html = page.content.decode()
    # The headline: each run's best Clean, with the model and surface it belongs to.
    from records.scoring.tables import score_rows

    for run in demo.values():
        best = max(
            (r for r in score_rows(run.latest_scoring()) if r.figures["attempts"]),
            key=lambda r: r.figures["clean"] / r.figures["attempts"],
        )
        model, surface, (n, d) = page.context["headlines"][run.pk]
        assert n / d == best.figures["clean"] / best.figures["attempts"]
    # The oldest run has nothing earlier to compare with, and says so.
    assert html.count("no earlier run to compare") == 1


def test_an_attempts_neighbours_follow_the_order_of_the_list_it_came_from(client, viewer, demo):
    from records.models import Attempt

    run = demo["run-2026-11-23-f00dfa"]
    for query, order in (
        ("", ["line"]),
        ("sort=-turns", ["-turn_count", "line"]),
        ("sort=case&ended_by=completed", ["case", "line"]),
    ):
        listed = Attempt.objects.filter(run=run)
        if "ended_by" in query:
            listed = listed.filter(ended_by="completed")
        pks = list(listed.order_by(*order).values_list("pk", flat=True))
        for i in (0, len(pks) // 2, len(pks) - 1):
            r = client.get(f"/attempts/{pks[i]}/?{query}")
            assert r.context["previous_pk"] == (pks[i - 1] if i else None), (query, i)
            assert r.context["next_pk"] == (pks[i + 1] if i + 1 < len(pks) else None), (query, i)
