"""Plotly figures, built in Python and drawn by static/evaldash/app.js.

Plotly reads a subset of HTML in every label, legend entry and hover text, and a model, provider
or surface name comes from a shard: every figure leaves here through `escaped`, which turns each
string into text Plotly shows as it is. Hover templates are this module's own, constant text;
they take data only through Plotly's %{...} placeholders, whose values are escaped with the rest.
"""

from __future__ import annotations

import html
from typing import Any

from records.evidence import cost_per_attempt
from records.queries.cost import COST_PARTS, RunFigures, row_cost
from records.scoring.vocabulary import COLUMN_BY_TITLE, COLUMN_TITLES

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


def _percent(n: int, d: int) -> float | None:
    """A ratio as a rate in percent, as the charts plot it (None with no denominator)."""
    return round(100 * n / d, 2) if d else None


def _interval_bars(
    rates: list[float | None], cis: list[Any], *, missing: float | None, size: int = 1
) -> dict[str, Any]:
    """Plotly error bars from each rate (in percent) out to its 95% interval's ends; `missing`
    where a rate has no interval."""
    return {
        "type": "data",
        "symmetric": False,
        "array": [
            round(100 * c.high - y, 2) if c and y is not None else missing
            for c, y in zip(cis, rates, strict=True)
        ],
        "arrayminus": [
            round(y - 100 * c.low, 2) if c and y is not None else missing
            for c, y in zip(cis, rates, strict=True)
        ],
        "thickness": size,
        "width": 3 * size,
    }


def grouped_bars(group: Any) -> dict[str, Any]:
    """One Plotly figure per cross-vendor group: a bar per model and column, with its 95% Wilson
    interval as an error bar; N / D and the interval in the hover."""
    data = []
    for r in group.rows:
        pairs = [p for _, p, _ in r.columns_with_intervals]
        rates = [_percent(n, d) for n, d in pairs]
        cis = [ci for _, _, ci in r.columns_with_intervals]
        data.append(
            {
                "type": "bar",
                "name": r.model,
                "x": COLUMN_TITLES,
                "y": rates,
                "error_y": _interval_bars(rates, cis, missing=None),
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


# Marker shapes, one per surface of a cost scatter, with the glyph that names each in its key.
SHAPES = ("circle", "square", "diamond", "triangle-up", "cross", "x", "star", "hexagon")
GLYPHS = dict(zip(SHAPES, "●■◆▲✚✖★⬢", strict=True))


def cost_scatter(groups: list[Any], title: str = "Clean") -> dict[str, Any]:
    """Cost per attempt against the column titled `title`, one point per priced row (of
    `score_groups`, which sets each row's provider), coloured and labelled by model (the label
    names its surface), the interval as an error bar, and the Pareto front: the rows no other
    row beats on both cost and the column."""
    column = COLUMN_BY_TITLE[title]
    by_model: dict[str, list[tuple[float, float, str, list, Any]]] = {}
    for g in groups:
        for r in g.rows:
            each = cost_per_attempt(row_cost(r), r.figures["total"])
            n, d = dict(r.columns)[column]
            if each is None or not d:
                continue  # unpriced rows have no place on a cost axis
            ci = r.interval(column)
            by_model.setdefault(r.model, []).append(
                (
                    round(each, 6),
                    _percent(n, d),
                    r.surface,
                    [n, d, ci.points() if ci else "-"],
                    ci,
                )
            )
    # A point's surface is its marker's shape, not a label beside it: labels of nearby points
    # overlap. The hover names both; a key above the plot says which shape is which surface.
    surfaces = sorted({p[2] for points in by_model.values() for p in points})
    shape = {s: SHAPES[i % len(SHAPES)] for i, s in enumerate(surfaces)}
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "markers",
            "name": model,
            "x": [p[0] for p in points],
            "y": [p[1] for p in points],
            "text": [p[2] for p in points],
            "customdata": [p[3] for p in points],
            "marker": {"size": 11, "symbol": [shape[p[2]] for p in points]},
            "error_y": _interval_bars([p[1] for p in points], [p[4] for p in points], missing=0),
            "hovertemplate": "%{fullData.name} on %{text}<br>$%{x:.5f} per attempt<br>"
            + title
            + " %{customdata[0]} / %{customdata[1]} (%{y:.1f}%; 95% interval "
            "%{customdata[2]})<extra></extra>",
        }
        for model, points in sorted(by_model.items())
    ]
    everything = sorted((p[0], -p[1]) for points in by_model.values() for p in points)
    front, best = [], None
    # Cheapest first: a point is on the front if it beats every cheaper one on the column.
    for x, negative_y in everything:
        if best is None or -negative_y > best:
            front.append((x, -negative_y))
            best = -negative_y
    if len(front) > 1:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "Pareto front",
                "x": [x for x, _ in front],
                "y": [y for _, y in front],
                "line": {"dash": "dot", "color": "#6b7280"},
                "hoverinfo": "skip",
            }
        )
    return escaped(
        {
            "data": data,
            "layout": {
                "height": 460,
                "xaxis": {
                    "title": {"text": "USD per attempt"},
                    "rangemode": "tozero",
                    "tickprefix": "$",
                },
                "yaxis": {"title": {"text": f"{title} (%)"}, "range": [0, 108]},
                "margin": {"t": 40, "r": 24, "b": 56, "l": 56},
                "legend": {"orientation": "h", "y": -0.2},
                "annotations": [
                    {
                        "text": "Shape = surface: "
                        + " · ".join(f"{GLYPHS[shape[s]]} {s or 'no surface'}" for s in surfaces),
                        "xref": "paper",
                        "yref": "paper",
                        "x": 0,
                        "y": 1,
                        "xanchor": "left",
                        "yanchor": "bottom",
                        "showarrow": False,
                    }
                ],
            },
        }
    )


