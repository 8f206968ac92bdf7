"""Score tables: a scoring's rows summed in the database, upstream's refusal rules (E.3), the
cross-vendor groups (E.4) with their captions, column titles, the legend and the case matrix."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from django.db import connection
from django.db.models import Case, Count, F, IntegerField, Max, Sum, When

from records import stats
from records.formats.rows import ADDITIVE, CONFIRMATIONS, TOKENS
from records.models import (
    Provider,
    Run,
    ScoreCase,
    Scoring,
    Session,
    Verdict,
)
from records.models import ScoreRow as StoredRow
from records.scorer.score import OUTCOMES, RATIO_COLUMNS


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


SUMMED = ["counted", "total", "clean", "unaided", "completed", *ADDITIVE, *TOKENS, "turns"]


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
    # Read through a cursor, not as model values: a comparison page reads a row per case and
    # row on both sides, and the ORM's per-value conversion of those sums cost a third of this
    # query's time (`manage.py bench`, scores comparison). PostgreSQL sums a bigint as a
    # numeric, hence int().
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        names = [column[0] for column in cursor.description]
        for values in cursor.fetchall():
            r = dict(zip(names, values, strict=True))
            out.setdefault(r["row_key"], {})[r["case"]] = {k: int(r[k] or 0) for k in SUMMED}
    return out


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
        return (
            self.model,
            self.surface,
            self.mode,
            self.tier,
            self.tier_pin,
            self.meta_schema,
            self.slice,
        )

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
        return {
            "model": self.model,
            "surface": self.surface,
            "mode": self.mode,
            "tier": self.tier,
            "tier_pin": self.tier_pin,
            "meta_schema": self.meta_schema,
            "slice": self.slice,
        }


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
) -> list[TableRow]:
    """The scoring's rows, as summed when it was stored; where the run repeats cases, with each
    column's interval over cases and pass^k / pass@k, as kept with the rows when the scoring
    was stored (`records.scoring.ranking`), or read from the cases (`live`, or for a scoring
    stored before they were kept: two more queries; `per_case` spares one when the caller has
    read the cases already)."""
    run = scoring.run
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
        # The session, joined, carries the key's mode and pins (no query of its own).
        for r in scoring.rows.select_related("session").order_by("row_key")
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
        repeats = {
            r["row_key"]: Repeats(repeat, r["cases"], r["every"] or 0, r["any"] or 0)
            for r in ScoreCase.objects.filter(scoring=scoring, counted__gt=0)
            .values("row_key")
            .annotate(
                cases=Count("id"),
                every=count_where("completed", F("counted")),
                any=count_where("completed__gt", 0),
            )
            .order_by()
        }
        for row in rows:
            cases = per_case.get(row.row_key, {}).values()
            row.case_intervals = {
                column: stats.case_interval([ratio_of(f, column) for f in cases])
                for column, _ in row.columns
            }
            row.repeats = repeats.get(row.row_key)
    return rows


def store_rows(scoring: Scoring) -> None:
    """Sum the scoring's rows and its per-case counts once, in the database."""

    qn = connection.ops.quote_name
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {qn(ScoreCase._meta.db_table)} (scoring_id, row_key, {qn('case')}, "
            f"completed, counted, total) SELECT scoring_id, row_key, {qn('case')}, "
            f"SUM(CASE WHEN outcome = 'completed' THEN 1 ELSE 0 END), "
            f"SUM(CASE WHEN counted THEN 1 ELSE 0 END), COUNT(*) "
            f"FROM {qn(Verdict._meta.db_table)} WHERE scoring_id = %s "
            f"GROUP BY scoring_id, row_key, {qn('case')}",
            [scoring.pk],
        )
    cases: dict[str, list[str]] = defaultdict(list)
    for row_key, case in (
        ScoreCase.objects.filter(scoring=scoring)
        .order_by("row_key", "case")
        .values_list("row_key", "case")
    ):
        cases[row_key].append(case)
    StoredRow.objects.bulk_create(
        StoredRow(
            scoring=scoring,
            row_key=r.row_key,
            model=r.model,
            surface=r.surface,
            session_id=r.figures.pop("session_id"),
            figures={
                k: v for k, v in r.figures.items() if k not in ("row_key", "model", "surface")
            },
            case_count=len(cases[r.row_key]),
            coverage=fnv1a64(cases[r.row_key]),
        )
        for r in _sum_rows(scoring)
    )


