"""Field kinds the record tables share."""

from __future__ import annotations

import typing
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import models
from django.urls import reverse
from django.utils import timezone

from records.formats.rows import Int64, JsonText


class WholeJSONField(models.JSONField):
    """JSON written once and always read whole (a turn's blocks, a call's arguments and result,
    an attempt's facts). PostgreSQL keeps it as `json`, its text
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


def bulk_reference(to: Any, on_delete: Any, related_name: str, **options: Any) -> Any:
    """A reference that only a bulk writer (the ingest, the scoring) fills, naming rows it has
    just stored or read in the same transaction; deletes go through Django. No database
    constraint checks it row by row, and it has no index unless `db_index=True` says so."""
    options.setdefault("db_index", False)
    return models.ForeignKey(
        to, on_delete=on_delete, related_name=related_name, db_constraint=False, **options
    )


# --- Field groups more than one table carries: declared once, inherited as abstract models. ---


class TokenUsage(models.Model):
    """The four usage numbers a provider bills (modelrecord's usage block): a turn's as
    reported, an attempt's and a summary's summed, a verdict's copied from its attempt."""

    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_created_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)

    class Meta:
        abstract = True

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_created_tokens
            + self.cache_read_tokens
        )


class HasPage:
    """A record with a page of its own: the URL named `page`, which takes the record's id."""

    page: str

    def get_absolute_url(self) -> str:
        return reverse(self.page, args=[self.pk])  # type: ignore[attr-defined]


class KeptFile(models.Model):
    """A file kept as it arrived: its name as uploaded, and the sha256 that makes a second
    upload of the same bytes a no-op. Listed newest first."""

    name = models.TextField()
    sha256 = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]


def named_within(
    parent: str, name: str, constraint: str, *, listed_by: str | None = None
) -> type[models.Model]:
    """An abstract model for rows named uniquely within their parent (a run's sessions by
    label, a key's cases by id): the database holds the name unique, the row reads as its name,
    and a parent's rows list by name or by `listed_by`. A table that inherits it names it first
    among its bases, so that its Meta is the one Django takes."""

    class Meta:
        abstract = True
        ordering = [parent, listed_by or name]
        constraints = [models.UniqueConstraint(fields=[parent, name], name=constraint)]

    def __str__(self: models.Model) -> str:
        return getattr(self, name)

    attrs = {"__module__": __name__, "Meta": Meta, "__str__": __str__}
    return type(f"NamedWithin{parent.title()}", (models.Model,), attrs)


def row_columns(
    name: str,
    row: type,
    *,
    skip: Iterable[str] = (),
    required: Iterable[str] = (),
    zero: Iterable[str] = (),
    indexed: Iterable[str] = (),
) -> type[models.Model]:
    """An abstract model with one column per field of `row`, a record shape a format declares
    (a msgspec Struct of `records.formats.rows`, a reader's dataclass), so that a table and the
    rows written into it are spelled once. Text may be blank unless `required`; a yes/no is
    false unless `required`; counts named in `zero` start at 0; a field that may be None is
    nullable; JSON text is stored as JSON, a list or a mapping as JSON that starts empty and
    may be blank unless `required`; the fields `indexed` have an index of their own. `skip`
    names the fields the table declares itself (its references, its token usage, columns that
    need a word of their own)."""
    skip, required, zero, indexed = set(skip), set(required), set(zero), set(indexed)
    attrs: dict[str, Any] = {"__module__": __name__, "Meta": type("Meta", (), {"abstract": True})}
    for field, kind in typing.get_type_hints(row, include_extras=True).items():
        if field not in skip:
            column, options = _column(kind, field in required, field in zero)
            if field in indexed:
                options["db_index"] = True
            attrs[field] = column(**options)
    attrs["row_layout"] = row  # what a reader (and the schema page's test) finds the columns by
    return type(name, (models.Model,), attrs)


def _column(kind: Any, required: bool, zero: bool) -> tuple[type[models.Field], dict[str, Any]]:
    """The field class of a column, and its options."""
    optional = type(None) in typing.get_args(kind)
    if optional:
        (kind,) = (a for a in typing.get_args(kind) if a is not type(None))
    if kind == Int64:
        return models.BigIntegerField, {"null": True, "blank": True} if optional else {}
    if kind == JsonText:
        return WholeJSONField, (
            {"null": True, "blank": True} if optional else {"default": list, "blank": True}
        )
    container = typing.get_origin(kind)
    if container in (list, dict):
        return models.JSONField, {
            "default": dict if container is dict else list,
            "blank": not required,
        }
    options: dict[str, Any] = {"null": True, "blank": True} if optional else {}
    if zero:
        options["default"] = 0
    if kind is str:
        return models.TextField, ({} if required else {"blank": True})
    if kind is bool:
        return models.BooleanField, (options if optional or required else {"default": False})
    column = {int: models.IntegerField, float: models.FloatField, datetime: models.DateTimeField}
    if kind in column:
        return column[kind], options
    raise TypeError(f"no column kind for {kind!r}")
