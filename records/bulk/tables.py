"""Rows into tables fast, for any model: plain executemany on SQLite, binary COPY on PostgreSQL,
ids reserved ahead of the rows that name them, statistics refreshed after a large load. Knows no
record type: callers say which model and columns."""

from __future__ import annotations

import gc
import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import DatabaseError, connection, transaction

_pausing = threading.Lock()
_paused = 0  # how many gc_paused blocks are under way, in any thread
_was_enabled = False  # whether the collector ran before the first of them


@contextmanager
def gc_paused() -> Iterator[None]:
    """Bulk work (a shard's rows, a run's verdicts) makes objects by the hundred thousand and
    no reference cycles: the collector would only walk them, and the whole heap once they
    count as old, to free nothing. The collector is the process's: blocks under way in two
    threads at once (a run scored beside the next shard's store) keep it paused until the last
    of them ends."""
    global _paused, _was_enabled
    with _pausing:
        if _paused == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _pausing:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.enable()


# PostgreSQL column types and the binary COPY form each takes. A json value's binary form is
# its text: the text the parser encoded goes in as it is, and the server still checks it.
_BINARY_COPY = {
    "integer": "int4",
    "bigint": "int8",
    "smallint": "int2",
    "boolean": "bool",
    "double precision": "float8",
    "text": "text",
    "json": "text",
}


_COPY_CONTEXT = re.compile(r"^COPY \S+, line (?P<row>\d+)(?:, column (?P<column>\w+))?")


class RowRefused(Exception):
    """The database refused a value of one row: which table, the row as it was given, the
    column named (when the database names one) and the database's own words."""

    def __init__(self, table: Table, row: tuple[Any, ...], column: str | None, message: str):
        super().__init__(message)
        self.table, self.row, self.column, self.message = table, row, column, message


class Table:
    """A plain `INSERT ... VALUES` for executemany: the ORM's per-object cost is the bottleneck.
    On PostgreSQL, a binary COPY: no value is written out as text for the server to parse."""

    def __init__(self, model: type, columns: list[str], *, binary: bool = True) -> None:
        """`binary=False`: the server reads each value from its text (for a column whose type
        Django does not know, such as a `tsvector`)."""
        qn = connection.ops.quote_name
        fields = [model._meta.get_field(c) for c in columns]
        cols = ", ".join(qn(f.column) for f in fields)
        table = qn(model._meta.db_table)
        self.sql = f"INSERT INTO {table} ({cols}) VALUES ({', '.join(['%s'] * len(fields))})"
        self.copy_sql = f"COPY {table} ({cols}) FROM STDIN"
        self.columns = columns
        self.copy_types: list[str] | None = None
        self.int4: list[tuple[int, bool]] = []  # (position, nullable) of the int4 columns
        if connection.vendor == "postgresql" and binary:
            types = [_BINARY_COPY.get(f.db_type(connection) or "") for f in fields]
            if all(types):
                self.copy_types = types  # type: ignore[assignment]
                self.int4 = [(i, f.null) for i, f in enumerate(fields) if types[i] == "int4"]
        self.rows: list[tuple[Any, ...]] = []

    def _refused(self, exc: DatabaseError) -> Exception:
        """PostgreSQL names the COPY row and column it refused ("COPY records_turn, line 2,
        column index"): the caller is told which of its rows and which column."""
        diag = getattr(exc.__cause__, "diag", None)
        where = _COPY_CONTEXT.search(getattr(diag, "context", None) or "")
        if not where:
            return exc
        row = self.rows[int(where["row"]) - 1]
        message = getattr(diag, "message_primary", None) or str(exc)
        return RowRefused(self, tuple(row), where["column"], message)

    def _binary(self) -> bool:
        """Whether these rows go in binary: every int4 value must fit, since the binary form of
        a larger one wraps around silently; in text, the server refuses it by name."""
        if not self.copy_types:
            return False
        rows = self.rows
        for i, nullable in self.int4:
            values = [r[i] for r in rows]
            if nullable:
                values = [v for v in values if v is not None]
            if values and (min(values) < -(2**31) or max(values) >= 2**31):
                return False
        return True

    def flush(self, cursor: Any) -> None:
        if not self.rows:
            return
        if connection.vendor == "postgresql":
            # COPY is PostgreSQL's bulk path; executemany sends a statement per row. The driver's
            # own cursor bypasses Django's error translation, so it is applied here: a value
            # the database refuses is a DatabaseError like any other.
            binary = self.copy_types is not None and self._binary()
            sql = self.copy_sql + (" (FORMAT BINARY)" if binary else "")
            try:
                with connection.wrap_database_errors, cursor.cursor.copy(sql) as copy:
                    if binary:
                        copy.set_types(self.copy_types)
                    for row in self.rows:
                        copy.write_row(row)
            except DatabaseError as exc:
                raise self._refused(exc) from exc
        else:
            # SQLite checks each JSON column with JSON_VALID (Django's constraint), parsing the
            # text again: a fifth of these inserts. This text is the parser's own encoding of
            # values it decoded, valid by construction, so the check is off for these rows only.
            cursor.execute("PRAGMA ignore_check_constraints = ON")
            try:
                cursor.executemany(self.sql, self.rows)
            finally:
                cursor.execute("PRAGMA ignore_check_constraints = OFF")
        self.rows = []


