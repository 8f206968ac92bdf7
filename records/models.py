"""Models that mirror the shard record types, plus the bookkeeping ingestion needs.

A shard is stored whole or not at all (see `records.ingest`). Raw JSON fields (arguments, results,
facts, options) are stored as JSON, not re-modelled. Per-attempt and per model-and-surface totals
are computed once at ingest, in the database, so that pages never add up a whole run in Python.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

ENDINGS = [
    "completed",
    "over_budget",
    "malformed",
    "no_tool_call",
    "provider_error",
    "harness_error",
    "skipped",
]


class Upload(models.Model):
    """One arrival: a CLI invocation, a browser upload or an API request."""

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

    def __str__(self) -> str:
        return f"upload {self.pk} ({self.source}, {self.created_at:%Y-%m-%d %H:%M})"


class ShardFile(models.Model):
    """A shard file as it arrived. Its sha256 makes ingestion idempotent."""

    upload = models.ForeignKey(Upload, on_delete=models.PROTECT, related_name="shards")
    name = models.CharField(max_length=500)
    sha256 = models.CharField(max_length=64, unique=True)
    size = models.BigIntegerField()
    lines = models.IntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    warnings = models.JSONField(default=list, blank=True)
    warning_count = models.IntegerField(default=0)

    def __str__(self) -> str:
        return self.name


class Run(models.Model):
    """The run line of one shard (one shard, one run line, one process)."""

    shard = models.OneToOneField(ShardFile, on_delete=models.CASCADE, related_name="run")
    run_id = models.CharField(max_length=300, db_index=True)
    package = models.CharField(max_length=300, blank=True)
    commit = models.CharField(max_length=100, blank=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True, db_index=True)
    edition = models.CharField(max_length=50, blank=True)
    gitlab_version = models.CharField(max_length=50, blank=True)
    tier = models.CharField(max_length=20, blank=True)
    tier_confirmed = models.BooleanField(default=False)
    filter = models.CharField(max_length=500, blank=True)
    corpus_digest = models.CharField(max_length=64, blank=True, db_index=True)
    contract_digest = models.CharField(max_length=64, blank=True)
    budget_usd = models.FloatField(null=True, blank=True)
    repeat = models.IntegerField()
    line = models.IntegerField()
    # Totals over every attempt and every try, written once at ingest.
    attempt_count = models.IntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_created_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    models_seen = models.JSONField(default=list)
    surfaces_seen = models.JSONField(default=list)
    modes_seen = models.JSONField(default=list)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return self.run_id

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_created_tokens
            + self.cache_read_tokens
        )


class Provider(models.Model):
    """A configured model of a run, with the price of the run's own day (absent = unpriced)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="providers")
    position = models.IntegerField()
    spec = models.CharField(max_length=300)
    name = models.CharField(max_length=50, blank=True)
    model = models.CharField(max_length=200, blank=True)
    options = models.JSONField(default=dict, blank=True)
    priced = models.BooleanField(default=False)
    input_per_million_usd = models.FloatField(null=True, blank=True)
    output_per_million_usd = models.FloatField(null=True, blank=True)
    cache_write_per_million_usd = models.FloatField(null=True, blank=True)
    cache_read_per_million_usd = models.FloatField(null=True, blank=True)
    retrieved_on = models.CharField(max_length=20, blank=True)

    class Meta:
        ordering = ["run", "position"]
        indexes = [models.Index(fields=["run", "spec"])]

    def __str__(self) -> str:
        return self.spec

    @property
    def price(self) -> tuple[float, float, float, float] | None:
        if not self.priced:
            return None
        return (
            self.input_per_million_usd or 0.0,
            self.output_per_million_usd or 0.0,
            self.cache_write_per_million_usd or 0.0,
            self.cache_read_per_million_usd or 0.0,
        )


