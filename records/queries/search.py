"""Attempts and calls across runs: what `/search/`, its exports and a run's Attempts tab read.

A query is attempt conditions (run, corpus digest, commit, model, surface, case, ending,
verdict, clean, a turn's status, a failed verify line) and call conditions (tool, action,
outcome, observed, truncated) that must hold of one call together; the words of `q` match an
attempt's own text or one call's (and then that call must meet the call conditions too). Every
figure is a query in the database, a constant number of them per page.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from itertools import islice
from operator import attrgetter
from typing import Any

from django.db import connection
from django.db.models import Exists, F, OuterRef, Q, QuerySet, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, Substr

from records.bulk.threads import threaded
from records.models import Annotation, Attempt, Call, Label, Run, Scoring, Turn, Verdict
from records.queries.annotations import attempt_labels, labelled, labels_by_key, live
from records.search import engine, snippets
from records.search.index import not_yet_indexed
from records.search.models import SearchCall
from records.search.snippets import snippet

# What a score cell's drill links select, per column: the verdicts behind its numerator, and
# the ones that missed it (the counted attempts that are not behind it; for a column of steps,
# the attempts with a step that missed). Summed over the attempts listed, the column then reads
# the cell's numerator, or what the numerator lacks of the denominator.
HITS: dict[str, tuple[Q, Q]] = {
    "clean": (Q(clean=True), Q(counted=True, clean=False)),
    "unaided": (Q(unaided=True), Q(counted=True, unaided=False)),
    "completion": (Q(outcome="completed"), Q(counted=True) & ~Q(outcome="completed")),
    **{
        column: (Q(**{f"{n}__gt": 0}), Q(**{f"{n}__lt": F(d)}))
        for column, n, d in (
            ("reached", "reached_n", "reached_d"),
            ("accepted_first_time", "aft_n", "aft_d"),
            ("argument_fidelity", "fidelity_n", "fidelity_d"),
            ("confirmation", "confirmation_n", "confirmation_d"),
        )
    },
}

# How a list may be ordered (`-` first: the other way), by the attempt's own columns; ties go
# newest run first, then in file order, so pages stay stable.
SORTS = {
    "line": "line",
    "case": "case",
    "model": "model",
    "surface": "effective_surface",
    "repeat": "repeat",
    "ended_by": "ended_by",
    "turns": "turn_count",
    "tries": "try_count",
    "calls": "call_count",
    "input_tokens": "input_tokens",
}

FACET_LIMIT = 30  # values per facet, the commonest first
# A facet whose column holds a row's id, counted by id and shown as that row's label: the label
# is joined to the few counts, not to every attempt matched.
_LABELS = {"run": (Run, "run_id")}
# The facets, in the order pages show them: each one's name, what it counts (m: the attempts
# that match; v: their verdicts in the latest scorings; c: the calls that match, or every call
# of those attempts when the query asks nothing of calls) and the column it reads there.
FACETS = (
    ("run", "m", "run"),  # the run's id, shown as the run's run_id (`_LABELS`)
    ("model", "m", "model"),
    ("surface", "m", "effective_surface"),
    ("case", "m", "case"),
    ("ended_by", "m", "ended_by"),
    ("verdict", "v", "outcome"),
    ("tool", "c", "tool"),
    ("requested", "c", "requested_action"),
    ("dispatched", "c", "dispatched_action"),
    ("outcome", "c", "outcome"),
)
# And the attempts by the unresolved labels they carry, on themselves or on their case (a facet
# of its own: it reads the annotations, not a column).
LABEL = "label"
COUNT, CALL_COUNT = "count", "call_count"  # the summary's totals beside the facets
PAGE = "page"  # and the ids of the page asked for (`Search`'s `window`)
INDEXING = "indexing"  # and the run ids of the runs reached that wait for their index
SNIPPET_SOURCE = 20_000  # characters of a field a snippet is looked for in


@dataclass
class SearchQuery:
    runs: list[str] = field(default_factory=list)
    run_pk: int | None = None  # one stored run (its Attempts tab)
    digest: str = ""
    commit: str = ""
    model: str = ""
    surface: str = ""
    case: str = ""
    ended_by: str = ""
    verdict: str = ""
    clean: bool | None = None
    tool: str = ""
    action: str = ""
    outcome: str = ""
    observed: bool | None = None
    truncated: bool = False
    turn_status: str = ""
    verify_failed: bool = False
    row: str = ""  # a score table's row key
    column: str = ""  # with `hit`: the verdicts behind a column's numerator, or those that missed
    hit: bool | None = None
    counted: bool | None = None  # the verdict counted (not counted apart), or not
    failure: str = ""  # a failure mode's id (`records.scorer.score.mode_id`)
    sort: str = ""
    q: str = ""
    label: str = ""  # carried unresolved by the attempt or its case (`annotations.labelled`)

    @property
    def words(self) -> list[str]:
        return engine.words(self.q)

    def verdict_condition(self) -> Q | None:
        """What the query asks of an attempt's verdict; None when nothing."""
        parts = []
        if self.verdict:
            parts.append(Q(outcome=self.verdict))
        if self.clean is not None:
            parts.append(Q(clean=self.clean))
        if self.row:
            parts.append(Q(row_key=self.row))
        if self.column and self.hit is not None:
            hit, miss = HITS[self.column]
            parts.append(hit if self.hit else miss)
        if self.counted is not None:
            parts.append(Q(counted=self.counted))
        if self.failure:
            parts.append(Q(failure_mode=self.failure))
        if not parts:
            return None
        condition = parts[0]
        for part in parts[1:]:
            condition &= part
        return condition

    def order(self) -> list[str]:
        """The list's order: the chosen column, then newest run first, then file order."""
        tail = ["-run_id", "line"]
        if not self.sort:
            return tail
        column = SORTS[self.sort.lstrip("-")]
        return [f"-{column}" if self.sort.startswith("-") else column, *tail]

    def narrowed(self) -> bool:
        """Whether the query asks more than which run: otherwise its size is known. A condition
        is asked when it differs from its default (a yes/no condition's "no" is False, and
        asks as much as its "yes")."""
        return any(
            getattr(self, f.name) != f.default
            for f in fields(self)
            if f.name not in ("runs", "run_pk", "sort")
        )


