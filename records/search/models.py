"""The search's tables, as Django knows them.

`SearchEntry` is the full-text index. The table itself is vendor-specific (migration 0011): on
SQLite an FTS5 virtual table, on PostgreSQL a `tsvector` column with a GIN index. Django only
needs to know it exists, so a test database's flush empties it with the rows it mirrors; only
`records.search.engine` reads or writes it, in SQL.

`SearchCall` holds what the call conditions and the call facets read of each call, narrow and
indexed, so a query starts from the calls that match rather than from every attempt of the
store; it is written and removed with the index.
"""

from __future__ import annotations

from typing import NamedTuple

from django.db import models

from records.models.fields import row_columns


class SearchEntry(models.Model):
    """One document of the index: an attempt's own text (id 2 x attempt id) or one call's
    arguments, result and text (id 2 x call id + 1)."""

    id = models.BigIntegerField(primary_key=True)
    body = models.TextField()

    class Meta:
        app_label = "records"
        db_table = "records_searchentry"

    def __str__(self) -> str:
        return f"search entry {self.id}"


class SearchCallRow(NamedTuple):
    """What the search keeps of a call beside its id and attempt: its names as stored, the
    kind of its outcome (`refused` for every `refused:<reason>`, the outcome itself otherwise),
    whether its dispatch was observed and whether its result or its text was cut."""

    tool: str
    requested_action: str
    dispatched_action: str
    outcome: str
    outcome_kind: str
    observed: bool
    truncated: bool


class SearchCall(row_columns("SearchCallColumns", SearchCallRow, required=SearchCallRow._fields)):
    """One call as the search filters it; its id is the call's.

    Columns: the fields of `SearchCallRow` (above), the attempt and its run; `records_searchcall`
    in `docs/schema.md` lists them all.

    The indexes serve a condition across the store and the same condition narrowed to runs:
    a query that names runs reads by the run first (`search_call_run`) or by the condition
    and then the run (the others), so what it reads grows with the runs it names, not with the
    store."""

    id = models.BigIntegerField(primary_key=True)
    # The call's run, as its attempt has it: a query narrowed to runs reads only their calls.
    run = models.ForeignKey(
        "records.Run", models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    attempt = models.ForeignKey(
        "records.Attempt", models.DO_NOTHING, db_constraint=False, related_name="+"
    )

    class Meta:
        app_label = "records"
        db_table = "records_searchcall"
        indexes = [
            models.Index(fields=["run", "tool", "outcome_kind"], name="search_call_run"),
            models.Index(fields=["tool", "outcome_kind"], name="search_call_tool"),
            models.Index(fields=["outcome_kind", "run"], name="search_call_outcome"),
            models.Index(fields=["requested_action", "run"], name="search_call_requested"),
            models.Index(fields=["dispatched_action", "run"], name="search_call_dispatched"),
        ]

    def __str__(self) -> str:
        return f"search call {self.id}"


class PendingIndex(models.Model):
    """The search's outbox: a run stored whose documents and calls are not yet in the index.

    Written in the shard's own transaction, so a run is stored with it or not at all; the
    follow-up that indexes the run (`records.search.index.index_pending`) deletes it in the
    transaction that writes the run's index. While it exists, the search says the run is still
    being indexed (`indexing`) rather than leave it out unsaid. `tries` counts the tries
    started (each counted before it starts, so one lost with its process counts too), `error`
    says how the last one failed, or that it has not ended."""

    run = models.OneToOneField(
        "records.Run", models.CASCADE, primary_key=True, related_name="pending_index"
    )
    queued_at = models.DateTimeField(auto_now_add=True)
    # The task worker that will index it once its upload is done ("" for none: the command
    # line, or a follow-up that failed): the sweep leaves the row to it while it is alive.
    worker = models.CharField(max_length=200, blank=True, default="")
    tries = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")

    class Meta:
        app_label = "records"
        db_table = "records_pendingindex"

    def __str__(self) -> str:
        return f"run {self.run_id} waiting for its index"

    @property
    def given_up(self) -> bool:
        """Whether its index was tried as often as a task is (EVALDASH_TASK_MAX_TRIES) and not
        written: no sweep tries it again; `manage.py search_index RUN_ID` does."""
        from django.conf import settings

        return self.tries >= settings.EVALDASH_TASK_MAX_TRIES
