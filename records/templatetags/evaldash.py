from __future__ import annotations

import unicodedata
from typing import Any
from urllib.parse import quote, urlencode

from django import template
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from records.queries.compare import parse_row_key
from records.queries.cost import usd
from records.queries.trace import shown_json as shown
from records.scorer.score import DISCOVERY_TOOL

register = template.Library()


# U+2068 FIRST STRONG ISOLATE and U+2069 POP DIRECTIONAL ISOLATE: what isolates text where no
# element can (a <title> holds text only, so no <bdi>).
FSI, PDI = "\u2068", "\u2069"
_ISOLATE_CONTROLS = str.maketrans("", "", "\u2066\u2067\u2068\u2069")


@register.filter
def isolated(value: Any) -> str:
    """Untrusted text for a <title>: between FSI and PDI, so an override it holds (U+202E)
    ends with it and turns none of the title around it; isolate controls of its own are dropped,
    so none of them closes the isolate early."""
    return f"{FSI}{str(value).translate(_ISOLATE_CONTROLS)}{PDI}"


@register.filter(name="usd")
def usd_filter(value: float | None, digits: int = 4) -> str:
    """Dollars as `records.queries.cost.usd` writes them, `digits` decimals."""
    return usd(value, digits=digits)


@register.filter
def pvalue(value: float | None) -> str:
    """A p to three places, or "< 0.001" where three places would write 0 (a paired test over
    many cases gives p far smaller, and "p = 0.000" would claim a certainty no test has)."""
    if value is None:
        return "-"
    return "< 0.001" if value < 0.0005 else f"{value:.3f}"


@register.filter
def p_is(value: float | None) -> str:
    """ "= 0.012" or "< 0.001", to follow a "p" in a sentence (`pvalue`)."""
    shown = pvalue(value)
    return shown if shown.startswith("<") or shown == "-" else f"= {shown}"


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


# --- what the table rows of a run's page need ---------------------------------------------------
# The rows themselves are templates (`records/runs/_*_rows.html`); these tags give them their
# links, a score row's ratio cells, and the one cell whose links are built from the scorer's
# vocabulary (the rows walk the rest of it from the row: `TableRow.counted_apart`).


def _q(value: Any) -> str:
    """A query-string value, as the `urlencode` filter writes it (percent-encoded)."""
    return quote(str(value), safe="/")


@register.simple_tag(takes_context=True)
def attempts_link(context: Any, r: Any) -> str:
    """The run's attempts tab narrowed to a table row: a score row by its row key (exactly its
    verdicts), a summary row by model and surface."""
    base = context.get("attempts_url", "")
    if hasattr(r, "row_key"):
        return f"{base}?row={_q(r.row_key)}"
    return f"{base}?model={_q(r.model)}&surface={_q(r.surface)}"


@register.simple_tag
def history_link(r: Any) -> str:
    """A score row over the runs of its corpus."""
    key = parse_row_key(r.row_key)
    query = {
        "digest": key.get("corpus", ""),
        "model": r.model,
        "surface": r.surface,
        "mode": key.get("mode", ""),
    }
    return reverse("records:history") + "?" + urlencode(query)


# A ratio cell: N / D linked to the attempts behind N, the rate, the interval, and (when N
# falls short of D) what it lacks linked to the attempts that missed it.
HITS = (
    '<td class="num"><a class="hits" href="{drill}yes" title="The attempts behind {shown}">'
    '{shown}</a> <span class="rate">{rate}</span><span class="ci" title="95% interval ({method})">'
    "{points}</span>"
)
MISSES = '<a class="misses" href="{drill}no" title="The attempts that missed">{missed} missed</a>'
SCORE_CELL = {False: HITS + "</td>", True: HITS + MISSES + "</td>"}


@register.simple_tag
def score_cells(link: str, r: Any) -> SafeString:
    """The ratio cells of a score row, one per column, in the columns' order.

    Written in Python rather than in the row's template: the score table has a cell per
    column per row, and as template markup (a cell tag in a loop over the columns) these cells
    made the run's scores tab (the largest of the run pages in `manage.py bench`) more than 20%
    slower; a cell tag in a loop still cost it 4%, so a row asks for its cells at once."""
    method = r.interval_method
    return format_html_join(
        "", "{}", ((score_cell(link, *cell, method),) for cell in r.columns_with_intervals)
    )


def score_cell(link: str, name: str, pair: Any, ci: Any, method: str) -> SafeString:
    """One ratio cell of a score table (`SCORE_CELL`)."""
    n, d = pair
    if not d:
        return format_html('<td class="num">{}</td>', "-")
    # Percent-encoded (`attempts_link`), so it goes into the attribute as it is.
    drill = mark_safe(f"{link}&column={name}&hit=")  # noqa: S308
    return format_html(
        SCORE_CELL[n != d],
        drill=drill,
        shown=ratio(pair),
        rate=rate(pair),
        method=method,
        points=ci.points() if ci else "-",
        missed=intcomma(d - n),
    )


