"""Cost from the four usage numbers and the run's own prices (modelrecord.md D.2).

A model without a price has *unknown* cost, never zero. Every try is charged, so the inputs here
are sums over every turn line.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import astuple, dataclass, field
from typing import Any

from records import evidence
from records.formats.rows import SUMMARY_COLUMNS
from records.models import ENDINGS, Provider, Run, ScoreRow, SurfaceSummary

Price = tuple[float, float, float, float]  # input, output, cache write, cache read; per million


def _plus(a: Any, b: Any) -> Any:
    """Two figures of one kind added field by field."""
    return type(a)(*(x + y for x, y in zip(astuple(a), astuple(b), strict=True)))


@dataclass(frozen=True)
class Tokens:
    input: int = 0
    output: int = 0
    cache_created: int = 0
    cache_read: int = 0

    def __add__(self, other: Tokens) -> Tokens:
        return _plus(self, other)

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_created + self.cache_read

    @property
    def all_input(self) -> int:
        """Every token the model read: plain input, cache writes and cache reads."""
        return self.input + self.cache_created + self.cache_read

    @property
    def cache_read_share(self) -> float | None:
        return self.cache_read / self.all_input if self.all_input else None

    @classmethod
    def of_figures(cls, f: dict[str, Any]) -> Tokens:
        """The tokens of summed figures (a score row's, a case's); a sum over nothing is 0."""
        return cls(
            f["input_tokens"] or 0,
            f["output_tokens"] or 0,
            f["cache_created_tokens"] or 0,
            f["cache_read_tokens"] or 0,
        )

    @classmethod
    def of(cls, obj: object) -> Tokens:
        return cls(
            obj.input_tokens,
            obj.output_tokens,
            obj.cache_created_tokens,  # type: ignore[attr-defined]
            obj.cache_read_tokens,
        )  # type: ignore[attr-defined]


# The four parts of a cost, as `Cost` names them, with their column titles.
COST_PARTS = (
    ("input", "Input"),
    ("output", "Output"),
    ("cache_write", "Cache write"),
    ("cache_read", "Cache read"),
)


@dataclass(frozen=True)
class Cost:
    input: float
    output: float
    cache_write: float
    cache_read: float

    @property
    def total(self) -> float:
        return self.input + self.output + self.cache_write + self.cache_read

    def __add__(self, other: Cost) -> Cost:
        return _plus(self, other)


def cost_of(tokens: Tokens, price: Price | None) -> Cost | None:
    """The four dollar components, or None when the model is unpriced."""
    if price is None:
        return None
    return Cost(
        tokens.input * price[0] / 1_000_000,
        tokens.output * price[1] / 1_000_000,
        tokens.cache_created * price[2] / 1_000_000,
        tokens.cache_read * price[3] / 1_000_000,
    )


def cost_without_cache(tokens: Tokens, price: Price | None) -> float | None:
    """What the same tokens would cost if cache reads and writes were priced as plain input."""
    if price is None:
        return None
    return (tokens.all_input * price[0] + tokens.output * price[1]) / 1_000_000


def usd(value: float | None, *, digits: int | None = 4) -> str:
    """Dollars with thousands separators and `digits` decimals; `digits=None` is a price as
    written, in cents at least ($1.00, $0.075), never a bare "$1.0"."""
    if value is None:
        return "unknown"
    sign = "-" if value < 0 else ""
    if digits is None:
        text = f"{abs(value):,.6f}".rstrip("0")
        whole, _, cents = text.partition(".")
        return f"{sign}${whole}.{cents.ljust(2, '0')}"
    return f"{sign}${abs(value):,.{digits}f}"


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
    # What the latest scoring found (`scored` figures): attempts Completed, and cases run;
    # None where the run is not scored (or the figures were not asked for).
    completed: int | None = None
    cases: int | None = None

    @property
    def endings(self) -> list[tuple[str, int]]:
        return [(e, getattr(self.summary, e)) for e in ENDINGS]

    @property
    def total(self) -> float | None:
        return None if self.cost is None else self.cost.total

    @property
    def cost_per_attempt(self) -> float | None:
        return evidence.cost_per_attempt(self.total, self.summary.attempts)

    @property
    def cost_per_completed(self) -> float | None:
        """Over the attempts the scorer found Completed, as every page divides it."""
        return evidence.cost_per_completed(self.total, self.completed)

    @property
    def cost_per_case(self) -> float | None:
        return evidence.cost_per_case(self.total, self.cases)

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


def scored_counts(run: Run) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(Completed attempts, cases) per model, surface and mode, as the run's latest scoring
    found them: what cost per completed and per case divide by (two queries; none scored:
    empty)."""
    scoring = run.latest_scoring()
    if scoring is None or not scoring.verdict_count:
        return {}
    out: dict[tuple[str, str, str], tuple[int, int]] = {}
    for model, surface, mode, completed, cases in ScoreRow.objects.filter(
        scoring=scoring
    ).values_list("model", "surface", "session__mode", "figures__completed", "case_count"):
        key = (model, surface, mode or "")
        done, seen = out.get(key, (0, 0))
        out[key] = (done + int(completed or 0), seen + (cases or 0))
    return out


