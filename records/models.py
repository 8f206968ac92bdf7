"""Models that mirror the shard record types, plus the bookkeeping ingestion needs.

A shard is stored whole or not at all (see `records.ingest`). Raw JSON fields (arguments, results,
facts, options) are stored as JSON, not re-modelled. Per-attempt and per model-and-surface totals
are computed once at ingest, in the database, so that pages never add up a whole run in Python.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

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


class WholeJSONField(models.JSONField):
    """JSON written once and always read whole (a turn's blocks, a call's arguments and result,
    an attempt's facts, a verdict's explanation). PostgreSQL keeps it as `json`, its text
    checked, rather than `jsonb`, parsed into a binary form that only queries into the value
    use, and none do: bulk loads skip that parse. SQLite stores text either way."""

    def db_type(self, connection: Any) -> str | None:
        if connection.vendor == "postgresql":
            return "json"
        return super().db_type(connection)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is not None and not isinstance(value, str | bytes | bytearray):
            return value  # the driver decoded the json type itself
        return super().from_db_value(value, expression, connection)


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
    name = models.TextField()
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
    run_id = models.TextField(db_index=True)
    package = models.TextField(blank=True)
    commit = models.TextField(blank=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True, db_index=True)
    edition = models.TextField(blank=True)
    gitlab_version = models.TextField(blank=True)
    tier = models.TextField(blank=True)
    tier_confirmed = models.BooleanField(default=False)
    filter = models.TextField(blank=True)
    corpus_digest = models.TextField(blank=True, db_index=True)
    contract_digest = models.TextField(blank=True)
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
    cases_seen = models.JSONField(default=list)
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
    spec = models.TextField()
    name = models.TextField(blank=True)
    model = models.TextField(blank=True)
    options = models.JSONField(default=dict, blank=True)
    priced = models.BooleanField(default=False)
    input_per_million_usd = models.FloatField(null=True, blank=True)
    output_per_million_usd = models.FloatField(null=True, blank=True)
    cache_write_per_million_usd = models.FloatField(null=True, blank=True)
    cache_read_per_million_usd = models.FloatField(null=True, blank=True)
    retrieved_on = models.TextField(blank=True)

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
    label = models.TextField()
    surface = models.TextField(blank=True)
    mode = models.TextField(blank=True)
    capabilities = models.TextField(blank=True)
    meta_param_schema = models.TextField(blank=True)
    tier_pin = models.TextField(blank=True)
    slice_size = models.IntegerField(null=True, blank=True)
    token_scopes = models.JSONField(default=list, blank=True)
    served_tools = models.IntegerField(default=0)
    tool_schema_digests = models.JSONField(default=dict, blank=True)
    line = models.IntegerField()
    # Calls made by the session's attempts, and how many the server observed (E.3 rule 2).
    call_count = models.IntegerField(default=0)
    observed_call_count = models.IntegerField(default=0)

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


def _bulk_reference(to: Any, on_delete: Any, related_name: str, **options: Any) -> Any:
    """A reference that only a bulk writer (the ingest, the scoring) fills, naming rows it has
    just stored or read in the same transaction; deletes go through Django. No database
    constraint checks it row by row, and it has no index unless `db_index=True` says so."""
    options.setdefault("db_index", False)
    return models.ForeignKey(
        to, on_delete=on_delete, related_name=related_name, db_constraint=False, **options
    )


class Attempt(models.Model):
    # Without database constraints, as for turn, call and verify rows below: only the ingest
    # writes attempts, naming the run and the sessions it has just stored in the same
    # transaction, and deletes cascade through Django. A run's attempts and sessions go
    # together with the run, so deleting sessions need not look attempts up by session (no
    # query does): the session column has no index to keep up at every insert.
    run = _bulk_reference(Run, models.CASCADE, "attempts")
    session = _bulk_reference(Session, models.DO_NOTHING, "attempts", null=True, blank=True)
    key = models.TextField()
    line = models.IntegerField()
    case = models.TextField()
    model = models.TextField()
    surface = models.TextField(blank=True)
    # The attempt's own surface, else its session's (modelrecord C.1); set at ingest.
    effective_surface = models.TextField(blank=True)
    effective_mode = models.TextField(blank=True)
    session_label = models.TextField(blank=True)
    repeat = models.IntegerField()
    shown_tools = models.IntegerField(null=True, blank=True)
    overflowed = models.BooleanField(null=True, blank=True)
    tool_digest = models.TextField(blank=True)
    facts = WholeJSONField(null=True, blank=True)
    stimulus = models.TextField(blank=True)
    ended_by = models.TextField()
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
    # What the scorer needs of the turn and verify lines, settled at ingest: whether the last
    # turn (the last try at the highest index) carried a tool_call block (None: no turn
    # lines), and how many checks failed.
    last_turn_has_tool_call = models.BooleanField(null=True)
    failed_checks = models.IntegerField(default=0)

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


# Turn, call and verify rows reference their attempt without a database-level constraint:
# only the ingest writes them, after the shard's joins are checked (every child line names an
# attempt line of its shard), and deletes cascade through Django. The constraint's per-row
# checks were a large share of a bulk load's cost (on PostgreSQL, a deferred check per row at
# commit).


class Turn(models.Model):
    """One provider request: every try is its own line (and is charged)."""

    attempt = _bulk_reference(Attempt, models.CASCADE, "turns")
    line = models.IntegerField()
    index = models.IntegerField()
    try_number = models.IntegerField()
    request_digest = models.TextField(blank=True)
    blocks = WholeJSONField(default=list, blank=True)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_created_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    status = models.TextField()
    detail = models.TextField(blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    # Whether the turn carried a tool_call block: the scorer's "ended in text" test (C.4).
    has_tool_call = models.BooleanField(default=False)

    class Meta:
        ordering = ["attempt", "index", "line"]
        indexes = [models.Index(fields=["attempt", "index", "line"])]

    def __str__(self) -> str:
        return f"turn {self.index} try {self.try_number} of attempt {self.attempt_id}"


class Call(models.Model):
    attempt = _bulk_reference(Attempt, models.CASCADE, "calls")
    line = models.IntegerField()
    turn = models.IntegerField()
    index = models.IntegerField()
    tool = models.TextField()
    arguments = WholeJSONField(null=True, blank=True)
    requested_action = models.TextField(blank=True)
    dispatched_action = models.TextField(blank=True)
    dispatched_tool = models.TextField(blank=True)
    refusal_reason = models.TextField(blank=True)
    outcome = models.TextField()
    result = WholeJSONField(null=True, blank=True)
    result_truncated = models.BooleanField(default=False)
    text = models.TextField(blank=True)
    text_truncated = models.BooleanField(default=False)
    duration_ms = models.FloatField(null=True, blank=True)
    trace_id = models.TextField(blank=True)
    requests = models.IntegerField(null=True, blank=True)
    dispatch_observed = models.BooleanField(default=False)

    class Meta:
        ordering = ["attempt", "index", "line"]
        indexes = [models.Index(fields=["attempt", "index", "line"])]

    def __str__(self) -> str:
        return f"call {self.index} of attempt {self.attempt_id}"

    @property
    def rewritten(self) -> bool:
        return bool(
            self.requested_action
            and self.dispatched_action
            and self.requested_action != self.dispatched_action
        )


class Verify(models.Model):
    attempt = _bulk_reference(Attempt, models.CASCADE, "verifies", db_index=True)
    line = models.IntegerField()
    name = models.TextField()
    passed = models.BooleanField()
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["attempt", "line"]

    def __str__(self) -> str:
        return f"{self.name} (attempt {self.attempt_id})"


class SurfaceSummary(models.Model):
    """Totals per (run, model, surface, mode), computed in the database at ingest."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="summaries")
    model = models.TextField()
    surface = models.TextField(blank=True)
    mode = models.TextField(blank=True)
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


