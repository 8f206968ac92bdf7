"""Attempts and calls across runs: what `/search/`, its exports and a run's Attempts tab read.

A query is attempt conditions (run, corpus digest, commit, model, surface, case, ending,
verdict, clean, a turn's status, a failed verify line) and call conditions (tool, action,
outcome, observed, truncated) that must hold of one call together; the words of `q` match an
attempt's own text or one call's (and then that call must meet the call conditions too). Every
figure is a query in the database, a constant number of them per page.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, QuerySet, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, Substr

from records.models import Attempt, Call, Scoring, Turn, Verdict
from records.search import engine
from records.search.snippets import snippet

FACET_LIMIT = 30  # values per facet, the commonest first
SNIPPET_SOURCE = 20_000  # characters of a field a snippet is looked for in


@dataclass
class SearchQuery:
    runs: list[str] = field(default_factory=list)
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
    q: str = ""

    @property
    def words(self) -> list[str]:
        return engine.words(self.q)

    def call_condition(self) -> Q | None:
        """What the call conditions ask of one call; None when none is set."""
        parts = []
        if self.tool:
            parts.append(Q(tool=self.tool))
        if self.action:
            parts.append(Q(requested_action=self.action) | Q(dispatched_action=self.action))
        if self.outcome == "refused":
            parts.append(Q(outcome__startswith="refused:"))
        elif self.outcome:
            parts.append(Q(outcome=self.outcome))
        if self.observed is not None:
            parts.append(Q(dispatch_observed=self.observed))
        if self.truncated:
            parts.append(Q(result_truncated=True) | Q(text_truncated=True))
        if not parts:
            return None
        condition = parts[0]
        for part in parts[1:]:
            condition &= part
        return condition


def _hits(kind: int, words: list[str]) -> RawSQL:
    sql, params = engine.matching(kind, words)
    return RawSQL(sql, params)  # noqa: S611 (the engine's own SQL; the words are parameters)


class Search:
    """One query's attempts, calls and facets, each read when asked for."""

    def __init__(self, query: SearchQuery) -> None:
        self.query = query
        self.words = query.words
        runs = Scoring.objects.filter(verdict_count__gt=0)
        if query.runs:
            runs = runs.filter(run__run_id__in=query.runs)
        latest: dict[int, int] = {}
        for run, scoring in runs.order_by("run", "-created_at", "-id").values_list("run", "id"):
            latest.setdefault(run, scoring)
        self.scorings = list(latest.values())  # each run's latest scoring that holds verdicts
        self.attempts = self._attempts()
        self.calls = self._calls()

    def _own(self) -> QuerySet:
        """The attempts the attempt conditions select."""
        q = self.query
        qs = Attempt.objects.all()
        if q.runs:
            qs = qs.filter(run__run_id__in=q.runs)
        if q.digest:
            qs = qs.filter(run__corpus_digest__startswith=q.digest)
        if q.commit:
            qs = qs.filter(run__commit__startswith=q.commit)
        if q.model:
            qs = qs.filter(model__icontains=q.model)
        if q.surface:
            qs = qs.filter(effective_surface=q.surface)
        if q.case:
            qs = qs.filter(case=q.case)
        if q.ended_by:
            qs = qs.filter(ended_by=q.ended_by)
        if q.verdict or q.clean is not None:
            verdicts = Verdict.objects.filter(scoring__in=self.scorings, attempt=OuterRef("pk"))
            if q.verdict:
                verdicts = verdicts.filter(outcome=q.verdict)
            if q.clean is not None:
                verdicts = verdicts.filter(clean=q.clean)
            qs = qs.filter(Exists(verdicts))
        if q.turn_status:
            turns = Turn.objects.filter(attempt=OuterRef("pk"), status=q.turn_status)
            qs = qs.filter(Exists(turns))
        if q.verify_failed:
            qs = qs.filter(failed_checks__gt=0)
        return qs

    def _attempts(self) -> QuerySet:
        qs = self._own()
        condition = self.query.call_condition()
        words = self.words
        if condition is not None:
            calls = Call.objects.filter(condition, attempt=OuterRef("pk"))
            if words:
                # The words match the attempt's own text, or this very call's.
                own = Q(pk__in=_hits(engine.ATTEMPT, words))
                qs = qs.filter(
                    own & Exists(calls) | Exists(calls.filter(pk__in=_hits(engine.CALL, words)))
                )
            else:
                qs = qs.filter(Exists(calls))
        elif words:
            calls = Call.objects.filter(attempt=OuterRef("pk"), pk__in=_hits(engine.CALL, words))
            qs = qs.filter(Q(pk__in=_hits(engine.ATTEMPT, words)) | Exists(calls))
        return qs

    def _calls(self) -> QuerySet | None:
        """The calls that match, of the attempts listed; None when the query asks nothing of
        calls (no call condition, no words)."""
        condition = self.query.call_condition()
        words = self.words
        if condition is None and not words:
            return None
        qs = Call.objects.filter(attempt__in=self.attempts.values("pk"))
        if condition is not None:
            qs = qs.filter(condition)
            if words:
                qs = qs.filter(
                    Q(pk__in=_hits(engine.CALL, words))
                    | Q(attempt__in=_hits(engine.ATTEMPT, words))
                )
        else:
            qs = qs.filter(pk__in=_hits(engine.CALL, words))
        return qs

    def count(self) -> int:
        return self.attempts.count()

    def call_count(self) -> int:
        return self.calls.count() if self.calls is not None else 0

    def facets(self) -> dict[str, dict[str, int]]:
        """Counts by value for the current query: attempts by run, model, surface, case,
        ending and verdict; calls (those that match, or every call of the attempts listed when
        the query asks nothing of calls) by tool, requested and dispatched action, outcome."""
        out: dict[str, dict[str, int]] = {}
        attempts = self.attempts.order_by()
        for name, column in (
            ("run", "run__run_id"),
            ("model", "model"),
            ("surface", "effective_surface"),
            ("case", "case"),
            ("ended_by", "ended_by"),
        ):
            out[name] = _counted(attempts.values(column), column)
        verdicts = Verdict.objects.filter(
            scoring__in=self.scorings, attempt__in=attempts.values("pk")
        )
        out["verdict"] = _counted(verdicts.values("outcome"), "outcome")
        calls = (
            self.calls
            if self.calls is not None
            else Call.objects.filter(attempt__in=attempts.values("pk"))
        )
        for name, column in (
            ("tool", "tool"),
            ("requested", "requested_action"),
            ("dispatched", "dispatched_action"),
            ("outcome", "outcome"),
        ):
            out[name] = _counted(calls.order_by().values(column), column)
        return out

    def page(self, number: int, per_page: int) -> list[Attempt]:
        """One page of the attempts (newest run first, then file order), each with its
        verdict's `outcome` and `clean` (None unscored), `matched` (its matching calls, each
        with `pieces`, the snippet of its text that matched) and `pieces` of its own text."""
        start = (number - 1) * per_page
        verdicts = Verdict.objects.filter(scoring__in=self.scorings, attempt=OuterRef("pk"))
        attempts = list(
            self.attempts.order_by("-run_id", "line")
            .select_related("run")
            .only(*ATTEMPT_FIELDS, "run__run_id", "run__commit", "run__started_at")
            .annotate(
                outcome=verdicts.values("outcome")[:1],
                clean=verdicts.values("clean")[:1],
                stimulus_part=Substr("stimulus", 1, SNIPPET_SOURCE),
            )[start : start + per_page]
        )
        self._attach(attempts)
        return attempts

    def _attach(self, attempts: list[Attempt]) -> None:
        words = self.words
        matched: dict[int, list[Call]] = {a.pk: [] for a in attempts}
        if self.calls is not None and attempts:
            calls = (
                self.calls.filter(attempt_id__in=list(matched))
                .order_by("attempt_id", "index", "line")
                .only(*CALL_FIELDS)
                .annotate(
                    text_part=Substr("text", 1, SNIPPET_SOURCE),
                    arguments_part=Substr(Cast("arguments", TextField()), 1, SNIPPET_SOURCE),
                    result_part=Substr(Cast("result", TextField()), 1, SNIPPET_SOURCE),
                )
            )
            for c in calls:
                c.pieces = _first_snippet(words, c.text_part, c.arguments_part, c.result_part)
                matched[c.attempt_id].append(c)
        for a in attempts:
            a.matched = matched[a.pk]
            a.pieces = _first_snippet(words, a.stimulus_part, a.reason)

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every attempt matched with its matching calls, a row per call (an attempt without
        one: a row of its own), a thousand attempts at a time: for the CSV export."""
        number = 1
        while True:
            attempts = self.page(number, 1000)
            for a in attempts:
                base = attempt_fields(a)
                if not a.matched:
                    yield {**base, **dict.fromkeys(CALL_COLUMNS, "")}
                for c in a.matched:
                    yield {**base, **call_fields(c)}
            if len(attempts) < 1000:
                return
            number += 1


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
CALL_COLUMNS = ("call", "tool", "requested_action", "dispatched_action", "call_outcome", "snippet")


def attempt_fields(a: Attempt) -> dict[str, Any]:
    return {
        "run_id": a.run.run_id,
        "attempt": a.key,
        "case": a.case,
        "model": a.model,
        "surface": a.effective_surface,
        "repeat": a.repeat,
        "ended_by": a.ended_by,
        "verdict": a.outcome or "",
    }


def call_fields(c: Call) -> dict[str, Any]:
    return {
        "call": c.index,
        "tool": c.tool,
        "requested_action": c.requested_action,
        "dispatched_action": c.dispatched_action,
        "call_outcome": c.outcome,
        "snippet": "".join(text for text, _ in c.pieces),
    }


def _first_snippet(words: list[str], *texts: str | None) -> list[tuple[str, bool]]:
    for text in texts:
        pieces = snippet(text or "", words)
        if pieces:
            return pieces
    return []


def _counted(qs: QuerySet, column: str) -> dict[str, int]:
    rows = qs.annotate(n=Count("*")).order_by("-n", column)[:FACET_LIMIT]
    return {str(r[column]): r["n"] for r in rows}
