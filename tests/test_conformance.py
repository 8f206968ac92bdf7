"""Conformance suites and runs: strict reading, contradictions, aborted runs, pages."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from records.conformance.formats import (
    TEMPLATES,
    ConformanceError,
    ambiguities,
    read_output,
    read_suite,
    template_of,
)
from records.ingest import bytes_input, ingest
from records.models import ApiToken, ConformanceRun, ConformanceSuite, Upload
from tests.builders import (
    CONFORMANCE_ALL_PASS,
    CONFORMANCE_SUITE,
    CONFORMANCE_TWO_FAIL,
    conformance_suite,
)


class TestFormat:
    def test_the_suite_loads_with_ten_cases(self):
        s = conformance_suite()
        assert s.suite == "taisce-conformance/v1" and len(s.cases) == 10
        assert s.names[-1] == "a_turn_retried_a_second_later_is_stored_once"

    @pytest.mark.parametrize(
        ("mutate", "field", "words"),
        [
            (
                lambda d: d.update(memory_message_prefix="taisce-memory/v2 untrusted"),
                "memory_message_prefix",
                "must be",
            ),
            (lambda d: d.update(cases=[]), "cases", "no case"),
            (lambda d: d["cases"][0].update(weight=2), "cases[0].weight", "unknown field"),
            (
                lambda d: d["cases"][6]["context"]["watermark"].update(stored="12"),
                "cases[6].context.watermark.stored",
                "whole number",
            ),
            (
                lambda d: d["cases"][0]["expect"].update(surprise=True),
                "cases[0].expect.surprise",
                "unknown field",
            ),
        ],
    )
    def test_the_loader_refuses_what_upstreams_refuses(self, mutate, field, words):
        doc = json.loads(CONFORMANCE_SUITE)
        mutate(doc)
        with pytest.raises(ConformanceError) as info:
            read_suite(json.dumps(doc).encode(), "cases.json")
        assert info.value.field == field and words in info.value.message

    def test_both_sample_outputs_read(self):
        ok = read_output(CONFORMANCE_ALL_PASS, "a.jsonl", exit_status=0, suite=conformance_suite())
        assert (ok.aborted, len(ok.results), ok.failed) == (False, 10, 0)
        bad = read_output(CONFORMANCE_TWO_FAIL, "b.jsonl", exit_status=1, suite=conformance_suite())
        assert [r.case for r in bad.results if not r.passed] == [
            "memory_is_one_untrusted_user_message",
            "a_retried_turn_is_stored_once",
        ]

    def test_empty_output_with_a_non_zero_exit_is_an_aborted_run(self):
        assert read_output(b"", "x", exit_status=1, suite=None).aborted
        with pytest.raises(ConformanceError):
            read_output(b"\n", "x", exit_status=0, suite=None)

    @pytest.mark.parametrize(
        ("edit", "line", "field", "words"),
        [
            (
                lambda t: t.replace('"cases":10,"failed":2', '"cases":10,"failed":1'),
                11,
                "failed",
                "summary says 1 failed but 2",
            ),
            (lambda t: t.replace('"cases":10', '"cases":9'), 11, "cases", "summary says 9 cases"),
            (
                lambda t: t.replace('"case":"store_only_on_success"', '"case":"made_up_case"'),
                4,
                "case",
                "the runner prints the suite's cases in order",
            ),
            (
                lambda t: t.replace(
                    '"case":"store_only_on_success"', '"case":"recall_failure_is_not_fatal"'
                ),
                4,
                "case",
                "the runner prints the suite's cases in order",
            ),
            (
                lambda t: t.replace('"passed":true}', '"passed":false}', 1),
                2,
                "passed",
                "exactly when failures is empty",
            ),
            (lambda t: t.rsplit("\n", 2)[0] + "\n", None, None, "no summary line"),
            (lambda t: t + '{"case":"late"}\n', 12, None, "follows the summary"),
        ],
    )
    def test_self_contradicting_output_is_refused_naming_the_line(self, edit, line, field, words):
        text = edit(CONFORMANCE_TWO_FAIL.decode()).encode()
        with pytest.raises(ConformanceError) as info:
            read_output(text, "b.jsonl", exit_status=1, suite=conformance_suite())
        assert (info.value.line, info.value.field) == (line, field) and words in info.value.message

    def test_output_must_be_what_upstreams_runner_can_print(self):
        """One line per suite case in the suite's order, then the summary (runner.go Run)."""
        lines = CONFORMANCE_TWO_FAIL.decode().strip().split("\n")
        cases, summary = lines[:-1], lines[-1]
        reordered = [cases[1], cases[0], *cases[2:], summary]
        missing = [*cases[:-1], summary.replace('"cases":10', '"cases":9')]
        only_summary = [
            summary.replace('"cases":10', '"cases":0').replace('"failed":2', '"failed":0')
        ]
        for text, line, words in (
            (reordered, 1, "the runner prints the suite's cases in order"),
            (missing, 10, "case 10"),
            (only_summary, 1, "0 case line(s) for a suite of 10"),
        ):
            with pytest.raises(ConformanceError) as info:
                status = 0 if text is only_summary else 1
                read_output(
                    ("\n".join(text) + "\n").encode(),
                    "o.jsonl",
                    exit_status=status,
                    suite=conformance_suite(),
                )
            assert info.value.line == line and words in info.value.message, info.value

    def test_an_exit_status_other_than_0_or_1_with_output_is_refused(self):
        with pytest.raises(ConformanceError) as info:
            read_output(CONFORMANCE_TWO_FAIL, "o.jsonl", exit_status=2, suite=conformance_suite())
        assert info.value.field == "exit_status"
        assert read_output(b"", "o.jsonl", exit_status=2, suite=conformance_suite()).aborted

    def test_every_suite_upstreams_load_accepts_is_accepted(self):
        doc = json.loads(CONFORMANCE_SUITE)
        doc["cases"][0].pop("turn")
        doc["cases"][1]["expect"] = None
        doc["cases"][2] = {k.upper(): v for k, v in doc["cases"][2].items()}  # Go folds case
        doc["cases"][3]["name"] = doc["cases"][4]["name"]
        doc["cases"][5]["name"] = ""
        suite = read_suite(json.dumps(doc).encode() + b"\n trailing bytes Go leaves unread", "s")
        assert (
            len(suite.cases) == 10
            and suite.cases[2]["name"] == json.loads(CONFORMANCE_SUITE)["cases"][2]["name"]
        )
        assert ambiguities(suite.cases) == [
            "case 6 has no name",
            f"cases 4, 5 share the name {doc['cases'][4]['name']!r}: results are told apart by "
            "their position only",
        ]

    def test_an_exit_status_that_contradicts_the_output_is_refused(self):
        with pytest.raises(ConformanceError) as info:
            read_output(CONFORMANCE_TWO_FAIL, "b.jsonl", exit_status=0, suite=conformance_suite())
        assert info.value.field == "exit_status"

    def test_failures_group_by_the_judges_template(self):
        assert (
            template_of(
                'memory message 0 has role "system"; it must be "user", never system, '
                "never assistant"
            )
            == TEMPLATES[2]
        )
        assert (
            template_of(
                "a retried turn was sent with 2 different idempotency keys; a retry "
                "carries the key of the turn it retries, or the deployment stores the "
                "same turn twice"
            )
            == TEMPLATES[21]
        )
        assert template_of("a memory message did not parse: x\ny") == TEMPLATES[0]
        assert template_of("something new") == "something new"


