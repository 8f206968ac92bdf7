"""Committed model results records (`docs/development/testing/model-results.json`) as uploaded:
the rows upstream published, each with its provenance and per-case figures."""

from __future__ import annotations

from django.db import models

from records.formats.model_results import Row, fnv1a64
from records.models.fields import HasPage, KeptFile
from records.models.intake import Upload


class PublishedRecord(HasPage, KeptFile):
    """One uploaded record, as `gen_model_results` wrote it."""

    page = "records:published-record"

    note = models.TextField(blank=True)
    row_count = models.IntegerField(default=0)
    upload = models.ForeignKey(Upload, on_delete=models.PROTECT, related_name="published_records")

    def __str__(self) -> str:
        return f"{self.name} ({self.row_count} rows)"


class PublishedRow(models.Model):
    """One published row: its key (also as upstream spells it), provenance, figures and cases."""

    record = models.ForeignKey(PublishedRecord, on_delete=models.CASCADE, related_name="rows")
    position = models.IntegerField()
    row_key = models.TextField(db_index=True)
    model = models.TextField()
    surface = models.TextField()
    corpus_digest = models.TextField(db_index=True)
    date = models.TextField(blank=True)
    key = models.JSONField()
    provenance = models.JSONField()
    counts = models.JSONField()
    columns = models.JSONField()
    tokens = models.JSONField()
    cases = models.JSONField(default=dict)

    class Meta:
        ordering = ["record", "position"]

    def __str__(self) -> str:
        return self.row_key

    def as_row(self, corpus_cases: int = 0) -> Row:
        return Row(
            self.key,
            self.provenance,
            self.counts,
            self.columns,
            self.tokens,
            cases=self.cases,
            coverage=fnv1a64(list(self.cases)) if self.cases else "",
            case_count=len(self.cases),
            corpus_cases=corpus_cases,
        )
