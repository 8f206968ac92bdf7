"""A run's answer at a glance: per group of comparable rows (a surface, with its mode and pins),
the models ranked by the score a reader picks, each with its interval, its cost per attempt and
per completed attempt, and the best figure of each column marked."""

from __future__ import annotations

from dataclasses import dataclass

from records import evidence, stats
from records.models import Scoring
from records.queries.compare import rank_models
from records.queries.cost import row_cost
from records.scoring.ranking import Ranking
from records.scoring.tables import Group, TableRow
from records.scoring.vocabulary import COLUMN_BY_TITLE


@dataclass
class Standing:
    """One model's line on a board."""

    row: TableRow
    score: tuple[int, int]
    interval: stats.Interval | None
    completion: tuple[int, int]
    cost: float | None  # every attempt of the row, from the run's own prices; None: unpriced
    cost_per_attempt: float | None
    cost_per_completed: float | None
    not_completed: int  # counted attempts that did not complete
    best: set[str]  # the columns this line is best in: score, per_attempt, per_completed


@dataclass
class Board:
    caption: str
    surface: str
    standings: list[Standing]  # ranked, best score first; rows without a score last
    ranking: Ranking
    distinct: list[str] | None = None  # what sets it apart from another board of its surface
    apart: str = ""  # why it is not ranked with the other boards of its surface


def boards(scoring: Scoring, groups: list[Group], title: str) -> list[Board]:
    """The boards of a scored run's groups, ranked on the column titled `title`."""
    column = COLUMN_BY_TITLE[title]
    out = []
    for group, ranking in zip(groups, rank_models(scoring, groups, title), strict=True):
        order = {r.row_key: i for i, (r, _, _) in enumerate(ranking.ranked)}
        standings = [_standing(r, column) for r in group.rows]
        standings.sort(key=lambda s: (order.get(s.row.row_key, len(order)), s.row.model))
        _mark_best(standings)
        out.append(
            Board(
                group.caption,
                group.rows[0].surface,
                standings,
                ranking,
                group.distinct,
                group.apart,
            )
        )
    return out


def _standing(row: TableRow, column: str) -> Standing:
    f = row.figures
    total = row_cost(row)
    completed, attempts = f["completed"], f["attempts"]
    return Standing(
        row,
        dict(row.columns)[column],
        row.interval(column),
        (completed, attempts),
        total,
        evidence.cost_per_attempt(total, f["total"]),
        evidence.cost_per_completed(total, completed),
        attempts - completed,
        set(),
    )


def _mark_best(standings: list[Standing]) -> None:
    scored = [s for s in standings if s.score[1]]
    if scored:
        top = max(s.score[0] / s.score[1] for s in scored)
        for s in scored:
            if s.score[0] / s.score[1] == top:
                s.best.add("score")
    for name in ("cost_per_attempt", "cost_per_completed"):
        priced = [getattr(s, name) for s in standings if getattr(s, name) is not None]
        if len(priced) > 1:
            low = min(priced)
            for s in standings:
                if getattr(s, name) == low:
                    s.best.add(name)