class Session(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="sessions")
    label = models.CharField(max_length=300)
    surface = models.CharField(max_length=20, blank=True)
    mode = models.CharField(max_length=20, blank=True)
    capabilities = models.CharField(max_length=20, blank=True)
    meta_param_schema = models.CharField(max_length=20, blank=True)
    tier_pin = models.CharField(max_length=20, blank=True)
    slice_size = models.IntegerField(null=True, blank=True)
    token_scopes = models.JSONField(default=list, blank=True)
    served_tools = models.IntegerField(default=0)
    tool_schema_digests = models.JSONField(default=dict, blank=True)
    line = models.IntegerField()

    class Meta:
        ordering = ["run", "label"]
        constraints = [
            models.UniqueConstraint(fields=["run", "label"], name="session_label_unique_in_run")
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def effective_mode(self) -> str:
        return self.mode or "default"


class Attempt(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts")
    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.CASCADE, related_name="attempts"
    )
    key = models.CharField(max_length=500)
    line = models.IntegerField()
    case = models.CharField(max_length=100)
    model = models.CharField(max_length=300)
    surface = models.CharField(max_length=20, blank=True)
    # The attempt's own surface, else its session's (modelrecord C.1); set at ingest.
    effective_surface = models.CharField(max_length=20, blank=True)
    effective_mode = models.CharField(max_length=20, blank=True)
    session_label = models.CharField(max_length=300, blank=True)
    repeat = models.IntegerField()
    shown_tools = models.IntegerField(null=True, blank=True)
    overflowed = models.BooleanField(null=True, blank=True)
    tool_digest = models.CharField(max_length=200, blank=True)
    facts = models.JSONField(null=True, blank=True)
    stimulus = models.TextField(blank=True)
    ended_by = models.CharField(max_length=20)
    reason = models.TextField(blank=True)
    # Totals over the attempt's turn and call lines, written once at ingest.
    turn_count = models.IntegerField(default=0)
    try_count = models.IntegerField(default=0)
    call_count = models.IntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_created_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    latency_ms = models.FloatField(default=0)

    class Meta:
        ordering = ["run", "line"]
        constraints = [
            models.UniqueConstraint(fields=["run", "key"], name="attempt_key_unique_in_run")
        ]
        indexes = [
            models.Index(fields=["run", "model", "effective_surface"]),
            models.Index(fields=["run", "case"]),
            models.Index(fields=["run", "ended_by"]),
            models.Index(fields=["run", "line"]),
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def completed_with_reason(self) -> bool:
        return self.ended_by == "completed" and bool(self.reason.strip())


class Turn(models.Model):
    """One provider request: every try is its own line (and is charged)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    # Set in the same transaction that stores the shard, once every attempt line is known.
    attempt = models.ForeignKey(Attempt, null=True, on_delete=models.CASCADE, related_name="turns")
    attempt_key = models.CharField(max_length=500)
    line = models.IntegerField()
    index = models.IntegerField()
    try_number = models.IntegerField()
    request_digest = models.CharField(max_length=200, blank=True)
    blocks = models.JSONField(default=list, blank=True)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_created_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    status = models.CharField(max_length=20)
    detail = models.TextField(blank=True)
    latency_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["attempt", "index", "line"]
        indexes = [
            models.Index(fields=["attempt", "index", "line"]),
            models.Index(fields=["run", "attempt_key"]),
        ]

    def __str__(self) -> str:
        return f"{self.attempt_key} turn {self.index} try {self.try_number}"


class Call(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    attempt = models.ForeignKey(Attempt, null=True, on_delete=models.CASCADE, related_name="calls")
    attempt_key = models.CharField(max_length=500)
    line = models.IntegerField()
    turn = models.IntegerField()
    index = models.IntegerField()
    tool = models.CharField(max_length=300)
    arguments = models.JSONField(null=True, blank=True)
    requested_action = models.CharField(max_length=300, blank=True)
    dispatched_action = models.CharField(max_length=300, blank=True)
    dispatched_tool = models.CharField(max_length=300, blank=True)
    refusal_reason = models.TextField(blank=True)
    outcome = models.CharField(max_length=300)
    result = models.JSONField(null=True, blank=True)
    result_truncated = models.BooleanField(default=False)
    text = models.TextField(blank=True)
    text_truncated = models.BooleanField(default=False)
    duration_ms = models.FloatField(null=True, blank=True)
    trace_id = models.CharField(max_length=200, blank=True)
    requests = models.IntegerField(null=True, blank=True)
    dispatch_observed = models.BooleanField(default=False)

    class Meta:
        ordering = ["attempt", "index", "line"]
        indexes = [
            models.Index(fields=["attempt", "index", "line"]),
            models.Index(fields=["run", "attempt_key"]),
        ]

    def __str__(self) -> str:
        return f"{self.attempt_key} call {self.index}"

    @property
    def rewritten(self) -> bool:
        return bool(
            self.requested_action
            and self.dispatched_action
            and self.requested_action != self.dispatched_action
        )


class Verify(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    attempt = models.ForeignKey(
        Attempt, null=True, on_delete=models.CASCADE, related_name="verifies"
    )
    attempt_key = models.CharField(max_length=500)
    line = models.IntegerField()
    name = models.CharField(max_length=500)
    passed = models.BooleanField()
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["attempt", "line"]
        indexes = [models.Index(fields=["run", "attempt_key"])]

    def __str__(self) -> str:
        return f"{self.attempt_key}: {self.name}"


class SurfaceSummary(models.Model):
    """Totals per (run, model, surface, mode), computed in the database at ingest."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="summaries")
    model = models.CharField(max_length=300)
    surface = models.CharField(max_length=20, blank=True)
    mode = models.CharField(max_length=20, blank=True)
    attempts = models.IntegerField(default=0)
    completed = models.IntegerField(default=0)
    over_budget = models.IntegerField(default=0)
    malformed = models.IntegerField(default=0)
    no_tool_call = models.IntegerField(default=0)
    provider_error = models.IntegerField(default=0)
    harness_error = models.IntegerField(default=0)
    skipped = models.IntegerField(default=0)
    turns = models.IntegerField(default=0)
    tries = models.IntegerField(default=0)
    calls = models.IntegerField(default=0)
    latency_ms = models.FloatField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_created_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["run", "model", "surface", "mode"]
        indexes = [models.Index(fields=["model"]), models.Index(fields=["surface"])]

    def __str__(self) -> str:
        return f"{self.model} {self.surface} {self.mode}"


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
