"""Adapter conformance suites, runs and their per-case results."""

from __future__ import annotations

from django.db import models

from records.formats.rows import CaseResult, killed_from_outside
from records.models.fields import HasPage, KeptFile, row_columns
from records.models.intake import Upload


class ConformanceSuite(HasPage, KeptFile):
    """A conformance suite file (`cases.json`), as the loader accepted it."""

    page = "records:conformance-suite"

    suite = models.TextField()
    document = models.JSONField()
    case_count = models.IntegerField()
    upload = models.ForeignKey(Upload, on_delete=models.PROTECT, related_name="suites")

    def __str__(self) -> str:
        return f"{self.suite} ({self.sha256[:12]})"

    @property
    def cases(self) -> list[dict]:
        return self.document.get("cases", [])


class ConformanceRun(HasPage, KeptFile):
    """One `taisce conformance` run, with what its output does not carry."""

    page = "records:conformance-run"

    suite = models.ForeignKey(
        ConformanceSuite, null=True, on_delete=models.PROTECT, related_name="runs"
    )
    adapter = models.TextField(db_index=True)
    adapter_version = models.TextField(blank=True)
    commit = models.TextField(blank=True)
    ran_at = models.DateTimeField(db_index=True)
    exit_status = models.IntegerField()
    aborted = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    case_count = models.IntegerField(default=0)
    failed_count = models.IntegerField(default=0)
    upload = models.ForeignKey(Upload, on_delete=models.PROTECT, related_name="conformance_runs")

    class Meta:
        ordering = ["-ran_at", "-id"]

    def __str__(self) -> str:
        return f"{self.adapter} {self.adapter_version} {self.ran_at:%Y-%m-%d}"

    @property
    def killed(self) -> bool:
        """Aborted by a signal from outside (a CI timeout, the OOM killer), not by the runner."""
        return self.aborted and killed_from_outside(self.exit_status)


class ConformanceResult(
    row_columns("ResultColumns", CaseResult, required=("case", "rule", "passed", "failures"))
):
    """One case line of a run's output, at its position in the output.

    Columns: the fields of `CaseResult` (`records/formats/rows.py`), the run and its position;
    `records_conformanceresult` in `docs/schema.md` lists them all."""

    run = models.ForeignKey(ConformanceRun, on_delete=models.CASCADE, related_name="results")
    position = models.IntegerField()

    class Meta:
        ordering = ["run", "position"]

    def __str__(self) -> str:
        return f"{self.case}: {'passed' if self.passed else 'failed'}"
