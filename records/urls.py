from __future__ import annotations

from django.urls import path, register_converter

from records import views


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

app_name = "records"
urlpatterns = [
    path("", views.runs, name="runs"),
    path("runs.<fmt:fmt>", views.runs_export, name="runs-export"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/attempts.<fmt:fmt>", views.run_attempts_export, name="run-attempts-export"),
    path("runs/<int:pk>/score/", views.run_score, name="run-score"),
    path("runs/<int:pk>/delete/", views.run_delete, name="run-delete"),
    path("audit/", views.audit, name="audit"),
    path("runs/<int:pk>/scores.<fmt:fmt>", views.run_scores_export, name="run-scores-export"),
    path("runs/<int:pk>/scores.md", views.run_scores_export, {"fmt": "md"}, name="run-scores-md"),
    path("runs/<int:pk>/matrix/", views.run_matrix, name="run-matrix"),
    path("runs/<int:pk>/flips/", views.run_flips, name="run-flips"),
    path("compare/", views.compare, name="compare"),
    path("compare.<fmt:fmt>", views.compare_export, name="compare-export"),
    path("compare.md", views.compare_export, {"fmt": "md"}, name="compare-md"),
    path("keys/", views.keys, name="keys"),
    path("keys/<int:pk>/", views.key_detail, name="key"),
    path("attempts/<int:pk>/", views.attempt_detail, name="attempt"),
    path("attempts/<int:pk>.<fmt:fmt>", views.attempt_export, name="attempt-export"),
    path(
        "attempts/<int:pk>/calls/<int:call>/<raw_field:field>.json",
        views.attempt_raw_call,
        name="attempt-raw-call",
    ),
    path(
        "attempts/<int:pk>/turns/<int:turn>/blocks/<int:block>.json",
        views.attempt_raw_block,
        name="attempt-raw-block",
    ),
    path("replays/", views.replays, name="replays"),
    path("replays/corpus/<int:pk>/", views.obs_corpus, name="obs-corpus"),
    path("replays/<int:pk>/", views.replay_detail, name="replay"),
    path("replays/<int:pk>/report.json", views.replay_report, name="replay-report"),
    path("conformance/", views.conformance, name="conformance"),
    path("conformance.<fmt:fmt>", views.conformance_export, name="conformance-export"),
    path("conformance/failures/", views.conformance_failures, name="conformance-failures"),
    path("conformance/adapter/", views.conformance_adapter, name="conformance-adapter"),
    path("conformance/runs/<int:pk>/", views.conformance_run, name="conformance-run"),
    path("conformance/suites/<int:pk>/", views.conformance_suite, name="conformance-suite"),
    path("upload/conformance/", views.upload_conformance, name="upload-conformance"),
    path("api/v1/conformance", views.api_conformance, name="api-conformance"),
    path("upload/", views.upload, name="upload"),
    path("uploads/<int:pk>/", views.upload_detail, name="upload-detail"),
    path("api/v1/uploads", views.api_upload, name="api-upload"),
]
