"""CSV (streamed, formula cells neutralised) and JSON exports, and raw values as downloads."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import (
    HttpResponse,
    StreamingHttpResponse,
)

from records.csv_writer import written
from records.formats.spreadsheet import CSV_BATCH, Lines, csv_cells


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


def export(fmt: str, name: str, rows: Iterable[dict[str, Any]]) -> HttpResponse:
    if fmt == "json":
        return HttpResponse(
            json_text({"rows": list(rows)}, cls=DjangoJSONEncoder, indent=1),
            content_type="application/json",
        )
    out = Lines()
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
    groups: Iterable[tuple[Sequence[Any], Sequence[Sequence[Any]]]],
    last: Callable[[Any], Any] | None = None,
) -> StreamingHttpResponse:
    """A CSV of rows that come in groups sharing their first cells: for each group, its
    cells named by `head` followed, a row each, by the cells named by `tail` of each of its
    rows, or by empty cells where it has none (`records.formats.spreadsheet.group_lines`).
    The same bytes as `export` of those rows joined. A long one is written by a worker process
    beside this one, which reads and shapes the rows meanwhile (`records.csv_writer`): its
    cells are plain values (str, int, float, bool, None), as they cross to that process, and
    `last`, if given, makes each row's last cell there (a module's own function)."""
    if len(head) < 2 or len(tail) < 2:
        # csv writes a row of one empty cell as "", which no longer joins as one row would.
        raise ValueError("a group's head and its rows have two cells or more")
    return _csv_answer(name, written(groups, len(tail), [*head, *tail], last))


def _csv_answer(name: str, pieces: Iterable[str | bytes]) -> StreamingHttpResponse:
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
