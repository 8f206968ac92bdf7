from __future__ import annotations

from typing import Any

from django import template

from records.cost import usd as _usd

register = template.Library()


@register.filter
def usd(value: float | None, digits: int = 4) -> str:
    return _usd(value, digits=digits)


@register.filter
def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


@register.filter
def ratio(pair: Any) -> str:
    """`N / D` for a (numerator, denominator) pair, `-` when D is 0 (never 0%)."""
    n, d = pair
    return "-" if not d else f"{n} / {d}"


@register.filter
def rate(pair: Any) -> str:
    n, d = pair
    return "" if not d else f"{100 * n / d:.0f}%"


@register.filter
def short(value: str, n: int = 9) -> str:
    return (value or "")[:n]


@register.filter
def intcomma(value: Any) -> str:
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


@register.simple_tag
def query_with(query: str, **kwargs: Any) -> str:
    """The current query string with some keys replaced (for pagination links)."""
    from django.http import QueryDict

    q = QueryDict(query, mutable=True)
    for k, v in kwargs.items():
        q[k] = v
    return q.urlencode()


@register.filter
def pretty_json(value: Any) -> str:
    from records.pages import pretty_json as dump

    return dump(value)


@register.filter
def get(mapping: Any, key: str) -> Any:
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def make_list_words(value: str) -> list[str]:
    return value.split()


@register.filter
def side_ratio(side: Any, column: str) -> tuple[int, int]:
    return side.ratio(column)


@register.filter
def delta(base: Any, other: Any) -> dict[str, float | None]:
    """Points of difference per column between two compared sides."""
    from records.compare import COLUMNS, delta_points

    return {c: delta_points(base.ratio(c), other.ratio(c)) for c in COLUMNS}
