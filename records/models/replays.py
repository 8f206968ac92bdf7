"""Sealed corpora and their replays (the "sealed replay" record family)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from records.models.fields import HasPage, KeptFile
from records.models.intake import Upload


class ObsCorpus(HasPage, models.Model):
    """A sealed OCA-V0 corpus. A changed corpus is a new seal; nothing is ever overwritten."""

    page = "records:obs-corpus"

    seal_id = models.CharField(max_length=64, unique=True)
    corpus = models.JSONField()
    subject_count = models.IntegerField()
    labelled_count = models.IntegerField()
    evaluator_revision = models.CharField(max_length=64)
    upload = models.ForeignKey(Upload, on_delete=models.PROTECT, related_name="obs_corpora")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.seal_id


class ObsReplay(HasPage, KeptFile):
    """One replay of a sealed corpus: the report (as upstream encodes it) and what it rests on."""

    page = "records:replay"

    corpus = models.ForeignKey(ObsCorpus, on_delete=models.CASCADE, related_name="replays")
    upload = models.ForeignKey(Upload, on_delete=models.PROTECT, related_name="obs_replays")
    overall = models.CharField(max_length=20)
    passed = models.IntegerField()
    failed = models.IntegerField()
    not_run = models.IntegerField()
    not_observed = models.IntegerField()
    denominator = models.IntegerField()
    report = models.TextField()  # the exact bytes of the oca-replay/1 encoding
    # Per subject: the screened outcome (only when it passed the screen) and captured telemetry.
    results = models.JSONField(default=dict)

    def __str__(self) -> str:
        return f"{self.corpus.seal_id[:12]} {self.overall}"
