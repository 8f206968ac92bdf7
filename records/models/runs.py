"""The shard record types: a run, its providers and sessions, and each attempt with its turn,
call and verify lines. A shard is stored whole or not at all (see `records.ingest`); raw JSON
fields are stored as JSON, not re-modelled; per-attempt and per model-and-surface totals are
computed once at ingest, so pages never add up a whole run in Python. The run, session,
attempt, turn, call and verify tables take their columns from the row layouts the ingest
writes (`records.formats.rows`)."""

from __future__ import annotations

from django.apps import apps
from django.db import models
from django.db.models import Exists, OuterRef

from records.formats.rows import (
    TOKENS,
    AttemptRow,
    CallRow,
    RunRow,
    SessionRow,
    SummaryRow,
    TurnRow,
    VerifyRow,
)
from records.formats.shard import ENDINGS
from records.models.fields import HasPage, TokenUsage, bulk_reference, named_within, row_columns
from records.models.intake import ShardFile


def _scoring_model(name: str) -> type[models.Model]:
    # The scoring tables reference runs, so a run reaches them through the app registry.
    return apps.get_model("records", name)


class RunQuerySet(models.QuerySet):
    def pending(self) -> RunQuerySet:
        """The runs whose corpus key is stored but that have no scoring."""
        corpus_key, scoring = _scoring_model("CorpusKey"), _scoring_model("Scoring")
        return self.exclude(corpus_digest="").filter(
            Exists(corpus_key.objects.filter(digest=OuterRef("corpus_digest"))),
            ~Exists(scoring.objects.filter(run=OuterRef("pk"))),
        )


