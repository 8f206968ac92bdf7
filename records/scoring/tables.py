"""Score tables: a scoring's rows as stored (`sums` takes them from its verdicts), the row
type, the cross-vendor groups (E.4) and the case matrix. Their words (titles, legend,
captions) are `vocabulary`; which rows upstream refuses is `refusals`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from django.db import connection
from django.db.models import Case, Count, IntegerField, Sum, When

from records import stats
from records.bulk.tables import Table
from records.formats.rows import ADDITIVE, TOKENS
from records.models import (
    Provider,
    Run,
    ScoreCase,
    Scoring,
    Session,
    Verdict,
)
from records.models import ScoreRow as StoredRow
from records.scorer.score import COUNTED_APART
from records.scoring.refusals import refusal
from records.scoring.sums import CASE_FIGURES, ScoringSums
from records.scoring.vocabulary import caption, caption_parts, coverage_caption


def cases_on(scoring: Scoring, surface: str) -> Any:
    """Every case scored on a surface, as a query a paginator can count and slice."""

    keys = list(scoring.rows.filter(surface=surface).values_list("row_key", flat=True))
    return (
        ScoreCase.objects.filter(scoring=scoring, row_key__in=keys)
        .values_list("case", flat=True)
        .distinct()
        .order_by("case")
    )


def count_where(name: str, value: Any = True) -> Sum:
    """How many of the grouped rows have `name` equal to `value` (`name` may carry a lookup)."""
    return Sum(Case(When(**{name: value}, then=1), default=0, output_field=IntegerField()))


def verdict_sums() -> dict[str, Any]:
    """The figures every grouping of verdicts sums: counts, the additive C.8 contributions and
    the attempts' tries and tokens (one definition for the score rows and the case figures)."""
    return {
        "total": Count("id"),
        "clean": count_where("clean"),
        "unaided": count_where("unaided"),
        **{name: Sum(name) for name in ADDITIVE},
        "turns": Sum("tries"),
        **{t: Sum(t) for t in TOKENS},
    }


SUMMED = list(CASE_FIGURES)  # what a case's figures sum, the same as a scoring's sums keep


def figure_sums() -> dict[str, Any]:
    """The SUMMED figures of a grouping of verdicts, as `ratio_of` reads them."""
    return {
        "counted": count_where("counted"),
        "completed": count_where("outcome", "completed"),
        **verdict_sums(),
    }


def summed(values: dict[str, Any]) -> dict[str, int]:
    """The SUMMED figures of one result of `figure_sums` (a sum over nothing is 0)."""
    return {k: values[k] or 0 for k in SUMMED}


def case_figures(
    scoring: Scoring, row_keys: Iterable[str] | None = None
) -> dict[str, dict[str, dict[str, int]]]:
    """{row key: {case: additive figures}} for the given rows (all rows when None), summed in
    the database: what per-case intervals and paired tests read."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    verdicts = Verdict.objects.filter(scoring=scoring)
    if row_keys is not None:
        row_keys = list(row_keys)
        if not row_keys:
            return out
        verdicts = verdicts.filter(row_key__in=row_keys)
    query = verdicts.values("row_key", "case").annotate(**figure_sums()).order_by()
    for r, figures in summed_rows(query):
        out.setdefault(r["row_key"], {})[r["case"]] = figures
    return out


def summed_rows(query: Any) -> Iterator[tuple[dict[str, Any], dict[str, int]]]:
    """Each row of a grouped `figure_sums` query (a QuerySet of values), with its SUMMED
    figures as ints. Read through a cursor, not as model values: a comparison page reads a row
    per case and row on both sides, and the ORM's per-value conversion of those sums cost a
    third of the query's time (`manage.py bench`, scores comparison). PostgreSQL sums a bigint
    as a numeric, hence int()."""
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        names = [column[0] for column in cursor.description]
        for values in cursor.fetchall():
            r = dict(zip(names, values, strict=True))
            yield r, {k: int(r[k] or 0) for k in SUMMED}


# Each ratio column's (numerator, denominator), read off summed figures.
_RATIO_TERMS = {
    "clean": itemgetter("clean", "counted"),
    "unaided": itemgetter("unaided", "counted"),
    "completion": itemgetter("completed", "counted"),
    "reached": itemgetter("reached_n", "reached_d"),
    "accepted_first_time": itemgetter("aft_n", "aft_d"),
    "argument_fidelity": itemgetter("fidelity_n", "fidelity_d"),
    "confirmation": itemgetter("confirmation_n", "confirmation_d"),
}


def ratio_of(f: dict[str, int], column: str) -> tuple[int, int]:
    """A column's (numerator, denominator) from summed figures (a row's or one case's)."""
    return _RATIO_TERMS[column](f)


