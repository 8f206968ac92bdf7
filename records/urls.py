from __future__ import annotations

from django.urls import include, path, register_converter

from records.conformance import views as conformance
from records.formats.numbers import parse_whole
from records.replays import views as replays
from records.views import (
    annotations,
    attempts,
    cases,
    compare,
    failures,
    gate,
    history,
    publish,
    runs,
    scores,
    search,
    uploads,
)


class WholeId:
    """A number in an address (a row's id, a turn, a call): read by the one parser, so one
    past what the database holds is a 404, not a query the database cannot take."""

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        return parse_whole(value)  # NotWhole is a ValueError: the address does not match

    def to_url(self, value: int | str) -> str:
        return str(int(value))


register_converter(WholeId, "id")


class ExportFormat:
    regex = "csv|json"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(ExportFormat, "fmt")


class RawField(ExportFormat):
    regex = "arguments|result"


register_converter(RawField, "raw_field")


class RunIdPart(ExportFormat):
    """A run_id in an address: any characters, a slash or a line break too (a run_id is any
    string the shard carries; reversed, they are percent-escaped)."""

    regex = r"[\s\S]+"


register_converter(RunIdPart, "run_id")


def _tab_converter(tab: str) -> str:
    """A converter that matches one tab's name: each tab has its own view, and every tab past
    the first is reversed as `records:run-tab` with its name, as one pattern would be."""
    register_converter(type(f"{tab.title()}Tab", (ExportFormat,), {"regex": tab}), f"{tab}_tab")
    return f"<{tab}_tab:tab>/"


# One run's pages, below /runs/<pk>/: its tabs, exports, scoring and deletion.
run_urls = [
    path("", runs.run_overview, name="run"),
    path(_tab_converter("scores"), runs.run_scores, name="run-tab"),
    path(_tab_converter("cost"), runs.run_cost, name="run-tab"),
    path(_tab_converter("attempts"), runs.run_attempts, name="run-tab"),
    path(_tab_converter("sessions"), runs.run_sessions, name="run-tab"),
    path("attempts.<fmt:fmt>", runs.run_attempts_export, name="run-attempts-export"),
    path("scores.<fmt:fmt>", scores.run_scores_export, name="run-scores-export"),
    path("score/", scores.run_score, name="run-score"),
    path("matrix/", scores.run_matrix, name="run-matrix"),
    path("flips/", scores.run_flips, name="run-flips"),
    path("delete/", runs.run_delete, name="run-delete"),
    path("scores.md", scores.run_scores_export, {"fmt": "md"}, name="run-scores-md"),
]

app_name = "records"
urlpatterns = [
    path("", runs.runs, name="runs"),
    path("runs.<fmt:fmt>", runs.runs_export, name="runs-export"),
    path("runs/<id:pk>/", include(run_urls)),
    path("audit/", uploads.audit, name="audit"),
    path("compare/", compare.compare, name="compare"),
    path("compare.md", compare.compare_export, {"fmt": "md"}, name="compare-md"),
    path("compare.<fmt:fmt>", compare.compare_export, name="compare-export"),
    path("compare/case/", compare.compare_case, name="compare-case"),
    path("compare/cases/", compare.compare_cases, name="compare-cases"),
    path("history/", history.row_history, name="history"),
    path("keys/", scores.keys, name="keys"),
    path("keys/<id:pk>/", scores.key_detail, name="key"),
    path("attempts/<id:pk>/", attempts.attempt_detail, name="attempt"),
    path("attempts/<id:pk>.<fmt:fmt>", attempts.attempt_export, name="attempt-export"),
    path(
        "attempts/<id:pk>/calls/<id:call>/<raw_field:field>.json",
        attempts.attempt_raw_call,
        name="attempt-raw-call",
    ),
    path(
        "attempts/<id:pk>/calls/<id:call>/<str:part>/",
        attempts.attempt_call_body,
        name="attempt-call-body",
    ),
    path(
        "attempts/<id:pk>/turns/<id:turn>/items/",
        attempts.attempt_turn_items,
        name="attempt-turn-items",
    ),
    path(
        "attempts/<id:pk>/turns/<id:turn>/blocks/<id:block>/",
        attempts.attempt_block_body,
        name="attempt-block-body",
    ),
    path(
        "attempts/<id:pk>/turns/<id:turn>/blocks/<id:block>.json",
        attempts.attempt_raw_block,
        name="attempt-raw-block",
    ),
    path("replays/", replays.replays, name="replays"),
    path("replays/corpus/<id:pk>/", replays.replay_corpus, name="obs-corpus"),
    path("replays/<id:pk>/", replays.replay_detail, name="replay"),
    path("replays/<id:pk>/report.json", replays.replay_report, name="replay-report"),
    path("conformance/", conformance.conformance, name="conformance"),
    path("conformance.<fmt:fmt>", conformance.conformance_export, name="conformance-export"),
    path("conformance/failures/", conformance.conformance_failures, name="conformance-failures"),
    path("conformance/adapter/", conformance.conformance_adapter, name="conformance-adapter"),
    path("conformance/runs/<id:pk>/", conformance.conformance_run, name="conformance-run"),
    path("conformance/suites/<id:pk>/", conformance.conformance_suite, name="conformance-suite"),
    path("upload/conformance/", conformance.upload_conformance, name="upload-conformance"),
    path("api/v1/conformance", conformance.api_conformance, name="api-conformance"),
    path("upload/", uploads.upload, name="upload"),
    path("uploads/<id:pk>/", uploads.upload_detail, name="upload-detail"),
    path("uploads/<id:pk>/progress/", uploads.upload_progress, name="upload-progress"),
    path("queue/", uploads.queue, name="queue"),
    path("api/v1/uploads", uploads.api_upload, name="api-upload"),
    path("api/v1/uploads/<id:pk>", uploads.api_upload_status, name="api-upload-status"),
    path("api/v1/runs/<run_id:run_id>/gate", gate.api_gate, name="api-gate"),
    path("cases/", cases.cases, name="cases"),
    path("cases.json", cases.cases_json, name="cases-json"),
    path("cases.csv", cases.cases_csv, name="cases-csv"),
    path("cases/case/", cases.case_page, name="case"),
    path("publish/blocks.md", publish.publish_blocks, name="publish-blocks"),
    path("publish/model-results.json", publish.publish_record, name="publish-record"),
    path("publish/records/", publish.published_records, name="published-records"),
    path("publish/records/<id:pk>/", publish.published_record, name="published-record"),
    path("failures/", failures.failures, name="failures"),
    path("failures.json", failures.failures_json, name="failures-json"),
    path("failures.csv", failures.failures_csv, name="failures-csv"),
    path("failures/<str:mode_id>/", failures.failure_mode, name="failure-mode"),
    path("search/", search.search, name="search"),
    path("search.json", search.search_json, name="search-json"),
    path("search.csv", search.search_csv, name="search-csv"),
    path("annotations/", annotations.annotate, name="annotate"),
    path("annotations/<id:pk>/", annotations.annotation_edit, name="annotation-edit"),
    path("annotations/<id:pk>/resolve/", annotations.annotation_resolve, name="annotation-resolve"),
    path("review/", annotations.review, name="review"),
    path("api/v1/annotations", annotations.api_annotations, name="api-annotations"),
]
