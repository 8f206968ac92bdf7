"""Side-by-side comparisons of scored rows, with the guard against comparing unlike things.

Rows are compared on the keys of modelrecord.md E.4: two rows share a table only when they agree
on corpus digest, contract digest, repeat, case coverage and (across vendors) tool schema digest.
When coverage is all that differs, the cases both sides share can still be compared honestly, and
are, labelled as such; a different corpus digest is refused outright (different answers).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from django.db import connection

from records import evidence, stats
from records.models import Attempt, Call, Provider, Run, ScoreCase, Scoring, Verdict
from records.queries.attempts import failing_step
from records.queries.decisions import decide
from records.queries.pairing import Side, differences, match_rows, refusal, row_figures
from records.scorer.score import RATIO_COLUMNS
from records.scoring.ranking import Ranking, pair_tests, paired_tests, rank, stored_pair_tests
from records.scoring.run import account
from records.scoring.tables import (
    SUMMED,
    RowKey,
    TableRow,
    case_figures,
    row_key_of,
    score_rows,
)
from records.scoring.vocabulary import COLUMN_BY_TITLE, TITLED_COLUMNS


def _sum(per_case: dict[str, dict[str, int]], cases: Iterable[str]) -> dict[str, int]:
    total = dict.fromkeys(SUMMED, 0)
    for c in cases:
        for k, v in per_case.get(c, {}).items():
            total[k] += v
    return total


def rate(pair: tuple[int, int]) -> float | None:
    n, d = pair
    return None if not d else n / d


def delta_points(a: tuple[int, int], b: tuple[int, int]) -> float | None:
    ra, rb = rate(a), rate(b)
    return None if ra is None or rb is None else 100 * (rb - ra)


# --- the guard ---------------------------------------------------------------------------------


def parse_row_key(row_key: str) -> dict[str, str]:
    """A row key string's parts, for links that only need its corpus and mode. A part's value
    may hold spaces (a model spec can), so this never decides which rows are the same row:
    `RowKey` does."""
    return dict(part.split("=", 1) for part in row_key.split(" ") if "=" in part)


# --- runs side by side --------------------------------------------------------------------------


@dataclass
class CaseFlip:
    case: str
    kind: str  # regressed, fixed, still failing, still passing, new, missing, counted apart
    before: str
    after: str

    @property
    def words(self) -> str:
        return FLIP_WORDS.get(self.kind, self.kind)


# How a case's change reads on a page: "regressed" and "improved" are the words of a row's
# decision (`records.evidence`), never of a single case's count.
FLIP_WORDS = {"regressed": "now failing", "fixed": "now passing"}

FLIP_ORDER = [
    "regressed",
    "missing",
    "still failing",
    "fixed",
    "new",
    "counted apart",
    "still passing",
]


_KIND_SQL = """CASE
    WHEN a_counted IS NULL THEN 'new'
    WHEN b_counted IS NULL THEN 'missing'
    WHEN a_counted = 0 OR b_counted = 0 THEN 'counted apart'
    WHEN a_completed = a_counted AND b_completed < b_counted THEN 'regressed'
    WHEN a_completed < a_counted AND b_completed = b_counted THEN 'fixed'
    WHEN a_completed < a_counted THEN 'still failing'
    ELSE 'still passing' END"""


def _describe(completed: int | None, counted: int | None, total: int | None) -> str:
    if counted is None:
        return "not in this run"
    if not counted:
        return f"counted apart ({total} attempt(s))"
    return f"{completed} / {counted} completed"


def case_flips(
    sa: Scoring,
    sb: Scoring,
    pairs: list[tuple[str, str]],
    *,
    limit: int | None = None,
    detail: bool = True,
    offset: int = 0,
) -> tuple[dict[str, dict[str, int]], dict[str, list[CaseFlip]]]:
    """How each case of each row pair (baseline key, candidate key) changed between two
    scorings: counts per kind, and (with `detail`) the changes (not the cases that still pass),
    regressions first, at most `limit` per row after the first `offset`. Two queries, whatever
    the number of rows or cases."""

    if not pairs:
        return {}, {}
    t, c = connection.ops.quote_name(ScoreCase._meta.db_table), connection.ops.quote_name("case")
    values = ", ".join(f"({n}, %s, %s)" for n in range(len(pairs)))
    # Each side's cases are gathered once (materialized, on both databases), both sides put
    # in one list and folded per (pair, case) by one grouping: no correlated subquery and no
    # join or sort on text, so the plan stays linear however the planner sees freshly loaded
    # tables. Pairs are carried by their number, not their (long) row keys.
    none = "CAST(NULL AS INTEGER)"
    cte = (
        f"WITH pairs(n, ka, kb) AS (VALUES {values}), "
        f"sa AS MATERIALIZED (SELECT p.n AS n, a.{c} AS k, a.completed, a.counted, a.total "
        f"FROM pairs p JOIN {t} a ON a.scoring_id = %s AND a.row_key = p.ka), "
        f"sb AS MATERIALIZED (SELECT p.n AS n, b.{c} AS k, b.completed, b.counted, b.total "
        f"FROM pairs p JOIN {t} b ON b.scoring_id = %s AND b.row_key = p.kb), "
        f"both_sides AS (SELECT n, k, completed AS ac, counted AS an, total AS at, "
        f"{none} AS bc, {none} AS bn, {none} AS bt FROM sa UNION ALL "
        f"SELECT n, k, {none}, {none}, {none}, completed, counted, total FROM sb), "
        f"j AS (SELECT n, k, MAX(ac) AS a_completed, MAX(an) AS a_counted, MAX(at) AS a_total, "
        f"MAX(bc) AS b_completed, MAX(bn) AS b_counted, MAX(bt) AS b_total "
        f"FROM both_sides GROUP BY n, k), "
        f"classified AS (SELECT j.*, {_KIND_SQL} AS kind FROM j) "
    )
    params = [v for pair in pairs for v in pair] + [sa.pk, sb.pk]
    order = (
        "CASE kind " + " ".join(f"WHEN '{k}' THEN {i}" for i, k in enumerate(FLIP_ORDER)) + " END"
    )
    counts: dict[str, dict[str, int]] = {}
    changes: dict[str, list[CaseFlip]] = {}
    with connection.cursor() as cur:
        cur.execute(cte + "SELECT n, kind, COUNT(*) FROM classified GROUP BY n, kind", params)
        for n, kind, count in cur.fetchall():
            counts.setdefault(pairs[n][0], {})[kind] = count
        if not detail:
            return counts, changes
        cur.execute(
            cte + f"SELECT n, k, kind, a_completed, a_counted, a_total, b_completed, b_counted, "
            f"b_total FROM (SELECT classified.*, ROW_NUMBER() OVER (PARTITION BY n ORDER BY "
            f"{order}, k) AS rn FROM classified WHERE kind <> 'still passing') x"
            + f" WHERE rn > {int(offset)}"
            + (f" AND rn <= {int(offset) + int(limit)}" if limit else "")
            + " ORDER BY n, rn",
            params,
        )
        for n, k, kind, *r in cur.fetchall():
            changes.setdefault(pairs[n][0], []).append(
                CaseFlip(k, kind, _describe(*r[0:3]), _describe(*r[3:6]))
            )
    return counts, changes


def shared_cases(scoring_rows: list[tuple[Scoring, str]]) -> list[str]:
    """The cases every one of the given (scoring, row key) rows ran."""

    shared: set[str] | None = None
    for scoring, key in scoring_rows:
        cases = set(
            ScoreCase.objects.filter(scoring=scoring, row_key=key).values_list("case", flat=True)
        )
        shared = cases if shared is None else shared & cases
    return sorted(shared or ())


FLIPS_SHOWN = 50  # a row's changed cases shown at once: a page of its case list


@dataclass
class CasePage:
    """One page of a compared row's changed cases (regressions first)."""

    flips: list[CaseFlip]
    number: int  # from 1
    total: int  # changed cases in the row
    per_page: int = FLIPS_SHOWN

    @property
    def start_index(self) -> int:
        return (self.number - 1) * self.per_page + 1 if self.flips else 0

    @property
    def end_index(self) -> int:
        return (self.number - 1) * self.per_page + len(self.flips)

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def has_next(self) -> bool:
        return self.number * self.per_page < self.total

    @property
    def previous_page_number(self) -> int:
        return self.number - 1

    @property
    def next_page_number(self) -> int:
        return self.number + 1