class CorpusKey(models.Model):
    """An uploaded `evaldash-corpus-key/1` file: the answers a run is scored against."""

    digest = models.CharField(max_length=16, db_index=True)
    declared_digest = models.TextField()
    verified = models.BooleanField(default=True)
    sha256 = models.CharField(max_length=64, unique=True)
    name = models.TextField()
    source = models.TextField(blank=True)
    upload = models.ForeignKey(Upload, on_delete=models.PROTECT, related_name="keys")
    created_at = models.DateTimeField(default=timezone.now)
    case_count = models.IntegerField()
    document = models.JSONField()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.digest} ({self.name})"

    def load(self):
        """The key as the scorer reads it."""
        import orjson

        from records.formats.corpus_key import read_corpus_key

        return read_corpus_key(
            orjson.dumps(self.document), self.name, allow_digest_mismatch=not self.verified
        )


class KeyCase(models.Model):
    key = models.ForeignKey(CorpusKey, on_delete=models.CASCADE, related_name="cases")
    position = models.IntegerField()
    case_id = models.TextField()
    prompt = models.TextField()
    recipe = models.TextField(blank=True)
    tier = models.TextField(blank=True)
    needs = models.JSONField(default=dict)
    surfaces_only = models.JSONField(default=list)
    surfaces_reason = models.TextField(blank=True)
    steps = models.JSONField(default=list)

    class Meta:
        ordering = ["key", "position"]
        constraints = [
            models.UniqueConstraint(fields=["key", "case_id"], name="case_unique_in_key")
        ]

    def __str__(self) -> str:
        return self.case_id


