"""A corpus's cases across runs: which are flaky, which flipped and when, which tell models apart.

Everything here reads the per-case figures kept with each scoring (`CaseFigure`), never a
verdict: a page's queries stay the same in number however many runs and attempts it covers.
Scorings stored before those figures were kept get theirs the first time a page needs them.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from functools import cached_property
from urllib.parse import urlencode

import numpy as np
from django.db.models import CharField, Exists, OuterRef, StringAgg, Sum
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from records import stats
from records.models import CaseFigure, CorpusKey, KeyCase, Run, Scoring


@dataclass(frozen=True)
class Choice:
    """Which runs and rows a page covers: every run of a corpus digest, or fewer."""

    digest: str
    since: date | None = None
    until: date | None = None
    commit: str = ""
    model: str = ""
    surface: str = ""

    def narrowed(self) -> bool:
        return bool(self.since or self.until or self.commit)


@dataclass
class Point:
    """One run of a timeline: its Clean attempts over its counted ones, repeats in order."""

    run: Run
    clean: tuple[int, int]
    marks: str
    row_key: str

    @property
    def interval(self) -> stats.Interval | None:
        return stats.wilson(*self.clean)

    @property
    def repeats(self) -> tuple[tuple[str, str, str], ...]:
        """Each repeat's mark as a page shows it: its kind, in words, and its sign."""
        return repeats(self.marks)


REPEAT_MARKS = {"1": ("clean", "Clean", "✓"), "0": ("unclean", "not Clean", "✗")}
APART_MARK = ("apart", "counted apart", "·")


@functools.lru_cache(maxsize=1024)
def repeats(marks: str) -> tuple[tuple[str, str, str], ...]:
    """`Point.repeats` of a run's marks (kept per marks: a page's runs repeat a case alike, and
    share a few hundred strings of marks at most)."""
    return tuple(REPEAT_MARKS.get(mark, APART_MARK) for mark in marks)


@dataclass(eq=False)
class ModelLine:
    """A case for one model on one surface, over the runs chosen: the runs holding it, in
    order, each with its Clean attempts over its counted ones (`figures`, as two arrays, and
    `counts`, as pairs); on a case's page also each run's repeats (`timeline`)."""

    model: str
    surface: str
    runs: list[Run]
    figures: tuple[np.ndarray, np.ndarray]
    timeline: list[Point] = field(default_factory=list)
    clean: tuple[int, int] = (0, 0)
    flakiness: stats.Flakiness | None = None
    flip: stats.Flip | None = None
    flip_index: int | None = None  # in `runs`: the first run of the changed rate
    before_index: int | None = None  # the run before it with a counted attempt

    @cached_property
    def counts(self) -> list[tuple[int, int]]:
        clean, counted = self.figures
        return list(zip(clean.tolist(), counted.tolist(), strict=True))

    @cached_property
    def interval(self) -> stats.Interval | None:
        return stats.case_interval_of(*self.figures)

    @property
    def flaky(self) -> bool:
        return bool(self.flakiness and self.flakiness.flaky)

    @property
    def flip_run(self) -> Run | None:
        return None if self.flip_index is None else self.runs[self.flip_index]

    @property
    def flip_at(self) -> Point | None:
        return self.timeline[self.flip_index] if self.timeline and self.flip else None

    @property
    def before_flip(self) -> Point | None:
        return self.timeline[self.before_index] if self.timeline and self.flip else None


@dataclass
class Grid:
    """A page's model lines over the runs chosen as matrices, a row per line (case, model and
    surface, in that order) and a column per run: the line's Clean and counted attempts in the
    run, and whether the run holds the line at all (a run holding it in two rows, as two
    modes, has them summed); and each line's attempts over every run."""

    lines: list[tuple[str, str, str]]
    attempts: list[int]
    clean: np.ndarray
    counted: np.ndarray
    held: np.ndarray

    @classmethod
    def of(
        cls,
        lines: list[tuple[str, str, str]],
        attempts: list[int],
        runs: int,
        cell: np.ndarray,
        clean: np.ndarray,
        counted: np.ndarray,
    ) -> Grid:
        """The grid of figures each given with its cell (row times `runs` plus column)."""
        shape = (len(lines), runs)
        size = shape[0] * shape[1]
        times = np.bincount(cell, minlength=size)
        if len(cell) and times.max() > 1:
            k = np.bincount(cell, weights=clean, minlength=size).round().astype(np.int64)
            d = np.bincount(cell, weights=counted, minlength=size).round().astype(np.int64)
        else:  # the usual grid: one figure a cell, placed rather than summed
            k, d = np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64)
            k[cell], d[cell] = clean, counted
        return cls(lines, attempts, k.reshape(shape), d.reshape(shape), times.reshape(shape) > 0)


