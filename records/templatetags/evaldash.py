from __future__ import annotations

import unicodedata
from typing import Any
from urllib.parse import quote, urlencode

from django import template
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from records.formats.rows import TOKENS
from records.queries.compare import parse_row_key
from records.queries.cost import COST_PARTS
from records.queries.cost import usd as _usd
from records.queries.trace import shown_json as shown
from records.scorer.score import COUNTED_APART, DISCOVERY_TOOL

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
    return "-" if not d else f"{n:,} / {d:,}"


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


@register.filter
def shown_json(value: Any) -> Any:

    return shown(value)


@register.filter
def get(mapping: Any, key: str) -> Any:
    try:
        return mapping.get(key)
    except AttributeError:
        return None


# --- table rows rendered in Python ----------------------------------------------------------------
# The run page's tables have a row per model, surface and mode, and a run of many models has
# thousands of cells: the template engine's cost per variable made those rows most of the
# page's time. These tags write the same rows with `format_html`, which escapes every value.


def _q(value: Any) -> str:
    """A query-string value, as the `urlencode` filter writes it (percent-encoded, so it is
    safe inside an attribute as it is)."""
    return quote(str(value), safe="/")


def _attempts_link(context: Any, r: Any) -> str:
    """The run's attempts tab narrowed to a table row: a score row by its row key (exactly its
    verdicts), a summary row by model and surface."""
    base = context.get("attempts_url", "")
    if hasattr(r, "row_key"):
        return f"{base}?row={_q(r.row_key)}"
    return f"{base}?model={_q(r.model)}&surface={_q(r.surface)}"


def _num(value: Any) -> SafeString:
    if type(value) is int:  # nothing to escape
        return mark_safe(f'<td class="num">{value:,}</td>')  # noqa: S308
    return format_html('<td class="num">{}</td>', value)


@register.simple_tag(takes_context=True)
def endings_row(context: Any, r: Any) -> SafeString:
    """A row of "How attempts ended": counts linked to the attempts behind them."""
    link = _attempts_link(context, r)
    cells = [
        format_html(
            '<td><code><bdi>{}</bdi></code></td><td>{}</td><td>{}</td><td class="num">'
            '<a href="{}">{}</a></td>',
            r.model,
            r.surface or "—",
            r.mode or "—",
            mark_safe(link),  # noqa: S308 (percent-encoded above)
            intcomma(r.summary.attempts),
        )
    ]
    for ending, n in r.endings:
        if n:
            cells.append(
                format_html(
                    '<td class="num"><a href="{}&ended_by={}">{}</a></td>',
                    mark_safe(link),  # noqa: S308
                    _q(ending),
                    intcomma(n),
                )
            )
        else:
            cells.append(mark_safe('<td class="num"><span class="muted">0</span></td>'))
    s = r.summary
    cells += [
        _num(s.turns),
        _num(s.tries),
        _num(ms(r.mean_latency_ms)),
        _num(intcomma(r.tokens.total)),
    ]
    return mark_safe("<tr>" + "".join(cells) + "</tr>")  # noqa: S308 (each part built above)


@register.simple_tag
def cost_row(r: Any, strong: bool = False) -> SafeString:
    """A row of "Tokens and cost": the four usage numbers, their prices, and the total."""
    t = r.tokens
    cells = [
        format_html(
            "<td><code><bdi>{}</bdi></code></td><td>{}</td>",
            r.model,
            "all surfaces" if strong else f"{r.surface} {r.mode}",
        ),
        *(_num(intcomma(n)) for n in (t.input, t.output, t.cache_created, t.cache_read)),
    ]
    if r.cost:
        c = r.cost
        cells += [_num(usd(getattr(c, part))) for part, _ in COST_PARTS]
        cells.append(format_html('<td class="num"><strong>{}</strong></td>', usd(c.total)))
    else:
        why = r.unpriced_reason
        cells.append(
            format_html('<td colspan="5" class="unknown" title="{}">unknown: {}</td>', why, why)
        )
    cells += [
        _num(pct(t.cache_read_share)),
        _num(usd(r.cost_per_attempt)),
        _num(usd(r.cost_per_completed)),
        _num(usd(r.without_cache)),
    ]
    row = "".join(cells)
    return mark_safe(f'<tr class="total">{row}</tr>' if strong else f"<tr>{row}</tr>")  # noqa: S308


