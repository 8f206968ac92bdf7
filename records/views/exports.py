"""CSV (streamed, formula cells neutralised) and JSON exports, and raw values as downloads."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import (
    HttpResponse,
    StreamingHttpResponse,
)


def json_text(value: Any, **options: Any) -> str:
    """JSON, never with a bare Infinity or NaN (not JSON; a browser's parser refuses it): a
    number that is not finite is sent as null."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False, **options)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


class _Lines:
    """What a csv writer writes, kept until taken."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, value: str) -> None:
        self.lines.append(value)

    def take(self) -> str:
        text = "".join(self.lines)
        self.lines.clear()
        return text


FORMULA = ("=", "+", "-", "@")
# Rows a streamed CSV sends at a time: one piece of the answer each, rather than one a row.
CSV_BATCH = 500


def csv_safe(value: Any) -> Any:
    # A cell starting with = + - @ is a formula to a spreadsheet, also after leading white space
    # (spreadsheets skip it); quote it as text.
    if not isinstance(value, str) or not value:
        return value
    first = value[0]
    if first in FORMULA or first in "\t\r" or (first.isspace() and value.lstrip()[:1] in FORMULA):
        return "'" + value
    return value


def csv_cells(row: dict[str, Any], header: Sequence[str]) -> list[Any]:
    """A row's cells in the header's order, each `csv_safe`. Most cells are not text or start
    with a letter or digit, and are taken as they are without a call (a whole-store export
    writes millions of cells)."""
    return [
        csv_safe(v) if isinstance(v, str) and v and not v[0].isalnum() else v
        for v in map(row.get, header)
    ]


def export(fmt: str, name: str, rows: Iterable[dict[str, Any]]) -> HttpResponse:
    if fmt == "json":
        return HttpResponse(
            json_text({"rows": list(rows)}, cls=DjangoJSONEncoder, indent=1),
            content_type="application/json",
        )
    out = _Lines()
    writer = csv.writer(out)

    def stream() -> Iterable[str]:
        header = None
        for n, row in enumerate(rows, 1):
            if header is None:
                header = list(row)
                writer.writerow(header)
            writer.writerow(csv_cells(row, header))
            if n % CSV_BATCH == 0:
                yield out.take()
        yield out.take()

    return _csv_answer(name, stream())


def export_groups(
    name: str,
    head: Sequence[str],
    tail: Sequence[str],
    groups: Iterable[tuple[dict[str, Any], list[dict[str, Any]]]],
) -> StreamingHttpResponse:
    """A CSV of rows that come in groups sharing their first cells: for each group, its
    `head` cells (one dict) followed, a row each, by the `tail` cells of each of its dicts, or
    by empty cells where it has none. The same bytes as `export` of those rows joined; the
    head's cells are written once a group, not once a row (a whole-store search export writes
    an attempt's nine cells before each of its calls)."""
    if len(head) < 2 or len(tail) < 2:
        # csv writes a row of one empty cell as "", which no longer joins as one row would.
        raise ValueError("a group's head and its rows have two cells or more")
    out, lead = _Lines(), _Lines()
    writer = csv.writer(out)
    heads = csv.writer(lead, lineterminator="")
    blank = [""] * len(tail)

    def stream() -> Iterable[str]:
        n = 0
        for first, rows in groups:
            if not n:  # as `export`, the header comes with the first row
                writer.writerow([*head, *tail])
            heads.writerow(csv_cells(first, head))
            cells = lead.take() + ","  # a row's own cells follow
            for row in rows or (None,):
                out.write(cells)
                writer.writerow(blank if row is None else csv_cells(row, tail))
                n += 1
                if n % CSV_BATCH == 0:
                    yield out.take()
        yield out.take()

    return _csv_answer(name, stream())


def _csv_answer(name: str, pieces: Iterable[str]) -> StreamingHttpResponse:
    """A CSV download streamed piece by piece, named `name`.csv."""
    response = StreamingHttpResponse(pieces, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response


def dump(value: Any) -> str:
    """Compact JSON. Indentation is left out on purpose: it grows with nesting (a 200 KB value
    1,000 levels deep indents to 190 MiB)."""
    return json_text(value, ensure_ascii=False, separators=(",", ":"), default=str)


Lists = Iterable[tuple[str, Iterable[Any]]]


def json_object_pieces(head: dict[str, Any], lists: Lists) -> Iterator[str]:
    """One JSON object as text pieces: `head`'s fields, then each named list one item at a
    time. An item is a value, or an iterator of the pieces of one (a nested streamed object)."""
    yield dump(head)[:-1]
    first = not head
    for key, items in lists:
        yield ("" if first else ",") + dump(key) + ":["
        first = False
        for n, item in enumerate(items):
            if n:
                yield ","
            if isinstance(item, Iterator):
                yield from item
            else:
                yield dump(item)
        yield "]"
    yield "}"


def json_stream(head: dict[str, Any], lists: Lists) -> StreamingHttpResponse:
    """One JSON object sent piece by piece (see `json_object_pieces`), so memory stays bounded
    however long the lists."""
    return StreamingHttpResponse(json_object_pieces(head, lists), content_type="application/json")


def raw_download(value: Any, name: str) -> HttpResponse:
    response = HttpResponse(dump(value), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{name}.json"'
    return response
