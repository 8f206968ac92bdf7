"""The search index's table, as Django knows it.

The table itself is vendor-specific (migration 0011): on SQLite an FTS5 virtual table, on
PostgreSQL a `tsvector` column with a GIN index. Django only needs to know it exists, so a
test database's flush empties it with the rows it mirrors; only `records.search.engine` reads
or writes it, in SQL.
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