@dataclass(frozen=True)
class Repeats:
    """pass^k and pass@k of a row whose attempts repeat cases: of the cases with a counted
    attempt, how many completed every counted attempt, and how many completed at least one."""

    k: int
    cases: int
    every: int
    any: int

    @property
    def measures(self) -> list[tuple[str, tuple[int, int], stats.Interval | None]]:
        """pass^k and pass@k as (title, (cases, of cases), 95% interval over cases)."""
        return [
            (f"pass^{self.k}", (self.every, self.cases), stats.wilson(self.every, self.cases)),
            (f"pass@{self.k}", (self.any, self.cases), stats.wilson(self.any, self.cases)),
        ]


# The parts of a row key that rows are matched on across runs, in the key's order.
IDENTITY = ("model", "surface", "mode", "tier", "tier_pin", "meta_schema", "slice")


@dataclass(frozen=True)
class RowKey:
    """A row's C.9 key as its parts, read from the stored row, its session and its run: what
    rows are told apart and matched on. The stored key string joins these with spaces and `=`,
    which a model spec may itself hold (`openai:gpt-5 preview`), so it is never split back."""

    model: str
    surface: str
    mode: str
    tier: str
    tier_pin: str = ""
    meta_schema: str = ""
    slice: int = 0
    corpus: str = ""
    contract: str = ""
    tools: str = ""
    repeat: int = 0

    @classmethod
    def of(cls, model: str, surface: str, run: Run, session: Session | None) -> RowKey:
        """The key `records.scoring.run` writes for a row of this model, surface and session
        (no session: the row of sessionless attempts, in the default mode)."""
        return cls(
            model,
            surface,
            session.mode if session else "",
            run.tier,
            (session.tier_pin or "") if session else "",
            (session.meta_param_schema or "") if session else "",
            (session.slice_size or 0) if session else 0,
            run.corpus_digest,
            run.contract_digest,
            (session.tool_schema_digests or {}).get(model, "") if session else "",
            run.repeat,
        )

    @property
    def identity(self) -> tuple[str, str, str, str, str, str, int]:
        """What rows are matched on across runs: model, surface, mode and the pins."""
        return tuple(getattr(self, part) for part in IDENTITY)  # type: ignore[return-value]

    @property
    def group(self) -> tuple[Any, ...]:
        """The cross-vendor key (E.4): every part but the model."""
        return (*self.identity[1:], self.corpus, self.contract, self.tools, self.repeat)

    @property
    def label(self) -> str:
        """The identity as the key string spells it, for people (never parsed)."""
        parts = [
            ("model", self.model),
            ("surface", self.surface),
            ("mode", self.mode),
            ("tier", self.tier),
        ]
        parts += [
            (name, value)
            for name, value in (
                ("tier-pin", self.tier_pin),
                ("meta-schema", self.meta_schema),
                ("slice", self.slice),
            )
            if value
        ]
        return " ".join(f"{name}={value}" for name, value in parts)

    @property
    def text(self) -> str:
        """The whole key string, as the scorer writes it."""
        rest = f"corpus={self.corpus} contract={self.contract} tools={self.tools}"
        return f"{self.label} {rest} repeat={self.repeat}"

    def as_dict(self) -> dict[str, Any]:
        """The identity by the names of its parts."""
        return dict(zip(IDENTITY, self.identity, strict=True))


