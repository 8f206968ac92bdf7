"""The one seam between search and the database: SQLite's FTS5 or PostgreSQL's full-text search.

Both index the same documents (an attempt's stimulus, reason, blocks' text and verify details;
a call's arguments, result and text, the JSON values and not their keys) and both match the
same thing: every word, case-insensitively, where a word is a run of letters and digits. On
PostgreSQL the text is cut into such runs and lower-cased straight into a vector of them, so
`issue.create` or a URL is two words or more there as in FTS5, not the one token that
`to_tsvector`'s parser would keep; the vector holds no positions, since no query asks for a
phrase. Words, not substrings (`pg_trgm`): FTS5 matches words, and a
query must answer alike on both databases.

Documents are built from the rows a shard has written, once its transaction has committed
(`records.search.index`): on SQLite by SQL over those rows; on PostgreSQL the attempts' and
calls' vectors are made in Python from their stored text (`records.search.vectors`, in a
process of their own for a large run) and the SQL makes the few left (`index_new_run`, also
what `manage.py search_index` runs). The statements alone over a run's rows make every
document (`index_run`): what the vectors made in Python are tested against. What is indexed of a
document is its first `INDEXED_CHARS` characters, on both databases alike: a job trace of
megabytes stays searchable by its head, and PostgreSQL's `tsvector` stays far below its 1 MB
limit (a stripped vector of 100,000 characters holds at most some 600 kB, whatever the words).
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterator
from typing import Any

from django.db import connection

from records.bulk import processes
from records.bulk.apart import Reader
from records.models import Run
from records.search.vectors import ATTEMPT, CALL, INDEXED_CHARS, documents
from records.search.worker import vector_worker

# A worker making a run's vectors may start from a forkserver a parser or scorer started first.
processes.preload(vector_worker)

# The words of a query: runs of letters and digits, as FTS5's unicode61 tokenizer cuts them.
WORD = re.compile(r"[^\W_]+")
MAX_WORDS = 16


def words(text: str) -> list[str]:
    """The distinct words of `text`, lower-cased, in order: what a query matches. Anything else
    (quotes, `AND`, `*`, `:`) separates words and is never an operator."""
    return list(dict.fromkeys(w.lower() for w in WORD.findall(text)))[:MAX_WORDS]


_SQLITE_JSON_VALUES = (
    "COALESCE((SELECT group_concat(j.atom, ' ') FROM json_tree({col}) j"
    " WHERE j.type IN ('text', 'integer', 'real')), '')"
)


def _sqlite_head(pieces: str) -> str:
    """The pieces that `pieces` selects (`x`, in their order `o1, o2`), each cut to
    INDEXED_CHARS and joined by spaces, as far as what the document indexes reaches: a piece
    that starts past its first INDEXED_CHARS characters is left out before the join, so an
    attempt of hundreds of megabytes is never joined whole (the head is the same)."""
    width = "COALESCE(length(x) + 1, 0)"
    return (
        "COALESCE((SELECT group_concat(x, ' ') FROM (SELECT x, SUM("
        + width
        + ") OVER (ORDER BY o1, o2 ROWS UNBOUNDED PRECEDING) - "
        + width
        + f" AS before FROM ({pieces}) AS p) WHERE before < {INDEXED_CHARS}), '')"
    )


_SQLITE = {
    ATTEMPT: (
        "INSERT INTO records_searchentry (rowid, body) SELECT 2 * a.id, substr("
        f"substr(a.stimulus, 1, {INDEXED_CHARS}) || ' ' || substr(a.reason, 1, {INDEXED_CHARS})"
        " || ' ' || "
        + _sqlite_head(
            "SELECT t.id AS o1, b.key AS o2, substr(json_extract(b.value, '$.text'), 1,"
            f" {INDEXED_CHARS}) AS x FROM records_turn t, json_each(t.blocks) b"
            " WHERE t.attempt_id = a.id"
        )
        + " || ' ' || "
        + _sqlite_head(
            f"SELECT v.id AS o1, 0 AS o2, substr(v.detail, 1, {INDEXED_CHARS}) AS x"
            " FROM records_verify v WHERE v.attempt_id = a.id"
        )
        + f", 1, {INDEXED_CHARS}) FROM records_attempt a"
    ),
    CALL: (
        "INSERT INTO records_searchentry (rowid, body) SELECT 2 * c.id + 1, substr("
        + _SQLITE_JSON_VALUES.format(col="c.arguments")
        + " || ' ' || "
        + _SQLITE_JSON_VALUES.format(col="c.result")
        + f" || ' ' || substr(c.text, 1, {INDEXED_CHARS}), 1, {INDEXED_CHARS})"
        " FROM records_call c"
    ),
}

_PG_JSON_VALUES = (
    "(SELECT string_agg(v #>> '{{}}', ' ') FROM jsonb_path_query({col}::jsonb, 'strict $.**') v"
    " WHERE jsonb_typeof(v) IN ('string', 'number'))"
)


def _pg_vector(text: str) -> str:
    # The words straight into a vector, not through to_tsvector's parser: cut at what is not a
    # letter or digit, they are already what its 'simple' configuration would keep (lower-cased
    # whole), at half its cost. A word of 2 kB or more is left out, as to_tsvector leaves it.
    return (
        "array_to_tsvector(ARRAY(SELECT w FROM regexp_split_to_table("
        f"lower(left({text}, {INDEXED_CHARS})), '[^[:alnum:]]+') w"
        " WHERE w <> '' AND octet_length(w) < 2048))"
    )


_PG_CALL_DOCUMENTS = (
    "INSERT INTO records_searchentry (id, body) SELECT 2 * c.id + 1, "
    + _pg_vector(
        "concat_ws(' ', "
        + _PG_JSON_VALUES.format(col="c.arguments")
        + ", "
        + _PG_JSON_VALUES.format(col="c.result")
        + ", c.text)"
    )
)

_PG = {
    ATTEMPT: (
        "INSERT INTO records_searchentry (id, body) SELECT 2 * a.id, "
        + _pg_vector(
            "concat_ws(' ', a.stimulus, a.reason, (SELECT string_agg(b ->> 'text', ' ')"
            " FROM records_turn t, json_array_elements(t.blocks) b WHERE t.attempt_id = a.id),"
            " (SELECT string_agg(v.detail, ' ') FROM records_verify v"
            " WHERE v.attempt_id = a.id))"
        )
        + " FROM records_attempt a"
    ),
    CALL: _PG_CALL_DOCUMENTS + " FROM records_call c",
}


# Each call's filtered columns (`records.search.models.SearchCall`), the same SQL on both, its
# run a parameter. This and the documents above are completed by which rows: a run's
# (`_of_run`, `_ATTEMPTS_OF_RUN`) or those Python left to them (`_AMONG`, PostgreSQL's).
_CALLS = (
    "INSERT INTO records_searchcall (id, run_id, attempt_id, tool, requested_action,"
    " dispatched_action, outcome, outcome_kind, observed, truncated) SELECT c.id, %s,"
    " c.attempt_id, c.tool, c.requested_action, c.dispatched_action, c.outcome, CASE WHEN"
    " c.outcome LIKE 'refused:%%' THEN 'refused' ELSE c.outcome END, c.dispatch_observed,"
    " c.result_truncated OR c.text_truncated FROM records_call c"
)
_ATTEMPT_IDS_OF_RUN = "SELECT id FROM records_attempt WHERE run_id = %s"


def _among(column: str, ids: str) -> str:
    """`column` among the ids the statement `ids` selects, each then read by its key. On
    PostgreSQL the ids are one array first: as `IN (subquery)` it may plan a join instead, and
    read a whole table (every call of the store, to find one run's: 0.5 s at 420,000 calls,
    each time a run was indexed or forgotten)."""
    if connection.vendor == "postgresql":
        return f"{column} = ANY(ARRAY({ids}))"
    return f"{column} IN ({ids})"


def _of_run() -> str:
    """The WHERE clause that keeps the calls (`c`) of the run given as its one parameter: by
    its attempts' ids and the calls' attempt index, whatever the size of the store."""
    return " WHERE " + _among("c.attempt_id", _ATTEMPT_IDS_OF_RUN)


_ATTEMPTS_OF_RUN = " WHERE a.run_id = %s"
# PostgreSQL's documents that Python left to the statement, by id (`index_new_run`).
_AMONG = {ATTEMPT: " WHERE a.id = ANY(%s)", CALL: " WHERE c.id = ANY(%s)"}


def outcome_kind(outcome: str) -> str:
    """What `records_searchcall.outcome_kind` holds for a call of this outcome (and what a
    query for it looks up): `refused` for every refusal, whatever its reason."""
    return "refused" if outcome == "refused" or outcome.startswith("refused:") else outcome


def _key() -> str:
    return "id" if connection.vendor == "postgresql" else "rowid"


def index_run(run_pk: int) -> int:
    """Add a stored run to the index (in the caller's transaction), every document and call
    filtered column made by the statements: how many calls it wrote the filtered columns of."""
    statements = _PG if connection.vendor == "postgresql" else _SQLITE
    with connection.cursor() as cursor:
        cursor.execute(statements[ATTEMPT] + _ATTEMPTS_OF_RUN, [run_pk])
        cursor.execute(statements[CALL] + _of_run(), [run_pk])
        cursor.execute(_CALLS + _of_run(), [run_pk, run_pk])
        return max(cursor.rowcount, 0)


# Documents made in Python (`index_new_run`) are sized by id range, this many ids at a time,
# and read a few megabytes at a time: what is held is bounded by bytes, not by the number of
# attempts or calls nor by their size.
VECTOR_CHUNK = 2000
VECTOR_BYTES = 8 * 1024 * 1024
# Only a document whose stored pieces come to fewer bytes than this is read into Python: a
# longer one has its head cut (it is past `WHOLE_BELOW`, for which `text_vector` has no
# answer) but for JSON whose keys outweigh its values. Either way the statement makes it,
# reading only its indexed head, so a call or a turn of a megabyte never reaches Python; its
# vector is the one the statement makes, as every document's is.
READ_BELOW = 2 * INDEXED_CHARS

# Each kind of document: the run's lowest and highest ids, each id's stored bytes (by id range),
# its pieces then read by id (`records.search.vectors.documents`).
_IDS = {
    ATTEMPT: "SELECT MIN(a.id), MAX(a.id) FROM records_attempt a" + _ATTEMPTS_OF_RUN,
    CALL: "SELECT MIN(c.id), MAX(c.id) FROM records_call c" + _of_run(),
}
_BYTES = {
    ATTEMPT: (
        "SELECT a.id, octet_length(a.stimulus) + octet_length(a.reason) + COALESCE((SELECT"
        " SUM(octet_length(t.blocks::text)) FROM records_turn t WHERE t.attempt_id = a.id), 0)"
        " + COALESCE((SELECT SUM(octet_length(v.detail)) FROM records_verify v"
        " WHERE v.attempt_id = a.id), 0) FROM records_attempt a"
        " WHERE a.run_id = %s AND a.id >= %s AND a.id < %s ORDER BY a.id"
    ),
    CALL: (
        "SELECT c.id, octet_length(c.text) + COALESCE(octet_length(c.arguments::text), 0)"
        " + COALESCE(octet_length(c.result::text), 0) FROM records_call c"
        " JOIN records_attempt a ON a.id = c.attempt_id"
        " WHERE a.run_id = %s AND c.id >= %s AND c.id < %s ORDER BY c.id"
    ),
}
# Batches of vectors a worker may have made ahead of their copy: what waits is bounded.
IN_FLIGHT = 2
# A run of fewer attempts has its vectors made in the writing thread: a process of their own
# (some 60 MB resident, most of it shared) would start for a few milliseconds of work.
VECTOR_PROCESS_MIN_ATTEMPTS = 1000


def index_new_run(run_pk: int, reach: Reader | None = None) -> int:
    """Add a run just stored to the index (in the caller's transaction), as `index_run` does,
    with on PostgreSQL each attempt's and call's vector made in Python from its stored text
    (`records.search.vectors`, the words the statement would cut) and copied in, some
    `VECTOR_BYTES` of them at a time; the statements make the few it cannot vouch for, and
    those too long to read (`READ_BELOW`). `reach`: how a process of its own reads the run's
    rows (`records.bulk.apart.reader`, taken before the caller's transaction began); with it,
    a large run's vectors are made by a worker process (`records.search.worker`), on a core of
    its own, while this thread sizes the next batches and copies in the last. How many calls
    it wrote the filtered columns of.

    A run of odd id has its calls' filtered columns written before its vectors are made, one
    of even id after: a zip's runs, stored one after another, are indexed two side by side
    (`records.search.index.inline_indexing`), and this way, while one makes vectors, the
    other's statement keeps the server busy (two 20,000-attempt runs took 4.4-4.7 s in the
    same order, 3.8-4.0 s so)."""
    if connection.vendor != "postgresql":
        return index_run(run_pk)
    with connection.cursor() as cursor:
        columns_first = run_pk % 2 == 1
        if columns_first:
            cursor.execute(_CALLS + _of_run(), [run_pk, run_pk])
            calls = max(cursor.rowcount, 0)
        attempts = Run.objects.filter(pk=run_pk).values_list("attempt_count", flat=True).first()
        if (attempts or 0) < VECTOR_PROCESS_MIN_ATTEMPTS:
            reach = None
        left = _Vectors(cursor, reach).write(run_pk)
        for kind, ids in left.items():
            if ids:
                cursor.execute(_PG[kind] + _AMONG[kind], [ids])
        if not columns_first:
            cursor.execute(_CALLS + _of_run(), [run_pk, run_pk])
            calls = max(cursor.rowcount, 0)
    return calls


class _Vectors:
    """A run's vectors made (here, or by a worker process) and copied in, batch by batch."""

    def __init__(self, cursor: Any, reach: Reader | None) -> None:
        from records.bulk.tables import Table
        from records.search.models import SearchEntry

        self.cursor = cursor
        self.entries = Table(SearchEntry, ["id", "body"], binary=False)
        self.left: dict[int, list[int]] = {ATTEMPT: [], CALL: []}
        self.worker = (
            processes.Beside(vector_worker, (reach,), "the search index's vectors")
            if reach is not None and processes.available()
            else None
        )
        self.waiting: collections.deque[int] = collections.deque()  # kinds of batches sent

    def write(self, run_pk: int) -> dict[int, list[int]]:
        """Every document of the run whose vector Python vouches for, copied in; by kind, the
        ids of those left to the statements."""
        try:
            for kind in (ATTEMPT, CALL):
                for ids in self._batches(kind, run_pk):
                    if self.worker is None:
                        self._copy(kind, documents(self._fetch, kind, ids))
                        continue
                    self.worker.send(processes.pack((kind, ids)))
                    self.waiting.append(kind)
                    self._take(IN_FLIGHT)
            self._take(0)
        finally:
            if self.worker is not None:
                if self.waiting:
                    self.worker.stop()  # failed part way: what it still makes is not wanted
                else:
                    self.worker.end_input()
                self.worker.close()
        return self.left

    def _batches(self, kind: int, run_pk: int) -> Iterator[list[int]]:
        """The run's documents of this kind to make in Python, sized by id range and batched
        by bytes; those too long to read go to `left`."""
        cursor = self.cursor
        cursor.execute(_IDS[kind], [run_pk])
        low, high = cursor.fetchone()
        while low is not None and low <= high:
            cursor.execute(_BYTES[kind], [run_pk, low, low + VECTOR_CHUNK])
            batch: list[int] = []
            size = 0
            for pk, stored_bytes in cursor.fetchall():
                if stored_bytes >= READ_BELOW:
                    self.left[kind].append(pk)
                    continue
                batch.append(pk)
                size += stored_bytes
                if size >= VECTOR_BYTES:
                    yield batch
                    batch, size = [], 0
            if batch:
                yield batch
            low += VECTOR_CHUNK

    def _fetch(self, sql: str, params: list[Any]) -> list[tuple]:
        self.cursor.execute(sql, params)
        return self.cursor.fetchall()

    def _take(self, keep: int) -> None:
        """Copy in what the worker made until at most `keep` batches are still on their way."""
        while len(self.waiting) > keep:
            assert self.worker is not None
            kind = self.waiting[0]
            what, made = self.worker.receive()
            if what == "error":
                raise RuntimeError(made)
            self.waiting.popleft()
            self._copy(kind, made)

    def _copy(self, kind: int, made: list[tuple[int, str | None]]) -> None:
        for pk, vector in made:
            if vector is None:
                self.left[kind].append(pk)
            else:
                self.entries.rows.append((2 * pk + kind, vector))
        self.entries.flush(self.cursor)


def forget_run(run_pk: int) -> None:
    """Remove a run's documents from the index (before its rows are deleted). A run not in the
    index, as every run is when its follow-up first indexes it, costs one lookup, not the
    deletes' reading of the ids of each of its attempts and calls (on PostgreSQL some 0.1 s for
    a run of 20,000 attempts)."""
    key = _key()
    with connection.cursor() as cursor:
        # A run's index is written in one transaction, every attempt's document and the calls'
        # filtered columns among it: its first attempt's document, or a call's row, tells.
        cursor.execute(
            f"SELECT EXISTS(SELECT 1 FROM records_searchentry WHERE {key} = 2 *"
            " (SELECT MIN(id) FROM records_attempt WHERE run_id = %s))"
            " OR EXISTS(SELECT 1 FROM records_searchcall WHERE run_id = %s)",
            [run_pk, run_pk],
        )
        if not cursor.fetchone()[0]:
            return
        cursor.execute(
            f"DELETE FROM records_searchentry WHERE {key} IN"
            " (SELECT 2 * id FROM records_attempt WHERE run_id = %s)",
            [run_pk],
        )
        documents = "SELECT 2 * c.id + 1 FROM records_call c" + _of_run()
        cursor.execute(f"DELETE FROM records_searchentry WHERE {_among(key, documents)}", [run_pk])
        cursor.execute("DELETE FROM records_searchcall WHERE run_id = %s", [run_pk])


def forget_everything() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM records_searchentry")
        cursor.execute("DELETE FROM records_searchcall")


def matching(kind: int, query_words: list[str]) -> tuple[str, list[Any]]:
    """SQL selecting the ids of the attempts (ATTEMPT) or calls (CALL) whose own document
    holds every word, and its parameters. `query_words` come from `words`: letters and digits
    only, so quoting them cannot fail and nothing in them is read as an operator."""
    return _matching(kind, query_words)


def matching_among(
    kind: int, query_words: list[str], among: str, among_params: list[Any]
) -> tuple[str, list[Any]]:
    """`matching`, of the documents of the attempts or calls whose ids the SQL `among` selects
    (one column, `x`) alone: an export reads its matches a chunk at a time, and a common word
    matched across the store for every chunk, then joined, costs a chunk the word's whole match
    set (`q=the` over 200,000 attempts, a hundred times over).

    PostgreSQL makes the documents' ids one array first (`= ANY(ARRAY(...))`) and reads each by
    its key to test its words (as `IN (subquery)` it matched the word across the index and
    joined: 160 ms a chunk of 2,000 attempts for `the`, against 6). FTS5 reads a word's match
    set faster than it tests given rowids, so SQLite reads the part of it between the ids' least
    and greatest and keeps the ids among that (5 ms a chunk; the whole match set, 60; the match
    set driven by the caller's query, 170)."""
    return _matching(kind, query_words, (among, among_params))


def _matching(
    kind: int, query_words: list[str], among: tuple[str, list[Any]] | None = None
) -> tuple[str, list[Any]]:
    if connection.vendor == "postgresql":
        words = " & ".join(query_words)
        if among is None:
            sql = (
                "SELECT (id - %s) / 2 FROM records_searchentry"
                " WHERE body @@ to_tsquery('simple', %s) AND id %% 2 = %s"
            )
            return sql, [kind, words, kind]
        sql = (
            "SELECT (id - %s) / 2 FROM records_searchentry"
            f" WHERE id = ANY(ARRAY(SELECT 2 * a.x + %s FROM ({among[0]}) AS a))"
            " AND body @@ to_tsquery('simple', %s)"
        )
        return sql, [kind, kind, *among[1], words]
    sql = (
        "SELECT (rowid - %s) / 2 FROM records_searchentry"
        " WHERE records_searchentry MATCH %s AND rowid %% 2 = %s"
    )
    params = [kind, " ".join(f'"{w}"' for w in query_words), kind]
    if among is not None:
        # The span of the ids bounds the rowids FTS5 reads (it seeks to the first and stops
        # after the last); the ids themselves are then kept among what it found.
        sql += (
            f" AND rowid >= (SELECT 2 * MIN(a.x) + %s FROM ({among[0]}) AS a)"
            f" AND rowid <= (SELECT 2 * MAX(a.x) + %s FROM ({among[0]}) AS a)"
            f" AND (rowid - %s) / 2 IN ({among[0]})"
        )
        params += [kind, *among[1], kind, *among[1], kind, *among[1]]
    return sql, params


def size_bytes() -> int | None:
    """What the index (and the calls' filtered columns kept with it) takes on disk, None where
    the database cannot say."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT pg_total_relation_size('records_searchentry')"
                " + pg_total_relation_size('records_searchcall')"
            )
            return int(cursor.fetchone()[0])
        try:
            cursor.execute(
                "SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'records_search%'"
                " OR name LIKE 'search_call_%'"
            )
        except Exception:  # noqa: BLE001 (SQLite built without the dbstat table)
            return None
        value = cursor.fetchone()[0]
        return int(value) if value is not None else 0