def _hits(kind: int, words: list[str], among: list[int] | None = None) -> RawSQL:
    """The ids of the attempts or calls whose documents hold the words; with `among`, only
    those of these attempts (their own documents, or their calls')."""
    if among is None:
        sql, params = engine.matching(kind, words)
    else:
        ids = (
            SearchCall.objects.filter(attempt__among=among)
            if kind == engine.CALL
            else Attempt.objects.filter(pk__among=among)
        )
        inner, inner_params = ids.order_by().values(x=F("pk")).query.sql_with_params()
        sql, params = engine.matching_among(kind, words, inner, list(inner_params))
    return RawSQL(sql, params)  # noqa: S611 (the engine's own SQL; the words are parameters)


# The attempt conditions that are a lookup on the attempt (or its run): the query's field and
# the lookup it sets.
LOOKUPS = (
    ("run_pk", "run"),
    ("runs", "run__run_id__in"),
    ("digest", "run__corpus_digest__startswith"),
    ("commit", "run__commit__startswith"),
    ("model", "model__icontains"),
    ("surface", "effective_surface"),
    ("case", "case"),
    ("ended_by", "ended_by"),
)


def latest_scorings(query: SearchQuery | None = None) -> QuerySet:
    """Each run's latest scoring that holds verdicts, as a subquery (never read into Python);
    only those of the runs `query` names, when it names some."""
    newer = Scoring.objects.filter(run=OuterRef("run"), verdict_count__gt=0).filter(
        Q(created_at__gt=OuterRef("created_at"))
        | Q(created_at=OuterRef("created_at"), id__gt=OuterRef("id"))
    )
    scorings = Scoring.objects.filter(verdict_count__gt=0)
    if query is not None and query.run_pk is not None:
        scorings = scorings.filter(run=query.run_pk)
    if query is not None and query.runs:
        scorings = scorings.filter(run__run_id__in=query.runs)
    return scorings.exclude(Exists(newer)).values("id")


