"""What the team decides about the evidence, kept beside it and never as an edit of it: a label
and a note on a case (of a corpus digest), an attempt or a failure mode, each change kept as a
row of its own.

A failure mode is named by its id (the first 16 hex characters of the sha256 of its canonical
signature), not by a reference: modes are worked out from the verdicts, and a label on one
outlives a re-scoring that works them out again."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator, URLValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from records.models.intake import ApiToken
from records.models.runs import Attempt

MODE_ID = RegexValidator(r"^[0-9a-f]{16}\Z", "a failure mode id is 16 lowercase hex characters")
WEB_LINK = URLValidator(schemes=["http", "https"], message="a link is an http or https address")


class Label(models.Model):
    """One word of the triage vocabulary (seeded with known-flaky, corpus-bug, model-error,
    harness-error, expected, needs-review; the admin adds more)."""

    slug = models.SlugField(max_length=40, unique=True)
    title = models.CharField(max_length=80)
    description = models.TextField(blank=True)
    order = models.PositiveSmallIntegerField(default=100)

    class Meta:
        ordering = ["order", "slug"]

    def __str__(self) -> str:
        return self.slug


class Annotation(models.Model):
    """A label and a note on one target: a case of a corpus digest, an attempt, or a failure
    mode. Who wrote it (an account or an upload token) and when; a label can be resolved (it
    then no longer speaks for the target); `client_key` makes a script's writes idempotent."""

    class Target(models.TextChoices):
        CASE = "case", "case"
        ATTEMPT = "attempt", "attempt"
        MODE = "mode", "failure mode"

    target = models.CharField(max_length=8, choices=Target.choices)
    digest = models.CharField(max_length=64, blank=True)
    case = models.CharField(max_length=500, blank=True)
    attempt = models.ForeignKey(
        Attempt, null=True, blank=True, on_delete=models.CASCADE, related_name="annotations"
    )
    mode = models.CharField(max_length=16, blank=True, validators=[MODE_ID])
    label = models.ForeignKey(
        Label, null=True, blank=True, on_delete=models.PROTECT, related_name="annotations"
    )
    note = models.TextField(blank=True)
    link = models.URLField(max_length=2000, blank=True, validators=[WEB_LINK])
    author = models.CharField(max_length=200)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    token = models.ForeignKey(ApiToken, null=True, blank=True, on_delete=models.SET_NULL)
    client_key = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now)
    resolved = models.BooleanField(default=False)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["target", "digest", "case"], name="annotation_case"),
            models.Index(fields=["target", "mode"], name="annotation_mode"),
            models.Index(fields=["label", "resolved"], name="annotation_label"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["client_key"],
                condition=~Q(client_key=""),
                name="annotation_client_key_unique",
            ),
            models.CheckConstraint(
                condition=(Q(target="case") & ~Q(digest="") & ~Q(case=""))
                | (Q(target="attempt") & Q(attempt__isnull=False))
                | (Q(target="mode") & ~Q(mode="")),
                name="annotation_names_its_target",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.label or 'note'} on {self.target} {self.target_name}"

    @property
    def target_name(self) -> str:
        if self.target == self.Target.CASE:
            return f"{self.case} ({self.digest[:12]})"
        if self.target == self.Target.ATTEMPT:
            return str(self.attempt_id)
        return self.mode

    def state(self) -> dict[str, object]:
        """What a change may alter, as the audit row keeps it."""
        return {
            "label": self.label.slug if self.label else None,
            "note": self.note,
            "link": self.link,
            "resolved": self.resolved,
        }


class AnnotationChange(models.Model):
    """One change to an annotation (made, edited, resolved, reopened): who, when, and the
    annotation's state before and after."""

    annotation = models.ForeignKey(Annotation, on_delete=models.CASCADE, related_name="changes")
    action = models.CharField(max_length=16)
    by = models.CharField(max_length=200)
    at = models.DateTimeField(default=timezone.now)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(default=dict)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.action} by {self.by}"