def _sum_rows(scoring: Scoring) -> list[TableRow]:
    """One row per C.9 row key, summed in the database."""
    qs = (
        Verdict.objects.filter(scoring=scoring)
        .values("row_key", "model", "surface")
        .annotate(
            attempts=count_where("counted"),
            **verdict_sums(),
            **{c: Sum(c) for c in CONFIRMATIONS},
            session_id=Max("session_id"),
            **{o: count_where("outcome", o) for o in OUTCOMES},
        )
        .order_by("row_key")
    )
    rows = [TableRow(r["row_key"], r["model"], r["surface"], r) for r in qs]
    return rows


def fnv1a64(case_ids: Iterable[str]) -> str:
    h = 0xCBF29CE484222325
    for cid in sorted(case_ids):
        for b in cid.encode() + b"\x00":
            h ^= b
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return format(h, "x")


def coverage_caption(count: int, coverage: str, corpus_cases: int) -> str:
    """E.4's case coverage caption, from a row's case count and FNV-1a hash."""
    if not count:
        return ""
    if count == corpus_cases:
        return f"the whole corpus ({corpus_cases} cases)"
    return f"{count} of {corpus_cases} cases (`{coverage}`)"


REFUSAL_RULES = (
    "filtered-run",
    "unobserved-session",
    "fake-provider",
    "incomplete-provenance",
    "stale-corpus",
    "duplicate-row",
)


def provenance_refusal(
    run: Run, s: Session | None, p: Provider | None, unobserved: set[int]
) -> tuple[str, str] | None:
    """E.3 rules 1-4, which the run, the row's session and its provider decide; upstream
    judges them before scoring, so a row they refuse is never scored."""
    if run.filter:
        return "filtered-run", f"the run was filtered with -run {run.filter!r}"
    if s is not None and s.pk in unobserved:
        return "unobserved-session", f"session {s.label!r} made calls and none was observed"
    if p is not None and p.name == "fake":
        return "fake-provider", "the provider is the fake one"
    if p is None:
        return "incomplete-provenance", "the run line has no provider with this row's model"
    checks = [
        ("commit", run.commit),
        ("date", run.started_at),
        ("gitlab_version", run.gitlab_version),
        ("edition", run.edition),
        ("tier", run.tier),
        # The session line's own surface, as upstream's provenance reads it: an attempt's
        # surface does not fill a hole in its session line.
        ("surface", s.surface if s else ""),
        ("mode", s.mode if s else ""),
        ("capability_surface", s.capabilities if s else ""),
        ("token_scopes", s.token_scopes if s else []),
        ("served_tools", (s.served_tools if s else 0) > 0),
        ("provider", p.name),
        ("model", p.model),
        ("request_options", p.options),
        ("repeat", run.repeat > 0),
        ("corpus_digest", run.corpus_digest),
        ("contract_digest", run.contract_digest),
        ("tool_schema_digest", (s.tool_schema_digests or {}).get(p.spec) if s else ""),
    ]
    for name, value in checks:
        if not value:
            return "incomplete-provenance", f"{name} is empty"
    return None


