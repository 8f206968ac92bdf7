"""Corpus keys and what scoring a run against one stores: verdicts, rows and per-case sums."""

from __future__ import annotations

import threading
from collections.abc import Iterable

import orjson
from django.db import connection, models
from django.utils import timezone

from records.bulk.tables import Table
from records.formats.corpus_key import KeyDocument, read_corpus_key
from records.formats.rows import COUNTS, FAILURE_PARTS, TOKENS, VerdictRow
from records.models.fields import (
    HasPage,
    KeptFile,
    TokenUsage,
    bulk_reference,
    named_within,
    row_columns,
)
from records.models.intake import Upload
from records.models.runs import Attempt, Run, Session


class CorpusKeyQuerySet(models.QuerySet):
    def newest_for(self, digest: str) -> CorpusKey | None:
        """The newest key of a corpus digest, without its document (it can be megabytes)."""
        return self.filter(digest=digest).defer("document").order_by("-created_at", "-id").first()


class CorpusKey(HasPage, KeptFile):
    """An uploaded `evaldash-corpus-key/1` file: the answers a run is scored against."""

    page = "records:key"

    digest = models.CharField(max_length=16, db_index=True)
    declared_digest = models.TextField()
    verified = models.BooleanField(default=True)
    source = models.TextField(blank=True)
    upload = models.ForeignKey(Upload, on_delete=models.PROTECT, related_name="keys")
    case_count = models.IntegerField()
    document = models.JSONField()

    objects = CorpusKeyQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.digest} ({self.name})"

    def load(self) -> KeyDocument:
        """The key as the scorer reads it. A stored key's file never changes (its sha256 names
        it), so the last few read are kept for the scorings and attempt pages that read them
        one after another."""
        which = (self.pk, self.sha256, self.verified)
        with _LOADED_LOCK:
            doc = _LOADED.get(which) if self.pk is not None else None
        if doc is None:
            doc = read_corpus_key(
                orjson.dumps(self.document), self.name, allow_digest_mismatch=not self.verified
            )
            if self.pk is not None:
                with _LOADED_LOCK:
                    while len(_LOADED) >= _LOADED_KEPT:
                        del _LOADED[next(iter(_LOADED))]
                    _LOADED[which] = doc
        return doc


# The keys `CorpusKey.load` read last, by (pk, sha256, verified), oldest first.
_LOADED: dict[tuple[int, str, bool], KeyDocument] = {}
_LOADED_KEPT = 4
_LOADED_LOCK = threading.Lock()


class KeyCase(named_within("key", "case_id", "case_unique_in_key", listed_by="position")):
    """One case of a key, in the key's order."""

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


class ScoringQuerySet(models.QuerySet):
    def latest_for(self, runs: Iterable[Run]) -> dict[int, Scoring]:
        """Each run's latest scoring that holds verdicts, by run id (one query)."""
        latest: dict[int, Scoring] = {}
        for scoring in self.filter(run__in=runs, verdict_count__gt=0).order_by(
            "run", "-created_at", "-id"
        ):
            latest.setdefault(scoring.run_id, scoring)
        return latest


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
    # Whether its verdicts carry failure signatures and its failure counts are kept: false for
    # a scoring stored before they were made (a re-score fills them).
    signed = models.BooleanField(default=False)

    objects = ScoringQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["run", "-created_at"])]

    def __str__(self) -> str:
        return f"run {self.run_id} against {self.key.digest}"