def reserve_ids(model: type, n: int, above: int = 0) -> list[int]:
    """n primary keys for rows this transaction is about to insert with explicit ids.

    `above` is the highest id this transaction already handed out (some may not be written yet).
    """
    table = model._meta.db_table
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                [table, n],
            )
            return [r[0] for r in cur.fetchall()]
        # SQLite: the IMMEDIATE transaction holds the write lock, so nobody else inserts now.
        cur.execute(f"SELECT COALESCE(MAX(id), 0) FROM {connection.ops.quote_name(table)}")
        start = max(cur.fetchone()[0], above)
    return list(range(start + 1, start + n + 1))


ANALYZE_AFTER_LINES = 20_000
# A load of fewer lines refreshes a table's statistics where they are this far behind: as many
# rows as this share of those PostgreSQL last counted in it, or a table it never counted.
ANALYZE_SHARE = 0.1


# Rows sampled per table are 300 times this (PostgreSQL's default is 100, so 30,000 rows).
ANALYZE_STATISTICS_TARGET = 10


def analyze_if_large(rows: int, models: Iterable[type]) -> None:
    """After a large bulk load, refresh PostgreSQL's statistics so its plans fit the data
    (autovacuum gets there eventually, within a minute; pages should not wait for it). Large:
    `ANALYZE_AFTER_LINES` rows or more, or, for a table, `ANALYZE_SHARE` of the rows PostgreSQL
    last counted in it (`stale`). Without it, the first upload to a new store left the index
    uncounted, and a text query took a common word for a rare one: 7 s to list 6,000 attempts,
    0.5 s once counted.

    Only the columns queries filter, join and sort on (those of every index, constraint and
    foreign key) are sampled: the bulky text and JSON columns cost most of a full ANALYZE and
    no plan looks at their statistics. The sample is 3,000 rows a table rather than 30,000:
    the plans here need row counts, distinct counts and the commonest values of id and label
    columns, which a small sample gives, and reading the large sample cost a quarter of a
    shard's load. Row counts are refreshed either way."""
    if connection.vendor != "postgresql" or rows <= 0:
        return
    qn = connection.ops.quote_name
    models = list(models)
    with transaction.atomic(), connection.cursor() as cur:
        if rows < ANALYZE_AFTER_LINES:
            tables = [m._meta.db_table for m in models]
            cur.execute(
                "SELECT t, (SELECT reltuples FROM pg_class WHERE oid = to_regclass(t))"
                " FROM unnest(%s::text[]) AS t",
                [tables],
            )
            counted = dict(cur.fetchall())
            models = [m for m in models if stale(rows, counted.get(m._meta.db_table))]
        if not models:
            return
        cur.execute(f"SET LOCAL default_statistics_target = {int(ANALYZE_STATISTICS_TARGET)}")
        for model in models:
            meta = model._meta
            names: list[str] = []
            for index in (*meta.indexes, *meta.constraints):
                names += getattr(index, "fields", ())
            names += [f.name for f in meta.concrete_fields if f.is_relation]
            columns = dict.fromkeys(meta.get_field(n.lstrip("-")).column for n in names)
            listed = f" ({', '.join(qn(c) for c in columns)})" if columns else ""
            cur.execute(f"ANALYZE {qn(meta.db_table)}{listed}")


def stale(rows: int, counted: float | None) -> bool:
    """Whether a load of `rows` rows leaves a table's statistics behind, PostgreSQL having last
    counted `counted` rows in it (-1 or None: never)."""
    return counted is None or counted < 0 or rows >= ANALYZE_SHARE * counted


def compress_columns(connection: Any, columns: dict[str, tuple[str, ...]], method: str) -> bool:
    """PostgreSQL: these tables' columns compress the values stored from now on with `method`
    (`lz4`, `pglz`); values stored before keep theirs, and both read alike. False where the
    server cannot (not PostgreSQL, or built without the method: "feature not supported"): its
    default stays; any other error is raised. For a migration, on its schema editor's
    connection."""
    if connection.vendor != "postgresql":
        return False
    qn = connection.ops.quote_name
    for table, names in columns.items():
        alter = ", ".join(f"ALTER COLUMN {qn(c)} SET COMPRESSION {method}" for c in names)
        try:
            with transaction.atomic(using=connection.alias), connection.cursor() as cur:
                cur.execute(f"ALTER TABLE {qn(table)} {alter}")
        except DatabaseError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != "0A000":
                raise
            return False
    return True


def compressed_with_lz4(columns: dict[str, tuple[str, ...]]) -> Any:
    """A migration's operation: `compress_columns` with lz4, and back to pglz when reversed."""
    from django.db import migrations  # here: no bulk load needs the migrations' machinery

    def to(method: str) -> Any:
        return lambda apps, schema_editor: compress_columns(
            schema_editor.connection, columns, method
        )

    return migrations.RunPython(to("lz4"), to("pglz"))