@dataclass
class TableRow:
    row_key: str
    model: str
    surface: str
    figures: dict[str, Any]
    provider: Provider | None = None
    session: Session | None = None
    case_count: int = 0
    coverage: str = ""
    refusal: tuple[str, str] | None = None
    # Where attempts repeat cases (set by `score_rows`): each column's interval with the case as
    # the unit, and pass^k / pass@k. None: one attempt per case, Wilson's interval over attempts.
    case_intervals: dict[str, stats.Interval | None] | None = None
    repeats: Repeats | None = None
    key: RowKey | None = None  # the row key's parts (set by `score_rows`)

    def ratio(self, name: str) -> tuple[int, int]:
        return self.figures[f"{name}_n"], self.figures[f"{name}_d"]

    def interval(self, column: str) -> stats.Interval | None:
        """The column's 95% interval, as every page, chart and export shows it."""
        if self.case_intervals is not None:
            return self.case_intervals.get(column)
        return stats.wilson(*dict(self.columns)[column])

    @property
    def counted_apart(self) -> list[tuple[str, int | None]]:
        """Each outcome kept out of the ratios, with its count (the scorer's order)."""
        f = self.figures
        return [(outcome, f.get(outcome)) for outcome in COUNTED_APART]

    @property
    def token_counts(self) -> list[int | None]:
        """The four token counts, in the order of `TOKENS`."""
        f = self.figures
        return [f.get(t) for t in TOKENS]

    @property
    def interval_method(self) -> str:
        return "Wilson, cases as the unit" if self.case_intervals is not None else "Wilson"

    @property
    def columns_with_intervals(
        self,
    ) -> list[tuple[str, tuple[int, int], stats.Interval | None]]:
        return [(name, pair, self.interval(name)) for name, pair in self.columns]

    @property
    def columns(self) -> list[tuple[str, tuple[int, int]]]:
        f = self.figures
        return [
            ("clean", (f["clean"], f["attempts"])),
            ("reached", self.ratio("reached")),
            ("accepted_first_time", self.ratio("aft")),
            ("argument_fidelity", self.ratio("fidelity")),
            ("confirmation", self.ratio("confirmation")),
            ("unaided", (f["unaided"], f["attempts"])),
            ("completion", (f["completed"], f["attempts"])),
        ]

    @property
    def overhead(self) -> str:
        f = self.figures
        if not f["steps"]:
            return "-"
        return (
            f"{f['discovery'] + f['invalid_params']} / {f['steps']} "
            f"({f['discovery']} find, {f['invalid_params']} invalid_params)"
        )

    @property
    def overhead_shown(self) -> str:
        """`overhead` as pages show it, with thousands separators (the Markdown export keeps
        upstream's plain figures)."""
        f = self.figures
        if not f["steps"]:
            return "-"
        return (
            f"{f['discovery'] + f['invalid_params']:,} / {f['steps']:,} "
            f"({f['discovery']:,} find, {f['invalid_params']:,} invalid_params)"
        )


def row_key_of(row: TableRow) -> RowKey:
    """A row's key parts (`score_rows` sets them; a row built by hand has none)."""
    if row.key is None:
        raise ValueError(f"row {row.row_key!r} carries no key parts")
    return row.key


def score_rows(
    scoring: Scoring,
    *,
    live: bool = False,
    per_case: dict[str, dict[str, dict[str, int]]] | None = None,
    stored: Iterable[StoredRow] | None = None,
    case_counts: Iterable[tuple[str, int, int]] | None = None,
) -> list[TableRow]:
    """The scoring's rows, as summed when it was stored; where the run repeats cases, with each
    column's interval over cases and pass^k / pass@k, as kept with the rows when the scoring
    was stored (`records.scoring.ranking`), or read from the cases (`live`, or for a scoring
    stored before they were kept: two more queries; `per_case` spares one when the caller has
    read the cases already). A scoring being stored gives its rows before they are stored
    (`stored`, each with its session, in row key order) and its cases' (row key, completed,
    counted) (`case_counts`): nothing is read back."""
    run = scoring.run
    if stored is None:
        # The session, joined, carries the key's mode and pins (no query of its own).
        stored = scoring.rows.select_related("session").order_by("row_key")
    rows = [
        TableRow(
            r.row_key,
            r.model,
            r.surface,
            {**r.figures, "session_id": r.session_id},
            case_count=r.case_count,
            coverage=r.coverage,
            key=RowKey.of(r.model, r.surface, run, r.session),
        )
        for r in stored
    ]
    if not live and rows and all("pairs" in r.figures for r in rows):
        for row in rows:
            kept = row.figures.get("intervals")
            if kept is not None:
                row.case_intervals = {
                    c: None if v is None else stats.Interval(*v) for c, v in kept.items()
                }
            if row.figures.get("repeats"):
                row.repeats = Repeats(*row.figures["repeats"])
        return rows
    repeat = scoring.run.repeat or 1
    if repeat > 1 and rows:
        if per_case is None:
            per_case = case_figures(scoring, [r.row_key for r in rows])
        if case_counts is None:  # streamed: a row's tally is all that is kept of its cases
            case_counts = (
                ScoreCase.objects.filter(scoring=scoring, counted__gt=0)
                .values_list("row_key", "completed", "counted")
                .iterator(chunk_size=5000)
            )
        repeats = repeats_of(repeat, case_counts)
        for row in rows:
            cases = per_case.get(row.row_key, {}).values()
            row.case_intervals = {
                column: stats.case_interval([ratio_of(f, column) for f in cases])
                for column, _ in row.columns
            }
            row.repeats = repeats.get(row.row_key)
    return rows