@dataclass
class CaseLine:
    """One case of the corpus over the runs chosen."""

    case: str
    steps: int
    attempts: int = 0
    clean: tuple[int, int] = (0, 0)
    interval: stats.Interval | None = None
    separation: stats.Discrimination | None = None
    by_model: list[ModelLine] = field(default_factory=list)

    @property
    def difficulty(self) -> float | None:
        """The share of counted attempts that were Clean (higher is easier)."""
        k, n = self.clean
        return k / n if n else None

    @property
    def discrimination(self) -> float | None:
        return None if self.separation is None or self.separation.models < 2 else self.separation.v

    @property
    def separates(self) -> bool:
        """Whether the models' rates on this case differ beyond noise."""
        return bool(self.separation and self.separation.p_value < stats.ALPHA)

    @property
    def flaky(self) -> bool:
        return any(m.flaky for m in self.by_model)

    @property
    def flipped(self) -> bool:
        return any(m.flip for m in self.by_model)

    @property
    def never_passed(self) -> bool:
        return bool(self.clean[1]) and self.clean[0] == 0

    @property
    def always_passed(self) -> bool:
        return bool(self.clean[1]) and self.clean[0] == self.clean[1]


FLAGS = ("flaky", "flipped", "never_passed", "always_passed")
SORTS = ("case", "steps", "attempts", "clean", "difficulty", "discrimination", *FLAGS)


@dataclass
class Corpus:
    choice: Choice
    key: CorpusKey | None
    runs: list[Run]
    cases: list[CaseLine]

    @property
    def uninformative(self) -> int:
        return sum(1 for c in self.cases if c.never_passed or c.always_passed)

    @property
    def most_discriminating(self) -> list[CaseLine]:
        ranked = [c for c in self.cases if c.separates]
        ranked.sort(key=lambda c: (-(c.discrimination or 0), c.case))
        return ranked[:3]

    @property
    def not_told_apart(self) -> int:
        """Cases two or more models ran on which no difference between the models is beyond
        noise."""
        return sum(
            1 for c in self.cases if c.separation and c.separation.models >= 2 and not c.separates
        )

    @property
    def with_attempts(self) -> int:
        return sum(1 for c in self.cases if c.clean[1])

    def count(self, flag: str) -> int:
        return sum(1 for c in self.cases if getattr(c, flag))


def newest_digest() -> str | None:
    key = CorpusKey.objects.defer("document").order_by("-created_at", "-id").first()
    return key.digest if key else None


def key_of(digest: str) -> CorpusKey | None:
    return (
        CorpusKey.objects.filter(digest=digest)
        .defer("document")
        .order_by("-created_at", "-id")
        .first()
    )


def chosen_runs(choice: Choice) -> tuple[list[Run], dict[int, Scoring]]:
    """The runs of the digest as chosen, oldest first, with their latest scoring against a key
    of that digest (runs without one are left out). Two queries."""
    narrowing = {
        "started_at__date__gte": choice.since,
        "started_at__date__lte": choice.until,
        "commit__startswith": choice.commit,
    }
    runs = Run.objects.filter(
        corpus_digest=choice.digest, **{k: v for k, v in narrowing.items() if v}
    )
    listed = list(runs.only("id", "run_id", "commit", "started_at").order_by("started_at", "id"))
    scorings = {
        run_id: s for run_id, s in Scoring.objects.latest_for(listed).items() if not s.stale
    }
    return [r for r in listed if r.pk in scorings], scorings


def fill_missing(scorings: Iterable[Scoring]) -> int:
    """Store the per-case figures of the scorings that have none (stored before they were
    kept). One query when none is missing."""
    ids = {s.pk: s for s in scorings}
    if not ids:
        return 0
    # One look into the (scoring, case) index per scoring, not a pass over every figure.
    have = set(
        Scoring.objects.filter(pk__in=list(ids))
        .filter(Exists(CaseFigure.objects.filter(scoring_id=OuterRef("pk"))))
        .values_list("pk", flat=True)
    )
    missing = [s for pk, s in ids.items() if pk not in have]
    for s in missing:
        CaseFigure.objects.store_for(s)
    return len(missing)


