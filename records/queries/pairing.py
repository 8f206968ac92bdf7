"""Which rows of two scorings are the same row, and whether they may be compared: the pairing
the comparison pages and the decisions (`records.queries.decisions`) share.

Rows are compared on the keys of modelrecord.md E.4: two rows share a table only when they agree
on corpus digest, contract digest, repeat, case coverage and (across vendors) tool schema digest.
When coverage is all that differs, the cases both sides share can still be compared honestly,
and are, labelled as such; a different corpus digest is refused outright (different answers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from records import evidence
from records.models import Run, Scoring
from records.queries.cost import Tokens, cost_of
from records.scoring.tables import SUMMED, TableRow, ratio_of, row_key_of


def row_figures(row: TableRow) -> dict[str, int]:
    f = {k: (v or 0) for k, v in row.figures.items() if isinstance(v, int | float) or v is None}
    f["counted"] = f.get("attempts", 0)
    return {k: f.get(k, 0) for k in SUMMED}


@dataclass
class Side:
    """One row's figures as compared: all its cases, or a stated subset."""

    run: Run
    scoring: Scoring
    row: TableRow
    figures: dict[str, int]
    price: tuple[float, float, float, float] | None

    def ratio(self, column: str) -> tuple[int, int]:
        return ratio_of(self.figures, column)

    @property
    def tokens(self) -> Tokens:
        return Tokens.of_figures(self.figures)

    @property
    def cost(self) -> float | None:
        c = cost_of(self.tokens, self.price)
        return None if c is None else c.total

    @property
    def cost_per_attempt(self) -> float | None:
        return evidence.cost_per_attempt(self.cost, self.figures["total"])

    @property
    def cost_per_completed(self) -> float | None:
        return evidence.cost_per_completed(self.cost, self.figures["completed"])

    @property
    def overhead(self) -> tuple[int, int]:
        f = self.figures
        return f["discovery"] + f["invalid_params"], f["steps"]


def differences(a: Side, b: Side, *, across_vendors: bool = False) -> list[str]:
    """The comparison keys on which two rows differ (E.4), in words."""
    ka, kb = row_key_of(a.row), row_key_of(b.row)
    out = []
    for key, words in (
        ("corpus", "corpus digest"),
        ("contract", "contract digest"),
        ("repeat", "repeat"),
    ):
        va, vb = getattr(ka, key), getattr(kb, key)
        if va != vb:
            out.append(f"{words} ({va or '-'} vs {vb or '-'})")
    if across_vendors and ka.tools != kb.tools:
        out.append(f"tool schema digest ({ka.tools or '-'} vs {kb.tools or '-'})")
    if (a.row.case_count, a.row.coverage) != (b.row.case_count, b.row.coverage):
        out.append(
            f"case coverage ({a.row.case_count} cases `{a.row.coverage}` vs "
            f"{b.row.case_count} cases `{b.row.coverage}`)"
        )
    if a.scoring.stale != b.scoring.stale:
        out.append("one side is scored against a stale corpus")
    return out


def match_rows(
    left: list[TableRow], right: list[TableRow]
) -> list[tuple[TableRow | None, TableRow | None]]:
    """Two scorings' rows paired on their identity (model, surface, mode, pins), in its order;
    where one run holds several rows of one identity (sessions given different tool lists),
    those pair on their tool schema digest too. Every row appears exactly once."""
    sides: dict[tuple[Any, ...], tuple[list[TableRow], list[TableRow]]] = {}
    for n, rows in enumerate((left, right)):
        for row in rows:
            sides.setdefault(row_key_of(row).identity, ([], []))[n].append(row)
    out: list[tuple[TableRow | None, TableRow | None]] = []
    for _, (a, b) in sorted(sides.items()):
        if len(a) <= 1 and len(b) <= 1:
            out.append((a[0] if a else None, b[0] if b else None))
            continue
        by_tools: dict[str, list[TableRow | None]] = {}
        for n, rows in enumerate((a, b)):
            for row in rows:
                by_tools.setdefault(row_key_of(row).tools, [None, None])[n] = row
        out += [(x, y) for _, (x, y) in sorted(by_tools.items())]
    return out


def refusal(a: Side, b: Side, differs: list[str]) -> str:
    """Why two matched rows are not compared ("" when they are): a different corpus, or a
    difference (`differences`) other than case coverage, whose shared cases still compare."""
    if row_key_of(a.row).corpus != row_key_of(b.row).corpus:
        return (
            "the two rows were scored against different corpora, so their "
            "answers differ: re-score one run against the other's key to "
            "compare them (it is then fenced as stale corpus)"
        )
    apart = [d for d in differs if not d.startswith("case coverage")]
    if apart:
        return "the rows differ in " + "; ".join(apart) + ", so they are not placed in one table"
    return ""
