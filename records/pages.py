"""The queries and figures pages need, kept out of the views so each can be read alone.

Everything here reads precomputed per (run, model, surface, mode) summaries or one page of rows:
no page adds up a whole run in Python.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Exists, F, OuterRef, QuerySet, Subquery

from records.cost import Cost, Tokens, cost_of, cost_without_cache
from records.formats.shard_rows import SUMMARY_COLUMNS
from records.models import ENDINGS, Attempt, Call, Provider, Run, SurfaceSummary, Turn


def filtered_runs(data: dict[str, Any]) -> QuerySet[Run]:
    qs = Run.objects.select_related("shard").annotate(
        token_total=F("input_tokens")
        + F("output_tokens")
        + F("cache_created_tokens")
        + F("cache_read_tokens")
    )
    summary = {}
    for name in ("model", "surface", "mode"):
        if data.get(name):
            summary[name] = data[name]
    if summary:
        qs = qs.filter(Exists(SurfaceSummary.objects.filter(run=OuterRef("pk"), **summary)))
    if data.get("tier"):
        qs = qs.filter(tier=data["tier"])
    if data.get("commit"):
        qs = qs.filter(commit__startswith=data["commit"])
    if data.get("corpus_digest"):
        qs = qs.filter(corpus_digest=data["corpus_digest"])
    if data.get("since"):
        qs = qs.filter(started_at__date__gte=data["since"])
    if data.get("until"):
        qs = qs.filter(started_at__date__lte=data["until"])
    from records.forms import RunFilterForm

    return qs.order_by(*RunFilterForm.SORTS[data.get("sort") or "-started"])


@dataclass
class SurfaceRow:
    """Figures for one (model, surface, mode) of a run: counts, tokens and cost."""

    model: str
    surface: str
    mode: str
    summary: SurfaceSummary
    provider: Provider | None
    tokens: Tokens
    cost: Cost | None
    without_cache: float | None

    @property
    def endings(self) -> list[tuple[str, int]]:
        return [(e, getattr(self.summary, e)) for e in ENDINGS]

    @property
    def cost_per_attempt(self) -> float | None:
        if self.cost is None or not self.summary.attempts:
            return None
        return self.cost.total / self.summary.attempts

    @property
    def cost_per_completed(self) -> float | None:
        if self.cost is None or not self.summary.completed:
            return None
        return self.cost.total / self.summary.completed

    @property
    def mean_latency_ms(self) -> float | None:
        return self.summary.latency_ms / self.summary.tries if self.summary.tries else None

    @property
    def unpriced_reason(self) -> str:
        if self.provider is None:
            return "the run line lists no provider with this spec"
        if not self.provider.priced:
            return "the run line carries no price for this model"
        return ""


@dataclass
class RunFigures:
    rows: list[SurfaceRow]
    by_model: dict[str, SurfaceRow] = field(default_factory=dict)

    @property
    def priced_total(self) -> float:
        return sum(r.cost.total for r in self.rows if r.cost is not None)

    @property
    def priced_models(self) -> list[str]:
        return sorted({r.model for r in self.rows if r.cost is not None})

    @property
    def unpriced_models(self) -> list[str]:
        return sorted({r.model for r in self.rows if r.cost is None})

    @property
    def tokens(self) -> Tokens:
        total = Tokens()
        for r in self.rows:
            total += r.tokens
        return total


def run_figures(
    run: Run,
    summaries: Iterable[SurfaceSummary] | None = None,
    providers: Iterable[Provider] | None = None,
) -> RunFigures:
    prices = {p.spec: p for p in (run.providers.all() if providers is None else providers)}
    rows = []
    for s in run.summaries.all() if summaries is None else summaries:
        provider = prices.get(s.model)
        price = provider.price if provider else None
        tokens = Tokens.of(s)
        rows.append(
            SurfaceRow(
                s.model,
                s.surface,
                s.mode,
                s,
                provider,
                tokens,
                cost_of(tokens, price),
                cost_without_cache(tokens, price),
            )
        )
    figures = RunFigures(rows)
    per_model: dict[str, list[SurfaceRow]] = defaultdict(list)
    for r in rows:
        per_model[r.model].append(r)
    for model, group in sorted(per_model.items()):
        merged = SurfaceSummary(model=model, surface="all", mode="")
        for name in SUMMARY_COLUMNS[3:]:  # every summed column (after model, surface, mode)
            setattr(merged, name, sum(getattr(g.summary, name) for g in group))
        provider = group[0].provider
        price = provider.price if provider else None
        tokens = Tokens.of(merged)
        figures.by_model[model] = SurfaceRow(
            model,
            "all",
            "",
            merged,
            provider,
            tokens,
            cost_of(tokens, price),
            cost_without_cache(tokens, price),
        )
    return figures


def filtered_attempts(run: Run, data: dict[str, Any], scoring: Any = None) -> QuerySet[Attempt]:
    qs = Attempt.objects.filter(run=run)
    if scoring is not None:
        from records.models import Verdict

        verdicts = Verdict.objects.filter(scoring=scoring, attempt=OuterRef("pk"))
        qs = qs.annotate(
            outcome=Subquery(verdicts.values("outcome")[:1]),
            clean=Subquery(verdicts.values("clean")[:1]),
        )
        if data.get("outcome"):
            qs = qs.filter(Exists(verdicts.filter(outcome=data["outcome"])))
        if data.get("clean") in ("yes", "no"):
            qs = qs.filter(Exists(verdicts.filter(clean=data["clean"] == "yes")))
    if data.get("model"):
        qs = qs.filter(model=data["model"])
    if data.get("surface"):
        qs = qs.filter(effective_surface=data["surface"])
    if data.get("case"):
        qs = qs.filter(case=data["case"])
    if data.get("ended_by"):
        qs = qs.filter(ended_by=data["ended_by"])
    return qs.order_by("line").defer("stimulus", "facts")


# What a trace renders of one JSON value: indentation multiplies a deeply nested value (a 200 KB
# line became 191 MiB of HTML), so nesting is shown to this depth and the text to this length;
# the rest is one click away as the raw value.
SHOWN_JSON_DEPTH = 24
SHOWN_JSON_CHARS = 64 * 1024


@dataclass
class ShownJson:
    text: str
    cut: bool  # something was left out: the page links to the raw value


def _clipped(value: Any, depth: int) -> tuple[Any, bool]:
    if isinstance(value, dict | list) and value and depth >= SHOWN_JSON_DEPTH:
        return f"… {'{…}' if isinstance(value, dict) else '[…]'} nested deeper", True
    if isinstance(value, dict):
        items = {k: _clipped(v, depth + 1) for k, v in value.items()}
        return {k: v for k, (v, _) in items.items()}, any(c for _, c in items.values())
    if isinstance(value, list):
        items = [_clipped(v, depth + 1) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    return value, False


def shown_json(value: Any) -> ShownJson:
    """Indented JSON for a page, bounded in depth and length."""
    clipped, cut = _clipped(value, 0)
    text = json.dumps(clipped, indent=2, ensure_ascii=False)
    if len(text) > SHOWN_JSON_CHARS:
        text = text[: text.rfind("\n", 0, SHOWN_JSON_CHARS) + 1] + "…"
        cut = True
    return ShownJson(text, cut)


def pretty_json(value: Any) -> str:
    return shown_json(value).text


@dataclass
class TraceBlock:
    kind: str
    text: str = ""
    tool: str = ""
    arguments: ShownJson | None = None
    raw: str = ""
    call: Call | None = None
    long: bool = False
    position: int = 0  # in its turn's blocks: the raw value's address


@dataclass
class TraceTurn:
    turn: Turn
    blocks: list[TraceBlock]
    cost: Cost | None
    extra_calls: list[Call]

    @property
    def rate_limited(self) -> bool:
        return self.turn.status == "rate_limited"


LONG_TEXT = 600


def trace(attempt: Attempt, price: tuple[float, float, float, float] | None) -> list[TraceTurn]:
    """Turns in conversation order, each tool-call block paired with the call line it led to.

    Call lines carry the turn index they were made in; within a turn, the k-th tool-call block
    of the answered try is paired with the k-th call by call index.
    """
    turns = list(attempt.turns.order_by("index", "line"))
    calls = list(attempt.calls.order_by("index", "line"))
    calls_by_turn: dict[int, list[Call]] = defaultdict(list)
    for c in calls:
        calls_by_turn[c.turn].append(c)
    answered: dict[int, Turn] = {}
    for t in turns:
        if t.status == "ok" or t.index not in answered:
            answered[t.index] = t
    out = []
    for t in turns:
        pending = calls_by_turn.get(t.index, []) if answered.get(t.index) is t else []
        pending = list(pending)
        blocks = []
        for position, b in enumerate(t.blocks or []):
            kind = b.get("kind", "")
            tb = TraceBlock(
                kind,
                text=b.get("text", ""),
                tool=b.get("tool", ""),
                raw=b.get("raw", ""),
                position=position,
            )
            if "arguments" in b:
                tb.arguments = shown_json(b["arguments"])
            if kind == "tool_call" and pending:
                tb.call = pending.pop(0)
            tb.long = len(tb.text) > LONG_TEXT
            blocks.append(tb)
        out.append(TraceTurn(t, blocks, cost_of(Tokens.of(t), price), pending))
    return out


def previous_runs(runs: list[Run]) -> dict[int, int]:
    """For each run, the latest earlier run with the same corpus digest (one query)."""
    if not runs:
        return {}
    digests = {r.corpus_digest for r in runs if r.corpus_digest and r.started_at}
    candidates = list(
        Run.objects.filter(corpus_digest__in=digests, started_at__isnull=False)
        .order_by("corpus_digest", "-started_at", "-id")
        .values_list("pk", "corpus_digest", "started_at")[:2000]
    )
    out = {}
    for run in runs:
        if not run.started_at:
            continue
        for pk, digest, started in candidates:
            if digest == run.corpus_digest and started < run.started_at and pk != run.pk:
                out[run.pk] = pk
                break
    return out
