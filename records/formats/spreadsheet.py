"""CSV as a spreadsheet reads it: cells that would start a formula neutralised, rows written in
pieces. Pure Python, no Django: a worker process writes a long export's rows this way
(`records.csv_writer`), and the views' exports do (`records.views.exports`).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

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


def safe_cells(cells: Iterable[Any]) -> list[Any]:
    """Cells, each `csv_safe`. Most are not text or start with a letter or digit, and are taken
    as they are without a call (a whole-store export writes millions of cells)."""
    return [csv_safe(v) if isinstance(v, str) and v and not v[0].isalnum() else v for v in cells]


def csv_cells(row: dict[str, Any], header: Sequence[str]) -> list[Any]:
    """A row's cells in the header's order, each `csv_safe`."""
    return safe_cells(map(row.get, header))


class Lines:
    """What a csv writer writes, kept until taken."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, value: str) -> None:
        self.lines.append(value)

    def take(self) -> str:
        text = "".join(self.lines)
        self.lines.clear()
        return text


Group = tuple[Sequence[Any], Sequence[Sequence[Any]]]


def group_lines(
    groups: Iterable[Group],
    width: int,
    header: Sequence[str] = (),
    last: Callable[[Any], Any] | None = None,
) -> Iterator[str]:
    """CSV text, `CSV_BATCH` rows a piece, of rows that come in groups sharing their first
    cells: each group's head cells followed, a row each, by the cells of each of its rows, or
    by `width` empty cells where it has none; `header` (if any) before the first row. The same
    bytes as each row written whole; the head's cells are written once a group, not once a
    row (a whole-store search export writes an attempt's nine cells before each of its
    calls). `last`, if given, makes each row's last cell what is written (a search export's
    snippet is folded here, in the writer process). Every cell is `csv_safe`. A group's head
    and its rows have two cells or more (csv writes a row of one empty cell as "", which no
    longer joins as one row would)."""
    out, lead = Lines(), Lines()
    writer = csv.writer(out)
    heads = csv.writer(lead, lineterminator="")
    blank = [""] * width
    n = 0
    for first, rows in groups:
        if not n and header:
            writer.writerow(header)
        heads.writerow(safe_cells(first))
        cells = lead.take() + ","  # a row's own cells follow
        for row in rows or (None,):
            out.write(cells)
            if row is not None and last is not None:
                row = [*row[:-1], last(row[-1])]
            writer.writerow(blank if row is None else safe_cells(row))
            n += 1
            if n % CSV_BATCH == 0:
                yield out.take()
    yield out.take()