def _figures(choice: Choice, scorings: dict[int, Scoring], case: str | None = None):
    wanted = CaseFigure.objects.filter(scoring_id__in=[s.pk for s in scorings.values()])
    if case is not None:
        wanted = wanted.filter(case=case)
    if choice.model:
        wanted = wanted.filter(model__icontains=choice.model)
    if choice.surface:
        wanted = wanted.filter(surface=choice.surface)
    return wanted


def _joined(name: str) -> StringAgg:
    """A column's values over a group, as text ("3 0 2"): in one query every aggregate of a
    group is fed its rows in the same order, so the n-th value of each names the same row. The
    space is written into the query: SQLite reads a bound delimiter again for every row, which
    costs it a third of the query."""
    return StringAgg(Cast(name, output_field=CharField()), delimiter=RawSQL("' '", ()))


def _grouped(
    choice: Choice, runs: list[Run], scorings: dict[int, Scoring], cases: list[str]
) -> Grid:
    """Every case's model lines without repeats: one query, grouped by case, model and surface
    in the order of their index (named by the corpus's cases, so the database reads the index
    in that order rather than sorting the chosen runs' figures)."""
    rows = sorted(
        _figures(choice, scorings)
        .filter(case__in=cases)
        .values("case", "model", "surface")
        .annotate(
            scoring_ids=_joined("scoring_id"),
            clean=_joined("clean"),
            counted=_joined("counted"),
            attempts=Sum("total"),
        )
        .values_list("case", "model", "surface", "scoring_ids", "clean", "counted", "attempts")
        .order_by()
    )
    if not rows:
        return Grid.of([], [], len(runs), *(np.zeros(0, dtype=np.int64) for _ in range(3)))
    # Every number of every timeline parsed in one NumPy call per column.
    scoring, clean, counted = (
        np.fromstring(" ".join(r[i] for r in rows), dtype=np.int64, sep=" ") for i in (3, 4, 5)
    )
    sizes = [r[3].count(" ") + 1 for r in rows]
    ids = np.array(sorted(s.pk for s in scorings.values()), dtype=np.int64)
    position = {s.pk: n for n, s in enumerate(scorings[r.pk] for r in runs)}
    order = np.array([position.get(int(i), -1) for i in ids], dtype=np.int64)
    at = order[np.searchsorted(ids, scoring)]
    line = np.repeat(np.arange(len(rows)), sizes)
    kept = at >= 0
    return Grid.of(
        [r[:3] for r in rows],
        [r[6] for r in rows],
        len(runs),
        line[kept] * len(runs) + at[kept],
        clean[kept],
        counted[kept],
    )


def _detailed(
    choice: Choice, runs: list[Run], scorings: dict[int, Scoring], case: str
) -> tuple[Grid, list[list[Point]]]:
    """One case's model lines, and each line's runs with their repeats and score row: one
    query."""
    order = {scorings[r.pk].pk: n for n, r in enumerate(runs)}
    # Per (model, surface), per run in order: [clean, counted, marks, row_key], a run holding
    # the pair in two rows (as two modes) summed, the first row's key kept; and its attempts.
    held: dict[tuple[str, str], dict[int, list]] = defaultdict(dict)
    attempts: dict[tuple[str, str], int] = defaultdict(int)
    for scoring_id, model, surface, row_key, clean, counted, total, marks in _figures(
        choice, scorings, case
    ).values_list(
        "scoring_id", "model", "surface", "row_key", "clean", "counted", "total", "marks"
    ):
        n = order.get(scoring_id)
        if n is None:
            continue
        per_run = held[(model, surface)]
        if n in per_run:
            q = per_run[n]
            q[0] += clean
            q[1] += counted
            q[2] += marks
        else:
            per_run[n] = [clean, counted, marks, row_key]
        attempts[(model, surface)] += total
    pairs = sorted(held)
    timelines = [
        [Point(runs[n], (v[0], v[1]), v[2], v[3]) for n, v in sorted(held[pair].items())]
        for pair in pairs
    ]
    cells = [
        (row * len(runs) + n, v[0], v[1]) for row, p in enumerate(pairs) for n, v in held[p].items()
    ]
    cell, clean, counted = (np.array([c[i] for c in cells], dtype=np.int64) for i in range(3))
    grid = Grid.of(
        [(case, *p) for p in pairs], [attempts[p] for p in pairs], len(runs), cell, clean, counted
    )
    return grid, timelines


