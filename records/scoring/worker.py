"""The scorer process: chunks of stored attempts in, verdict rows out.

No Django here, nor anything that imports it: a threaded server starts this process from a clean
forkserver that preloads only this module. Where the rows it scores are committed, it reads them
itself, on a connection of its own (`Reader`), so the writer only says which.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Collection
from typing import Any, NamedTuple

from records.bulk.processes import pack, unpack
from records.formats.corpus_key import KeyDocument
from records.scorer.batch import Chunk, score_chunk
from records.scorer.score import ScoringError

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


class Reader(NamedTuple):
    """How a scorer process reaches the store: SQLite's file or PostgreSQL's connection string."""

    vendor: str
    where: str
    timeout: float  # SQLite's wait for a lock, in seconds


class ChunkRead(NamedTuple):
    """A chunk's attempts as rows, and the two statements reading the rest of what the scorer
    needs of them, each (SQL with %s parameters, parameters)."""

    attempts: list[tuple]
    facts: tuple[str, list[Any]]
    calls: tuple[str, list[Any]]
    mine: list[int] | None  # where other runs' attempts lie in the range: this chunk's ids


def read_chunk(fetch: Callable[[str, list[Any]], list[tuple]], spec: ChunkRead) -> Chunk:
    """The chunk to score, its statements run by `fetch(sql, params)`."""
    attempts, facts, calls, mine = spec
    call_rows = fetch(*calls)
    if mine is not None:
        ids = set(mine)
        call_rows = [r for r in call_rows if r[0] in ids]
    return list(attempts), fetch(*facts), call_rows


_FORMAT = re.compile(r"(?<!%)%s")


def _connect(reach: Reader) -> Callable[[str, list[Any]], list[tuple]]:
    """A `fetch` on a read-only connection of this process's own."""
    if reach.vendor == "sqlite":
        import sqlite3
        from urllib.parse import quote

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


def score_worker(
    source: Any,
    sink: Any,
    doc: KeyDocument,
    stale: bool,
    refused: Collection[str],
    reach: Reader | None,
) -> None:
    """The scorer process: packed ("read", `ChunkRead`) or ("rows", `Chunk`) messages in (an
    empty message ends them), packed ("verdicts", rows, retired, unknown, unscoreable) or
    ("error", message) out."""
    gc.disable()  # nothing here makes cycles; a forked scorer shares the writer's pages
    fetch = None
    try:
        while data := source.recv_bytes():
            kind, body = unpack(data)
            if kind == "read":
                if fetch is None:
                    assert reach is not None
                    fetch = _connect(reach)
                chunk = read_chunk(fetch, ChunkRead(*body))
            else:
                chunk = tuple(body)
            rows, retired, unknown, unscoreable = score_chunk(doc, stale, chunk, refused)
            sink.send_bytes(pack(("verdicts", rows, retired, unknown, unscoreable)))
    except ScoringError as exc:
        sink.send_bytes(pack(("error", str(exc))))
    except EOFError:
        pass  # the writer gave up
    finally:
        sink.close()