class Search:
    """One query's attempts, calls and facets, each read when asked for.

    The calls come from `SearchCall`, the calls' filtered columns indexed: a query with a call
    condition starts from the calls that meet it and reaches their attempts by key, so what it
    costs grows with what it finds, not with the store.
    """

    def __init__(self, query: SearchQuery, window: tuple[int, int] | None = None) -> None:
        """`window`: the page (number, attempts a page) that will be shown, whose attempts the
        summary then chooses in the same statement (`page`)."""
        self.query = query
        self.words = query.words
        self.scorings = latest_scorings(query)
        self.attempts = self._attempts()
        self.calls = self._calls()
        self.window = window
        self._summary: dict[str, Any] | None = None

    def indexing(self) -> list[str]:
        """The run ids of the runs this query reaches that are stored but not yet indexed:
        their attempts are listed as their rows match, but their words and calls are not
        matched, nor their calls counted, until the index is written; every answer says so.
        Read by the summary's statement, not a query of its own."""
        return self.summary()[INDEXING]

    def reached_runs(self) -> QuerySet:
        """The runs the query's run conditions leave (every run when it names none)."""
        q = self.query
        runs = Run.objects.all()
        if q.run_pk is not None:
            runs = runs.filter(pk=q.run_pk)
        if q.runs:
            runs = runs.filter(run_id__in=q.runs)
        if q.digest:
            runs = runs.filter(corpus_digest__startswith=q.digest)
        if q.commit:
            runs = runs.filter(commit__startswith=q.commit)
        return runs

    def verdicts(self, outer: str = "pk") -> QuerySet:
        """The verdicts of the attempt `outer` names, in its run's latest scoring."""
        return Verdict.objects.filter(scoring__in=self.scorings, attempt=OuterRef(outer))

    def attempt_condition(self, prefix: str = "") -> Q:
        """What the attempt conditions ask, of an attempt (`prefix` empty) or of a call's
        attempt (`prefix` "attempt__")."""
        q = self.query
        condition = Q()
        for name, lookup in LOOKUPS:
            value = getattr(q, name)
            if value not in ("", None, []):
                condition &= Q(**{prefix + lookup: value})
        if q.verify_failed:
            condition &= Q(**{f"{prefix}failed_checks__gt": 0})
        outer = "attempt" if prefix else "pk"
        verdict = q.verdict_condition()
        if verdict is not None:
            # The attempts behind the latest scorings' verdicts that meet it, read once through
            # the verdicts' (scoring, ...) index, not probed attempt by attempt.
            chosen = Verdict.objects.filter(scoring__in=self.scorings).filter(verdict)
            condition &= Q(**{f"{outer}__in": chosen.values("attempt")})
        if q.turn_status:
            condition &= Exists(Turn.objects.filter(attempt=OuterRef(outer), status=q.turn_status))
        if q.label:
            condition &= labelled(q.label, prefix)
        return condition

    def call_condition(self) -> Q | None:
        """What the call conditions ask of one call (a `SearchCall`); None when none is set.
        When the query names runs, the call's own run is held to them too, so that the calls
        are read by run (`SearchCall`'s indexes) and not across the store."""
        q = self.query
        runs = Q()
        if q.run_pk is not None:
            runs &= Q(run=q.run_pk)
        if q.runs:
            # By the runs' pks, read first; not by a join to the runs, which SQLite would read
            # the other way about: the condition's calls across the store, then their runs.
            runs &= Q(run__in=Run.objects.filter(run_id__in=q.runs).order_by().values("pk"))
        condition = Q()
        if q.tool:
            condition &= Q(tool=q.tool)
        if q.action:
            # The runs on either side, so that each side is read by (action, run).
            condition &= (Q(requested_action=q.action) & runs) | (
                Q(dispatched_action=q.action) & runs
            )
        if q.outcome:
            condition &= Q(outcome_kind=engine.outcome_kind(q.outcome))
            if q.outcome != "refused":
                condition &= Q(outcome=q.outcome)
        if q.observed is not None:
            condition &= Q(observed=q.observed)
        if q.truncated:
            condition &= Q(truncated=True)
        return condition & runs if condition else None

    def _attempts(self, matched: Any = None) -> QuerySet:
        """The attempts listed. `matched`: the attempts of the calls that match, where the
        caller has selected those calls already (the summary's `k`); else they are selected
        here (`matching`)."""
        qs = Attempt.objects.filter(self.attempt_condition())
        condition = self.call_condition()
        words = self.words
        if condition is None and not words:
            return qs
        if matched is None:
            matched = self.matched_calls().values("attempt")
        if condition is not None:
            # The words match the attempt's own text, or this very call's (`matching`).
            return qs.filter(pk__in=matched)
        return qs.filter(Q(pk__in=_hits(engine.ATTEMPT, words)) | Q(pk__in=matched))

    def _calls(self) -> QuerySet | None:
        """The calls that match (`SearchCall`s), of the attempts listed; None when the query
        asks nothing of calls (no call condition, no words)."""
        if self.call_condition() is None and not self.words:
            return None
        return self.matching(self.every_call())

    def matched_calls(self) -> QuerySet:
        """Every call (`SearchCall`) that the call conditions and the words select, of any
        attempt."""
        return self.matching(SearchCall.objects.all())

    def matching(self, calls: QuerySet, among: list[int] | None = None) -> QuerySet:
        """Those of `calls` (`SearchCall`s) that the call conditions and the words select;
        `among`: `calls` are of these attempts alone, and the words are matched against their
        documents and their calls' alone."""
        condition = self.call_condition()
        words = self.words
        if condition is not None:
            calls = calls.filter(condition)
            if words:
                calls = calls.filter(
                    Q(pk__in=_hits(engine.CALL, words, among))
                    | Q(attempt__in=_hits(engine.ATTEMPT, words, among))
                )
        elif words:
            calls = calls.filter(pk__in=_hits(engine.CALL, words, among))
        return calls

    def every_call(self) -> QuerySet:
        """Every call (`SearchCall`) of the attempts the attempt conditions select: one join
        to the attempt, or, when a condition reads the attempt's verdict or turns, the calls of
        the attempts selected first, so that condition is tested once an attempt, not once a
        call."""
        q = self.query
        if q.verdict_condition() is None and not q.turn_status and not q.label:
            return SearchCall.objects.filter(self.attempt_condition("attempt__"))
        attempts = Attempt.objects.filter(self.attempt_condition()).values("pk")
        return SearchCall.objects.filter(attempt__in=attempts)

    def ordered(self) -> QuerySet:
        """The attempts in the list's order."""
        return self.attempts.order_by(*self.query.order())

    def count(self, known: int | None = None) -> int:
        """How many attempts match; `known`, a run's stored size, when the query asks nothing
        past the run (no page counts a whole run's attempts)."""
        if known is not None and not self.query.narrowed():
            return known
        return self.summary()[COUNT]

    def call_count(self) -> int:
        return self.summary()[CALL_COUNT] if self.calls is not None else 0

    def facets(self) -> dict[str, dict[str, int]]:
        """Counts by value for the current query: attempts by run, model, surface, case,
        ending and verdict; calls (those that match, or every call of the attempts listed when
        the query asks nothing of calls) by tool, requested and dispatched action, outcome."""
        summary = self.summary()
        return {name: summary[name] for name, _, _ in FACETS} | {LABEL: summary[LABEL]}

    def summary(self) -> dict[str, Any]:
        """The facets (each the commonest values first), the count of attempts and the count
        of calls, and with a `window` the ids of that page's attempts, in one statement read
        once: the attempts that match are selected once into a table of their faceted and
        ordering columns, their calls once into another, and each facet counts that table,
        and the page is cut from it, rather than selecting the attempts again."""
        if self._summary is None:
            self._summary = self._summarised()
        return self._summary

    def _summarised(self) -> dict[str, Any]:
        qn = connection.ops.quote_name
        # With a window, the list's order, column by column, as ordering columns of `m`.
        order = [
            (c.lstrip("-"), "DESC" if c.startswith("-") else "ASC")
            for c in (self.query.order() if self.window is not None else ())
        ]
        ordering = tuple(f"o{i}" for i in range(len(order)))
        call_facets = tuple(n for n, t, _ in FACETS if t == "c")
        call_columns = [c for n, t, c in FACETS if t == "c"]
        # The statement's own tables, named in its SQL (noqa S611: no outside text in them).
        within = RawSQL("SELECT id FROM m", [])  # noqa: S611
        # Each table of the statement: its name, its columns, its (SQL, parameters).
        tables: list[tuple[str, tuple[str, ...], tuple[str, Any]]] = []
        if self.calls is None:
            attempts = self.attempts
            calls = SearchCall.objects.filter(attempt__in=within).order_by().values(*call_columns)
            call_sql = calls.query.sql_with_params()
        else:
            # The calls that match, selected once (k): the attempts listed are theirs (by key,
            # read from k), and the calls counted are those of k whose attempt is listed,
            # rather than the calls of the listed attempts matched a second time.
            matched = self.matched_calls().order_by().values("attempt", *call_columns)
            tables.append(("k", ("attempt", *call_facets), matched.query.sql_with_params()))
            attempts = self._attempts(RawSQL("SELECT attempt FROM k", []))  # noqa: S611
            listed = ", ".join(qn(n) for n in call_facets)
            call_sql = (f"SELECT {listed} FROM k WHERE attempt IN (SELECT id FROM m)", ())
        attempts = (
            attempts.order_by()
            .annotate(**{o: F(c) for o, (c, _) in zip(ordering, order, strict=True)})
            .values("pk", *(c for n, t, c in FACETS if t == "m"), *ordering)
        )
        verdicts = Verdict.objects.filter(scoring__in=self.scorings, attempt__in=within)
        tables += [
            (
                "m",
                ("id", *(n for n, t, _ in FACETS if t == "m"), *ordering),
                attempts.query.sql_with_params(),
            ),
            ("v", ("verdict",), verdicts.order_by().values("outcome").query.sql_with_params()),
            ("c", call_facets, call_sql),
        ]
        parts, params = [], []
        for name, columns, (sql, more) in tables:
            listed = ", ".join(qn(c) for c in columns)
            # Read more than once (k by m and c; m by v and c and its facets; c by its
            # facets): materialized.
            hint = "" if name == "v" else "MATERIALIZED "
            parts.append(f"{name} ({listed}) AS {hint}({sql})")
            params.extend(more)
        branches = []
        for i, (name, table, _) in enumerate(FACETS):
            counted = f"SELECT {qn(name)} AS value, COUNT(*) AS n FROM {table} GROUP BY {qn(name)}"
            if name in _LABELS:
                # Rows may share a label (two runs of one run_id): their counts add up.
                model, label = _LABELS[name]
                meta = model._meta
                counted = (
                    f"SELECT l.{qn(label)} AS value, CAST(SUM(g.n) AS BIGINT) AS n"
                    f" FROM ({counted}) AS g"
                    f" JOIN {qn(meta.db_table)} l ON l.{qn(meta.pk.column)} = g.value"
                    f" GROUP BY l.{qn(label)}"
                )
            branches.append(
                f"SELECT * FROM (SELECT {i} AS facet, value, n, ROW_NUMBER() OVER"
                f" (ORDER BY n DESC, value) AS rank FROM ({counted}) AS g{i}"
                f" ORDER BY n DESC, value LIMIT {FACET_LIMIT}) AS f{i}"
            )
        totals = len(FACETS)
        branches += [
            f"SELECT {totals} AS facet, NULL AS value, COUNT(*) AS n, 0 AS rank FROM m",
            f"SELECT {totals + 1} AS facet, NULL AS value, COUNT(*) AS n, 0 AS rank FROM c",
        ]
        branches.append(
            f"SELECT * FROM (SELECT {totals + 3} AS facet, value, n, ROW_NUMBER() OVER"
            f" (ORDER BY n DESC, value) AS rank FROM ({self._labelled_sql()}) AS gl"
            f" ORDER BY n DESC, value LIMIT {FACET_LIMIT}) AS fl"
        )
        waiting = not_yet_indexed(self.reached_runs()).order_by().values("run_id").distinct()
        sql, more = waiting.query.sql_with_params()
        branches.append(
            f"SELECT {totals + 4} AS facet, w.{qn('run_id')} AS value, 0 AS n, 0 AS rank"
            f" FROM ({sql}) AS w"
        )
        params.extend(more)
        if self.window is not None:
            number, per_page = self.window
            by = ", ".join(f"{o} {way}" for o, (_, way) in zip(ordering, order, strict=True))
            # The page's ids in any order: `page` reads them in the list's.
            branches.append(
                f"SELECT * FROM (SELECT {totals + 2} AS facet, NULL AS value, id AS n,"
                f" 0 AS rank FROM m ORDER BY {by}"
                f" LIMIT {int(per_page)} OFFSET {int((number - 1) * per_page)}) AS p"
            )
        sql = f"WITH {', '.join(parts)} " + " UNION ALL ".join(branches)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = sorted(cursor.fetchall(), key=lambda r: (r[0], r[3], str(r[1])))
        out: dict[str, Any] = {name: {} for name, _, _ in FACETS}
        out[COUNT] = out[CALL_COUNT] = 0
        out[PAGE] = []
        out[LABEL] = {}
        out[INDEXING] = []
        for facet, value, n, _ in rows:
            if facet < totals:
                out[FACETS[facet][0]][str(value)] = n
            elif facet == totals + 2:
                out[PAGE].append(n)
            elif facet == totals + 3:
                out[LABEL][str(value)] = n
            elif facet == totals + 4:
                out[INDEXING].append(value)
            else:
                out[COUNT if facet == totals else CALL_COUNT] = n
        return out

    @staticmethod
    def _labelled_sql() -> str:
        """The summary's label facet: per label, the attempts of `m` that carry it unresolved,
        on themselves or on their case of their run's corpus digest (as `labelled` decides)."""
        qn = connection.ops.quote_name
        a, r, lab = (qn(m._meta.db_table) for m in (Annotation, Run, Label))
        live = "NOT a.resolved AND a.label_id IS NOT NULL"
        return (
            f"SELECT l.slug AS value, COUNT(DISTINCT x.id) AS n FROM ("
            f"SELECT m.id, a.label_id FROM m JOIN {a} a ON a.target = '{Annotation.Target.ATTEMPT}'"
            f" AND a.attempt_id = m.id AND {live}"
            f" UNION ALL SELECT m.id, a.label_id FROM m JOIN {r} r ON r.id = m.{qn('run')}"
            f" JOIN {a} a ON a.target = '{Annotation.Target.CASE}' AND a.digest = r.corpus_digest"
            f" AND a.{qn('case')} = m.{qn('case')} AND {live}"
            f") AS x JOIN {lab} l ON l.id = x.label_id GROUP BY l.slug"
        )

    def page(self, number: int, per_page: int) -> list[Attempt]:
        """One page of the attempts (newest run first, then file order), each with its
        verdict's `outcome` and `clean` (None unscored), `matched` (its matching calls, each
        with `pieces`, the snippet of its text that matched) and `pieces` of its own text."""
        start = (number - 1) * per_page
        # The page's attempts are chosen by key first, so that what is read of each (its
        # verdict, the head of its stimulus) is read for the page alone, not for every match
        # before the sort: by the summary when this is its window (the matches are not
        # selected twice), else here. An attempt has one verdict in its run's latest scoring.
        chosen: Any
        if self.window == (number, per_page):
            chosen = self.summary()[PAGE]
        else:
            chosen = self.ordered().values("pk")[start : start + per_page]
        return self._read(chosen)

    def _read(self, chosen: Any) -> list[Attempt]:
        """The attempts whose ids `chosen` gives, in the list's order, as `page` gives them."""
        verdicts = self.verdicts().order_by()
        attempts = list(
            Attempt.objects.filter(pk__in=chosen)
            .order_by(*self.query.order())
            .select_related("run")
            .only(
                *ATTEMPT_FIELDS,
                "run__run_id",
                "run__commit",
                "run__started_at",
                "run__corpus_digest",
            )
            .annotate(
                outcome=verdicts.values("outcome")[:1],
                clean=verdicts.values("clean")[:1],
                stimulus_part=Substr("stimulus", 1, SNIPPET_SOURCE),
            )
        )
        self._attach(attempts)
        return attempts

    def _attach(self, attempts: list[Attempt]) -> None:
        words = self.words
        matched: dict[int, list[Call]] = {a.pk: [] for a in attempts}
        if self.calls is not None and attempts:
            ids = self.calls.filter(attempt__in=list(matched)).values("pk")
            calls = (
                Call.objects.filter(pk__in=ids)
                .order_by("attempt_id", "index", "line")
                .only(*CALL_FIELDS)
                .annotate(**_snippet_sources())
            )
            for c in calls:
                c.pieces = _first_snippet(words, c.text_part, c.arguments_part, c.result_part)
                matched[c.attempt_id].append(c)
        # The labels of the page's attempts, unless the summary has counted none among them all.
        counted = self._summary is not None and not self._summary[LABEL]
        labels = {} if counted else attempt_labels(attempts)
        for a in attempts:
            a.labels = labels.get(a.pk, [])
            a.matched = matched[a.pk]
            a.pieces = _first_snippet(words, a.stimulus_part, a.reason)

    def groups(
        self, chunk: int = 2000, *, stretches: bool = False
    ) -> Iterator[tuple[list[Any], list[list[Any]]]]:
        """Every attempt matched, with its matching calls, `chunk` attempts at a time: for the
        CSV export (a row a call, or one for an attempt without any), an attempt's cells in
        `ATTEMPT_COLUMNS`' order (its `IDENTITY_SOURCES`, its ending, verdict and labels), and
        each call's in `CALL_COLUMNS`'. With `stretches`, a call's snippet is left as
        `snippets.stretches` finds it, for the export's writer to fold (`snippets.folded`);
        else it is folded here. The ids come in the list's order from one statement
        read as it goes (not a page cut again from every match at each offset), and each
        chunk's attempts and calls are read by key, as plain values, and given as lists: an
        export of the whole store reads hundreds of thousands of rows, and a model instance (or
        a dict) for each would be most of its time."""
        words = self.words
        stretch = snippets.stretches(words)
        finish = None if stretches else snippets.folded
        ids = self.ordered().values_list("pk", flat=True).iterator(chunk_size=chunk)
        attempt_columns = [source.replace(".", "__") for _, source in IDENTITY_SOURCES]
        call_columns = [source for _, source in CALL_SOURCES]
        # A call's result (the longest of its texts) is read only where its text and arguments
        # hold no word: most snippets are cut from the text, and reading every result's head
        # was most of what the export read.
        sources = _snippet_sources() if words else {}
        result_part = sources.pop("result_part", None)
        cut = 2 + len(call_columns)
        # Words alone (no call condition): a chunk's calls are those whose documents hold them,
        # its attempts meeting the attempt conditions already.
        words_alone = self.call_condition() is None
        # Where no label speaks for anything (no attempt carries one), no chunk asks for them.
        labelled_any = live().exists()
        order = self.query.order()
        verdict = self.verdicts().order_by().values("outcome")[:1]

        def read(chosen: list[int]) -> tuple[list[tuple], dict[int, list[str]], list[tuple]]:
            """A chunk's attempts, their labels and their matching calls, as plain rows."""
            attempts = list(
                Attempt.objects.filter(pk__among=chosen)
                .order_by(*order)
                .annotate(outcome=verdict)
                .values_list(
                    "pk", "run__corpus_digest", "case", "ended_by", "outcome", *attempt_columns
                )
            )
            labels = labels_by_key([a[:3] for a in attempts]) if labelled_any else {}
            if self.calls is None:
                return attempts, labels, []
            # The words matched against this chunk's documents alone, not the store's.
            if words_alone:
                theirs = _hits(engine.CALL, words, chosen)
            else:
                theirs = self.matching(
                    self.every_call().filter(attempt__among=chosen), among=chosen
                ).values("pk")
            calls = (
                Call.objects.filter(pk__in=theirs)
                .order_by("attempt_id", "index", "line")
                .annotate(**sources)
                .values_list("pk", "attempt_id", *call_columns, *sources)
            )
            return attempts, labels, list(calls)

        # The next chunks are read while this one is shaped (`records.bulk.threads`).
        chunks = iter(lambda: list(islice(ids, chunk)), [])
        for attempts, labels, calls in threaded(read, chunks):
            matched: dict[int, list[list[Any]]] = {}
            unfound: dict[int, list[Any]] = {}
            for c in calls:
                # The snippet from the call's text, else its arguments, else (read below) its
                # result.
                found = (stretch(c[cut]) or stretch(c[cut + 1])) if words else None
                row = [*c[2:cut], found or ""]
                if words and found is None:
                    unfound[c[0]] = row
                matched.setdefault(c[1], []).append(row)
            if unfound:
                results = (
                    Call.objects.filter(pk__among=list(unfound))
                    .annotate(result_part=result_part)
                    .values_list("pk", "result_part")
                )
                for pk, result in results:
                    unfound[pk][-1] = stretch(result) or ""
            if finish is not None:
                for rows in matched.values():
                    for row in rows:
                        row[-1] = finish(row[-1])
            for pk, _, _, ended_by, outcome, *identity in attempts:
                cells = [*identity, ended_by, outcome or "", " ".join(labels.get(pk, []))]
                yield cells, matched.get(pk, [])


