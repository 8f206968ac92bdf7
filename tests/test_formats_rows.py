"""The row layouts are declared once (records/formats/rows.py); the rows the parser builds as
plain lists must be exactly those layouts, field for field, on every kind of line."""

from __future__ import annotations

import io

import msgspec
import pytest
from django.core.management import call_command

from records.formats.rows import (
    CALL_COLUMNS,
    AttemptRow,
    CallRow,
    SummaryRow,
    TurnRow,
    VerifyRow,
)
from records.formats.shard_rows import messages
from records.models import Call, SurfaceSummary
from tests.builders import FIXTURE_SHARD, shard


def _rows() -> dict[str, list]:
    """The rows of the fixture shard and of a minimal shard with a verify line."""
    out: dict[str, list] = {"turn": [], "call": [], "verify": [], "attempt": [], "summary": []}
    for data in (FIXTURE_SHARD.read_bytes(), shard()):
        _collect(messages(io.BytesIO(data), "modeleval-rows.jsonl"), out)
    return out


def _collect(stream, out: dict[str, list]) -> None:
    for msg in stream:
        if msg[0] == "batch":
            out["turn"] += msg[1]
            out["call"] += msg[2]
            out["verify"] += msg[3]
        elif msg[0] == "shard":
            out["summary"] += msg[1].summaries
        elif msg[0] == "attempts":
            out["attempt"] += [row[1:] for row in msg[1]]  # after the attempt's index


@pytest.mark.parametrize(
    ("kind", "layout"),
    [
        ("turn", TurnRow),
        ("call", CallRow),
        ("verify", VerifyRow),
        ("attempt", AttemptRow),
        ("summary", SummaryRow),
    ],
)
def test_every_built_row_is_its_declared_layout(kind, layout):
    rows = _rows()[kind]
    assert rows, kind
    for row in rows:
        assert len(row) == len(layout.__struct_fields__), (kind, row)
        # Field by field, in order, with its declared type (int may stand for a float).
        msgspec.convert(list(row), layout, strict=False)


def test_the_declared_columns_are_the_models_fields():
    fields = {f.name for f in Call._meta.get_fields()}
    assert set(CALL_COLUMNS) <= fields
    summary = {f.name for f in SurfaceSummary._meta.get_fields()}
    assert set(SummaryRow.__struct_fields__) <= summary


@pytest.mark.django_db
def test_the_tables_the_declared_layouts_give_are_those_the_migrations_build():
    # Columns derive from the layouts: a layout changed without a migration fails here.
    call_command("makemigrations", "records", "--check", "--dry-run", verbosity=0)
