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

from django.db import models


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


class SearchCall(models.Model):
    """One call as the search filters it: its id is the call's, `outcome_kind` is `refused`
    for every `refused:<reason>` and the outcome itself otherwise, `truncated` is whether its
    result or its text was cut."""

    id = models.BigIntegerField(primary_key=True)
    attempt = models.ForeignKey(
        "records.Attempt", models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    tool = models.TextField()
    requested_action = models.TextField()
    dispatched_action = models.TextField()
    outcome = models.TextField()
    outcome_kind = models.TextField()
    observed = models.BooleanField()
    truncated = models.BooleanField()

    class Meta:
        app_label = "records"
        db_table = "records_searchcall"
        indexes = [
            models.Index(fields=["tool", "outcome_kind"], name="search_call_tool"),
            models.Index(fields=["outcome_kind"], name="search_call_outcome"),
            models.Index(fields=["requested_action"], name="search_call_requested"),
            models.Index(fields=["dispatched_action"], name="search_call_dispatched"),
        ]

    def __str__(self) -> str:
        return f"search call {self.id}"