@register.simple_tag(takes_context=True)
def score_row(context: Any, r: Any) -> SafeString:
    """A row of a score table: each ratio linked to the attempts behind its numerator, and
    what the numerator lacks of the denominator linked to the attempts that missed it."""
    link = _attempts_link(context, r)
    key = parse_row_key(r.row_key)
    trend = (
        reverse("records:history")
        + "?"
        + urlencode(
            {
                "digest": key.get("corpus", ""),
                "model": r.model,
                "surface": r.surface,
                "mode": key.get("mode", ""),
            }
        )
    )
    cells = [
        format_html(
            '<td><a href="{}" title="Every attempt of this row"><code><bdi>{}</bdi></code></a> '
            '<a class="trend" href="{}" title="This row over the runs of its corpus">history</a>'
            "</td>",
            mark_safe(link),  # noqa: S308
            r.model,
            trend,
        )
    ]
    for name, pair, ci in r.columns_with_intervals:
        if not pair[1]:
            cells.append(mark_safe('<td class="num">-</td>'))
            continue
        missed = pair[1] - pair[0]
        drill = f"{link}&column={name}&hit="
        cells.append(
            format_html(
                '<td class="num"><a class="hits" href="{}yes" title="The attempts behind {}">'
                '{}</a> <span class="rate">{}</span>'
                '<span class="ci" title="95% interval ({})">{}</span>{}</td>',
                mark_safe(drill),  # noqa: S308 (percent-encoded above)
                ratio(pair),
                ratio(pair),
                rate(pair),
                r.interval_method,
                ci.points() if ci else "-",
                format_html(
                    '<a class="misses" href="{}no" title="The attempts that missed">{} missed</a>',
                    mark_safe(drill),  # noqa: S308
                    intcomma(missed),
                )
                if missed
                else "",
            )
        )
    cells.append(_overhead(link, r))
    if r.refusal:
        cells.append(
            format_html(
                '<td><span class="badge warn" title="{}">{}</span></td>',
                r.refusal[1],
                r.refusal[0],
            )
        )
    else:
        cells.append(mark_safe('<td><span class="ok">yes</span></td>'))
    return mark_safe("<tr>" + "".join(cells) + "</tr>")  # noqa: S308


def _overhead(link: str, r: Any) -> SafeString:
    """Overhead: the calls to find an action and those refused for invalid params, each count
    linked to the search of those calls among the row's attempts."""
    f = r.figures
    if not f["steps"]:
        return mark_safe('<td class="num">-</td>')
    parts = []
    for n, condition, label in (
        (f["discovery"], f"tool={_q(DISCOVERY_TOOL)}", "find"),
        (f["invalid_params"], "call_outcome=refused:invalid_params", "invalid_params"),
    ):
        if n:
            parts.append(
                format_html(
                    '<a class="calls" href="{}&{}">{} {}</a>',
                    mark_safe(link),  # noqa: S308 (percent-encoded above)
                    mark_safe(condition),  # noqa: S308
                    intcomma(n),
                    label,
                )
            )
        else:
            parts.append(format_html("0 {}", label))
    return format_html(
        '<td class="num">{} / {} ({})</td>',
        f["discovery"] + f["invalid_params"],
        f["steps"],
        mark_safe(", ".join(parts)),  # noqa: S308 (each part built above)
    )


