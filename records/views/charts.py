"""Plotly figures, built in Python and drawn by static/evaldash/app.js.

Plotly reads a subset of HTML in every label, legend entry and hover text, and a model, provider
or surface name comes from a shard: every figure leaves here through `escaped`, which turns each
string into text Plotly shows as it is. Hover templates are this module's own, constant text;
they take data only through Plotly's %{...} placeholders, whose values are escaped with the rest.
"""

from __future__ import annotations

import html
from typing import Any

from records.models import Run
from records.queries.cost import COST_PARTS, RunFigures, Tokens, cost_of
from records.scores.tables import COLUMN_TITLES

# Keys whose strings are this module's own markup, not data.
_TEMPLATES = frozenset({"hovertemplate", "texttemplate"})


def escaped(figure: Any, key: str = "") -> Any:
    """The figure with every data string HTML-escaped (Plotly turns &lt; back into a "<")."""
    if isinstance(figure, str):
        return figure if key in _TEMPLATES else html.escape(figure, quote=False)
    if isinstance(figure, dict):
        return {k: escaped(v, k) for k, v in figure.items()}
    if isinstance(figure, list | tuple):
        return [escaped(v, key) for v in figure]
    return figure


def cost_chart(figures: RunFigures) -> dict[str, Any]:
    """A Plotly figure: stacked bars of the four cost components per model (priced models)."""
    models = [m for m, r in figures.by_model.items() if r.cost is not None]
    data = [
        {
            "type": "bar",
            "name": label,
            "x": models,
            "y": [round(getattr(figures.by_model[m].cost, attr), 6) for m in models],
            "hovertemplate": "%{x}<br>" + label + ": $%{y:.4f}<extra></extra>",
        }
        for attr, label in COST_PARTS
    ]
    layout = {
        "barmode": "stack",
        "title": {"text": "Cost by model (USD, from the run's own prices)"},
        "yaxis": {"title": {"text": "USD"}, "tickprefix": "$"},
        "margin": {"t": 48, "r": 16, "b": 120, "l": 64},
        "height": 380,
        "legend": {"orientation": "h"},
    }
    return escaped({"data": data, "layout": layout})


def grouped_bars(group: Any) -> dict[str, Any]:
    """One Plotly figure per cross-vendor group: a bar per model and column, with its 95% Wilson
    interval as an error bar; N / D and the interval in the hover."""
    data = []
    for r in group.rows:
        pairs = [p for _, p, _ in r.columns_with_intervals]
        rates = [round(100 * n / d, 2) if d else None for n, d in pairs]
        cis = [ci for _, _, ci in r.columns_with_intervals]
        data.append(
            {
                "type": "bar",
                "name": r.model,
                "x": COLUMN_TITLES,
                "y": rates,
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "array": [
                        round(100 * c.high - y, 2) if c else None
                        for c, y in zip(cis, rates, strict=True)
                    ],
                    "arrayminus": [
                        round(y - 100 * c.low, 2) if c else None
                        for c, y in zip(cis, rates, strict=True)
                    ],
                    "thickness": 1,
                    "width": 3,
                },
                "customdata": [
                    [n, d, c.points() if c else "-"] for (n, d), c in zip(pairs, cis, strict=True)
                ],
                "hovertemplate": "%{x}: %{customdata[0]} / %{customdata[1]} (%{y:.1f}%; "
                "95% interval %{customdata[2]})<extra>%{fullData.name}</extra>",
            }
        )
    return escaped(
        {
            "data": data,
            "layout": {
                "barmode": "group",
                "height": 360,
                "yaxis": {"title": {"text": "rate (%)"}, "range": [0, 100]},
                "margin": {"t": 24, "r": 16, "b": 60, "l": 56},
                "legend": {"orientation": "h"},
            },
        }
    )


def cost_scatter(groups: list[Any], run: Run) -> dict[str, Any]:
    """Cost per attempt against Completion and Clean, one point per priced row."""
    prices = {p.spec: p.price for p in run.providers.all()}
    points: dict[str, tuple[list, list, list, list]] = {
        "Completion": ([], [], [], []),
        "Clean": ([], [], [], []),
    }
    for g in groups:
        for r in g.rows:
            f = r.figures
            cost = cost_of(
                Tokens(
                    f["input_tokens"] or 0,
                    f["output_tokens"] or 0,
                    f["cache_created_tokens"] or 0,
                    f["cache_read_tokens"] or 0,
                ),
                prices.get(r.model),
            )
            if cost is None or not f["total"] or not f["attempts"]:
                continue  # unpriced rows have no place on a cost axis
            for name, n in (("Completion", f["completed"]), ("Clean", f["clean"])):
                xs, ys, texts, custom = points[name]
                xs.append(round(cost.total / f["total"], 6))
                ys.append(round(100 * n / f["attempts"], 2))
                texts.append(f"{r.model} ({r.surface})")
                custom.append([n, f["attempts"]])
    data = [
        {
            "type": "scatter",
            "mode": "markers",
            "name": name,
            "x": xs,
            "y": ys,
            "text": texts,
            "customdata": custom,
            "hovertemplate": "%{text}<br>$%{x:.5f} per attempt<br>"
            + name
            + " %{customdata[0]} / %{customdata[1]} (%{y:.1f}%)<extra></extra>",
        }
        for name, (xs, ys, texts, custom) in points.items()
    ]
    return escaped(
        {
            "data": data,
            "layout": {
                "height": 420,
                "xaxis": {"title": {"text": "USD per attempt"}},
                "yaxis": {"title": {"text": "rate (%)"}, "range": [0, 105]},
                "margin": {"t": 24, "r": 16, "b": 56, "l": 56},
                "legend": {"orientation": "h"},
            },
        }
    )
