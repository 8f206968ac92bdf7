"""CSV (streamed, formula cells neutralised) and JSON exports, and raw values as downloads."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable
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


class _Echo:
    def write(self, value: str) -> str:
        return value


def _csv_safe(value: Any) -> Any:
    # A cell starting with = + - @ is a formula to a spreadsheet, also after leading white space
    # (spreadsheets skip it); quote it as text.
    if isinstance(value, str) and (
        value[:1] in ("\t", "\r") or value.lstrip()[:1] in ("=", "+", "-", "@")
    ):
        return "'" + value
    return value


def _export(fmt: str, name: str, rows: Iterable[dict[str, Any]]) -> HttpResponse:
    if fmt == "json":
        return HttpResponse(
            json_text({"rows": list(rows)}, cls=DjangoJSONEncoder, indent=1),
            content_type="application/json",
        )
    writer = csv.writer(_Echo())

    def stream() -> Iterable[str]:
        header = None
        for row in rows:
            if header is None:
                header = list(row)
                yield writer.writerow(header)
            yield writer.writerow([_csv_safe(row.get(k)) for k in header])

    response = StreamingHttpResponse(stream(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response


def _json_stream(
    head: dict[str, Any], key: str, items: Iterable[Any], tail: dict[str, Any]
) -> StreamingHttpResponse:
    """One JSON object sent piece by piece, compact: `head`'s fields, then `key` as a list of
    `items` one at a time, then `tail`'s fields. Indentation is left out on purpose: it grows
    with nesting (a 200 KB value 1,000 levels deep indents to 190 MiB)."""

    def dump(value: Any) -> str:
        return json_text(value, ensure_ascii=False, separators=(",", ":"), default=str)

    def pieces() -> Iterable[str]:
        yield dump(head)[:-1] + ("," if head else "") + dump(key) + ":["
        for n, item in enumerate(items):
            yield ("," if n else "") + dump(item)
        yield "]" + ("," + dump(tail)[1:] if tail else "}")

    return StreamingHttpResponse(pieces(), content_type="application/json")


def _raw(value: Any, name: str) -> HttpResponse:
    response = HttpResponse(
        json_text(value, ensure_ascii=False, separators=(",", ":")),
        content_type="application/json",
    )
    response["Content-Disposition"] = f'attachment; filename="{name}.json"'
    return response
