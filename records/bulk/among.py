"""A column among a long list of ids, as one parameter.

`IN (%s, %s, ...)` with thousands of ids costs more to build than to run: Django prepares each
value, and psycopg splits the statement at every placeholder before sending it (a quarter of a
whole-store export on PostgreSQL, a chunk of 2,000 attempts at a time). PostgreSQL takes the
list as one array (`= ANY(%s)`), which it also plans faster; SQLite as one JSON array
(`IN (SELECT value FROM json_each(%s))`, as fast as the placeholders), so no list meets SQLite's
limit on a statement's parameters (32,766 in its own builds).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db.models import CharField, ForeignObject, IntegerField, Lookup, TextField


def among_sql(column: str, ids: Iterable[int | str], vendor: str) -> tuple[str, list[Any]]:
    """`column` among `ids` (whole numbers, or strings), as SQL and its parameters, for a
    database of `vendor`."""
    ids = _plain(ids)
    if vendor == "postgresql":
        return f"{column} = ANY(%s)", [ids]
    return f"{column} IN (SELECT value FROM json_each(%s))", [json.dumps(ids)]


def _plain(values: Iterable[Any]) -> list[int] | list[str]:
    """The values as one array takes them: all whole numbers (not booleans), or all strings."""
    values = list(values)
    if all(type(v) is int for v in values) or all(type(v) is str for v in values):
        return values
    raise TypeError("__among takes whole numbers or strings, all of one kind")


class Among(Lookup):
    """`field__among=[...]`: `field__in` for a list of ids (or a foreign key's ids, or
    strings), written as `among_sql` writes it. The values are sent as they are, not prepared
    by the field: only a list of whole numbers or of strings, never a query (that is `__in`'s)."""

    lookup_name = "among"
    prepare_rhs = False

    def get_prep_lookup(self) -> list[int] | list[str]:
        if not isinstance(self.rhs, list | tuple | set | frozenset):
            raise TypeError(f"__among takes a list, not {type(self.rhs).__name__}")
        return _plain(self.rhs)

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        if not self.rhs:
            raise EmptyResultSet
        sql, params = among_sql(lhs, self.rhs, connection.vendor)
        return sql, [*lhs_params, *params]


def register() -> None:
    """Make `__among` a lookup of the whole-number fields (ids among them), the text fields and
    the foreign keys (Django gives related fields lookups of their own): the app's `ready`. (A
    JSON field reads any name after it as a key, this one too.)"""
    for field in (IntegerField, CharField, TextField, ForeignObject):
        field.register_lookup(Among)