def _lines(
    cases: list[tuple[str, int]],
    grid: Grid,
    runs: list[Run],
    timelines: list[list[Point]] | None = None,
) -> list[CaseLine]:
    """Each case's figures from its model lines, each line's flakiness and first flip, every
    line tested at once."""
    flakiness = stats.flakiness_of_rows(grid.clean, grid.counted)
    # The split is sought over the runs with a counted attempt, and named by them.
    counted = grid.counted > 0
    flips = stats.first_flips_of(grid.clean[counted], grid.counted[counted], counted.sum(axis=1))
    every = grid.held.all(axis=1).tolist()
    sums = zip(grid.clean.sum(axis=1).tolist(), grid.counted.sum(axis=1).tolist(), strict=True)
    by_case: dict[str, list[ModelLine]] = defaultdict(list)
    rows: dict[str, list[int]] = {}
    attempts: dict[str, int] = defaultdict(int)
    for row, ((case, model, surface), total, full, clean, flaky, flip) in enumerate(
        zip(grid.lines, grid.attempts, every, sums, flakiness, flips, strict=True)
    ):
        if full:  # the usual line: held by every run chosen
            on, figures = runs, (grid.clean[row], grid.counted[row])
        else:
            where = np.flatnonzero(grid.held[row])
            on = [runs[n] for n in where.tolist()]
            figures = (grid.clean[row][where], grid.counted[row][where])
        m = ModelLine(model, surface, on, figures, timelines[row] if timelines else [], clean)
        m.flakiness, m.flip = flaky, flip
        if flip is not None:
            at, before = np.flatnonzero(counted[row])[[flip.index, flip.index - 1]].tolist()
            if not full:  # named by their place among the runs holding the line
                at, before = (int(grid.held[row][:n].sum()) for n in (at, before))
            m.flip_index, m.before_index = at, before
        by_case[case].append(m)
        rows.setdefault(case, [row, row])[1] = row + 1
        attempts[case] += total
    out = []
    tables = []
    for case_id, steps in cases:
        line = CaseLine(case_id, steps, attempts.get(case_id, 0), by_model=by_case.get(case_id, []))
        per_model: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for m in line.by_model:
            per_model[m.model][0] += m.clean[0]
            per_model[m.model][1] += m.clean[1]
        line.clean = (
            sum(m.clean[0] for m in line.by_model),
            sum(m.clean[1] for m in line.by_model),
        )
        # Every run of every line of the case, in order, as the units of its interval.
        start, end = rows.get(case_id, (0, 0))
        line.interval = stats.case_interval_of(
            grid.clean[start:end].ravel(), grid.counted[start:end].ravel()
        )
        tables.append([tuple(v) for v in per_model.values()])
        out.append(line)
    for line, separation in zip(out, stats.discriminations(tables), strict=True):
        line.separation = separation
    return out


def _merge(timeline: list[Point], order: dict[int, int], scorings) -> list[Point]:
    """A (model, surface)'s points in run order, one per run (a run holding the pair in two
    rows, as two modes, has them summed)."""
    by_run: dict[int, Point] = {}
    for p in sorted(timeline, key=lambda p: order[scorings[p.run.pk].pk]):
        if p.run.pk in by_run:
            q = by_run[p.run.pk]
            q.clean = (q.clean[0] + p.clean[0], q.clean[1] + p.clean[1])
            q.marks += p.marks
        else:
            by_run[p.run.pk] = Point(p.run, p.clean, p.marks, p.row_key)
    return list(by_run.values())


def corpus(choice: Choice) -> Corpus:
    """Every case of the digest's newest key over the runs chosen."""
    key = key_of(choice.digest)
    runs, scorings = chosen_runs(choice)
    fill_missing(scorings.values())
    cases = (
        [(c, len(steps or [])) for c, steps in key.cases.values_list("case_id", "steps")]
        if key
        else []
    )
    grid = _grouped(choice, runs, scorings, [c for c, _ in cases])
    return Corpus(choice, key, runs, _lines(cases, grid, runs))


