"""Database work on threads of their own, each with its own connection, so that a PostgreSQL
server works on several statements at once, on its own cores, while this process goes on: an
export's next chunks read while it shapes the one before, a zip's runs indexed side by side.

Only where the database is a server of its own (PostgreSQL), whose work is what the threads
wait on. SQLite works inside this process, holding the interpreter as much as the caller does,
and takes one writer at a time: there a thread adds only its switching (a whole-store export 5%
slower), so each item is done here, in turn. So it is inside a transaction too (the caller's
rows may be its own, which a thread's connection, seeing only what is committed, would not see).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from itertools import chain, islice
from queue import SimpleQueue
from typing import Any

from django.db import connection, connections

# Items under way at once, a thread and a connection each. On two cores a whole-store export
# (`q=the`, 347,347 rows) took 8.9-9.5 s with one, 7.3-7.5 s with two, 7.6 s with three; two
# runs' index, 10.9 s one after the other, 6.6 s side by side.
THREADS = 2


def threaded[T, R](
    work: Callable[[T], R], items: Iterable[T], threads: int = THREADS
) -> Iterator[R]:
    """`work(item)` of each of `items`, the results in their order; on PostgreSQL outside a
    transaction, where there are two items or more, the next `threads` of them done in threads
    of their own (each item in turn to the next thread) while the caller works on the result
    before (one item alone is done here: no thread, no connection, no memory of their own).
    `items` is iterated here (it may be a cursor of this thread's connection). An error of an
    item is raised where its result would have been given. Left early (a client gone), the
    items under way end first; either way each thread closes its connection and ends before
    this does."""
    rest = iter(items)
    first = list(islice(rest, 2))
    if len(first) < 2 or connection.vendor != "postgresql" or connection.in_atomic_block:
        for item in chain(first, rest):
            yield work(item)
        return
    inboxes: list[SimpleQueue[tuple[T, Future[R]] | None]] = [SimpleQueue() for _ in range(threads)]
    workers = [
        threading.Thread(target=_serve, args=(work, inbox), name=f"db-thread-{i}", daemon=True)
        for i, inbox in enumerate(inboxes)
    ]
    for worker in workers:
        worker.start()
    pending: deque[Future[R]] = deque()
    try:
        for n, item in enumerate(chain(first, rest)):
            future: Future[R] = Future()
            inboxes[n % threads].put((item, future))
            pending.append(future)
            if len(pending) > threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()  # not yet started: never is
        for inbox in inboxes:
            inbox.put(None)
        for worker in workers:
            worker.join()


def _serve(work: Callable[[Any], Any], inbox: SimpleQueue) -> None:
    """A thread: each (item, future) of its inbox done into its future, until None; then its own
    connection closed."""
    try:
        while (job := inbox.get()) is not None:
            item, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(work(item))
            except BaseException as exc:  # noqa: BLE001 (raised where the caller takes it)
                future.set_exception(exc)
    finally:
        connections.close_all()
