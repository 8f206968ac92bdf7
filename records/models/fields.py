"""Field kinds the record tables share."""

from __future__ import annotations

from typing import Any

from django.db import models


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


def _bulk_reference(to: Any, on_delete: Any, related_name: str, **options: Any) -> Any:
    """A reference that only a bulk writer (the ingest, the scoring) fills, naming rows it has
    just stored or read in the same transaction; deletes go through Django. No database
    constraint checks it row by row, and it has no index unless `db_index=True` says so."""
    options.setdefault("db_index", False)
    return models.ForeignKey(
        to, on_delete=on_delete, related_name=related_name, db_constraint=False, **options
    )