class Scoring(models.Model):
    """One scoring of a run against a key by one scorer version. Kept, so scorings compare."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="scorings")
    key = models.ForeignKey(CorpusKey, on_delete=models.CASCADE, related_name="scorings")
    scorer_version = models.CharField(max_length=50)
    created_at = models.DateTimeField(default=timezone.now)
    # The key's digest differs from the run's corpus_digest: upstream's `stale-corpus`.
    stale = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    verdict_count = models.IntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["run", "-created_at"])]

    def __str__(self) -> str:
        return f"run {self.run_id} against {self.key.digest}"


class Verdict(models.Model):
    """One attempt's verdict, with its additive contribution to every C.8 column."""

    # Only the scoring writes verdicts, for the attempts it has just read, in the transaction
    # that creates their scoring: no database constraint checks each row. No index of its own:
    # the three (scoring, ...) indexes below serve every lookup.
    scoring = _bulk_reference(Scoring, models.CASCADE, "verdicts")
    # An attempt's verdicts belong to scorings of its own run and go when they go (a run is
    # deleted whole), so deleting attempts need not look verdicts up by attempt.
    attempt = _bulk_reference(Attempt, models.DO_NOTHING, "verdicts")
    row_key = models.TextField()
    case = models.TextField()
    model = models.TextField()
    surface = models.TextField()
    outcome = models.TextField()
    reason = models.TextField(blank=True)
    clean = models.BooleanField(default=False)
    unaided = models.BooleanField(default=False)
    verified = models.BooleanField(default=True)
    counted = models.BooleanField(default=False)
    discovery = models.IntegerField(default=0)
    invalid_params = models.IntegerField(default=0)
    steps = models.IntegerField(default=0)
    reached_n = models.IntegerField(default=0)
    reached_d = models.IntegerField(default=0)
    aft_n = models.IntegerField(default=0)
    aft_d = models.IntegerField(default=0)
    fidelity_n = models.IntegerField(default=0)
    fidelity_d = models.IntegerField(default=0)
    confirmation_n = models.IntegerField(default=0)
    confirmation_d = models.IntegerField(default=0)
    declined_by_refusal = models.IntegerField(default=0)
    declined_by_text = models.IntegerField(default=0)
    confirmed_unaided = models.IntegerField(default=0)
    confirmed_server_aided = models.IntegerField(default=0)
    confirmed_never = models.IntegerField(default=0)
    # The attempt's session, tries and tokens, copied from it as scored, so that sums over
    # verdicts (score rows, per-case figures of a comparison) read no attempt row.
    session = _bulk_reference(Session, models.DO_NOTHING, "+", null=True)
    tries = models.IntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_created_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    detail = WholeJSONField(default=dict)

    class Meta:
        ordering = ["scoring", "attempt"]
        indexes = [
            models.Index(fields=["scoring", "row_key"]),
            models.Index(fields=["scoring", "case"]),
            models.Index(fields=["scoring", "attempt"]),
        ]

    def __str__(self) -> str:
        return f"{self.attempt_id}: {self.outcome}"