ATTEMPT_FIELDS = (
    "id",
    "run",
    "key",
    "line",
    "case",
    "model",
    "effective_surface",
    "repeat",
    "ended_by",
    "reason",
    "call_count",
    "turn_count",
    "try_count",
    "input_tokens",
    "output_tokens",
    "cache_created_tokens",
    "cache_read_tokens",
)
CALL_FIELDS = (
    "id",
    "attempt",
    "line",
    "index",
    "tool",
    "requested_action",
    "dispatched_action",
    "outcome",
    "refusal_reason",
    "dispatch_observed",
    "result_truncated",
    "text_truncated",
)
# The export's columns of an attempt and of a call, each with the attribute it reads.
IDENTITY_SOURCES = (
    ("run_id", "run.run_id"),
    ("attempt", "key"),
    ("case", "case"),
    ("model", "model"),
    ("surface", "effective_surface"),
    ("repeat", "repeat"),
)
CALL_SOURCES = (
    ("call", "index"),
    ("tool", "tool"),
    ("requested_action", "requested_action"),
    ("dispatched_action", "dispatched_action"),
    ("call_outcome", "outcome"),
)
# The export's columns: an attempt's (its identity, then these), then a call's.
ATTEMPT_COLUMNS = (*(name for name, _ in IDENTITY_SOURCES), "ended_by", "verdict", "labels")
CALL_COLUMNS = (*(name for name, _ in CALL_SOURCES), "snippet")


def attempt_identity(a: Attempt) -> dict[str, Any]:
    """What names a found attempt in every answer of the search (CSV rows, JSON)."""
    return {name: attrgetter(source)(a) for name, source in IDENTITY_SOURCES}


def _snippet_sources() -> dict[str, Any]:
    """The heads of a call's text, arguments and result that its snippet is cut from."""
    return {
        "text_part": Substr("text", 1, SNIPPET_SOURCE),
        "arguments_part": Substr(Cast("arguments", TextField()), 1, SNIPPET_SOURCE),
        "result_part": Substr(Cast("result", TextField()), 1, SNIPPET_SOURCE),
    }


def _first_snippet(words: list[str], *texts: str | None) -> list[tuple[str, bool]]:
    """`snippet`'s pieces of the first of `texts` that holds a word (a page's); [] where none
    does."""
    for text in texts:
        if found := snippet(text or "", words):
            return found
    return []
