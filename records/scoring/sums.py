"""A scoring's sums, taken from its verdict rows as they are written: each score row's figures,
its per-case counts and figures, and each case's marks in repeat order. Storing a scoring then
reads none of its verdicts back (four reads of every verdict: a quarter of a re-score's time).

Pure: verdict rows as `records.scorer.batch.score_chunk` makes them (`VERDICT_FIELDS`) in, plain
values out. The sums are those the database makes of the stored verdicts
(`records.scoring.tables.verdict_sums`, `figure_sums` and `case_figures`), and a test holds them
to it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from operator import add, itemgetter
from typing import Any

from records.formats.rows import ADDITIVE, CONFIRMATIONS, FAILURE_COLUMNS, TOKENS, VERDICT_FIELDS
from records.scorer.score import OUTCOMES

# What a (row key, case) cell sums, in this order: how many of its verdicts were counted, clean
# and unaided; the sums of their counts, tries (`turns`) and tokens; how many ended in each
# outcome. Its total is kept beside it.
CELL = (
    "counted",
    "clean",
    "unaided",
    *ADDITIVE,
    *CONFIRMATIONS,
    "turns",
    *TOKENS,
    *OUTCOMES,
)
_COLUMN = {**{n: n for n in CELL}, "turns": "tries"}
_SUMMED_COLUMNS = CELL[: len(CELL) - len(OUTCOMES)]
_values = itemgetter(*(VERDICT_FIELDS.index(_COLUMN[n]) for n in _SUMMED_COLUMNS))
_AT = {name: i for i, name in enumerate(VERDICT_FIELDS)}
_OUTCOME_AT = {o: len(_SUMMED_COLUMNS) + i for i, o in enumerate(OUTCOMES)}
_ZERO = (0,) * len(CELL)
_signature_of = itemgetter(_AT["outcome"], *(_AT[c] for c in FAILURE_COLUMNS[1:]))
_REPEAT_AT = 2 + 63  # an attempt's id takes 63 bits (a signed 64-bit column), its mark 2
_MARKS = "-01"  # counted apart, counted and not clean, clean
# Each figure's place in a cell's sums followed by its total (`ScoringSums._full`).
_FULL_AT = {**{n: i for i, n in enumerate(CELL)}, "total": len(CELL)}

# A score row's figures, in the order its stored figures have them.
ROW_FIGURES = (
    "attempts",
    "total",
    "clean",
    "unaided",
    *ADDITIVE,
    "turns",
    *TOKENS,
    *CONFIRMATIONS,
    *OUTCOMES,
)
# A case's figures, as `records.scoring.tables.case_figures` reads them (`SUMMED` there).
CASE_FIGURES = (
    "counted",
    "total",
    "clean",
    "unaided",
    "completed",
    *ADDITIVE,
    *TOKENS,
    "turns",
)


class ScoringSums:
    """The sums of the verdict rows `add`ed so far. Its size grows with the cells (cases times
    rows) and one mark per attempt, not with what a verdict carries."""

    def __init__(self) -> None:
        self._cells: dict[tuple[str, str], list[int]] = {}
        self._totals: dict[tuple[str, str], int] = {}
        self._rows: dict[str, list[Any]] = {}  # row key: [model, surface, first session]
        # Each attempt's mark as one int, (repeat, attempt id, mark) in that order of bits, so
        # they sort in repeat order: one small object each, not a tuple of three.
        self._marks: dict[tuple[str, str], list[int]] = {}
        # Attempts per (failure mode, model, surface, case), and each mode's signature parts
        # (outcome first, then `FAILURE_COLUMNS` past the mode).
        self._failures: dict[tuple[str, str, str, str], int] = {}
        self._signatures: dict[str, tuple[str, ...]] = {}

    def add(self, rows: Iterable[tuple], repeats: Mapping[int, int]) -> None:
        """Verdict rows (`VERDICT_FIELDS`); `repeats`: each attempt's repeat, by its id."""
        at = _AT
        i_attempt, i_key, i_case, i_outcome = (
            at["attempt"],
            at["row_key"],
            at["case"],
            at["outcome"],
        )
        i_model, i_surface, i_session = at["model"], at["surface"], at["session"]
        i_counted, i_clean = at["counted"], at["clean"]
        cells, totals, keyed, marks = self._cells, self._totals, self._rows, self._marks
        failures, signatures = self._failures, self._signatures
        i_mode = at["failure_mode"]
        signed = _signature_of
        for r in rows:
            cell_key = (r[i_key], r[i_case])
            cell = cells.get(cell_key)
            if cell is None:
                cell = cells[cell_key] = list(_ZERO)
                totals[cell_key] = 0
            cell[: len(_SUMMED_COLUMNS)] = map(add, cell, _values(r))
            cell[_OUTCOME_AT[r[i_outcome]]] += 1
            totals[cell_key] += 1
            row = keyed.get(r[i_key])
            if row is None:
                row = keyed[r[i_key]] = [r[i_model], r[i_surface], None]
            session = r[i_session]
            if row[2] is None:  # verdicts come in the shard's order: the first attempt's session
                row[2] = session
            pk = r[i_attempt]
            mark = (2 if r[i_clean] else 1) if r[i_counted] else 0
            marks.setdefault(cell_key, []).append((repeats[pk] << _REPEAT_AT) | (pk << 2) | mark)
            mode = r[i_mode]
            if mode:
                failure = (mode, r[i_model], r[i_surface], r[i_case])
                failures[failure] = failures.get(failure, 0) + 1
                if mode not in signatures:
                    signatures[mode] = signed(r)

    def failures(self) -> Iterator[tuple[str, str, str, str, int]]:
        """(failure mode, model, surface, case, attempts) of the verdicts that did not pass, in
        that order."""
        for key in sorted(self._failures):
            yield (*key, self._failures[key])

    def signatures(self) -> dict[str, tuple[str, ...]]:
        """Each failure mode met: its signature as (outcome, step, tool, action, call outcome,
        argument, check, message), blank where absent."""
        return dict(self._signatures)

    def _full(self, key: tuple[str, str]) -> list[int]:
        """A cell's sums in `CELL` order, then its total (`_FULL_AT` names each place)."""
        return [*self._cells[key], self._totals[key]]

    def case_counts(self) -> Iterator[tuple[str, str, int, int, int]]:
        """(row key, case, completed, counted, total) per cell, in row key and case order."""
        counts = itemgetter(_FULL_AT["completed"], _FULL_AT["counted"], _FULL_AT["total"])
        for key in sorted(self._cells):
            yield (*key, *counts(self._full(key)))

    def per_case(self) -> dict[str, dict[str, dict[str, int]]]:
        """{row key: {case: figures}}, as `records.scoring.tables.case_figures` reads them, in
        row key and case order (the order SQLite groups them in, which intervals summing their
        ratios follow to the last digit)."""
        out: dict[str, dict[str, dict[str, int]]] = {}
        figures = itemgetter(*(_FULL_AT[n] for n in CASE_FIGURES))
        for key in sorted(self._cells):
            named = dict(zip(CASE_FIGURES, figures(self._full(key)), strict=True))
            out.setdefault(key[0], {})[key[1]] = named
        return out

    def rows(self) -> Iterator[tuple[str, str, str, int | None, dict[str, int], list[str]]]:
        """(row key, model, surface, session, figures, cases) per score row, in row key order:
        the figures summed over the row's cases, its cases in order."""
        cases: dict[str, list[str]] = {}
        for row_key, case in sorted(self._cells):
            cases.setdefault(row_key, []).append(case)
        # A row's figures, `ROW_FIGURES` in order: "attempts" is the cells' counted attempts.
        figures = itemgetter(_FULL_AT["counted"], *(_FULL_AT[n] for n in ROW_FIGURES[1:]))
        for row_key in sorted(self._rows):
            model, surface, session = self._rows[row_key]
            sums = [0] * len(ROW_FIGURES)
            for case in cases[row_key]:
                sums = list(map(add, sums, figures(self._full((row_key, case)))))
            yield (
                row_key,
                model,
                surface,
                session,
                dict(zip(ROW_FIGURES, sums, strict=True)),
                cases[row_key],
            )

    def marks(self) -> Iterator[tuple[str, str, str, str, str]]:
        """(case, row key, model, surface, marks) per cell, in case and row key order: one mark
        per attempt in repeat order, `1` clean, `0` counted and not clean, `-` counted apart."""
        for row_key, case in sorted(self._marks, key=lambda k: (k[1], k[0])):
            model, surface, _ = self._rows[row_key]
            marks = sorted(self._marks[(row_key, case)])
            yield case, row_key, model, surface, "".join(_MARKS[m & 3] for m in marks)
