"""docs/schema.md, written from the models: every table of the app with its columns (type on
each database, null, what it references), its indexes and its unique constraints. A test holds
the page to what this writes, so the page cannot drift from the models."""

from __future__ import annotations

import inspect
from typing import Any

from django.apps import apps
from django.db import models
from django.db.backends.postgresql.base import DatabaseWrapper as PostgreSQL
from django.db.backends.sqlite3.base import DatabaseWrapper as SQLite

# Connection objects only to ask each backend its column types; neither ever connects.
_BACKENDS = {
    "PostgreSQL": PostgreSQL({"NAME": "schema", "OPTIONS": {}}, alias="schema-postgresql"),
    "SQLite": SQLite({"NAME": ":memory:", "OPTIONS": {}}, alias="schema-sqlite"),
}

HEADER = """# Schema

The tables of the `records` app as the models declare them, one section per table in the
order of `records/models/`. Written by `manage.py schema_doc` (run it after changing a model);
`tests/test_docs.py` fails when this page and the models disagree. Django's own tables
(accounts, sessions, admin log) are Django's and are left out.

A reference marked *no constraint* is a column the bulk writers fill with ids they have just
stored in the same transaction: the database does not check it row by row, and deletes go
through Django (see [architecture](architecture.md)). Types are those of a table
`manage.py migrate` creates on each database.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _column_type(field: models.Field) -> str:
    kinds = []
    for name, connection in _BACKENDS.items():
        kind = field.db_type(connection) or "-"
        kinds.append((name, kind))
    if kinds[0][1] == kinds[1][1]:
        return f"`{kinds[0][1]}`"
    return " / ".join(f"`{kind}`" for _, kind in kinds)


def _reference(field: models.Field) -> str:
    if not field.is_relation or not field.concrete:
        return ""
    target = field.target_field
    text = f"`{target.model._meta.db_table}.{target.column}`"
    text += f", on delete {field.remote_field.on_delete.__name__.lower().replace('_', ' ')}"
    if not field.db_constraint:
        text += ", *no constraint*"
    return text


def _keys(field: models.Field) -> str:
    if field.primary_key:
        return "primary key"
    if field.unique:
        return "unique"
    if field.db_index:
        return "indexed"
    return ""


def _description(model: type[models.Model]) -> str:
    doc = model.__dict__.get("__doc__")
    return inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " ") if doc else ""


def _table(model: type[models.Model]) -> list[str]:
    meta = model._meta
    lines = [f"## `{meta.db_table}`", ""]
    lines.append(f"Model `{model.__module__}.{model.__name__}`.")
    description = _description(model)
    if description:
        lines[-1] += f" {description}"
    lines += ["", "| column | type (PostgreSQL / SQLite) | null | references | key |"]
    lines.append("| --- | --- | --- | --- | --- |")
    # The primary key first, then references, then the rest as declared (a table whose columns
    # come from a row layout declares its own references after them).
    fields = sorted(
        meta.local_concrete_fields, key=lambda f: (not f.primary_key, not f.is_relation)
    )
    for field in fields:
        lines.append(
            f"| `{field.column}` | {_column_type(field)} | {'yes' if field.null else 'no'} "
            f"| {_reference(field)} | {_keys(field)} |"
        )
    extras = _indexes_and_constraints(model)
    if extras:
        lines += ["", "Indexes and constraints:", "", *extras]
    return lines


def _columns(model: type[models.Model], names: Any) -> str:
    columns = []
    for name in names:
        descending = name.startswith("-")
        column = model._meta.get_field(name.lstrip("-")).column
        columns.append(f"{column} DESC" if descending else column)
    return ", ".join(columns)


def _indexes_and_constraints(model: type[models.Model]) -> list[str]:
    meta = model._meta
    found = []
    for fields in meta.unique_together:
        found.append(f"- unique ({_columns(model, fields)})")
    for constraint in meta.constraints:
        if isinstance(constraint, models.UniqueConstraint):
            where = f" where `{_cell(str(constraint.condition))}`" if constraint.condition else ""
            found.append(
                f"- unique `{constraint.name}` ({_columns(model, constraint.fields)}){where}"
            )
        elif isinstance(constraint, models.CheckConstraint):
            found.append(f"- check `{constraint.name}`: `{_cell(str(constraint.condition))}`")
        else:
            found.append(f"- `{constraint.name}` ({type(constraint).__name__})")
    for index in meta.indexes:
        found.append(f"- index `{index.name}` ({_columns(model, index.fields)})")
    return found


def schema_markdown() -> str:
    """docs/schema.md as the models declare it today."""
    tables = [
        model
        for model in apps.get_app_config("records").get_models()
        if model._meta.managed and not model._meta.proxy
    ]
    contents = ", ".join(f"[`{m._meta.db_table}`](#{m._meta.db_table})" for m in tables)
    parts = [HEADER, f"Tables: {contents}.\n"]
    parts += ["\n".join(_table(model)) + "\n" for model in tables]
    return "\n".join(parts)
