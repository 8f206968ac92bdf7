"""How results arrive: uploads, the shard files they held, upload tokens, and the audit log."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from records.models.fields import HasPage, KeptFile


class Upload(HasPage, models.Model):
    """One arrival: a CLI invocation, a browser upload or an API request."""

    page = "records:upload-detail"

    class Source(models.TextChoices):
        CLI = "cli", "command line"
        WEB = "web", "browser"
        API = "api", "API"
        DEMO = "demo", "demo data"

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    source = models.CharField(max_length=8, choices=Source.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    token = models.ForeignKey("ApiToken", null=True, blank=True, on_delete=models.SET_NULL)
    summary = models.JSONField(default=dict)

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    # Rows from before uploads were queued were all ingested in their request: done.
    status = models.CharField(
        max_length=8, choices=Status.choices, default=Status.DONE, db_index=True
    )
    # What the worker has done so far: bytes read of the shard in hand, shards and attempts done.
    progress = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    tries = models.IntegerField(default=0)
    allow_digest_mismatch = models.BooleanField(default=False)
    # The files it brought while they wait for a worker, in the uploads storage
    # (STORAGES["uploads"]): each {"name": as sent, "stored": its name there, "size": bytes}.
    # They are deleted from the storage once the upload is done or has failed for good.
    files = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"upload {self.pk} ({self.source}, {self.created_at:%Y-%m-%d %H:%M})"

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)

    # The error of a queued upload whose ingest stopped on a full store (its bytes are kept and
    # it is tried again later): "waiting: database full".
    WAITING = "waiting: "

    @property
    def waiting(self) -> str:
        """What a queued upload waits for ("database full"), or ""."""
        if self.status == self.Status.QUEUED and self.error.startswith(self.WAITING):
            return self.error.removeprefix(self.WAITING)
        return ""


class WorkerBeat(models.Model):
    """A task worker's heartbeat: a running task whose worker has not beaten for a while is
    taken to be orphaned (the worker was killed) and queued again."""

    worker_id = models.CharField(max_length=64, primary_key=True)
    beat_at = models.DateTimeField(db_index=True)
    host = models.CharField(max_length=200, blank=True)
    pid = models.IntegerField(default=0)

    def __str__(self) -> str:
        return f"worker {self.worker_id} ({self.host} {self.pid})"


class ShardFile(KeptFile):
    """A shard file as it arrived. Its sha256 makes ingestion idempotent."""

    upload = models.ForeignKey(Upload, on_delete=models.PROTECT, related_name="shards")
    size = models.BigIntegerField()
    lines = models.IntegerField()
    warnings = models.JSONField(default=list, blank=True)
    warning_count = models.IntegerField(default=0)

    class Meta:
        """Shards have no default order (the other kept files list newest first)."""

    def __str__(self) -> str:
        return self.name


def _hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """An upload-only API token. Only its hash is stored; the token is shown once."""

    PREFIX = "evd_"

    name = models.CharField(max_length=200)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    hint = models.CharField(max_length=12, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    @classmethod
    def issue(cls, name: str, created_by=None) -> tuple[ApiToken, str]:
        raw = cls.PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            name=name, digest=_hash_token(raw), hint=raw[:10], created_by=created_by
        )
        return token, raw

    @classmethod
    def authenticate(cls, raw: str) -> ApiToken | None:
        """The live token for `raw`, or None. Revoked tokens are returned so callers can say so."""
        if not raw:
            return None
        return cls.objects.filter(digest=_hash_token(raw)).first()

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class LoginSlots(models.Model):
    """The password checks an account (or an address) may still have in the current lockout
    window, taken by one conditional update each, so simultaneous logins cannot all pass the
    check before any of their failures is recorded (`records.views.login`)."""

    key = models.CharField(max_length=250, primary_key=True)
    window_start = models.DateTimeField()
    taken = models.IntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.key}: {self.taken} since {self.window_start:%H:%M}"


class AuditEvent(models.Model):
    """Who did what to the stored history, and when (uploads are recorded as Upload rows)."""

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=40)
    detail = models.JSONField(default=dict)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.action}"