def changed_count(kinds: dict[str, int]) -> int:
    return sum(n for k, n in kinds.items() if k != "still passing")


def row_cases(sa: Scoring, sb: Scoring, a: str, b: str, page: int) -> CasePage:
    """Page `page` of the changed cases of the baseline's row `a` against the candidate's `b`
    (the last page past the end)."""
    counts, _ = case_flips(sa, sb, [(a, b)], detail=False)
    total = changed_count(counts.get(a, {}))
    page = max(1, min(page, -(-total // FLIPS_SHOWN)))
    offset = (page - 1) * FLIPS_SHOWN
    _, changes = case_flips(sa, sb, [(a, b)], limit=FLIPS_SHOWN, offset=offset)
    return CasePage(changes.get(a, []), page, total)


@dataclass
class RowComparison:
    key: RowKey  # the rows' identity (model, surface, mode, pins), as parts
    baseline: Side | None
    candidate: Side | None
    differs: list[str] = field(default_factory=list)
    refused: str = ""
    shared_only: bool = False
    shared_cases: int = 0
    flips: list[CaseFlip] = field(default_factory=list)  # the changes shown (capped)
    kinds: dict[str, int] = field(default_factory=dict)  # every case, counted per kind
    tests: dict[str, stats.Paired] = field(default_factory=dict)  # per column, case by case
    # The row's decision on the decided column(s), within its run pair's family
    # (`records.queries.decisions.RowDecision`); None where the rows were not tested.
    decision: Any = None

    @property
    def identity(self) -> str:
        """The identity as people read it (model=... surface=...); rows are matched on `key`."""
        return self.key.label

    @property
    def evidence(self) -> str:
        """The row's decision, as the gate reads it: "regressed", "improved" or "within noise"
        on the decided column, Holm-adjusted over the rows of the two runs (or "" when the
        rows were not compared case by case)."""
        return "" if self.decision is None else self.decision.label

    @property
    def shared(self) -> int:
        return max((t.cases for t in self.tests.values()), default=0)

    @property
    def kind_counts(self) -> list[tuple[str, int]]:
        """Each kind of change with its count, as the page words it."""
        return [(FLIP_WORDS.get(k, k), self.kinds[k]) for k in FLIP_ORDER if self.kinds.get(k)]

    @property
    def more_flips(self) -> int:
        return max(0, changed_count(self.kinds) - len(self.flips))

    @property
    def cases(self) -> CasePage:
        """The first page of the row's changed cases, as the comparison shows it."""
        return CasePage(self.flips, 1, changed_count(self.kinds))

    @property
    def regressions(self) -> int:
        return self.kinds.get("regressed", 0)

    @property
    def fixes(self) -> int:
        return self.kinds.get("fixed", 0)

    def columns(self) -> list[tuple[str, tuple[int, int], tuple[int, int], float | None]]:
        """Per column: both sides' ratios and the difference in points. Where the column was
        tested case by case, the difference is the test's (over the cases both sides ran with
        a denominator, by the estimator its interval resamples), so it lies inside that
        interval; otherwise it is read off the two ratios."""
        assert self.baseline and self.candidate
        out = []
        for c, title in TITLED_COLUMNS:
            a, b = self.baseline.ratio(c), self.candidate.ratio(c)
            test = self.tests.get(c)
            d = delta_points(a, b) if test is None else 100 * test.difference
            out.append((title, a, b, d))
        return out

    def tested_columns(self) -> list[tuple[Any, ...]]:
        """`columns` with each column's case-by-case test, where there is one, and its decision
        where the column is decided (None for a column shown but not decided)."""
        decided = {} if self.decision is None else self.decision.decisions
        return [
            (*col, self.tests.get(c), decided.get(c))
            for c, col in zip(RATIO_COLUMNS, self.columns(), strict=True)
        ]

    @property
    def still_failing(self) -> int:
        return self.kinds.get("still failing", 0)

    @property
    def cost_delta(self) -> float | None:
        if not self.baseline or not self.candidate:
            return None
        a, b = self.baseline.cost, self.candidate.cost
        return None if a is None or b is None else b - a


def row_label(scoring: Scoring, row_key: str) -> str:
    """The identity of a scoring's row as people read it, from its stored parts (one query);
    the key itself when the scoring has no such row."""
    row = scoring.rows.select_related("session").filter(row_key=row_key).first()
    if row is None:
        return row_key
    return RowKey.of(row.model, row.surface, scoring.run, row.session).label


def _sides(scoring: Scoring) -> dict[str, TableRow]:
    return {r.row_key: r for r in score_rows(scoring)}


def _shared(scoring: Scoring, row: TableRow, cases: list[str]) -> dict[str, int]:
    """A row's figures over a subset of its cases, summed in the database."""
    return _sum(case_figures(scoring, [row.row_key]).get(row.row_key, {}), cases)


def _prices(run: Run) -> dict[str, tuple[float, float, float, float] | None]:
    return {p.spec: p.price for p in Provider.objects.filter(run=run)}


ROWS_PER_PAGE = 12


def compare_runs(
    baseline: Run,
    candidate: Run,
    *,
    flip_limit: int | None = FLIPS_SHOWN,
    page: int | None = 1,
    decision: Any = None,
) -> tuple[list[RowComparison], str]:
    """Row by row (matched on model, surface, mode and pins), the rows that regressed first,
    every pair with its counts per kind and its decision (`decision`, the run pair's
    `records.queries.decisions.RunDecision`; on Clean when not given); the changes case by
    case only for the pairs on `page` (all pairs when page is None), so a page costs the same
    however many models a run has."""
    sa, sb = baseline.latest_scoring(), candidate.latest_scoring()
    if sa is None or sb is None or not sa.verdict_count or not sb.verdict_count:
        return [], "both runs must be scored to be compared"
    if decision is None:
        decision = decide(baseline.pk, candidate.pk)
    left, right = _sides(sa), _sides(sb)
    prices_a, prices_b = _prices(baseline), _prices(candidate)
    # Rows are matched on their key's parts, never on the key string split apart: a model spec
    # may hold spaces, and `openai:gpt-5` and `openai:gpt-5 preview` are two rows.
    out = []
    for a, b in match_rows(list(left.values()), list(right.values())):
        ra = Side(baseline, sa, a, row_figures(a), prices_a.get(a.model)) if a else None
        rb = Side(candidate, sb, b, row_figures(b), prices_b.get(b.model)) if b else None
        comp = RowComparison(row_key_of(b or a), ra, rb)
        if ra and rb:
            comp.differs = differences(ra, rb)
            comp.refused = refusal(ra, rb, comp.differs)
            if comp.differs and not comp.refused:
                shared = shared_cases([(sa, a.row_key), (sb, b.row_key)])
                comp.shared_only, comp.shared_cases = True, len(shared)
                ra.figures, rb.figures = _shared(sa, a, shared), _shared(sb, b, shared)
        out.append(comp)
    pairs = [
        (c.baseline.row.row_key, c.candidate.row.row_key)
        for c in out
        if c.baseline and c.candidate and not c.refused
    ]
    counts, _ = case_flips(sa, sb, pairs, detail=False)
    for c in out:
        if c.baseline and c.candidate and not c.refused:
            c.kinds = counts.get(c.baseline.row.row_key, {})
            c.decision = decision.row(c.baseline.row.row_key, c.candidate.row.row_key)
    out.sort(
        key=lambda c: (
            c.evidence != "regressed",
            -c.regressions,
            c.refused != "",
            c.key.identity,
        )
    )
    first = 0 if page is None else (page - 1) * ROWS_PER_PAGE
    shown = out[first:] if page is None else out[first : first + ROWS_PER_PAGE]
    keys = {c.baseline.row.row_key for c in shown if c.baseline and c.candidate and not c.refused}
    # The case-by-case tests of the rows shown (every row when page is None, as for the gate
    # and the exports), so a page costs the same however many rows two runs have; on it, rows
    # that regressed with evidence come first.
    per_case_a = case_figures(sa, keys)
    per_case_b = case_figures(sb, [b for a, b in pairs if a in keys])
    for c in shown:
        if c.baseline and c.candidate and not c.refused:
            c.tests = paired_tests(
                per_case_a.get(c.baseline.row.row_key, {}),
                per_case_b.get(c.candidate.row.row_key, {}),
            )
    # The changed cases of the rows shown, `flip_limit` of each (every one when None; none
    # when 0, as the gate asks, which reads only the counts above).
    _, changes = case_flips(
        sa, sb, [p for p in pairs if p[0] in keys], limit=flip_limit, detail=flip_limit != 0
    )
    for c in shown:
        if c.baseline and c.candidate and not c.refused:
            c.flips = changes.get(c.baseline.row.row_key, [])
    return out, ""


# --- surfaces side by side (one run) -------------------------------------------------------------


@dataclass
class SurfaceGroup:
    caption: str
    sides: list[Side]
    shared_only: bool = False
    shared_cases: int = 0
    note: str = ""
    # For each side after the first: its columns tested case by case against the first side's,
    # over the cases both surfaces ran (`stats`), and each test's decision within the group.
    tests: list[dict[str, stats.Paired]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    rule: str = ""

    @property
    def table(
        self,
    ) -> list[tuple[str, list[tuple[tuple[int, int], float | None, stats.Paired | None]]]]:
        """Per column (titled): each side's ratio, and after the first side its difference in
        points from the first and its case-by-case test."""
        out = []
        for column, title in TITLED_COLUMNS:
            first = self.sides[0].ratio(column)
            cells = [(first, None, None, None)]
            for side, tests, decided in zip(
                self.sides[1:], self.tests, self.decisions or [{}] * len(self.tests), strict=True
            ):
                pair = side.ratio(column)
                test = tests.get(column)
                # A tested column's difference is its test's (over the cases the two sides
                # share), so it lies inside the interval shown with it.
                d = delta_points(first, pair) if test is None else 100 * test.difference
                cells.append((pair, d, test, decided.get(column)))
            out.append((title, cells))
        return out


def compare_surfaces(
    run: Run, surfaces: Sequence[str] = (), baseline: str = ""
) -> list[SurfaceGroup]:
    """Each model's rows on its surfaces side by side, on the cross-surface key (E.4): only
    `surfaces` when named, and measured against `baseline` when named (else the first)."""
    scoring = run.latest_scoring()
    if scoring is None or not scoring.verdict_count:
        return []
    prices = _prices(run)
    groups: dict[tuple, list[TableRow]] = {}
    for row in _sides(scoring).values():
        if surfaces and row.surface not in surfaces:
            continue
        k = row_key_of(row)
        gk = (k.model, k.mode, k.tier, k.tier_pin, k.corpus, k.contract, k.repeat)
        groups.setdefault(gk, []).append(row)
    out = []
    order = ["dynamic", "meta", "individual"]
    for gk, members in sorted(groups.items(), key=lambda kv: kv[0]):
        members.sort(
            key=lambda m: (
                m.surface != baseline,
                order.index(m.surface) if m.surface in order else 9,
            )
        )
        same = len({(m.case_count, m.coverage) for m in members}) == 1
        shared = [] if same else shared_cases([(scoring, m.row_key) for m in members])
        group = SurfaceGroup(
            f"{gk[0]}: mode {gk[1]}, tier {gk[2]}{', tier pinned to ' + gk[3] if gk[3] else ''}, "
            f"corpus {gk[4]}, contract {gk[5]}, repeat {gk[6]}",
            [
                Side(
                    run,
                    scoring,
                    m,
                    row_figures(m) if same else _shared(scoring, m, shared),
                    prices.get(m.model),
                )
                for m in members
            ],
        )
        if not same:
            group.shared_only, group.shared_cases = True, len(shared)
            group.note = (
                "the surfaces cover different cases, so only the "
                f"{len(shared)} case(s) every surface ran are compared"
            )
        out.append(group)
    per_case = case_figures(scoring, [s.row.row_key for g in out for s in g.sides])
    for g in out:
        first = per_case.get(g.sides[0].row.row_key, {})
        g.tests = [paired_tests(first, per_case.get(s.row.row_key, {})) for s in g.sides[1:]]
        # Read as one family: every column of every surface against the first.
        flat = [(i, c, t) for i, tests in enumerate(g.tests) for c, t in tests.items()]
        g.decisions = [{} for _ in g.tests]
        for (i, c, _), d in zip(flat, evidence.decide([t for _, _, t in flat]), strict=True):
            g.decisions[i][c] = d
        g.rule = evidence.rule_words(len(flat), "tests")
    return out


# --- models ranked (one run) ---------------------------------------------------------------------


class RankedGroup(NamedTuple):
    """One score table of the models side by side: the table, its chart of every column, the
    ranking by the chosen column and its chart; each chart with the id of its data element."""

    group: Any
    chart: Any
    chart_id: str
    ranking: Ranking
    ranked_chart: Any
    ranked_id: str


def rank_models(scoring: Scoring, groups: list[Any], title: str) -> list[Ranking]:
    """Per group of a scoring's rows, the models ranked on the column titled `title`, read
    against the pair tests kept with the rows (no query), or, for a scoring stored before they
    were kept, tested here over the cases every pair ran (one query)."""
    column = COLUMN_BY_TITLE[title]
    rows = [r for g in groups for r in g.rows]
    tests = stored_pair_tests(rows)
    if tests is not None and not all(
        (a, b) in tests or (b, a) in tests
        for g in groups
        for i, a in enumerate(r.row_key for r in g.rows)
        for b in [r.row_key for r in g.rows][i + 1 :]
    ):
        tests = None  # kept before tables of one surface were ranked together
    if tests is None:
        tests = pair_tests(groups, case_figures(scoring, [r.row_key for r in rows]))
    return [rank(g.rows, column, title, tests) for g in groups]


# --- one case, two runs ---------------------------------------------------------------------------


@dataclass
class CaseAttempt:
    attempt: Attempt
    verdict: Verdict
    calls: list[Call]  # in order
    differs_at: int | None = None  # the index of the first call unlike the other side's
    # The index of the call the verdict turns on: the one that reached the first step that did
    # not complete (as the attempt page marks it); None where no call did (or no account).
    turns_at: int | None = None
    turns_step: dict[str, Any] | None = None


def case_side_by_side(
    sa: Scoring, sb: Scoring, a_key: str, b_key: str, case: str
) -> list[tuple[CaseAttempt | None, CaseAttempt | None]]:
    """A case's attempts in two rows of two scorings, paired by repeat, each with its verdict,
    its calls and the call its verdict turns on (the scorer's account, as the attempt page
    reads it); in each pair, the first call that differs (in what was asked for or its
    arguments) is marked on both sides too. Three queries, and each attempt's account."""
    sides: list[dict[int, CaseAttempt]] = []
    for scoring, key in ((sa, a_key), (sb, b_key)):
        verdicts = list(
            Verdict.objects.filter(scoring=scoring, row_key=key, case=case)
            .select_related("attempt")
            .order_by("attempt__repeat", "attempt__line")
        )
        side = {}
        for v in verdicts:
            v.scoring = scoring  # read once already
            told = account(v).told
            step = failing_step(told["steps"]) if told else None
            side[v.attempt.repeat] = CaseAttempt(
                v.attempt, v, [], turns_at=step.get("call_index") if step else None, turns_step=step
            )
        sides.append(side)
    by_attempt = {ca.attempt.pk: ca for side in sides for ca in side.values()}
    for call in Call.objects.filter(attempt__in=list(by_attempt)).order_by(
        "attempt", "index", "line"
    ):
        by_attempt[call.attempt_id].calls.append(call)
    pairs = []
    for repeat in sorted(set(sides[0]) | set(sides[1])):
        a, b = sides[0].get(repeat), sides[1].get(repeat)
        if a and b:
            shape = [
                [(c.requested_action or c.tool, c.arguments) for c in side.calls] for side in (a, b)
            ]
            for i in range(max(len(shape[0]), len(shape[1]))):
                if i >= len(shape[0]) or i >= len(shape[1]) or shape[0][i] != shape[1][i]:
                    if i < len(a.calls):
                        a.differs_at = a.calls[i].index
                    if i < len(b.calls):
                        b.differs_at = b.calls[i].index
                    break
        pairs.append((a, b))
    return pairs
