"""A call's or an attempt's document as PostgreSQL's index holds it (a `tsvector` of its words),
made in Python where that gives the very same vector, so the database's regular expressions
(most of the index's time on PostgreSQL) cut only what Python cannot vouch for. Pure Python:
`records.search.engine.index_new_run` reads the stored pieces of each document (`documents`,
in a worker process of its own for a large run) and makes its vector here.

The statements in `records.search.engine` join a call's JSON values (strings and numbers as
`jsonb` prints them, not the keys), its arguments' then its result's, and its text; or an
attempt's stimulus, reason, its turns' blocks' `text` and its checks' details. Each lower-cases
its document's first `INDEXED_CHARS` characters and keeps each run of letters and digits
shorter than 2 kB. A document of ASCII text well under that length gives the same words here,
whatever the order its pieces are joined in: the vector is the set of its words. Anything else
(a letter outside ASCII, whose case and class the database's locale decides; a NUL, which
`jsonb` refuses; a document near the length where the head is cut) is left to the database
(None).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

import msgspec
import orjson

# A document's kind, and its id in the index: 2 x the attempt's id, or 2 x the call's id + 1.
ATTEMPT, CALL = 0, 1

# What is indexed of one document (an attempt's own text, or one call's): its first characters.
INDEXED_CHARS = 100_000
# A document this long or longer is left to the database: its head is, or may be, cut there.
WHOLE_BELOW = INDEXED_CHARS - 1000
LONGEST_WORD = 2047  # bytes: a longer word is left out, as the database leaves it out

# ASCII letters lower-cased and digits kept, every other byte a separator.
_WORDS = bytes(
    c + 32 if 65 <= c <= 90 else c if 48 <= c <= 57 or 97 <= c <= 122 else 32 for c in range(256)
)
_encode_float = msgspec.json.Encoder().encode


def _values(value: Any, out: list[str]) -> None:
    """The strings and numbers in a JSON value, as the database prints them (in no particular
    order: the vector is a set). Walked with a list, not by recursion, so that no depth of
    nesting a shard may hold stops it."""
    pending = [value]
    while pending:
        v = pending.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            pending.extend(v.values())
        elif isinstance(v, list):
            pending.extend(v)
        elif isinstance(v, bool) or v is None:
            continue
        elif isinstance(v, int):
            out.append(str(v))
        else:
            # The float as the parser wrote it into the column, then in `numeric`'s plain
            # notation (`1e-7` reads 0.0000001 there), which is what `jsonb` prints.
            out.append(format(Decimal(_encode_float(v).decode()), "f"))


def call_vector(arguments: str | None, result: str | None, text: str) -> str | None:
    """The `tsvector` text of a call's document, or None when only the database can say. The
    JSON columns are as the parser writes them (`records.formats.shard_rows`): a float there
    is the text its encoder gives it, which is what this reads it back into."""
    out: list[str] = []
    for column in (arguments, result):
        if column is not None:
            try:
                _values(orjson.loads(column), out)
            except orjson.JSONDecodeError:
                return None  # nested deeper than orjson reads: the database reads it
    out.append(text)
    return text_vector(out)


def text_vector(texts: list[str]) -> str | None:
    """The `tsvector` text of a document joined from `texts` (in any order), or None when only
    the database can say (see the module's docstring)."""
    doc = " ".join(texts)
    if len(doc) >= WHOLE_BELOW or not doc.isascii() or "\x00" in doc:
        return None
    words = set(doc.encode().translate(_WORDS).split())
    if words and max(map(len, words)) > LONGEST_WORD:
        words = {w for w in words if len(w) <= LONGEST_WORD}
    # Letters and digits only: each word quoted as it is, in one join.
    return (b"'" + b"' '".join(sorted(words)) + b"'").decode() if words else ""


def attempt_vector(
    stimulus: str, reason: str, blocks: Iterable[str], details: Iterable[str]
) -> str | None:
    """The `tsvector` text of an attempt's document, or None when only the database can say:
    its stimulus and reason, each of its turns' blocks (`blocks`, as stored: JSON arrays) by
    their `text` as `->>` reads it (a string; a block whose text is anything else, which `->>`
    prints as JSON, leaves the attempt to the database), and its checks' details as they are."""
    texts = [stimulus, reason, *details]
    for column in blocks:
        try:
            turn = orjson.loads(column)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(turn, list):
            return None
        for block in turn:
            text = block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str):
                texts.append(text)
            elif text is not None:
                return None
    return text_vector(texts)


# The pieces of each kind of document, read by id (PostgreSQL's SQL, in Django's %s style).
_CALL_TEXTS = (
    "SELECT id, arguments::text, result::text, text FROM records_call"
    " WHERE id = ANY(%s) ORDER BY id"
)
_ATTEMPT_TEXTS = "SELECT id, stimulus, reason FROM records_attempt WHERE id = ANY(%s) ORDER BY id"
_TURN_BLOCKS = "SELECT attempt_id, blocks::text FROM records_turn WHERE attempt_id = ANY(%s)"
_VERIFY_DETAILS = "SELECT attempt_id, detail FROM records_verify WHERE attempt_id = ANY(%s)"


def documents(
    fetch: Callable[[str, list[Any]], list[tuple]], kind: int, ids: list[int]
) -> list[tuple[int, str | None]]:
    """Each of these documents' id and vector (None: the statement's to make), its pieces read
    by `fetch(sql, params)` (a worker's own connection, `records.bulk.apart`, or Django's)."""
    if kind == CALL:
        return [
            (pk, call_vector(arguments, result, text or ""))
            for pk, arguments, result, text in fetch(_CALL_TEXTS, [ids])
        ]
    blocks: dict[int, list[str]] = {}
    details: dict[int, list[str]] = {}
    for pk, text in fetch(_TURN_BLOCKS, [ids]):
        blocks.setdefault(pk, []).append(text)
    for pk, detail in fetch(_VERIFY_DETAILS, [ids]):
        details.setdefault(pk, []).append(detail)
    return [
        (pk, attempt_vector(stimulus, reason, blocks.get(pk, ()), details.get(pk, ())))
        for pk, stimulus, reason in fetch(_ATTEMPT_TEXTS, [ids])
    ]
