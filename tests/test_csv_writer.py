"""A long CSV written by a worker process beside the one that shapes its rows
(`records.csv_writer`): the same bytes as written in line, whatever the batches."""

from __future__ import annotations

import multiprocessing
import random

import pytest

from records import csv_writer as beside
from records.formats.spreadsheet import group_lines

HEADER = ["a", "b", "c", "d"]


def _groups(n: int, seed: int = 5) -> list[tuple[list, list[list]]]:
    rng = random.Random(seed)
    cells = ["", "x", "=1+1", " -2", 'say "hi",\nthen', "é", "@", None, 7, 2.5, True, "\t+3"]
    return [
        (
            [rng.choice(cells), i],
            [[rng.choice(cells), rng.choice(cells)] for _ in range(rng.choice([0, 0, 1, 3]))],
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("rows", [1, 7, 4000])
def test_rows_written_beside_are_the_bytes_written_in_line(monkeypatch, rows):
    groups = _groups(300)
    monkeypatch.setattr(beside, "BATCH_ROWS", rows)
    before = set(multiprocessing.active_children())
    pieces = list(beside.written(iter(groups), 2, HEADER))
    text = "".join(p if isinstance(p, str) else p.decode() for p in pieces)
    assert text == "".join(group_lines(groups, 2, HEADER))
    # Batches of a few rows: a worker wrote each batch's text, and it has ended since.
    assert (len(pieces) > 10) == (rows < 100)
    assert set(multiprocessing.active_children()) == before
    # Nothing to write: no header, nothing started.
    assert "".join(beside.written(iter([]), 2, HEADER)) == ""


@pytest.mark.parametrize("rows", [7, 4000])
def test_each_rows_last_cell_is_made_where_the_rows_are_written(monkeypatch, rows):
    # A search export's snippets are folded by the writer process (`snippets.folded`): a
    # stretch ([text, cut before, cut after]) in a row's last cell, never in a head's.
    from records.search.snippets import folded

    monkeypatch.setattr(beside, "BATCH_ROWS", rows)
    stretch = ["a\n  b", True, False]
    groups = [([i, "x"], [[1, list(stretch)], [2, "=c"]] if i % 2 else []) for i in range(50)]
    pieces = beside.written(iter(groups), 2, HEADER, folded)
    text = "".join(p if isinstance(p, str) else p.decode() for p in pieces)
    assert text == "".join(group_lines(groups, 2, HEADER, folded))
    assert text.count("1,…a b\r\n") == 25 and text.count("2,'=c\r\n") == 25
    assert "0,x,,\r\n" in text


def test_an_export_given_up_part_way_stops_its_worker(monkeypatch):
    monkeypatch.setattr(beside, "BATCH_ROWS", 3)
    before = set(multiprocessing.active_children())
    pieces = beside.written(iter(_groups(200)), 2, HEADER)
    assert next(pieces).startswith(b"a,b,c,d\r\n")
    assert set(multiprocessing.active_children()) > before  # the worker is writing
    pieces.close()  # the client went away
    assert set(multiprocessing.active_children()) == before


@pytest.mark.parametrize(
    "error",
    # A fork refused here; a forkserver that could not fork (it ends, and its pipe with it).
    [OSError("Resource temporarily unavailable"), EOFError("unexpected EOF")],
)
def test_where_no_process_can_be_started_the_rows_are_written_here(monkeypatch, error):
    def refused(*args, **kwargs):
        raise error

    monkeypatch.setattr(beside, "BATCH_ROWS", 5)
    monkeypatch.setattr(beside.processes.Beside, "several", refused)
    groups = _groups(50)
    text = "".join(beside.written(iter(groups), 2, HEADER))
    assert text == "".join(group_lines(groups, 2, HEADER))