class ScoreRow(models.Model):
    """One C.9 row of a scoring, summed once when the scoring is stored."""

    scoring = models.ForeignKey(Scoring, on_delete=models.CASCADE, related_name="rows")
    row_key = models.TextField()
    model = models.TextField()
    surface = models.TextField()
    session = models.ForeignKey(Session, null=True, on_delete=models.SET_NULL, related_name="+")
    figures = models.JSONField()
    # Case coverage (E.4): how many cases, and the FNV-1a hash of their sorted ids.
    case_count = models.IntegerField(default=0)
    coverage = models.CharField(max_length=16, blank=True)

    class Meta:
        ordering = ["scoring", "row_key"]
        indexes = [models.Index(fields=["row_key"])]

    def __str__(self) -> str:
        return self.row_key


class ScoreCase(models.Model):
    """One case of one row of a scoring: what comparisons join on, written once per scoring."""

    scoring = models.ForeignKey(
        Scoring, on_delete=models.CASCADE, related_name="cases", db_index=False
    )
    row_key = models.TextField()
    case = models.TextField()
    completed = models.IntegerField()
    counted = models.IntegerField()
    total = models.IntegerField()

    class Meta:
        indexes = [models.Index(fields=["scoring", "row_key", "case"])]

    def __str__(self) -> str:
        return f"{self.case}: {self.completed} / {self.counted}"


class ObsCorpus(models.Model):
    """A sealed OCA-V0 corpus. A changed corpus is a new seal; nothing is ever overwritten."""

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


class ObsReplay(models.Model):
    """One replay of a sealed corpus: the report (as upstream encodes it) and what it rests on."""

    corpus = models.ForeignKey(ObsCorpus, on_delete=models.CASCADE, related_name="replays")
    upload = models.ForeignKey(Upload, on_delete=models.PROTECT, related_name="obs_replays")
    name = models.TextField()
    sha256 = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    overall = models.CharField(max_length=20)
    passed = models.IntegerField()
    failed = models.IntegerField()
    not_run = models.IntegerField()
    not_observed = models.IntegerField()
    denominator = models.IntegerField()
    report = models.TextField()  # the exact bytes of the oca-replay/1 encoding
    # Per subject: the screened outcome (only when it passed the screen) and captured telemetry.
    results = models.JSONField(default=dict)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.corpus.seal_id[:12]} {self.overall}"


class ConformanceSuite(models.Model):
    """A conformance suite file (`cases.json`), as the loader accepted it."""

    sha256 = models.CharField(max_length=64, unique=True)
    suite = models.TextField()
    document = models.JSONField()
    case_count = models.IntegerField()
    name = models.TextField()
    upload = models.ForeignKey(Upload, on_delete=models.PROTECT, related_name="suites")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.suite} ({self.sha256[:12]})"

    @property
    def cases(self) -> list[dict]:
        return self.document.get("cases", [])


class ConformanceRun(models.Model):
    """One `taisce conformance` run, with what its output does not carry."""

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
    sha256 = models.CharField(max_length=64, unique=True)
    name = models.TextField()
    upload = models.ForeignKey(Upload, on_delete=models.PROTECT, related_name="conformance_runs")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-ran_at", "-id"]

    def __str__(self) -> str:
        return f"{self.adapter} {self.adapter_version} {self.ran_at:%Y-%m-%d}"


class ConformanceResult(models.Model):
    run = models.ForeignKey(ConformanceRun, on_delete=models.CASCADE, related_name="results")
    position = models.IntegerField()
    line = models.IntegerField()
    case = models.TextField()
    rule = models.TextField()
    passed = models.BooleanField()
    failures = models.JSONField(default=list)

    class Meta:
        ordering = ["run", "position"]

    def __str__(self) -> str:
        return f"{self.case}: {'passed' if self.passed else 'failed'}"


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
