"""A worker process's own read-only connection to the store, for rows already committed.

No Django here: a scorer process (started from a forkserver that preloads nothing of Django)
reads its chunks this way, while the process that started it writes. `reader` says, from the
caller's Django connection, how a worker reaches the same database, or that it cannot.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple
from urllib.parse import quote

# What a PostgreSQL connection string may carry from the database's OPTIONS (libpq's own).
LIBPQ_OPTIONS = frozenset(
    {
        "sslmode",
        "sslrootcert",
        "sslcert",
        "sslkey",
        "options",
        "application_name",
        "connect_timeout",
    }
)

Fetch = Callable[[str, list[Any]], list[tuple]]  # (SQL with %s parameters, parameters) -> rows


class Reader(NamedTuple):
    """How a worker reaches the store: SQLite's file or PostgreSQL's connection string."""

    vendor: str
    where: str
    timeout: float  # SQLite's wait for a lock, in seconds


def reader(connection: Any) -> Reader | None:
    """How a worker reaches the rows `connection` (Django's) has committed, or None where it
    cannot see them: inside a transaction (the rows may be its own, not yet committed), or a
    database no other process can open (an in-memory one)."""
    if connection.in_atomic_block:
        return None
    params = connection.settings_dict
    name = str(params.get("NAME") or "")
    options = params.get("OPTIONS") or {}
    if connection.vendor == "sqlite":
        if name in ("", ":memory:") or name.startswith("file:"):
            return None
        return Reader("sqlite", name, float(options.get("timeout", 5)))
    if connection.vendor != "postgresql":
        return None
    from psycopg.conninfo import make_conninfo

    given = {
        "dbname": name,
        "user": params.get("USER"),
        "password": params.get("PASSWORD"),
        "host": params.get("HOST"),
        "port": params.get("PORT"),
        **{k: v for k, v in options.items() if k in LIBPQ_OPTIONS},
    }
    return Reader(
        "postgresql",
        make_conninfo("", **{k: v for k, v in given.items() if v not in (None, "")}),
        0,
    )


_FORMAT = re.compile(r"(?<!%)%s")


def connect(reach: Reader) -> Fetch:
    """A fetch on a read-only connection of this process's own."""
    if reach.vendor == "sqlite":
        import sqlite3

        db = sqlite3.connect(f"file:{quote(reach.where)}?mode=ro", uri=True, timeout=reach.timeout)

        def fetch(sql: str, params: list[Any]) -> list[tuple]:
            # Django's SQL, in SQLite's own parameter style.
            return db.execute(_FORMAT.sub("?", sql).replace("%%", "%"), params).fetchall()

        return fetch
    import psycopg

    pg = psycopg.connect(reach.where, autocommit=True)

    def fetch_pg(sql: str, params: list[Any]) -> list[tuple]:
        return pg.execute(sql, params).fetchall()

    return fetch_pg