class Verdict(
    row_columns(
        "VerdictColumns",
        VerdictRow,
        skip=("attempt", "session", "verified", *TOKENS),
        required=("row_key", "case", "model", "surface", "outcome"),
        zero=(*COUNTS, "tries"),
    ),
    TokenUsage,
):
    """One attempt's verdict, with its additive contribution to every C.8 column.

    Columns: the fields of `VerdictRow` (`records/formats/rows.py`), the token totals and those
    below; `records_verdict` in `docs/schema.md` lists them all."""

    # Only the scoring writes verdicts, for the attempts it has just read, in the transaction
    # that creates their scoring: no database constraint checks each row. No index of its own:
    # the three (scoring, ...) indexes below serve every lookup.
    scoring = bulk_reference(Scoring, models.CASCADE, "verdicts")
    # An attempt's verdicts belong to scorings of its own run and go when they go (a run is
    # deleted whole), so deleting attempts need not look verdicts up by attempt.
    attempt = bulk_reference(Attempt, models.DO_NOTHING, "verdicts")
    # The attempt's session, copied from it as scored (with its tries and tokens), so that
    # sums of verdicts (score rows as they are written, per-case figures of a comparison) read
    # no attempt row.
    session = bulk_reference(Session, models.DO_NOTHING, "+", null=True)
    # Whether every check of the attempt held (C.5): true unless one failed.
    verified = models.BooleanField(default=True)
    # The scorer's account of the verdict step by step is not kept (1.7 KB a verdict, most of
    # a scoring's writing): the attempt's page scores the attempt again for it
    # (`records.scoring.run.account`).

    class Meta:
        ordering = ["scoring", "attempt"]
        indexes = [
            models.Index(fields=["scoring", "row_key"]),
            models.Index(fields=["scoring", "case"]),
            models.Index(fields=["scoring", "attempt"]),
            # A failure mode's attempts (its page, the search for them): only the verdicts
            # that did not pass are in it.
            models.Index(
                fields=["scoring", "failure_mode", "attempt"],
                name="records_verdict_by_mode",
                condition=~models.Q(failure_mode=""),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.attempt_id}: {self.outcome}"

    @property
    def signature(self) -> dict[str, str | None] | None:
        """The verdict's failure signature (`records.scorer.score.failure_signature`), None for
        a passed verdict or one scored before signatures were made."""
        if not self.failure_mode:
            return None
        return {
            "outcome": self.outcome,
            **{part: getattr(self, f"failure_{part}") or None for part in FAILURE_PARTS},
        }


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


def per_case_of(scoring: type[Scoring], related_name: str) -> models.ForeignKey:
    """The scoring of a table kept per case of a scoring's rows: read by scoring and case
    through the table's own indexes (each starts with the scoring), so none of its own."""
    return models.ForeignKey(
        scoring, on_delete=models.CASCADE, related_name=related_name, db_index=False
    )


class CaseOfRow(models.Model):
    """What a table kept per case of a scoring's rows holds of each: the case, its score row
    (what links to a comparison of two runs join on), how many of its attempts counted and how
    many there were."""

    case = models.TextField()
    row_key = models.TextField()
    counted = models.IntegerField()
    total = models.IntegerField()

    class Meta:
        abstract = True


class ScoreCase(CaseOfRow):
    """One case of one row of a scoring: what comparisons join on, written once per scoring."""

    scoring = per_case_of(Scoring, "cases")
    completed = models.IntegerField()

    class Meta:
        indexes = [models.Index(fields=["scoring", "row_key", "case"])]

    def __str__(self) -> str:
        return f"{self.case}: {self.completed} / {self.counted}"


class CaseFigureQuerySet(models.QuerySet):
    def store_for(
        self, scoring: Scoring, marks: Iterable[tuple[str, str, str, str, str]] | None = None
    ) -> int:
        """Keep a scoring's figures per case, model and surface (what the case pages read, so
        that they never read a verdict): `marks` gives each one's (case, row key, model,
        surface, marks) as the scoring summed them (`records.scoring.sums`); without, one read
        of its verdicts, in repeat order. Returns how many were stored; a scoring's figures are
        replaced whole."""
        if marks is None:
            read: dict[tuple[str, str, str, str], list[str]] = {}
            for case, row_key, model, surface, counted, clean in (
                Verdict.objects.filter(scoring=scoring)
                .order_by("case", "row_key", "attempt__repeat", "attempt_id")
                .values_list("case", "row_key", "model", "surface", "counted", "clean")
            ):
                read.setdefault((case, row_key, model, surface), []).append(
                    ("1" if clean else "0") if counted else "-"
                )
            marks = ((*key, "".join(m)) for key, m in read.items())
        # Plain rows, not model objects: a large run's scoring keeps thousands of these, and the
        # ORM's per-object work cost half of their store (0.08 s of a 20,000-attempt run's).
        table = Table(CaseFigure, ["scoring", *_CASE_FIGURE_COLUMNS])
        table.rows = figures = [
            (scoring.pk, case, row_key, model, surface, m.count("1"), len(m) - m.count("-"))
            + (len(m), m)
            for case, row_key, model, surface, m in marks
        ]
        self.filter(scoring=scoring).delete()
        with connection.cursor() as cursor:
            table.flush(cursor)
        return len(figures)


# What `store_for` writes of each figure, after its scoring, in the order it builds them.
_CASE_FIGURE_COLUMNS = ["case", "row_key", "model", "surface", "clean", "counted", "total", "marks"]


class CaseFigure(CaseOfRow):
    """One case of one score row of a scoring (a model on a surface): its Clean attempts over its counted
    ones, and each repeat's mark in repeat order (`1` clean, `0` counted and not clean, `-`
    counted apart), written once when the scoring is stored."""

    scoring = per_case_of(Scoring, "case_figures")
    model = models.TextField()
    surface = models.TextField()
    clean = models.IntegerField()
    marks = models.TextField()

    objects = CaseFigureQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["scoring", "case"]),
            # A corpus's cases across runs read in (case, model, surface) order from this
            # index alone: the database groups them without a sort and reads no table row.
            models.Index(
                fields=["case", "model", "surface", "scoring", "clean", "counted", "total"],
                name="records_casefigure_by_case",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.case} {self.model} {self.surface}: {self.clean} / {self.counted}"


class FailureMode(HasPage, models.Model):
    """A failure signature (`records.scorer.score.failure_signature`), stored once under its id
    (`mode_id`) the first time a scoring meets it: what a mode's page and the failures list
    show of it. Its attempts are the verdicts whose `failure_mode` is this id."""

    page = "records:failure-mode"

    id = models.CharField(max_length=16, primary_key=True)
    outcome = models.TextField()
    step = models.TextField(blank=True)
    tool = models.TextField(blank=True)
    action = models.TextField(blank=True)
    call_outcome = models.TextField(blank=True)
    argument = models.TextField(blank=True)
    # A field named `check` would hide the model's system checks.
    check_name = models.TextField(blank=True)
    message = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"{self.id}: {self.outcome} {self.message}"

    @property
    def signature(self) -> dict[str, str | None]:
        """The signature, absent parts None (as `mode_id` hashes it)."""
        return {
            "outcome": self.outcome,
            **{part: getattr(self, MODE_FIELD.get(part, part)) or None for part in FAILURE_PARTS},
        }


# The field of `FailureMode` that holds a signature's part, where its name is not the part's.
MODE_FIELD = {"check": "check_name"}


class FailureCount(models.Model):
    """How many attempts of a scoring failed in one mode, per model, surface and case, summed
    once when the scoring is stored: what the failures list reads, never a verdict."""

    scoring = per_case_of(Scoring, "failure_counts")
    mode = models.CharField(max_length=16)
    model = models.TextField()
    surface = models.TextField()
    case = models.TextField()
    attempts = models.IntegerField()

    class Meta:
        indexes = [
            models.Index(
                fields=["scoring", "mode", "model", "surface", "case", "attempts"],
                name="records_failurecount_by_mode",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.mode} {self.case}: {self.attempts}"