def run_figures(
    run: Run,
    summaries: Iterable[SurfaceSummary] | None = None,
    providers: Iterable[Provider] | None = None,
    *,
    scored: bool = False,
) -> RunFigures:
    """The run's tokens and cost per model, surface and mode (and per model); with `scored`,
    the per-completed and per-case figures too, from the latest scoring."""
    prices = {p.spec: p for p in (run.providers.all() if providers is None else providers)}
    counts = scored_counts(run) if scored else {}
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
                *counts.get((s.model, s.surface, s.mode), (None, None)),
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
        known = [g for g in group if g.completed is not None]
        figures.by_model[model] = SurfaceRow(
            model,
            "all",
            "",
            merged,
            provider,
            tokens,
            cost_of(tokens, price),
            cost_without_cache(tokens, price),
            sum(g.completed or 0 for g in known) if known else None,
            None,  # a case is run once per surface: per case is a surface's figure
        )
    return figures


# What the tables of a run's figures (cost; how attempts ended) sort by, through the address:
# each column's value of a row (None, an unknown cost, sorts last either way).
ROW_SORTS: dict[str, Any] = {
    "model": lambda r: r.model,
    "surface": lambda r: (r.surface, r.mode),
    "attempts": lambda r: r.summary.attempts,
    **{ending: (lambda r, e=ending: getattr(r.summary, e)) for ending in ENDINGS},
    "turns": lambda r: r.summary.turns,
    "tries": lambda r: r.summary.tries,
    "latency": lambda r: r.mean_latency_ms,
    "tokens": lambda r: r.tokens.total,
    "input": lambda r: r.tokens.input,
    "output": lambda r: r.tokens.output,
    "cache_write": lambda r: r.tokens.cache_created,
    "cache_read": lambda r: r.tokens.cache_read,
    "total": lambda r: r.cost.total if r.cost else None,
    "cache_share": lambda r: r.tokens.cache_read_share,
    "per_attempt": lambda r: r.cost_per_attempt,
    "per_completed": lambda r: r.cost_per_completed,
    "per_case": lambda r: r.cost_per_case,
    "without_cache": lambda r: r.without_cache,
}


def sort_figures(figures: RunFigures, sort: str) -> None:
    """Order the rows (per model, and per model and surface) by `sort`: a key of ROW_SORTS,
    `-` before it for the highest first."""
    key = ROW_SORTS.get(sort.lstrip("-"))
    if key is None:
        return
    descending = sort.startswith("-")

    def ordered(rows: list[SurfaceRow]) -> list[SurfaceRow]:
        known = sorted((r for r in rows if key(r) is not None), key=key, reverse=descending)
        return known + [r for r in rows if key(r) is None]

    figures.rows = ordered(figures.rows)
    figures.by_model = {r.model: r for r in ordered(list(figures.by_model.values()))}


def row_cost(row: Any) -> float | None:
    """What a score row's attempts cost at its provider's price (every try charged); None when
    the model is unpriced. `row` is a `records.scoring.tables.TableRow` of `score_groups`."""
    cost = cost_of(Tokens.of_figures(row.figures), row.provider.price if row.provider else None)
    return None if cost is None else cost.total