def one_case(choice: Choice, case: str) -> tuple[Corpus, CaseLine | None]:
    """One case over the runs chosen, per model and surface, with its timelines."""
    key = key_of(choice.digest)
    runs, scorings = chosen_runs(choice)
    fill_missing(scorings.values())
    steps = (
        KeyCase.objects.filter(key=key, case_id=case).values_list("steps", flat=True).first()
        if key
        else None
    )
    if steps is None:
        return Corpus(choice, key, runs, []), None
    grid, timelines = _detailed(choice, runs, scorings, case)
    lines = _lines([(case, len(steps or []))], grid, runs, timelines)
    return Corpus(choice, key, runs, lines), lines[0]


def sorted_cases(cases: list[CaseLine], sort: str) -> list[CaseLine]:
    """The cases in the order asked (`-` first for the highest first); unknown values last."""
    name = sort.lstrip("-") or "case"
    desc = sort.startswith("-")

    def value(c: CaseLine):
        if name == "clean":
            return c.clean[0] / c.clean[1] if c.clean[1] else None
        return getattr(c, name)

    known = [c for c in cases if value(c) is not None]
    unknown = [c for c in cases if value(c) is None]
    known.sort(key=lambda c: c.case)
    known.sort(key=value, reverse=desc)
    return known + unknown


def search_link(choice: Choice, runs: list[Run], **params: str) -> str:
    """The search for the attempts behind a figure: the runs (when narrowed), the digest and
    the given parameters."""
    query: list[tuple[str, str]] = [("digest", choice.digest)]
    if choice.narrowed():
        query += [("run", r.run_id) for r in runs]
    if choice.model:
        query.append(("model", choice.model))
    if choice.surface:
        query.append(("surface", choice.surface))
    query += [(k, v) for k, v in params.items() if v]
    return "/search/?" + urlencode(query)


def as_json(c: Corpus) -> dict:
    """The corpus page's export, as `/cases.json` answers it."""

    def interval(i: stats.Interval | None) -> tuple[float | None, float | None]:
        return (None, None) if i is None else (i.low, i.high)

    out = []
    for line in c.cases:
        low, high = interval(line.interval)
        models = []
        for m in line.by_model:
            mlow, mhigh = interval(m.interval)
            flip = m.flip_run
            models.append(
                {
                    "model": m.model,
                    "surface": m.surface,
                    "clean": list(m.clean),
                    "low": mlow,
                    "high": mhigh,
                    "flaky": m.flaky,
                    "first_flip": flip.run_id if flip else None,
                    "timeline": [
                        {"run_id": r.run_id, "clean": list(c)}
                        for r, c in zip(m.runs, m.counts, strict=True)
                    ],
                }
            )
        out.append(
            {
                "case": line.case,
                "steps": line.steps,
                "attempts": line.attempts,
                "clean": list(line.clean),
                "low": low,
                "high": high,
                "difficulty": line.difficulty,
                "discrimination": line.discrimination,
                "flaky": line.flaky,
                "flipped": line.flipped,
                "never_passed": line.never_passed,
                "always_passed": line.always_passed,
                "by_model": models,
            }
        )
    return {"digest": c.choice.digest, "runs": [r.run_id for r in c.runs], "cases": out}


def health(c: Corpus) -> list[str]:
    """The corpus's health over the runs chosen, in sentences."""
    counted = c.with_attempts
    if not counted:
        return ["None of the corpus's cases has a counted attempt in the runs chosen."]
    always, never = c.count("always_passed"), c.count("never_passed")
    out = [
        f"{c.uninformative} of the {counted} cases with counted attempts carry no information: "
        f"{always} every attempt passed and {never} no attempt passed (is its key right?)."
        if c.uninformative
        else f"Every one of the {counted} cases with counted attempts was passed by some "
        "attempt and failed by another."
    ]
    best = c.most_discriminating
    if best:
        named = ", ".join(f"{x.case} (V = {x.discrimination:.2f})" for x in best)
        out.append(f"The cases that separate the models most: {named}.")
    else:
        out.append("No case separates the models beyond noise.")
    apart = c.not_told_apart
    several = sum(1 for x in c.cases if x.separation and x.separation.models >= 2)
    if several:
        out.append(
            f"On {apart} of the {several} cases two or more models ran, the runs chosen cannot "
            "tell the models apart (a chi-square test of equal Clean rates, p ≥ 0.05)."
        )
    flaky, flipped = c.count("flaky"), c.count("flipped")
    out.append(f"{flaky} case{'s are' if flaky != 1 else ' is'} flaky and {flipped} flipped.")
    return out