@register.simple_tag
def overhead_cell(link: str, r: Any) -> SafeString:
    """Overhead: the calls to find an action and those refused for invalid params, each count
    linked to the search of those calls among the row's counted attempts (the figures leave out
    the attempts counted apart, as upstream's do)."""
    f = r.figures
    if not f["steps"]:
        return format_html('<td class="num">{}</td>', "-")
    parts = []
    for n, condition, label in (
        (f["discovery"], f"counted=yes&tool={_q(DISCOVERY_TOOL)}", "find"),
        (f["invalid_params"], "counted=yes&call_outcome=refused:invalid_params", "invalid_params"),
    ):
        if n:
            parts.append(
                format_html(
                    '<a class="calls" href="{}&{}">{} {}</a>', link, condition, intcomma(n), label
                )
            )
        else:
            parts.append(format_html("0 {}", label))
    return format_html(
        '<td class="num">{} / {} ({}, {})</td>',
        f["discovery"] + f["invalid_params"],
        f["steps"],
        *parts,
    )


@register.filter
def numerator(pair: Any) -> Any:
    """N of an (N, D) pair."""
    return pair[0]


@register.filter
def denominator(pair: Any) -> Any:
    """D of an (N, D) pair."""
    return pair[1]


@register.filter
def missed(pair: Any) -> int:
    """What N lacks of D in an (N, D) pair."""
    return pair[1] - pair[0]


@register.filter
def names_of(rows: Any) -> LookAlikes:
    """The look-alike names among the models of a table's rows (or of the score rows they
    stand for, as a board's standings do), found once for the table."""
    return LookAlikes(lookalikes(getattr(r, "row", r).model for r in rows or ()))


@register.simple_tag
def address(name: str, *args: Any, **query: Any) -> str:
    """A page's address with a query string of the values given, in their order, each
    percent-encoded as the `urlencode` filter does; empty values are left out."""
    pairs = [(k, v) for k, v in query.items() if v not in (None, "")]
    url = reverse(name, args=args)
    return url + "?" + urlencode(pairs, safe="/", quote_via=quote) if pairs else url


@register.filter(is_safe=True)
def squash(value: Any) -> str:
    """Runs of white space as one space: an attribute written over several template lines
    (`{% filter squash %}...{% endfilter %}`) reaches the page on one."""
    return " ".join(str(value).split())


@register.filter
def runs_query(points: Any) -> str:
    """A query string naming the run of each point, `run=1&run=2`."""
    return urlencode([("run", p.run.pk) for p in points])


@register.filter
def marked(pieces: Any) -> SafeString:
    """Text in pieces, (text, hit): the hits in <mark>, every piece escaped."""
    return format_html_join(
        "", "{}", ((format_html("<mark>{}</mark>", t) if hit else t,) for t, hit in pieces)
    )


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
    where htmx is at hand.

    A page of several tables gives each the same headers: each is written once a render."""
    base = context.get("sort_base", context["request"].path)
    swap = context.get("sort_target", "")
    written = context.render_context.setdefault(sort_header, {})
    header = (title, key, numeric, high_first, base, swap)
    if header not in written:
        written[header] = _sort_header(context["request"], *header)
    return written[header]


def _sort_header(
    request: Any, title: str, key: str, numeric: bool, high_first: bool, base: str, swap: str
) -> SafeString:
    current = request.GET.get("sort", "")
    first, second = (f"-{key}", key) if high_first else (key, f"-{key}")
    target = second if current == first else first
    query = request.GET.copy()
    query["sort"] = target
    query.pop("page", None)
    href = f"{base}?{query.urlencode()}"
    arrow = {key: " ▲", f"-{key}": " ▼"}.get(current, "")
    aria = {key: "ascending", f"-{key}": "descending"}.get(current, "none")
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


class LookAlikes(frozenset):
    """The look-alike names of one table, found once (`names_of`) for every row to ask."""


@register.filter
def lookalike(name: Any, names: Any) -> str:
    """A visible marker after a name that another name of the same table looks exactly like;
    `names` are the table's names, or its look-alikes found once by `names_of`."""
    alike = names if isinstance(names, LookAlikes) else lookalikes(names)
    if str(name) not in alike:
        return ""
    return format_html(
        ' <span class="badge warn lookalike" title="{}">look-alike {}</span>',
        "Another name here looks the same but differs in invisible characters or Unicode "
        "normalisation; its code points: " + " ".join(f"U+{ord(c):04X}" for c in str(name)),
        ascii(str(name)),
    )