def repeats_of(k: int, case_counts: Iterable[tuple[str, int, int]]) -> dict[str, Repeats]:
    """Each row's pass^k and pass@k (`Repeats`) from its cases' (row key, completed, counted):
    of the cases with a counted attempt, how many completed every counted attempt and how many
    completed at least one."""
    tally: dict[str, list[int]] = {}
    for row_key, completed, counted in case_counts:
        if counted > 0:
            t = tally.setdefault(row_key, [0, 0, 0])
            t[0] += 1
            t[1] += completed == counted
            t[2] += completed > 0
    return {row_key: Repeats(k, *t) for row_key, t in tally.items()}


def store_case_counts(scoring: Scoring, counts: Iterable[tuple[str, str, int, int, int]]) -> None:
    """Store the scoring's per-case counts (`ScoreCase`), as its verdicts summed them
    (`ScoringSums.case_counts`)."""
    table = Table(ScoreCase, ["scoring", "row_key", "case", "completed", "counted", "total"])
    table.rows = [(scoring.pk, *cell) for cell in counts]
    with connection.cursor() as cursor:
        table.flush(cursor)


def rows_to_store(
    scoring: Scoring,
    sums: ScoringSums,
    sessions: dict[str, int | None],
    session_rows: dict[int, Session],
) -> list[StoredRow]:
    """The scoring's rows as its verdicts summed them, in row key order, not yet stored; each
    row's session is the one `sessions` gives its key (its first attempt's, as upstream's
    groupShard takes it), else the session of its first verdict, and carries its row
    (`session_rows`, the run's sessions by id) as a stored row read with it would."""
    coverage: dict[tuple[str, ...], str] = {}  # most rows cover the same cases
    out = []
    for row_key, model, surface, session_id, figures, cases in sums.rows():
        session_id = sessions.get(row_key, session_id)
        covered = tuple(cases)
        if covered not in coverage:
            coverage[covered] = fnv1a64(covered)
        row = StoredRow(
            scoring=scoring,
            row_key=row_key,
            model=model,
            surface=surface,
            session_id=session_id,
            figures=figures,
            case_count=len(cases),
            coverage=coverage[covered],
        )
        if session_id is not None and session_id in session_rows:
            row.session = session_rows[session_id]
        out.append(row)
    return out


def fnv1a64(case_ids: Iterable[str]) -> str:
    h = 0xCBF29CE484222325
    for cid in sorted(case_ids):
        for b in cid.encode() + b"\x00":
            h ^= b
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return format(h, "x")


@dataclass
class Group:
    caption: str
    rows: list[TableRow]
    opaque_meta: bool = False
    parts: list[str] = field(default_factory=list)  # what the rows agree on, as the caption says
    # Where another group of the same surface agrees on something else: the parts only this one
    # has (its title says them, so two tables of one surface never share a title).
    distinct: list[str] = field(default_factory=list)

    @property
    def surface(self) -> str:
        return self.rows[0].surface if self.rows else ""

    @property
    def title(self) -> str:
        return " · ".join([self.surface or "no surface", *self.distinct])

    @property
    def apart(self) -> str:
        """Why this table is not ranked with the other tables of its surface ("" if none)."""
        if not self.distinct:
            return ""
        return (
            f"Not ranked with the other {self.surface or 'no-surface'} table of this run: "
            "these rows agree on " + ", ".join(self.distinct) + " and the other's do not; rows "
            "are ranked together only where they agree on everything the caption names."
        )

    @property
    def refusals(self) -> list[tuple[str, str]]:
        """Each refusal the rows carry, with its explanation, once (the rows show the badge)."""
        return sorted({r.refusal for r in self.rows if r.refusal})


