"""Database work on threads of their own (`records.bulk.threads`): the results in order, each
item done in a thread with its own connection while the caller works on the ones before, an
error raised where its result would have been, each thread's connection closed however the
caller stops; on SQLite, in a transaction or for one item, everything done here; and a
whole-store export read so gives the very rows it gives read in turn. (The index's follow-ups
side by side: `tests/test_search_outbox.py`.)"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction

from records.bulk.threads import threaded
from records.models import Upload
from records.queries.search import Search, SearchQuery
from tests.searched import store_searched

# The threads are PostgreSQL's alone: SQLite holds the interpreter, and each item is done here.
on_a_server = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="reads ahead only from a database server"
)


def _reader(seen: list):
    """A read that asks the database for its item and notes the thread and connection it ran
    on."""

    def read(item: int) -> int:
        with connection.cursor() as cur:
            cur.execute("SELECT %s + COUNT(*) FROM records_upload", [item])
            value = cur.fetchone()[0]
        seen.append((item, threading.get_ident(), connections["default"]))
        return value

    return read


@on_a_server
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("readers", [1, 2])
def test_outside_a_transaction_reads_run_ahead_in_threads_whose_connections_close(readers):
    Upload.objects.create(source="test")
    seen: list = []
    made: list[int] = []

    def items():
        for i in range(7):
            made.append(i)
            yield i

    results = []
    for value in threaded(_reader(seen), items(), readers):
        # The next `readers` items are taken, and their reads under way, before this one is
        # worked on.
        assert len(made) == min(len(results) + 1 + readers, 7)
        results.append(value)
    assert results == [1, 2, 3, 4, 5, 6, 7]  # each item plus the one committed upload, in order
    assert sorted(item for item, _, _ in seen) == list(range(7))
    assert threading.get_ident() not in {ident for _, ident, _ in seen}
    theirs = {conn for _, _, conn in seen}
    assert len(theirs) == readers and connections["default"] not in theirs
    assert all(conn.connection is None for conn in theirs)  # closed when the reads ended
    assert not [t for t in threading.enumerate() if t.name.startswith("db-thread")]


@on_a_server
@pytest.mark.django_db(transaction=True)
def test_a_caller_that_stops_early_leaves_no_read_running_and_no_connection_open():
    seen: list = []
    reads = threaded(_reader(seen), iter(range(100)))
    assert next(reads) == 0
    reads.close()  # a client gone after the first chunk
    assert len(seen) <= 3  # the one given and, at most, the two under way
    assert not [t for t in threading.enumerate() if t.name.startswith("db-thread")]
    assert all(conn.connection is None for _, _, conn in seen)


@on_a_server
@pytest.mark.django_db(transaction=True)
def test_a_failed_read_is_raised_where_its_result_would_be_given():
    def read(item: int) -> int:
        if item == 2:
            raise ValueError("chunk 2 could not be read")
        return item

    given = []
    with pytest.raises(ValueError, match="chunk 2"):
        for value in threaded(read, iter(range(5))):
            given.append(value)
    assert given == [0, 1]
    assert not [t for t in threading.enumerate() if t.name.startswith("db-thread")]


@pytest.mark.django_db(transaction=True)
def test_on_sqlite_every_read_is_made_here_in_turn():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite")
    seen: list = []
    assert list(threaded(_reader(seen), iter(range(3)))) == [0, 1, 2]
    assert {ident for _, ident, _ in seen} == {threading.get_ident()}


@pytest.mark.django_db(transaction=True)
def test_a_single_item_is_done_here_with_no_thread_of_its_own():
    seen: list = []
    assert list(threaded(_reader(seen), iter([4]))) == [4]
    assert [(item, ident) for item, ident, _ in seen] == [(4, threading.get_ident())]


@pytest.mark.django_db
def test_inside_a_transaction_every_read_is_made_here_and_sees_its_rows():
    Upload.objects.create(source="test")  # not committed: a thread's connection would not see it
    seen: list = []
    assert list(threaded(_reader(seen), iter(range(3)))) == [1, 2, 3]
    assert {ident for _, ident, _ in seen} == {threading.get_ident()}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("params", [{}, {"q": "project"}, {"tool": "gitlab_execute_action"}])
def test_an_export_read_ahead_gives_the_rows_it_gives_read_in_turn(tmp_path, params):
    store_searched(tmp_path)
    query = SearchQuery(sort="-model", **params)
    ahead = list(Search(query).groups(chunk=5))
    with transaction.atomic():  # inside one, each chunk is read in turn, here
        in_turn = list(Search(query).groups(chunk=5))
    assert ahead == in_turn and len(ahead) > 10