class Run(
    HasPage,
    row_columns(
        "RunColumns",
        RunRow,
        required=("run_id",),
        indexed=("run_id", "commit", "started_at", "corpus_digest"),
    ),
    TokenUsage,
):
    """The run line of one shard (one shard, one run line, one process).

    Columns: the fields of `RunRow` (`records/formats/rows.py`), the token totals and those
    below; `records_run` in `docs/schema.md` lists them all."""

    page = "records:run"

    shard = models.OneToOneField(ShardFile, on_delete=models.CASCADE, related_name="run")
    # Totals over every attempt and every try, written once at ingest.
    attempt_count = models.IntegerField(default=0)
    models_seen = models.JSONField(default=list)
    cases_seen = models.JSONField(default=list)
    surfaces_seen = models.JSONField(default=list)
    modes_seen = models.JSONField(default=list)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return self.run_id

    def key(self) -> models.Model | None:
        """The newest stored key (a `CorpusKey`) whose digest is the run's corpus digest."""
        if not self.corpus_digest:
            return None
        return _scoring_model("CorpusKey").objects.newest_for(self.corpus_digest)

    def latest_scoring(self) -> models.Model | None:
        """The run's newest `Scoring` (with its key, less the key's document)."""
        # The key's document can be megabytes; pages need only its name and digest.
        return (
            self.scorings.select_related("key")
            .defer("key__document")
            .order_by("-created_at", "-id")
            .first()
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


class Session(
    named_within("run", "label", "session_label_unique_in_run"),
    row_columns("SessionColumns", SessionRow, required=("label",), zero=("served_tools",)),
):
    """A session line: the tool surface, mode and slice its attempts ran against.

    Columns: the fields of `SessionRow` (`records/formats/rows.py`) and the run; `records_session`
    in `docs/schema.md` lists them all."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="sessions")
    # Calls made by the session's attempts, and how many the server observed (E.3 rule 2).
    call_count = models.IntegerField(default=0)
    observed_call_count = models.IntegerField(default=0)

    @property
    def effective_mode(self) -> str:
        return self.mode or "default"


class Attempt(
    HasPage,
    row_columns(
        "AttemptColumns",
        AttemptRow,
        skip=(*TOKENS, "last_turn_has_tool_call", "failed_checks"),
        required=("key", "case", "model", "ended_by"),
        zero=("turn_count", "try_count", "call_count", "latency_ms"),
    ),
    TokenUsage,
):
    """An attempt line: one try of a case by a model on a surface, with its totals.

    Columns: the fields of `AttemptRow` (`records/formats/rows.py`), the token totals and those
    below; `records_attempt` in `docs/schema.md` lists them all."""

    page = "records:attempt"

    # Without database constraints, as for turn, call and verify rows below: only the ingest
    # writes attempts, naming the run and the sessions it has just stored in the same
    # transaction, and deletes cascade through Django. A run's attempts and sessions go
    # together with the run, so deleting sessions need not look attempts up by session (no
    # query does): the session column has no index to keep up at every insert.
    run = bulk_reference(Run, models.CASCADE, "attempts")
    session = bulk_reference(Session, models.DO_NOTHING, "attempts", null=True, blank=True)
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


class InAttempt(models.Model):
    """A turn or call line: read back in the order of its attempt (index, then line)."""

    class Meta:
        abstract = True
        ordering = ["attempt", "index", "line"]

    def __str__(self) -> str:
        return f"{self._meta.model_name} {self.index} of attempt {self.attempt_id}"  # type: ignore[attr-defined]


class Turn(
    InAttempt,
    row_columns("TurnColumns", TurnRow, skip=("attempt", *TOKENS), required=("status",)),
    TokenUsage,
):
    """One provider request: every try is its own line (and is charged).

    Columns: the fields of `TurnRow` (`records/formats/rows.py`) with the attempt and the token
    counts; `records_turn` in `docs/schema.md` lists them all."""

    attempt = bulk_reference(Attempt, models.CASCADE, "turns")

    class Meta(InAttempt.Meta):
        indexes = [models.Index(fields=["attempt", "index", "line"])]


class Call(
    InAttempt,
    row_columns("CallColumns", CallRow, skip=("attempt",), required=("tool", "outcome")),
):
    """A call line: one tool call of an attempt, with its arguments, result and outcome.

    Columns: the fields of `CallRow` (`records/formats/rows.py`) with the attempt; `records_call`
    in `docs/schema.md` lists them all."""

    attempt = bulk_reference(Attempt, models.CASCADE, "calls")

    class Meta(InAttempt.Meta):
        indexes = [models.Index(fields=["attempt", "index", "line"])]

    @property
    def rewritten(self) -> bool:
        return bool(
            self.requested_action
            and self.dispatched_action
            and self.requested_action != self.dispatched_action
        )


class Verify(
    row_columns("VerifyColumns", VerifyRow, skip=("attempt",), required=("name", "passed"))
):
    """A verify line: one check of an attempt, and whether it held.

    Columns: the fields of `VerifyRow` (`records/formats/rows.py`) with the attempt;
    `records_verify` in `docs/schema.md` lists them all."""

    attempt = bulk_reference(Attempt, models.CASCADE, "verifies", db_index=True)

    class Meta:
        ordering = ["attempt", "line"]

    def __str__(self) -> str:
        return f"{self.name} (attempt {self.attempt_id})"


class SurfaceSummary(
    row_columns(
        "SummaryColumns",
        SummaryRow,
        skip=TOKENS,
        required=("model",),
        zero=("attempts", *ENDINGS, "turns", "tries", "calls", "latency_ms"),
    ),
    TokenUsage,
):
    """Totals per (run, model, surface, mode), computed at ingest.

    Columns: the fields of `SummaryRow` (`records/formats/rows.py`), the token totals and the
    run; `records_surfacesummary` in `docs/schema.md` lists them all."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="summaries")

    class Meta:
        ordering = ["run", "model", "surface", "mode"]
        indexes = [models.Index(fields=["model"]), models.Index(fields=["surface"])]

    def __str__(self) -> str:
        return f"{self.model} {self.surface} {self.mode}"
