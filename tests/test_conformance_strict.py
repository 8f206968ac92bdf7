"""Conformance input read as strictly as taisce reads and prints it: the suite as `Load` decodes
it (one value, Go's key folding, Go's merging), and run output only as `taisce conformance`
can print it (Go's encoder, byte for byte)."""

from __future__ import annotations

import json

import pytest

from records.conformance.formats import (
    ConformanceError,
    go_fold,
    read_output,
    read_suite,
)
from records.formats.text import go_json_string
from records.ingest import bytes_input, ingest
from records.models import ConformanceRun, ConformanceSuite, Upload
from tests.builders import (
    CONFORMANCE_ALL_PASS,
    CONFORMANCE_SUITE,
    CONFORMANCE_TWO_FAIL,
    conformance_suite,
)


def _refusal(data: bytes, exit_status: int = 1) -> ConformanceError:
    with pytest.raises(ConformanceError) as info:
        read_output(data, "out.jsonl", exit_status=exit_status, suite=conformance_suite())
    return info.value


def _lines() -> list[str]:
    return CONFORMANCE_TWO_FAIL.decode().split("\n")[:-1]


def _joined(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


# --- the suite, as Load decodes it -----------------------------------------------------------


class TestSuiteAsLoadReadsIt:
    @pytest.mark.parametrize(
        "after",
        [b"\n{}", b" trailing text", b"\n\xff\xfe not UTF-8", b'"\\ud800"', b"\n\\u0000"],
    )
    def test_it_reads_the_first_json_value_and_leaves_what_follows_unread(self, after):
        suite = read_suite(CONFORMANCE_SUITE + after, "cases.json")
        assert len(suite.cases) == 10

    def test_a_suite_with_data_after_its_first_value_is_stored_as_a_suite(self):
        report = ingest(
            [bytes_input("cases.json", CONFORMANCE_SUITE + b"\n\xff not read")],
            Upload.objects.create(source="cli"),
        )
        assert report.ok, report.refused
        assert ConformanceSuite.objects.get().case_count == 10

    def test_it_accepts_untrusted_on_history_and_synthetic_messages(self):
        doc = json.loads(CONFORMANCE_SUITE)
        doc["cases"][6]["turn"]["history"][0]["untrusted"] = True
        doc["cases"][5]["turn"]["synthetic"][0]["untrusted"] = False
        suite = read_suite(json.dumps(doc).encode(), "cases.json")
        assert suite.cases[6]["turn"]["history"][0]["untrusted"] is True
        assert suite.cases[5]["turn"]["synthetic"][0] == {
            **doc["cases"][5]["turn"]["synthetic"][0],
            "untrusted": False,
        }

    def test_it_matches_keys_with_gos_folding(self):
        assert go_fold("ſuite") == "SUITE" and go_fold("\u212aeys") == "KEYS"
        assert go_fold("ıd") != "ID" and go_fold("İd") != "ID" and go_fold("straße") != "STRASSE"
        text = CONFORMANCE_SUITE.decode()
        text = text.replace('"suite":', '"ſuite":', 1).replace(
            '"memory_message_prefix"', '"Memory_Message_Prefix"', 1
        )
        text = text.replace('"rule"', '"Rule"').replace(
            '"observe_keys_equal"', '"observe_\u212aeys_equal"'
        )
        suite = read_suite(text.encode(), "cases.json")
        assert suite.suite == "taisce-conformance/v1"
        assert suite.cases[0]["rule"] == json.loads(CONFORMANCE_SUITE)["cases"][0]["rule"]
        assert suite.cases[8]["expect"]["observe_keys_equal"] is True

    def test_suite_detection_follows_gos_folding(self):
        text = CONFORMANCE_SUITE.decode().replace(
            '"memory_message_prefix"', '"MEMORY_message_PREFIX"', 1
        )
        report = ingest(
            [bytes_input("cases.json", text.encode())], Upload.objects.create(source="cli")
        )
        assert report.ok, report.refused
        assert ConformanceSuite.objects.get().document["memory_message_prefix"]

    def test_a_field_given_twice_fills_the_struct_the_first_left_as_gos_decoder_does(self):
        text = CONFORMANCE_SUITE.decode().replace(
            '"turn": {\n        "user": "Where does Marta work?",',
            '"turn": {"assistant": "kept", "compact": true}, "turn": {\n'
            '        "user": "Where does Marta work?",',
            1,
        )
        assert text != CONFORMANCE_SUITE.decode()
        turn = read_suite(text.encode(), "cases.json").cases[0]["turn"]
        assert turn["compact"] is True and turn["user"] == "Where does Marta work?"
        assert turn["assistant"] == "At Ensera."  # the later value overwrites

    def test_a_null_leaves_a_value_as_it_was_and_sets_a_pointer_to_nil(self):
        text = CONFORMANCE_SUITE.decode().replace(
            '"suite": "taisce-conformance/v1",',
            '"suite": "taisce-conformance/v1", "suite": null,',
            1,
        )
        assert text != CONFORMANCE_SUITE.decode()
        assert read_suite(text.encode(), "s").suite == "taisce-conformance/v1"
        doc = json.loads(CONFORMANCE_SUITE)
        doc["cases"][6]["context"] = None
        doc["cases"][0]["expect"]["fatal"] = None
        suite = read_suite(json.dumps(doc).encode(), "s")
        assert suite.cases[6]["context"] is None and suite.cases[0]["expect"]["fatal"] is None

    @pytest.mark.parametrize(
        ("edit", "words", "field"),
        [
            (lambda t: t.replace(b"Marta works", b"Marta \xff works", 1), "invalid UTF-8", None),
            (
                lambda t: t.replace(b"Marta works", b"Marta \\ud800 works", 1),
                "lone surrogate",
                "cases[0].seed[0].statement",
            ),
            (
                lambda t: t.replace(b"Marta works", b"Marta \\u0000 works", 1),
                "NUL",
                "cases[0].seed[0].statement",
            ),
        ],
    )
    def test_the_documented_refusals_stay_inside_the_first_value(self, edit, words, field):
        with pytest.raises(ConformanceError) as info:
            read_suite(edit(CONFORMANCE_SUITE), "cases.json")
        assert words in info.value.message and info.value.field == field

    def test_a_suite_with_a_lone_surrogate_is_refused_naming_its_field_on_upload(self):
        data = CONFORMANCE_SUITE.replace(b"Marta works", b"Marta \\ud800 works", 1)
        report = ingest([bytes_input("cases.json", data)], Upload.objects.create(source="cli"))
        (refused,) = report.refused
        assert refused["field"] == "cases[0].seed[0].statement"
        assert not ConformanceSuite.objects.exists()


# --- run output, only as the runner prints it --------------------------------------------------


class TestOutputAsTheRunnerPrintsIt:
    def test_the_samples_are_byte_for_byte_what_the_runner_prints(self):
        assert not read_output(
            CONFORMANCE_TWO_FAIL, "o", exit_status=1, suite=conformance_suite()
        ).aborted
        assert (
            len(
                read_output(
                    CONFORMANCE_ALL_PASS, "o", exit_status=0, suite=conformance_suite()
                ).results
            )
            == 10
        )

    @pytest.mark.parametrize("status", [1, 137])
    def test_it_refuses_white_space_only_output_on_an_abort(self, status):
        err = _refusal(b" \n\n", exit_status=status)
        assert err.line == 1 and "prints nothing at all" in err.message

    @pytest.mark.parametrize("status", [137, -1])
    def test_empty_output_killed_from_outside_is_an_aborted_run_that_says_so(self, status):
        out = read_output(b"", "o", exit_status=status, suite=conformance_suite())
        assert out.aborted and out.killed
        assert not read_output(b"", "o", exit_status=1, suite=conformance_suite()).killed

    def test_a_killed_run_is_stored_aborted_and_its_page_says_it_was_killed(self, client, viewer):
        from records.conformance.store import RunMeta, store_run

        up = Upload.objects.create(source="cli")
        ingest([bytes_input("cases.json", CONFORMANCE_SUITE)], up)
        out = store_run(b"", "o.jsonl", RunMeta("python/langgraph", 137), up)
        run = ConformanceRun.objects.get()
        assert out["aborted"] and out["killed"] and run.aborted and run.killed
        assert "killed from outside" in client.get(f"/conformance/runs/{run.pk}/").content.decode()
        assert "killed from outside" in client.get("/conformance/").content.decode()

    def test_crlf_line_ends_throughout_are_tolerated(self):
        out = read_output(
            CONFORMANCE_TWO_FAIL.replace(b"\n", b"\r\n"),
            "o",
            exit_status=1,
            suite=conformance_suite(),
        )
        assert [r.line for r in out.results][:2] == [1, 2] and out.failed == 2

    def test_it_refuses_a_crlf_line_end_among_newlines(self):
        lines = _lines()
        lines[3] += "\r"
        err = _refusal(_joined(lines))
        assert err.line == 4 and "CRLF" in err.message

    def test_it_refuses_a_blank_line(self):
        lines = _lines()
        lines.insert(2, "")
        err = _refusal(_joined(lines))
        assert err.line == 3 and "blank line" in err.message

    @pytest.mark.parametrize("pad", [(" ", ""), ("", " "), ("\t", "")])
    def test_it_refuses_spaces_around_a_line(self, pad):
        lines = _lines()
        original = lines[1]
        lines[1] = pad[0] + original + pad[1]
        err = _refusal(_joined(lines))
        assert err.line == 2 and "white space around the line" in err.message
        assert err.message.endswith("the runner would have printed " + original)

    def test_it_refuses_output_without_a_final_newline(self):
        err = _refusal(CONFORMANCE_TWO_FAIL[:-1])
        assert err.line == 11 and "no newline after it" in err.message

    def test_it_refuses_keys_out_of_the_order_the_runner_writes(self):
        lines = _lines()
        doc = json.loads(lines[1])
        lines[1] = json.dumps(dict(reversed(doc.items())), separators=(",", ":"))
        err = _refusal(_joined(lines))
        assert err.line == 2 and "out of the order the runner writes" in err.message
        assert err.message.endswith(_lines()[1])

    def test_it_refuses_summary_keys_out_of_order(self):
        lines = _lines()
        lines[-1] = '{"cases":10,"suite":"taisce-conformance/v1","failed":2}'
        err = _refusal(_joined(lines))
        assert err.line == 11 and "out of the order" in err.message
        assert err.message.endswith('{"suite":"taisce-conformance/v1","cases":10,"failed":2}')

    @pytest.mark.parametrize(("spelling", "word"), [("[]", "[]"), ("null", "null")])
    def test_it_refuses_failures_the_runner_would_leave_out(self, spelling, word):
        lines = _lines()
        lines[1] = lines[1][:-1] + f',"failures":{spelling}}}'
        err = _refusal(_joined(lines))
        assert err.line == 2 and f"failures is {word}" in err.message
        assert err.message.endswith(_lines()[1])

    @pytest.mark.parametrize(
        ("raw", "escaped"), [("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")]
    )
    def test_it_refuses_html_characters_go_escapes(self, raw, escaped):
        text = f"the adapter reported a store error where none was expected: a {raw} b"
        assert go_json_string(text) == '"' + text.replace(raw, escaped) + '"'
        lines = _lines()
        lines[0] = lines[0].replace("memory message 0 is not marked untrusted", text)
        err = _refusal(_joined(lines))
        assert err.line == 1 and "otherwise than Go's encoder" in err.message
        assert escaped in err.message
        lines[0] = lines[0].replace(f" {raw} ", f" {escaped} ")
        assert (
            read_output(_joined(lines), "o", exit_status=1, suite=conformance_suite()).failed == 2
        )

    @pytest.mark.parametrize(
        ("written", "refusal"),
        [
            pytest.param('"p\\u0061ssed":true', "never escaped", id="plain-ascii-as-an-escape"),
            pytest.param('"passed": true', "white space between the values", id="white-space"),
            pytest.param('"passed":false,"passed":true', "'passed' appears twice", id="key-twice"),
        ],
    )
    def test_it_refuses_what_gos_encoder_never_prints(self, written, refusal):
        lines = _lines()
        lines[1] = lines[1].replace('"passed":true', written)
        err = _refusal(_joined(lines))
        assert err.line == 2 and refusal in err.message

    def test_it_refuses_a_failure_text_outside_the_judges_templates(self):
        lines = _lines()
        lines[0] = lines[0].replace("memory message 0 is not marked untrusted", "it broke")
        err = _refusal(_joined(lines))
        assert (err.line, err.field) == (1, "failures[0]") and "none of the judge's" in err.message

    @pytest.mark.parametrize(
        "text",
        [
            "the turn was fatal=maybe; expected false",
            "memory message x is not marked untrusted",
            "observed group ordinals [0 a]; expected [0 1]: messages that are not one atomic "
            "unit must not be observed as one",
        ],
    )
    def test_a_template_filled_with_what_its_go_type_cannot_print_is_refused(self, text):
        lines = _lines()
        lines[0] = lines[0].replace(
            "memory message 0 is not marked untrusted", text.replace('"', '\\"')
        )
        assert _refusal(_joined(lines)).field == "failures[0]"

    def test_every_template_filled_as_the_judge_fills_it_is_accepted(self):
        texts = [
            "a memory message did not parse: not a memory message\nunexpected end of JSON input",
            'memory message 0 has role "system"; it must be "user", never system, never assistant',
            "the turn was fatal=true; expected false",
            "observed group ordinals [0 0]; expected [0 1]: messages that are not one atomic "
            "unit must not be observed as one",
            "observed roles [user tool assistant]; expected [user assistant]: internal tool "
            "traffic must not become memory by default",
            'observed 3 message(s) ["a" "b \\"c\\""]; expected exactly ["a"]: a synthetic or '
            "injected message is never observed as though a person said it",
            "the deployment holds -1 more observation(s) after the turn; expected 1",
        ]
        lines = _lines()
        failures = ",".join(go_json_string(t) for t in texts)
        lines[0] = lines[0].replace('["memory message 0 is not marked untrusted"]', f"[{failures}]")
        out = read_output(_joined(lines), "o", exit_status=1, suite=conformance_suite())
        assert out.results[0].failures == texts

    def test_it_refuses_an_empty_failure(self):
        lines = _lines()
        lines[0] = lines[0].replace("memory message 0 is not marked untrusted", "")
        err = _refusal(_joined(lines))
        assert (err.line, err.field) == (1, "failures[0]") and "empty failure" in err.message

    def test_a_refused_output_stores_nothing(self):
        from records.conformance.store import RunMeta, store_run

        up = Upload.objects.create(source="cli")
        ingest([bytes_input("cases.json", CONFORMANCE_SUITE)], up)
        with pytest.raises(ConformanceError):
            store_run(
                CONFORMANCE_TWO_FAIL.replace(b'"passed":true', b'"passed": true'),
                "o",
                RunMeta("a", 1),
                up,
            )
        assert not ConformanceRun.objects.exists()


pytestmark = pytest.mark.django_db


class TestFailuresAsTheJudgeWritesThem:
    ROLE = 'memory message 0 has role "system"; it must be "user", never system, never assistant'
    UNTRUSTED = "memory message 0 is not marked untrusted"
    TURNS = "memory message 0 carries no turns although the context holds some"

    def _with(self, failures: list[str]) -> bytes:
        lines = _lines()
        listed = ",".join(go_json_string(t) for t in failures)
        lines[0] = lines[0].replace(f'["{self.UNTRUSTED}"]', f"[{listed}]")
        return _joined(lines)

    def test_failures_in_the_judges_order_are_accepted(self):
        out = read_output(
            self._with([self.ROLE, self.UNTRUSTED]), "o", exit_status=1, suite=conformance_suite()
        )
        assert out.results[0].failures == [self.ROLE, self.UNTRUSTED]

    def test_a_line_whose_failures_the_judge_cannot_have_written_in_that_order_is_refused(self):
        # runner.go's judge checks a memory message's role before whether it is untrusted.
        err = _refusal(self._with([self.UNTRUSTED, self.ROLE]))
        assert (err.line, err.field) == (1, "failures[1]")
        assert "the runner cannot print them in this order" in err.message

    @pytest.mark.parametrize(
        "failures",
        [
            # A memory message's carries come in the suite's memory_carries order (watermark,
            # plan, facts for this case), each once.
            [
                "memory message 0 carries no plan",
                "memory message 0 carries no watermark",
            ],
            ["memory message 0 carries no plan", "memory message 0 carries no plan"],
            # The memory messages in turn, each message's checks together.
            ["memory message 1 is not marked untrusted", UNTRUSTED],
            # One count, written once, before every message's checks.
            [
                UNTRUSTED,
                "expected 1 memory message(s) handed to the model, got 2",
            ],
            [
                "the deployment holds 2 more observation(s) after the turn; expected 1",
                "the turn was fatal=true; expected false",
            ],
        ],
    )
    def test_other_orders_the_judge_never_writes_are_refused(self, failures):
        assert _refusal(self._with(failures)).field == "failures[1]"

    @pytest.mark.parametrize(
        "failures, k",
        [
            # This case's memory_carries are watermark, plan and facts: never turns.
            ([TURNS], 0),
            ([ROLE, TURNS], 1),
        ],
    )
    def test_a_failure_the_judge_cannot_write_for_the_case_is_refused_naming_it(self, failures, k):
        err = _refusal(self._with(failures))
        assert err.field == f"failures[{k}]"
        assert err.message == (
            f"{self.TURNS!r}: the judge (runner.go judge) cannot write this failure for this case: "
            "its expect.memory_carries (watermark, plan, facts) has no turns"
        )
        assert "follows" not in err.message

    def test_a_carry_failure_for_a_case_without_memory_carries_is_refused_naming_it(self):
        # The suite's second case expects no carries at all.
        lines = _lines()
        lines[1] = (
            lines[1]
            .replace('"passed":true', '"passed":false')
            .replace("}", ',"failures":["memory message 0 carries no plan"]}')
        )
        err = _refusal(_joined(lines))
        assert (err.line, err.field) == (2, "failures[0]")
        assert err.message == (
            "'memory message 0 carries no plan': the judge (runner.go judge) cannot write this "
            "failure for this case: its expect has no memory_carries"
        )

    @pytest.mark.parametrize(
        "text",
        [
            "expected 1 memory message(s) handed to the model, got 00",
            "expected 1 memory message(s) handed to the model, got -0",
            "expected 1 memory message(s) handed to the model, got -1",
            "memory message 01 is not marked untrusted",
            'the model was not handed "caf\\u00e9" as a message of its own: a compaction keeps '
            "what the deployment did not replace",
            'the model was not handed "a\\qb" as a message of its own: a compaction keeps what '
            "the deployment did not replace",
        ],
    )
    def test_a_number_or_string_gos_verbs_never_print_is_refused(self, text):
        # %d never writes a leading zero or -0, a length is never negative, and %q keeps a
        # printable rune as it is and writes only Go's escapes.
        assert _refusal(self._with([text])).field == "failures[0]"

    def test_gos_own_spellings_of_those_verbs_are_accepted(self):
        texts = [
            "expected -1 memory message(s) handed to the model, got 0",
            'the model was not handed "café \\"x\\"\\n" as a message of its own: a compaction '
            "keeps what the deployment did not replace",
        ]
        out = read_output(self._with(texts), "o", exit_status=1, suite=conformance_suite())
        assert out.results[0].failures == texts