# --- a run's case x model matrix, flagged as the corpus page flags ------------------------------


@dataclass
class Cell:
    """One case for one model on a surface in a run: its Clean attempts over its counted ones,
    whether its repeats disagree (mixed), and whether the case is flaky for the model over the
    runs of the corpus up to this run (the corpus page's flag)."""

    clean: tuple[int, int] = (0, 0)
    flaky: bool = False

    @property
    def mixed(self) -> bool:
        return 0 < self.clean[0] < self.clean[1]


MATRIX_SHOWS = ("flaky", "mixed", "flaky_or_mixed")
MATRIX_SORTS = ("case", "-case", "clean", "-clean", "flaky", "mixed")


def matrix_cells(run: Run, scoring: Scoring, surface: str) -> dict[tuple[str, str], Cell]:
    """Per (case, model) on a surface, the run's figures and the case's flakiness over the runs
    of its corpus digest up to and including this one, from the kept per-case figures (four
    queries, whatever the number of runs; every case of the surface, so that a filter or a
    sort sees them all before the page is cut)."""
    choice = Choice(run.corpus_digest, surface=surface)
    runs, scorings = chosen_runs(choice)
    if run.pk in scorings:
        runs = runs[: [r.pk for r in runs].index(run.pk) + 1]
    else:
        # Not scored against a key of its own digest: this scoring's figures, with no history.
        runs, scorings = [run], {run.pk: scoring}
    fill_missing(scorings.values())
    order = {scorings[r.pk].pk: n for n, r in enumerate(runs)}
    run_of = {scorings[r.pk].pk: r for r in runs}
    own = scorings[run.pk].pk
    points: dict[tuple[str, str], list[Point]] = defaultdict(list)
    cells: dict[tuple[str, str], Cell] = {}
    for scoring_id, case, model, row_key, clean, counted, marks in _figures(
        choice, scorings
    ).values_list("scoring_id", "case", "model", "row_key", "clean", "counted", "marks"):
        if scoring_id not in order:
            continue
        points[(case, model)].append(Point(run_of[scoring_id], (clean, counted), marks, row_key))
        if scoring_id == own:
            held = cells.setdefault((case, model), Cell()).clean
            cells[(case, model)].clean = (held[0] + clean, held[1] + counted)
    for place, cell in cells.items():
        counts = [p.clean for p in _merge(points[place], order, scorings)]
        cell.flaky = stats.flakiness(counts).flaky
    return cells


def matrix_cases(
    cases: Iterable[str], cells: dict[tuple[str, str], Cell], show: str = "", sort: str = ""
) -> list[str]:
    """The matrix's cases, only those with a flaky or mixed cell when `show` asks, in the
    order asked: by case id, by the case's Clean over every model in the run (unscored cases
    last), or the most flaky (or mixed) cells first."""
    by_case: dict[str, list[Cell]] = defaultdict(list)
    for (case, _), cell in cells.items():
        by_case[case].append(cell)
    wanted = {
        "flaky": lambda c: c.flaky,
        "mixed": lambda c: c.mixed,
        "flaky_or_mixed": lambda c: c.flaky or c.mixed,
    }.get(show)
    out = [c for c in cases if wanted is None or any(wanted(x) for x in by_case.get(c, []))]
    name = sort.lstrip("-") or "case"
    out.sort(reverse=sort == "-case")
    if name == "clean":

        def rate(case: str) -> tuple[bool, float]:
            k = sum(x.clean[0] for x in by_case.get(case, []))
            n = sum(x.clean[1] for x in by_case.get(case, []))
            if not n:
                return (True, 0.0)
            return (False, -k / n if sort.startswith("-") else k / n)

        out.sort(key=rate)
    elif name in ("flaky", "mixed"):
        out.sort(key=lambda case: -sum(getattr(x, name) for x in by_case.get(case, [])))
    return out
