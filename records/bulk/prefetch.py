"""Reading one step ahead, on a connection of its own: while the caller works on what one read
gave (Python, holding the interpreter), the next read runs in a thread, where the database's
work and the wait for it overlap the caller's.

Only where the database is a server of its own (PostgreSQL), whose work is what the thread
waits on. SQLite works inside this process, its reads holding the interpreter as much as the
caller does: there a thread adds only its switching (a whole-store export 5% slower), so each
read is made here, in turn. So it is inside a transaction too (the caller's rows may be its own,
which a thread's connection, seeing only what is committed, would not see).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from django.db import connection, connections


def prefetched[T, R](read: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
    """`read(item)` of each of `items` in turn; on PostgreSQL outside a transaction, each one
    in a thread of its own while the caller works on the one before. `items` is iterated here
    (it may be a cursor of this thread's connection). An error of a read is raised where its
    result would have been given. Left early (a client gone), the read under way ends first;
    either way the thread's connection is closed."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        for item in items:
            yield read(item)
        return
    pool = ThreadPoolExecutor(1, thread_name_prefix="prefetch")
    pending: Future[R] | None = None
    try:
        for item in items:
            following = pool.submit(read, item)
            if pending is not None:
                yield pending.result()
            pending = following
        if pending is not None:
            yield pending.result()
    finally:
        if pending is not None:
            pending.cancel()  # not yet started: never is
        pool.submit(connections.close_all).result()  # the thread's own, not this one's
        pool.shutdown()
