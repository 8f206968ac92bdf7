"""A worker process's own read-only connection to the store, for rows already committed.

No Django here: a scorer process (started from a forkserver that preloads nothing of Django)
reads its chunks this way, while the process that started it writes. `reader` says, from the
caller's Django connection, how a worker reaches the same database, or that it cannot.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple
from urllib.parse import quote

# What Django's connection parameters hold that is not libpq's: left out of the string.
_NOT_LIBPQ = frozenset({"cursor_factory", "context", "prepare_threshold", "client_encoding"})

Fetch = Callable[[str, list[Any]], list[tuple]]  # (SQL with %s parameters, parameters) -> rows


class Reader(NamedTuple):
    """How a worker reaches the store: SQLite's file or PostgreSQL's connection string."""

    vendor: str
    where: str
    timeout: float  # SQLite's wait for a lock, in seconds

    @property
    def may_fork(self) -> bool:
        """Whether a worker reading this way may be forked from the process that holds the
        store open: not for SQLite, whose forked copy would believe it holds that process's
        locks (`records.bulk.processes`, `fork=False`)."""
        return self.vendor != "sqlite"


def reader(connection: Any) -> Reader | None:
    """How a worker reaches the rows `connection` (Django's) has committed, or None where it
    cannot, or might not see them: inside a transaction (the rows may be its own, not yet
    committed), an SQLite database not in WAL mode (a reader would wait on the writer's locks),
    one no other process can open (in memory), or a PostgreSQL connection that takes a role
    Django sets after connecting."""
    if connection.in_atomic_block or not connection.get_autocommit():
        return None
    params = connection.settings_dict
    options = params.get("OPTIONS") or {}
    if connection.vendor == "sqlite":
        name = str(params.get("NAME") or "")
        if name in ("", ":memory:") or name.startswith("file:"):
            return None
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            if str(cursor.fetchone()[0]).lower() != "wal":
                return None
        return Reader("sqlite", name, float(options.get("timeout", 5)))
    if connection.vendor != "postgresql" or options.get("assume_role"):
        return None
    from psycopg.conninfo import make_conninfo

    given = {
        k: v
        for k, v in connection.get_connection_params().items()
        if k not in _NOT_LIBPQ and v not in (None, "")
    }
    return Reader("postgresql", make_conninfo("", **given), 0)


_FORMAT = re.compile(r"(?<!%)%s")


def connect(reach: Reader) -> tuple[Fetch, Callable[[], None]]:
    """A fetch on a read-only connection of this process's own, and what closes it."""
    if reach.vendor == "sqlite":
        import sqlite3

        db = sqlite3.connect(f"file:{quote(reach.where)}?mode=ro", uri=True, timeout=reach.timeout)

        def fetch(sql: str, params: list[Any]) -> list[tuple]:
            # Django's SQL, in SQLite's own parameter style.
            return db.execute(_FORMAT.sub("?", sql).replace("%%", "%"), params).fetchall()

        return fetch, db.close
    import psycopg

    pg = psycopg.connect(reach.where, autocommit=True)
    pg.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")

    def fetch_pg(sql: str, params: list[Any]) -> list[tuple]:
        return pg.execute(sql, params).fetchall()

    return fetch_pg, pg.close


@contextmanager
def reading(reach: Reader | None) -> Iterator[Fetch]:
    """Within this block, a fetch on a read-only connection of this process's own (`connect`),
    opened at its first statement (a worker sent its rows instead never opens one) and closed
    as the block ends."""
    opened: list[tuple[Fetch, Callable[[], None]]] = []

    def fetch(sql: str, params: list[Any]) -> list[tuple]:
        if not opened:
            if reach is None:
                raise RuntimeError("this process has no way to read the store")
            opened.append(connect(reach))
        return opened[0][0](sql, params)

    try:
        yield fetch
    finally:
        if opened:
            opened[0][1]()
