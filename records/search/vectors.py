"""A call's or an attempt's document as PostgreSQL's index holds it (a `tsvector` of its words),
made in Python where that gives the very same vector, so the database's regular expressions
(most of a PostgreSQL ingest's time) cut only what Python cannot vouch for. Pure Python: the
parser process makes the calls' beside the writer, the writer the attempts' (`AttemptTexts`)
from the rows it passes on.

The statement in `records.search.engine` joins a call's JSON values (strings and numbers as
`jsonb` prints them, not the keys), its arguments' then its result's, and its text; lower-cases
its first `INDEXED_CHARS` characters and keeps each run of letters and digits shorter than
2 kB. A document of ASCII text well under that length gives the same words here, whatever the
order its values are joined in: the vector is the set of its words. Anything else (a letter
outside ASCII, whose case and class the database's locale decides; a NUL, which `jsonb`
refuses; a document near the length where the head is cut) is left to the database (None).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgspec
import orjson

from records.formats.rows import CallRow, TurnRow, VerifyRow, position

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

_ARGUMENTS, _RESULT, _TEXT = (position(CallRow, f) for f in ("arguments", "result", "text"))


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


def call_vectors(calls: list[Any]) -> list[str | None]:
    """`call_vector` of each call row (`CallRow`'s layout), in order."""
    return [call_vector(r[_ARGUMENTS], r[_RESULT], r[_TEXT]) for r in calls]


_BLOCKS = position(TurnRow, "blocks")
_DETAIL = position(VerifyRow, "detail")

# About this many bytes of attempts' own text (each piece charged its length and what Python
# keeps beside it) wait for their attempt rows; past it, the shard's attempts are left to the
# database, so memory stays bounded whatever the shard.
ATTEMPT_TEXT_BUDGET = 32 * 1024 * 1024
_PIECE_COST = 64  # bytes of a kept piece besides its characters (the str object, its list slot)


class AttemptTexts:
    """The text of each attempt's document that its turn and verify rows carry (its blocks'
    text, its checks' details), kept as those rows go by, until its attempt row comes (last,
    with its stimulus and reason) and `vector` makes its `tsvector` text as the statement in
    `records.search.engine` would: blocks' `text` as `->>` reads it (a string; a block whose
    text is anything else leaves the attempt to the database), details as they are."""

    def __init__(self, budget: int = ATTEMPT_TEXT_BUDGET) -> None:
        self.texts: dict[int, list[str]] = {}
        self.unsure: set[int] = set()
        self.left = budget  # bytes that may still be kept; below 0, none are

    def _keep(self, attempt: int, text: str) -> None:
        self.left -= len(text) + _PIECE_COST
        self.texts.setdefault(attempt, []).append(text)

    def add(self, turns: list[Any], verifies: list[Any]) -> None:
        """A batch's turn and verify rows, each still naming its attempt by index."""
        if self.left < 0:
            return
        for r in turns:
            try:
                blocks = orjson.loads(r[_BLOCKS])
            except orjson.JSONDecodeError:
                self.unsure.add(r[0])
                continue
            for b in blocks:
                text = b.get("text") if isinstance(b, dict) else None
                if isinstance(text, str):
                    self._keep(r[0], text)
                elif text is not None:
                    self.unsure.add(r[0])
        for r in verifies:
            self._keep(r[0], r[_DETAIL])
        if self.left < 0:
            self.texts.clear()  # over budget: every attempt of the shard is the database's

    def vector(self, attempt: int, stimulus: str, reason: str) -> str | None:
        """The attempt's `tsvector` text, or None where the database must make it."""
        if self.left < 0 or attempt in self.unsure:
            return None
        return text_vector([stimulus, reason, *self.texts.pop(attempt, ())])