def score_groups(scoring: Scoring, rows: list[TableRow] | None = None) -> list[Group]:
    """Rows grouped by the cross-vendor key (row key less the model, plus case coverage)."""
    run = scoring.run
    rows = score_rows(scoring) if rows is None else rows
    sessions = {s.pk: s for s in run.sessions.all()}
    providers = {p.spec: p for p in run.providers.all()}
    unobserved = {sid for sid, s in sessions.items() if s.call_count and not s.observed_call_count}

    # Row keys an earlier run already produced (upstream's duplicate-row), in one query.
    claimed = set(
        StoredRow.objects.filter(
            row_key__in=[r.row_key for r in rows], scoring__run__pk__lt=run.pk
        ).values_list("row_key", flat=True)
    )
    corpus_cases = scoring.key.case_count
    groups: dict[tuple[Any, str], Group] = {}
    for row in rows:
        row.session = sessions.get(row.figures.get("session_id"))
        row.provider = providers.get(row.model)
        row.refusal = refusal(row, run, scoring, unobserved, claimed)
        coverage = coverage_caption(row.case_count, row.coverage, corpus_cases)
        gk = (row_key_of(row).group, coverage)
        if gk not in groups:
            parts = caption_parts(row, run, coverage)
            groups[gk] = Group(caption(parts), [], parts=parts)
        groups[gk].rows.append(row)
    out = sorted(groups.values(), key=lambda g: g.caption)
    by_surface: dict[str, list[Group]] = defaultdict(list)
    for g in out:
        by_surface[g.rows[0].surface].append(g)
    for same in by_surface.values():
        if len(same) > 1:
            shared = set.intersection(*(set(g.parts) for g in same))
            for g in same:
                g.distinct = [p for p in g.parts if p not in shared]
    for g in out:
        g.rows.sort(key=lambda r: r.model)
        g.opaque_meta = any(
            r.surface == "meta" and r.session and r.session.meta_param_schema == "opaque"
            for r in g.rows
        )
    return out


def ranking_groups(groups: list[Group]) -> list[Group]:
    """The score tables joined where they differ only in case coverage, for ranking the models
    of a surface together: their pair tests pair each two rows on the cases both ran. Upstream's
    tables (the scores tab, the published blocks) keep the split; a ranking need not."""
    joined: dict[tuple[Any, ...], list[Group]] = defaultdict(list)
    for g in groups:
        joined[row_key_of(g.rows[0]).group if g.rows else (id(g),)].append(g)
    out = []
    for same in joined.values():
        if len(same) == 1:
            out.append(same[0])
            continue
        shared = [p for p in same[0].parts if all(p in g.parts for g in same[1:])]
        counts = sorted({r.case_count for g in same for r in g.rows})
        parts = [
            *shared,
            "case coverage differing ("
            + " / ".join(str(c) for c in counts)
            + " cases): each pair is compared on the cases both ran",
        ]
        rows = sorted((r for g in same for r in g.rows), key=lambda r: r.model)
        out.append(Group(caption(parts), rows, any(g.opaque_meta for g in same), parts=parts))
    by_surface: dict[str, list[Group]] = defaultdict(list)
    for g in out:
        g.distinct = []
        by_surface[g.surface].append(g)
    for same_surface in by_surface.values():
        if len(same_surface) > 1:
            common = set.intersection(*(set(g.parts) for g in same_surface))
            for g in same_surface:
                g.distinct = [p for p in g.parts if p not in common]
    return sorted(out, key=lambda g: g.caption)


def case_matrix(scoring: Scoring, surface: str, cases: list[str]) -> tuple[list[str], dict]:
    """Outcomes per (case, model) on one surface, repeats side by side, for the given cases."""
    cells: dict[tuple[str, str], list[tuple[int, int, str, bool]]] = defaultdict(list)
    models: set[str] = set()
    for case, model, attempt_id, repeat, outcome, clean in (
        Verdict.objects.filter(scoring=scoring, surface=surface, case__in=cases)
        .order_by("case", "model", "attempt__repeat", "attempt_id")
        .values_list("case", "model", "attempt_id", "attempt__repeat", "outcome", "clean")
    ):
        cells[(case, model)].append((attempt_id, repeat, outcome, clean))
        models.add(model)
    return sorted(models), cells