@register.simple_tag(takes_context=True)
def counted_apart_row(context: Any, r: Any) -> SafeString:
    """A row of "Counted apart and tokens": outcomes kept out of the ratios, linked."""
    f = r.figures
    link = _attempts_link(context, r)
    cells = [
        format_html("<td><code><bdi>{}</bdi></code></td>", r.model),
        _num(f["attempts"]),
        _num(f["turns"] or 0),
    ]
    for outcome in COUNTED_APART:
        n = f.get(outcome)
        if n:
            cells.append(
                format_html(
                    '<td class="num"><a href="{}&outcome={}">{}</a></td>',
                    mark_safe(link),  # noqa: S308
                    outcome,
                    n,
                )
            )
        else:
            cells.append(mark_safe('<td class="num">0</td>'))
    cells += [_num(intcomma(f[t])) for t in TOKENS]
    return mark_safe("<tr>" + "".join(cells) + "</tr>")  # noqa: S308


@register.simple_tag(takes_context=True)
def uploader(context: Any, upload: Any) -> str:
    """Who uploaded: the account, or the token by name for staff only (its name and prefix
    say which CI job holds it), "an upload token" for everyone else."""
    if upload.user_id:
        return str(upload.user)
    if upload.token_id:
        user = getattr(context.get("request"), "user", None)
        return str(upload.token) if user is not None and user.is_staff else "an upload token"
    return "—"


@register.filter
def points(value: float | None) -> str:
    """A difference in rate as signed percentage points ("+3.2", "-15.0")."""
    if value is None:
        return "-"
    return f"{100 * value:+.1f}"


@register.simple_tag(takes_context=True)
def sort_header(
    context: Any, title: str, key: str, numeric: bool = False, high_first: bool = False
) -> SafeString:
    """A column header that sorts its table through the address: a click sorts by the column
    (`high_first`: highest first), a second click the other way; the list is swapped in place
    where htmx is at hand."""
    request = context["request"]
    current = request.GET.get("sort", "")
    first, second = (f"-{key}", key) if high_first else (key, f"-{key}")
    target = second if current == first else first
    query = request.GET.copy()
    query["sort"] = target
    query.pop("page", None)
    base = context.get("sort_base", request.path)
    href = f"{base}?{query.urlencode()}"
    arrow = {key: " ▲", f"-{key}": " ▼"}.get(current, "")
    aria = {key: "ascending", f"-{key}": "descending"}.get(current, "none")
    swap = context.get("sort_target", "")
    hx = (
        format_html(
            ' hx-get="{}" hx-target="{}" hx-swap="outerHTML" hx-push-url="true"', href, swap
        )
        if swap
        else ""
    )
    return format_html(
        '<th class="sortable{}" aria-sort="{}"><a href="{}"{}>{}{}</a></th>',
        " num" if numeric else "",
        aria,
        href,
        hx,
        title,
        arrow,
    )


# --- names that look alike -----------------------------------------------------------------------
# Characters that draw nothing (zero-width spaces and joiners, the soft hyphen, bidi controls):
# two names that differ only by these, or by Unicode normalisation, print the same.
INVISIBLE = dict.fromkeys(
    [0x00AD, 0x034F, 0x061C, 0x180E, 0xFEFF, *range(0x200B, 0x2010), *range(0x202A, 0x202F)]
    + [*range(0x2060, 0x2065), *range(0x2066, 0x206A)]
)


def looks_like(name: str) -> str:
    """What a name looks like on a page: NFKC, without the characters that draw nothing."""
    return unicodedata.normalize("NFKC", str(name)).translate(INVISIBLE)


def lookalikes(names: Any) -> set[str]:
    """The names among `names` that another, different name of them looks exactly like."""
    seen: dict[str, set[str]] = {}
    for name in names or ():
        seen.setdefault(looks_like(name), set()).add(str(name))
    return {n for group in seen.values() if len(group) > 1 for n in group}


@register.filter
def lookalike(name: Any, names: Any) -> str:
    """A visible marker after a name that another name of the same table looks exactly like."""
    if str(name) not in lookalikes(names):
        return ""
    return format_html(
        ' <span class="badge warn lookalike" title="{}">look-alike {}</span>',
        "Another name here looks the same but differs in invisible characters or Unicode "
        "normalisation; its code points: " + " ".join(f"U+{ord(c):04X}" for c in str(name)),
        ascii(str(name)),
    )