@pytest.mark.django_db
class TestStoredRuns:
    @pytest.fixture
    def suite(self):
        ingest([bytes_input("cases.json", CONFORMANCE_SUITE)], Upload.objects.create(source="cli"))
        return ConformanceSuite.objects.get()

    def _run(self, tmp_path, data: bytes, *args: str) -> None:
        out = tmp_path / "out.jsonl"
        out.write_bytes(data)
        call_command("ingest_conformance", str(out), *args)

    def test_both_sample_outputs_ingest_and_show_in_the_matrix(
        self, tmp_path, suite, client, viewer
    ):
        self._run(
            tmp_path,
            CONFORMANCE_ALL_PASS,
            "--adapter",
            "python/langgraph",
            "--exit-status",
            "0",
            "--adapter-version",
            "0.4.0",
            "--commit",
            "abc1234",
            "--ran-at",
            "2026-11-20T10:00:00Z",
        )
        self._run(
            tmp_path,
            CONFORMANCE_TWO_FAIL,
            "--adapter",
            "java/langchain4j",
            "--exit-status",
            "1",
            "--ran-at",
            "2026-11-21T10:00:00Z",
        )
        r = client.get("/conformance/")
        cases, rows = r.context["cases"], r.context["rows"]
        assert len(cases) == 10 and [run.adapter for run, _ in rows] == [
            "java/langchain4j",
            "python/langgraph",
        ]
        java = dict(zip(cases, rows[0][1], strict=True))
        assert not java["memory_is_one_untrusted_user_message"].passed
        html = r.content.decode()
        assert "memory message 0 is not marked untrusted" in html
        failures = client.get("/conformance/failures/").context["groups"]
        assert {t for t, _ in failures} == {TEMPLATES[3], TEMPLATES[21], TEMPLATES[23]}
        text = b"".join(client.get("/conformance.csv").streaming_content).decode()
        assert text.count("\n") == 21 and "not marked untrusted" in text

    def test_an_aborted_run_is_stored_as_aborted_not_as_zero_cases(
        self, tmp_path, suite, client, viewer
    ):
        self._run(
            tmp_path,
            b"",
            "--adapter",
            "dotnet/agent-framework",
            "--exit-status",
            "1",
            "--error",
            "conformance: case memory_is_one_untrusted_user_message could not run: driver: exec: not found",
        )
        run = ConformanceRun.objects.get()
        assert run.aborted and run.case_count == 0 and "could not run" in run.error
        html = client.get("/conformance/").content.decode()
        assert "aborted" in html and "could not run" in html

    def test_a_contradicting_output_stores_nothing(self, tmp_path, suite):
        bad = CONFORMANCE_TWO_FAIL.replace(b'"failed":2', b'"failed":3')
        with pytest.raises(CommandError, match="line 11"):
            self._run(tmp_path, bad, "--adapter", "x", "--exit-status", "1")
        assert not ConformanceRun.objects.exists()

    def test_history_says_which_rule_broke_when_and_which_commit_fixed_it(
        self, tmp_path, suite, client, viewer
    ):
        for data, exit, commit, day in (
            (CONFORMANCE_ALL_PASS, "0", "c1", 1),
            (CONFORMANCE_TWO_FAIL, "1", "c2", 2),
            (CONFORMANCE_ALL_PASS, "0", "c3", 3),
        ):
            self._run(
                tmp_path,
                data,
                "--adapter",
                "python/langgraph",
                "--exit-status",
                exit,
                "--commit",
                commit,
                "--ran-at",
                f"2026-11-0{day}T10:00:00Z",
            )
        events = client.get("/conformance/adapter/?name=python/langgraph").context["events"]
        summary = [(kind, case, run.commit) for kind, case, run, _ in events]
        assert ("broke", "a_retried_turn_is_stored_once", "c2") in summary
        assert ("fixed", "a_retried_turn_is_stored_once", "c3") in summary

    def test_the_api_takes_the_run_with_its_metadata(self, client, suite):
        _, raw = ApiToken.issue("ci")
        from django.core.files.uploadedfile import SimpleUploadedFile

        r = client.post(
            "/api/v1/conformance",
            {
                "output": SimpleUploadedFile("out.jsonl", CONFORMANCE_TWO_FAIL),
                "adapter": "python/agent-framework",
                "exit_status": "1",
                "adapter_version": "1.2.0",
            },
            headers={"Authorization": f"Bearer {raw}"},
        )
        assert r.status_code == 200 and r.json()["failed"] == 2
        r = client.post(
            "/api/v1/conformance",
            {"adapter": "x", "exit_status": "zero"},
            headers={"Authorization": f"Bearer {raw}"},
        )
        assert r.status_code == 422 and r.json()["refused"][0]["field"] == "exit_status"

    def test_case_pages_show_every_expectation(self, suite, client, viewer):
        html = client.get(
            f"/conformance/suites/{suite.pk}/?case=compaction_hands_the_model_the_deployments_context"
        ).content.decode()
        assert "The office moved to Cork in March" in html and "model_lacks" in html
        assert "&quot;memory_carries&quot;" in html


def test_a_suite_with_repeated_or_empty_names_is_stored_and_its_page_says_so(
    client, django_user_model
):
    doc = json.loads(CONFORMANCE_SUITE)
    doc["cases"][3]["name"] = doc["cases"][4]["name"]
    report = ingest(
        [bytes_input("cases.json", json.dumps(doc).encode())], Upload.objects.create(source="cli")
    )
    assert report.ok, report.refused
    client.force_login(django_user_model.objects.create_user("v", password="pw-123456789"))
    html = client.get(f"/conformance/suites/{ConformanceSuite.objects.get().pk}/").content.decode()
    assert "ambiguous" in html and "cases 4, 5 share the name" in html