def ranked_intervals(ranking: Any) -> dict[str, Any]:
    """A ranked interval plot: one row per model, best at the top, its rate on the column as a
    point with its 95% interval as a bar across it; N / D and the interval in the hover."""
    ranked = ranking.ranked
    rates = [_percent(n, d) for _, (n, d), _ in ranked]
    return escaped(
        {
            "data": [
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": ranking.title,
                    "x": rates,
                    "y": [r.model for r, _, _ in ranked],
                    "error_x": _interval_bars(
                        rates, [ci for _, _, ci in ranked], missing=0, size=2
                    ),
                    "marker": {"size": 10},
                    "customdata": [[n, d, ci.points() if ci else "-"] for _, (n, d), ci in ranked],
                    "hovertemplate": "%{y}<br>"
                    + ranking.title
                    + " %{customdata[0]} / %{customdata[1]} (%{x:.1f}%)<br>"
                    "95% interval %{customdata[2]}<extra></extra>",
                }
            ],
            "layout": {
                "height": 80 + 36 * len(ranked),
                "xaxis": {"title": {"text": f"{ranking.title} (%)"}, "range": [0, 101]},
                # Categories run bottom-up: reversed, the best model is on top.
                "yaxis": {"autorange": "reversed", "automargin": True},
                "margin": {"t": 12, "r": 16, "b": 48, "l": 16},
                "showlegend": False,
            },
        }
    )


def history_chart(h: Any) -> dict[str, Any]:
    """A row's score over runs: the rate per run with its 95% interval as a band, the first run
    that fell by more than noise marked."""
    points = [p for p in h.points if p.ratio[1]]
    xs = [p.when.isoformat() if p.when else p.run.run_id for p in points]
    ys = [_percent(*p.ratio) for p in points]
    lows = [round(100 * p.interval.low, 2) if p.interval else None for p in points]
    highs = [round(100 * p.interval.high, 2) if p.interval else None for p in points]
    band = {"type": "scatter", "mode": "lines", "line": {"width": 0}, "hoverinfo": "skip"}
    data = [
        {**band, "x": xs, "y": highs, "name": "95% interval", "showlegend": False},
        {
            **band,
            "x": xs,
            "y": lows,
            "name": "95% interval",
            "fill": "tonexty",
            "fillcolor": "rgba(37, 99, 235, 0.15)",
        },
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": h.title,
            "x": xs,
            "y": ys,
            "customdata": [
                [
                    p.run.run_id,
                    p.run.commit[:12] or "-",
                    p.ratio[0],
                    p.ratio[1],
                    p.interval.points() if p.interval else "-",
                ]
                for p in points
            ],
            "hovertemplate": "%{customdata[0]} (commit %{customdata[1]})<br>"
            + h.title
            + " %{customdata[2]} / %{customdata[3]} (%{y:.1f}%)<br>"
            "95% interval %{customdata[4]}<extra></extra>",
        },
    ]
    drop = [(x, y) for x, y, p in zip(xs, ys, points, strict=True) if p.first_drop]
    if drop:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "first drop beyond noise",
                "x": [drop[0][0]],
                "y": [drop[0][1]],
                "marker": {"size": 16, "symbol": "x", "color": "#b91c1c"},
                "hoverinfo": "skip",
            }
        )
    return escaped(
        {
            "data": data,
            "layout": {
                "height": 360,
                "yaxis": {"title": {"text": f"{h.title} (%)"}, "range": [0, 101]},
                "margin": {"t": 16, "r": 16, "b": 56, "l": 56},
                "legend": {"orientation": "h"},
            },
        }
    )