def _refusal(
    row: TableRow, run: Run, scoring: Scoring, unobserved: set[int], claimed: set[str]
) -> tuple[str, str] | None:
    """The first E.3 rule a row trips, as (rule, reason); None when upstream would publish it."""
    first = provenance_refusal(run, row.session, row.provider, unobserved)
    if first:
        return first
    if scoring.stale:
        return "stale-corpus", (
            f"the run's corpus digest {run.corpus_digest} is not the key's {scoring.key.digest}"
        )
    if row.row_key in claimed:
        return "duplicate-row", "an earlier run already produced a row with this key"
    return None


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
        row.refusal = _refusal(row, run, scoring, unobserved, claimed)
        coverage = coverage_caption(row.case_count, row.coverage, corpus_cases)
        gk = (row_key_of(row).group, coverage)
        if gk not in groups:
            parts = caption_parts(row, run, coverage)
            groups[gk] = Group(_caption(parts), [], parts=parts)
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


def caption_parts(row: TableRow, run: Run, coverage: str) -> list[str]:
    """What the rows of one table agree on, each part as the caption words it."""
    s = row.session
    mode = s.mode if s else ""  # as the row key spells it
    parts = [f"surface `{row.surface}`", f"mode `{mode}`", f"tier `{run.tier}`"]
    if s and s.tier_pin:
        parts.append(f"tier pinned to `{s.tier_pin}`")
    if s and s.meta_param_schema:
        parts.append(f"meta schema `{s.meta_param_schema}`")
    if s and s.slice_size:
        parts.append(f"slice of {s.slice_size} tools")
    parts.append(f"corpus `{run.corpus_digest}`")
    if coverage:
        parts.append(coverage)
    tools = (s.tool_schema_digests or {}).get(row.model, "") if s else ""
    parts += [
        f"contract `{run.contract_digest}`",
        f"tool schemas `{tools}`",
        f"repeat {run.repeat}",
    ]
    return parts


def _caption(parts: list[str]) -> str:
    return "Compared as one table because these rows agree on " + ", ".join(parts) + "."


COLUMN_TITLES = [
    "Clean",
    "Reached",
    "Accepted first time",
    "Argument fidelity",
    "Confirmation",
    "Unaided",
    "Completion",
]
# Each ratio column by its key (as exports and addresses name it) and its title (as pages and
# the legend show it).
TITLED_COLUMNS = list(zip(RATIO_COLUMNS, COLUMN_TITLES, strict=True))
TITLE_OF = dict(TITLED_COLUMNS)
COLUMN_BY_TITLE = {title: column for column, title in TITLED_COLUMNS}


LEGEND = [
    (
        "Clean",
        "completed, unaided, every check held, and every step reached (or correctly declined), "
        "observed, confirmed when destructive and sent every compared argument right. Derived "
        "reading of upstream's Verdict.Clean (modelrecord.md C.7), not pinned upstream; a "
        "destructive step declined in read-only mode counts as unclean under this reading.",
    ),
    (
        "Reached",
        "required steps reached by a call (or declined correctly) over required steps, "
        "over attempts counted in the columns.",
    ),
    (
        "Accepted first time",
        "reached steps answered as the mode expects with no call retried "
        "before, over reached steps.",
    ),
    (
        "Argument fidelity",
        "compared arguments that carried the declared value, over compared "
        "arguments of reached steps.",
    ),
    (
        "Confirmation",
        "destructive steps confirmed (unaided or after the server asked), over destructive steps.",
    ),
    (
        "Unaided",
        "completed attempts with no call refused for invalid params or a missing "
        "confirmation, over counted attempts.",
    ),
    ("Completion", "completed attempts over counted attempts."),
    ("Overhead", "discovery calls plus invalid_params refusals, per reached step (may exceed 1)."),
    (
        "Counted apart",
        "skipped, unobserved, provider errors, harness errors and GitLab refusals "
        "are in no column above, with their steps.",
    ),
    (
        "Requested action",
        "read from the call line's recorded requested_action; upstream first "
        "identifies (tool, arguments) against its own catalog, so the two can disagree on calls "
        "the runner could not resolve.",
    ),
]


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
