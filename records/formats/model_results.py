"""Upstream's published form of model evaluation rows (`gen_model_results`: render.go, legend.go,
compare.go, record.go, refusals.go). Pure Python, no Django.

A published row is held as upstream's record holds it (record.go's row: key, provenance,
counts, columns, tokens, cases), as plain dicts spelled and ordered as Go writes them, so the
same value draws the managed blocks byte for byte as render.go draws them and writes the
committed record as `gen_model_results -shards` writes it.

One departure: text a run supplied (model and provider names, options, scopes, versions, digests,
row keys, reasons) goes through `records.formats.markdown`, in a code span where upstream puts it
in one and as escaped running text elsewhere, so none of it is read as a link, an image, HTML,
emphasis, a table cell's end or a line's end; upstream writes it raw. A value without such
characters is drawn byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from records.formats.markdown import LINE_ENDS, markdown_code, markdown_text
from records.formats.text import go_field, go_fold, go_json_string
from records.scorer.score import RATIO_COLUMNS, go_quote

RECORD_PATH = "docs/development/testing/model-results.json"
PAGE_PATH = "docs/development/testing/model-results.md"
README_PATH = "README.md"
SCHEMA_VERSION = 1


def code(value: Any, *, cell: bool = False) -> str:
    """Run-supplied text in the code span upstream puts it in (`cell`: inside a table); empty,
    as upstream writes it."""
    return markdown_code(value, in_table=cell) if str(value) else "``"


# --- a row, as the record holds it -----------------------------------------------------------


def pins(key: dict[str, Any]) -> list[tuple[str, Any]]:
    """The row key's pins that are set, in the order upstream writes them: the tier pin, the
    meta schema and the slice size."""
    set_pins = [(name, key[name]) for name in ("tier_pin", "meta_param_schema") if key.get(name)]
    if key.get("slice_size", 0) > 0:
        set_pins.append(("slice_size", key["slice_size"]))
    return set_pins


# Each pin as the key string names it.
_KEY_PINS = {"tier_pin": "tier-pin", "meta_param_schema": "meta-schema", "slice_size": "slice"}


def _pin_caption(name: str, value: Any) -> str:
    """A pin as a table's caption words it."""
    if name == "slice_size":
        return f"slice of {value} tools"
    return f"{'tier pinned to' if name == 'tier_pin' else 'meta schema'} {code(value)}"


def key_string(key: dict[str, Any]) -> str:
    """rowKey.String(): how a row is named, refused and sorted."""
    parts = [
        f"model={key['model']}",
        f"surface={key['surface']}",
        f"mode={key['mode']}",
        f"tier={key['tier']}",
    ]
    parts += [f"{_KEY_PINS[name]}={value}" for name, value in pins(key)]
    parts += [
        f"corpus={key['corpus_digest']}",
        f"contract={key['contract_digest']}",
        f"tools={key['tool_schema_digest']}",
        f"repeat={key['repeat']}",
    ]
    return " ".join(parts)


@dataclass
class Row:
    """One published row (record.go's row), with how much of the corpus it covers."""

    key: dict[str, Any]
    provenance: dict[str, Any]
    counts: dict[str, Any]
    columns: dict[str, Any]
    tokens: dict[str, int]
    cases: dict[str, dict[str, Any]] = field(default_factory=dict)
    coverage: str = ""  # FNV-1a 64 of the case identifiers, hex
    case_count: int = 0
    corpus_cases: int = 0  # how many cases the corpus (the key) has
    intervals: str | None = None  # evaldash's optional column (`?intervals=1`)

    @property
    def name(self) -> str:
        return key_string(self.key)

    @property
    def surface(self) -> str:
        return self.key["surface"]

    @property
    def licensed(self) -> bool:
        return self.key["tier"] in ("premium", "ultimate")


def ratio_string(r: dict[str, int]) -> str:
    return "-" if r["denominator"] == 0 else f"{r['numerator']} / {r['denominator']}"


def coverage_caption(count: int, coverage: str, corpus_cases: int) -> str:
    """E.4's case coverage caption, from a row's case count and FNV-1a hash."""
    if not count:
        return ""
    if count == corpus_cases:
        return f"the whole corpus ({corpus_cases} cases)"
    return f"{count} of {corpus_cases} cases (`{coverage}`)"


def coverage_string(row: Row) -> str:
    return coverage_caption(row.case_count, row.coverage, row.corpus_cases)


def vendor_caption(row: Row) -> str:
    """vendorKey.String(): what a cross-vendor table holds fixed."""
    k = row.key
    parts = [f"surface {code(k['surface'])}", f"mode {code(k['mode'])}", f"tier {code(k['tier'])}"]
    parts += [_pin_caption(name, value) for name, value in pins(k)]
    parts.append(f"corpus {code(k['corpus_digest'])}")
    if covered := coverage_string(row):
        parts.append(covered)
    parts += [
        f"contract {code(k['contract_digest'])}",
        f"tool schemas {code(k['tool_schema_digest'])}",
        f"repeat {k['repeat']}",
    ]
    return ", ".join(parts)


def surface_key(row: Row) -> tuple[Any, ...]:
    """crossSurfaceKey: the row key less the surface and what the surface decides."""
    k = row.key
    return (
        k["model"],
        k["mode"],
        k["tier"],
        k.get("tier_pin", ""),
        k["corpus_digest"],
        k["contract_digest"],
        k["repeat"],
        row.coverage if row.case_count else "",
        row.case_count,
        row.corpus_cases,
    )


def surface_caption(row: Row) -> str:
    """surfaceKey.String()."""
    k = row.key
    parts = [f"model {code(k['model'])}", f"mode {code(k['mode'])}", f"tier {code(k['tier'])}"]
    if k.get("tier_pin"):
        parts.append(f"tier pinned to {code(k['tier_pin'])}")
    parts.append(f"corpus {code(k['corpus_digest'])}")
    if covered := coverage_string(row):
        parts.append(covered)
    parts += [f"contract {code(k['contract_digest'])}", f"repeat {k['repeat']}"]
    return ", ".join(parts)


def shown_string(shown: dict[str, int]) -> str:
    span = str(shown["min"])
    if shown["max"] != shown["min"]:
        span += f" to {shown['max']}"
    if shown.get("overflowed", 0) > 0:
        span += f", {shown['overflowed']} over budget"
    return span


def surface_label(row: Row) -> str:
    """What a row decided for itself, printed beside it in a cross-surface note."""
    parts = []
    if row.key.get("slice_size", 0) > 0:
        label = f"slice of {row.key['slice_size']} tools"
        if row.counts.get("shown") is not None:
            label += f" (shown {shown_string(row.counts['shown'])})"
        parts.append(label)
    if row.key.get("meta_param_schema"):
        parts.append(f"meta schema {code(row.key['meta_param_schema'])}")
    return ", ".join(parts)


@dataclass
class Group:
    caption: str
    rows: list[Row]


def group_by_vendor(rows: list[Row]) -> list[Group]:
    """Cross-vendor tables sorted by caption, each sorted by model (a stable sort)."""
    by: dict[str, list[Row]] = {}
    for one in rows:
        by.setdefault(vendor_caption(one), []).append(one)
    return [
        Group(caption, sorted(by[caption], key=lambda r: r.key["model"].encode()))
        for caption in sorted(by, key=str.encode)
    ]


# --- drawing (docgen.RenderMarkdownTable, render.go) -----------------------------------------

LEFT, RIGHT = "left", "right"


def markdown_table(headers: list[str], aligns: list[str], rows: list[list[str]]) -> str:
    """docgen.RenderMarkdownTable: padded to the widest cell (in runes), at least 3 wide and
    4 for a right-aligned column, every line ended by a newline."""
    widths = [max(len(h), 3) for h in headers]
    for r in rows:
        for i in range(len(headers)):
            widths[i] = max(widths[i], len(r[i]) if i < len(r) else 0)
    widths = [max(w, 4) if aligns[i] == RIGHT else w for i, w in enumerate(widths)]

    def line(cells: list[str]) -> str:
        padded = [
            (c.rjust(widths[i]) if aligns[i] == RIGHT else c.ljust(widths[i]))
            for i, c in enumerate(cells)
        ]
        return "|" + "".join(f" {p} |" for p in padded) + "\n"

    separator = "|" + "".join(
        f" {'-' * (w - 1) + ':' if aligns[i] == RIGHT else '-' * w} |" for i, w in enumerate(widths)
    )
    return (
        line(headers)
        + separator
        + "\n"
        + "".join(line(r + [""] * (len(headers) - len(r))) for r in rows)
    )


# Each ratio column's title, in `RATIO_COLUMNS` order, as render.go heads the tables (and as
# every page, export and address of evaldash names the column).
COLUMN_TITLES = [
    "Clean",
    "Reached",
    "Accepted first time",
    "Argument fidelity",
    "Confirmation",
    "Unaided",
    "Completion",
]
COLUMN_HEADERS = ["Model", *COLUMN_TITLES, "Overhead"]
COLUMN_KEYS = list(RATIO_COLUMNS)


def overhead_cell(o: dict[str, int]) -> str:
    if o["steps"] == 0:
        return "-"
    return (
        f"{o['discovery'] + o['invalid_params']} / {o['steps']} "
        f"({o['discovery']} find, {o['invalid_params']} invalid_params)"
    )


def columns_table(rows: list[Row]) -> str:
    headers = list(COLUMN_HEADERS)
    aligns = [LEFT] + [RIGHT] * 8
    cells = [
        [
            code(r.key["model"], cell=True),
            *(ratio_string(r.columns[c]) for c in COLUMN_KEYS),
            overhead_cell(r.columns["overhead"]),
        ]
        for r in rows
    ]
    if any(r.intervals is not None for r in rows):
        headers.append("95% intervals (" + ", ".join(COLUMN_HEADERS[1:8]) + ")")
        aligns.append(LEFT)
        for cell, r in zip(cells, rows, strict=True):
            cell.append(r.intervals or "")
    return markdown_table(headers, aligns, cells)


APART_SENTENCE = (
    "What the columns leave out: an attempt the instance could not offer, one the server's span "
    "never described, one the provider would not answer, one this side broke, and one GitLab "
    "refused after a correct dispatch. None of the five is the model's, so none is in any "
    "denominator."
)
TOKENS_SENTENCE = (
    "Tokens, never folded into one figure: a cache read is not an input token, and a table that "
    "added them together is how sixty thousand tokens came to be published against five million."
)
APART = (
    "attempts",
    "turns",
    "skipped",
    "unobserved",
    "provider_errors",
    "harness_errors",
    "gitlab_refused",
)


def apart_table(rows: list[Row]) -> str:
    return (
        APART_SENTENCE
        + "\n\n"
        + markdown_table(
            [
                "Model",
                "Attempts",
                "Turns",
                "Skipped",
                "Unobserved",
                "Provider errors",
                "Harness errors",
                "GitLab refused",
            ],
            [LEFT] + [RIGHT] * 7,
            [[code(r.key["model"], cell=True), *(str(r.counts[k]) for k in APART)] for r in rows],
        )
    )


def tokens_table(rows: list[Row]) -> str:
    return (
        TOKENS_SENTENCE
        + "\n\n"
        + markdown_table(
            ["Model", "Input", "Output", "Cache created", "Cache read"],
            [LEFT] + [RIGHT] * 4,
            [
                [
                    code(r.key["model"], cell=True),
                    *(str(r.tokens[k]) for k in ("input", "output", "cache_created", "cache_read")),
                ]
                for r in rows
            ],
        )
    )


def request_options(options: dict[str, str] | None) -> str:
    if not options:
        return "-"
    return ", ".join(
        code(f"{name}={options[name]}", cell=True) for name in sorted(options, key=str.encode)
    )


def provenance_table(rows: list[Row]) -> str:
    cells = []
    for r in rows:
        p = r.provenance
        cells.append(
            [
                code(r.key["model"], cell=True),
                code(p["provider"], cell=True),
                code(p["commit"][:9], cell=True),
                markdown_text(p["date"]),
                markdown_text(p["gitlab_version"] + " " + p["edition"]),
                str(p["served_tools"]),
                markdown_text(", ".join(p["token_scopes"] or [])),
                request_options(p["request_options"]),
            ]
        )
    return markdown_table(
        [
            "Model",
            "Provider",
            "Commit",
            "Date",
            "GitLab",
            "Tools served",
            "Token scopes",
            "Request options",
        ],
        [LEFT] * 5 + [RIGHT, LEFT, LEFT],
        cells,
    )


def cross_surface_notes(rows: list[Row], everything: list[Row]) -> str:
    notes = []
    for one in rows:
        key = surface_key(one)
        peers = []
        for other in everything:
            if other.surface != one.surface and surface_key(other) == key:
                label = surface_label(other)
                peers.append(f"its {code(other.surface)} row" + (f" ({label})" if label else ""))
        if not peers:
            continue
        peers = list(dict.fromkeys(sorted(peers, key=str.encode)))
        notes.append(
            f"- {code(one.key['model'])} may be read beside {' and '.join(peers)}: they agree on "
            f"{surface_caption(one)}."
        )
    if not notes:
        return ""
    return "Cross-surface comparisons this table takes part in:\n\n" + "\n".join(notes) + "\n"


META_OPAQUE_NOTE = (
    "These rows ran in the default `opaque` meta schema mode, which withholds parameter names: a "
    "model learned them from the tool description and from `invalid_params` refusals and from "
    "nothing else. Their argument fidelity is therefore not comparable with a dynamic row, where "
    "`gitlab_find_action` returns the schema, or with an individual row, where the tool carries "
    "it. What the mode costs is visible in the `invalid_params` half of the overhead column."
)


@dataclass(frozen=True)
class Block:
    path: str
    start: str
    end: str
    surface: str = ""
    licensed: bool = False
    detailed: bool = False
    legend: bool = False
    empty: str = ""

    def selects(self, row: Row) -> bool:
        return not self.legend and row.surface == self.surface and row.licensed == self.licensed

    @property
    def name(self) -> str:
        return self.start.removeprefix("<!-- START ").removesuffix(" -->")


_WITHDRAWN = "4587cbfb3"
_UNSOUND = "` and is not reproduced because the measurement behind it was unsound."
BLOCKS = [
    Block(
        README_PATH,
        "<!-- START MODEL EVAL DYNAMIC SUMMARY -->",
        "<!-- END MODEL EVAL DYNAMIC SUMMARY -->",
        "dynamic",
        empty="Withdrawn. The CE dynamic table published here, last refreshed from a Docker run "
        f"dated 20260627-232303, is readable at commit `{_WITHDRAWN}{_UNSOUND}",
    ),
    Block(
        README_PATH,
        "<!-- START MODEL EVAL META SUMMARY -->",
        "<!-- END MODEL EVAL META SUMMARY -->",
        "meta",
        empty="Withdrawn. No CE meta-tools table was ever published here, and none will be until "
        "the rebuilt harness produces one.",
    ),
    Block(
        README_PATH,
        "<!-- START MODEL EVAL ENTERPRISE META SUMMARY -->",
        "<!-- END MODEL EVAL ENTERPRISE META SUMMARY -->",
        "meta",
        licensed=True,
        empty="Withdrawn. The Enterprise meta table published here, last refreshed from a Docker "
        f"run dated 20260527, is readable at commit `{_WITHDRAWN}{_UNSOUND}",
    ),
    Block(
        README_PATH,
        "<!-- START MODEL EVAL ENTERPRISE DYNAMIC SUMMARY -->",
        "<!-- END MODEL EVAL ENTERPRISE DYNAMIC SUMMARY -->",
        "dynamic",
        licensed=True,
        empty="Withdrawn. The Enterprise dynamic table published here, last refreshed from a "
        f"Docker run dated 20260628-015421, is readable at commit `{_WITHDRAWN}{_UNSOUND}",
    ),
    Block(
        PAGE_PATH, "<!-- START MODEL EVAL LEGEND -->", "<!-- END MODEL EVAL LEGEND -->", legend=True
    ),
    Block(
        PAGE_PATH,
        "<!-- START MODEL EVAL DYNAMIC RESULTS -->",
        "<!-- END MODEL EVAL DYNAMIC RESULTS -->",
        "dynamic",
        detailed=True,
        empty="Withdrawn. The CE dynamic run published here, dated 20260627-232303, is readable "
        f"at commit `{_WITHDRAWN}`.",
    ),
    Block(
        PAGE_PATH,
        "<!-- START MODEL EVAL META RESULTS -->",
        "<!-- END MODEL EVAL META RESULTS -->",
        "meta",
        detailed=True,
        empty="No CE meta-tools run has been published here. The rebuilt harness has not put the "
        "corpus to a model.",
    ),
    Block(
        PAGE_PATH,
        "<!-- START MODEL EVAL ENTERPRISE META RESULTS -->",
        "<!-- END MODEL EVAL ENTERPRISE META RESULTS -->",
        "meta",
        licensed=True,
        detailed=True,
        empty="Withdrawn. The Enterprise meta-tools run published here, dated 20260527, is "
        f"readable at commit `{_WITHDRAWN}`.",
    ),
    Block(
        PAGE_PATH,
        "<!-- START MODEL EVAL ENTERPRISE DYNAMIC RESULTS -->",
        "<!-- END MODEL EVAL ENTERPRISE DYNAMIC RESULTS -->",
        "dynamic",
        licensed=True,
        detailed=True,
        empty="Withdrawn. The Enterprise dynamic run published here, dated 20260628-015421, is "
        f"readable at commit `{_WITHDRAWN}`.",
    ),
]


def render_group(block: Block, group: Group, everything: list[Row]) -> str:
    body = "Compared as one table because these rows agree on " + group.caption + ".\n\n"
    body += columns_table(group.rows)
    if block.surface == "meta" and group.rows[0].key.get("meta_param_schema") == "opaque":
        body += "\n" + META_OPAQUE_NOTE + "\n"
    if not block.detailed:
        return body
    body += "\n" + apart_table(group.rows)
    body += "\n" + tokens_table(group.rows)
    body += "\n" + provenance_table(group.rows)
    if note := cross_surface_notes(group.rows, everything):
        body += "\n" + note
    return body


def render_block(block: Block, everything: list[Row], corpus_cases: int = 0) -> str:
    """renderBlock: a block's body from every published row (a cross-surface note may name a
    row of another block); `corpus_cases` sizes the legend's example coverage."""
    if block.legend:
        return legend_block(corpus_cases)
    mine = [r for r in everything if block.selects(r)]
    if not mine:
        return block.empty
    return "\n".join(render_group(block, g, everything) for g in group_by_vendor(mine)).rstrip("\n")


def managed_block(block: Block, everything: list[Row], corpus_cases: int = 0) -> str:
    """A block as docgen.ComputeReplacedSection leaves it between its markers."""
    return f"{block.start}\n\n{render_block(block, everything, corpus_cases)}\n{block.end}"


def unpublished(rows: list[Row]) -> list[Row]:
    """Rows no block selects (today: every individual-surface row)."""
    return [r for r in rows if not any(b.selects(r) for b in BLOCKS)]


def report_text(value: object) -> str:
    """Run-supplied text in a line of the report, as upstream prints it (raw, Markdown's
    punctuation included), but for the characters that would end the line, shown as `\\uXXXX`
    so a report keeps one line per row (refusal.String), and `<` and `>`, written `&lt;` and
    `&gt;`, so that a report pasted where Markdown is rendered never carries a tag a shard
    wrote (the one departure, in docs/upstream.md)."""
    text = LINE_ENDS.sub(lambda m: f"\\u{ord(m.group()):04x}", str(value))
    return text.replace("<", "&lt;").replace(">", "&gt;")


def refused_line(key: str, rule: str, reason: str) -> str:
    """A refusal as `gen_model_results` reports it (refusal.String)."""
    return report_text(f"refused [{rule}] {key}: {reason}")


def unpublished_line(row: Row) -> str:
    """main.go runWrite's line for a row no managed block publishes."""
    return report_text(f"no managed block publishes the row {row.name}")


# --- the legend (legend.go) ------------------------------------------------------------------

LEGEND_MODEL = "example:not-a-real-model"
_FIGURE_GLOSSES = [
    ("Clean", "The headline. Attempts that went right end to end **with no help at all**: the task finished, every step was reached, every argument the case gives a truth for matched, every destructive step carried its approval, nothing of ours had to refuse anything, and what it did to GitLab checked out afterwards. It is a conjunction of the columns after it, never an average of them: there is no defensible weighting between them, so a weighted score would be a reading of whoever chose the weights."),
    ("Reached", "Steps the model got to, or correctly declined, over the steps the case declares. A step is reached when a call named it and the server dispatched it."),
    ("Accepted first time", "Of the steps reached, how many were reached by the **first** call about them. A second call means the first was refused and repaired."),
    ("Argument fidelity", "Argument **values** compared against the truth the case declares, not argument names. A model that places `title` correctly and writes the wrong title fails here, which is the whole reason values are compared."),
    ("Confirmation", "Destructive steps whose reaching call carried the approval, over destructive steps declared. A deletion that ran without one is a finding, not a faster model."),
    ("Unaided", "Attempts that finished with no refusal of ours anywhere. Weaker than Clean: an attempt can be unaided and still have written a wrong value."),
    ("Completion", "Attempts that finished the task at all. Weakest of the three: it says the conversation ended correctly and nothing about how."),
    ("Overhead", "What getting there cost, per step reached, with the two halves apart. A `find` is the dynamic surface's declared cost, since the catalog is not in the tool list and has to be searched. An `invalid_params` is the model learning a parameter name from a rejection, which is what the opaque meta schema leaves it to do. One rate over both would hide each inside the other."),
]  # fmt: skip
_APART_GLOSSES = [
    ("Attempts", "How many attempts are behind the figures above. The five columns after Turns are **not** in this number."),
    ("Turns", "Provider requests the row paid for, which is not the same as calls: one turn can carry several tool calls, and a refused request is a turn of its own."),
    ("Skipped", "The instance did not meet the case's needs, so it never ran. Counting it would rank a model by the license of the instance it was measured on."),
    ("Unobserved", "It ran and the server's span never described it, so nothing can be said about it either way."),
    ("Provider errors", "The provider would not answer."),
    ("Harness errors", "This side broke."),
    ("GitLab refused", "GitLab refused a call the model dispatched correctly, with the arguments the case declares. That reports the instance or the fixture, not the model."),
]  # fmt: skip
_TOKEN_GLOSSES = [
    ("Input", "Uncached input tokens."),
    ("Output", "Output tokens, reasoning included where the provider bills it there."),
    ("Cache created", "Input tokens written into the provider's prompt cache."),
    ("Cache read", "Input tokens served from it, billed at a fraction of the others."),
]


def fnv1a64(names: list[str]) -> str:
    """compare.go coverageOf's digest of the case identifiers behind a row."""
    h = 0xCBF29CE484222325
    for name in sorted(names, key=str.encode):
        for b in name.encode() + b"\x00":
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return format(h, "x")


def legend_row(corpus_cases: int) -> Row:
    names = [f"XX-{i:03d}" for i in range(1, 11)]
    return Row(
        key={
            "model": LEGEND_MODEL,
            "surface": "dynamic",
            "mode": "default",
            "tier": "free",
            "corpus_digest": "example-corpus",
            "contract_digest": "example-contract",
            "tool_schema_digest": "example-tools",
            "repeat": 1,
        },
        provenance={},
        counts={
            "attempts": 10,
            "skipped": 2,
            "unobserved": 1,
            "provider_errors": 1,
            "harness_errors": 0,
            "gitlab_refused": 1,
            "turns": 23,
        },
        columns={
            "clean": {"numerator": 5, "denominator": 10},
            "reached": {"numerator": 17, "denominator": 19},
            "accepted_first_time": {"numerator": 14, "denominator": 17},
            "argument_fidelity": {"numerator": 24, "denominator": 26},
            "confirmation": {"numerator": 3, "denominator": 4},
            "unaided": {"numerator": 6, "denominator": 10},
            "completion": {"numerator": 7, "denominator": 10},
            "overhead": {"discovery": 9, "invalid_params": 3, "steps": 17},
        },
        tokens={"input": 120000, "output": 4200, "cache_created": 30000, "cache_read": 88000},
        coverage=fnv1a64(names),
        case_count=len(names),
        corpus_cases=corpus_cases,
    )


def _glosses(glosses: list[tuple[str, str]]) -> str:
    return "\n".join(f"- **{column}** — {means}" for column, means in glosses)


def legend_block(corpus_cases: int) -> str:
    """legendBlock: the worked example, over a corpus of `corpus_cases` cases."""
    example = legend_row(corpus_cases)
    return "\n\n".join(
        [
            "**How to read the tables below.** Every figure is a numerator over a denominator "
            "rather than a percentage, because a column reading 100% over one attempt and one "
            "reading 100% over ninety are not the same claim and a rate cannot tell them apart. "
            "The row here is invented; the columns are the real ones, drawn by the same code.",
            columns_table([example]).rstrip("\n"),
            _glosses(_FIGURE_GLOSSES),
            apart_table([example]).rstrip("\n"),
            _glosses(_APART_GLOSSES),
            tokens_table([example]).rstrip("\n"),
            _glosses(_TOKEN_GLOSSES),
            "And one thing no column carries: a row is only comparable with another row that "
            "agreed with it on everything a caption lists. That list is not written out here, it "
            "is drawn by the same code that captions the real tables, so it cannot come to say "
            "less than the rule enforces:",
            "> Compared as one table because these rows agree on " + vendor_caption(example) + ".",
            "Two tables with different captions are two measurements rather than two readings of "
            "one. Case coverage is in there for a reason worth stating: the corpus fingerprint "
            "says which corpus was asked, never how much of it, so a run narrowed to a handful of "
            "cases would otherwise sit beside a full one under a caption claiming they agree.",
        ]
    )


# --- the committed record (record.go, cases.go, mergeguard.go) -------------------------------

RECORD_NOTE = (
    "What the model evaluation measured, one row per configuration, written by "
    "`make model-results-record` from the shards of a run and scored, at that moment, against "
    "the corpus at HEAD. The columns here are that scoring: redrawing a page re-reads them and "
    "scores nothing, so a scoring rule corrected later reaches a published row only by "
    "re-folding the run's retained shards with `make model-results-refold`, which drops the "
    "rows those shards publish and folds them again, naming each. The pages at README.md and "
    "docs/development/testing/model-results.md are rendered from this file, and "
    "`make check-model-results` compares all three without a GitLab and without a network. "
    "Every figure is a numerator over a denominator: a rate with nothing behind it is what the "
    "tables this replaces published."
)
_ADDITIVE_COUNTS = (
    "attempts",
    "skipped",
    "unobserved",
    "provider_errors",
    "harness_errors",
    "gitlab_refused",
)
_TALLIES = ("outcomes", "declines", "confirmations")


def _tally_sum(a: dict[str, int] | None, b: dict[str, int] | None) -> dict[str, int] | None:
    out = dict(a or {})
    for k, v in (b or {}).items():
        out[k] = out.get(k, 0) + v
    out = {k: out[k] for k in sorted(out, key=str.encode) if out[k]}
    return out or None


def _shown_merge(span: dict | None, other: dict | None) -> dict | None:
    if other is None:
        return span
    if span is None:
        return dict(other)
    return {
        "min": min(span["min"], other["min"]),
        "max": max(span["max"], other["max"]),
        "overflowed": span.get("overflowed", 0) + other.get("overflowed", 0),
    }


def sum_cases(cases: dict[str, dict[str, Any]]) -> tuple[dict, dict, dict]:
    """cases.go sumCases: a row's counts, columns and tokens re-derived from its cases."""
    counts: dict[str, Any] = {k: 0 for k in _ADDITIVE_COUNTS}
    counts["turns"] = 0
    tallies: dict[str, dict[str, int] | None] = dict.fromkeys(_TALLIES)
    span = None
    columns = {c: {"numerator": 0, "denominator": 0} for c in COLUMN_KEYS}
    columns["overhead"] = {"discovery": 0, "invalid_params": 0, "steps": 0}
    tokens = {"input": 0, "output": 0, "cache_created": 0, "cache_read": 0}
    for name in sorted(cases, key=str.encode):
        one = cases[name]
        for k in (*_ADDITIVE_COUNTS, "turns"):
            counts[k] += one["counts"].get(k, 0)
        for t in _TALLIES:
            tallies[t] = _tally_sum(tallies[t], one["counts"].get(t))
        span = _shown_merge(span, one["counts"].get("shown"))
        for c in COLUMN_KEYS:
            for half in ("numerator", "denominator"):
                columns[c][half] += one["columns"][c][half]
        for half in ("discovery", "invalid_params", "steps"):
            columns["overhead"][half] += one["columns"]["overhead"][half]
        for k in tokens:
            tokens[k] += one["tokens"][k]
    counts.update(tallies, shown=span)
    return counts, columns, tokens


def merge_refusal(standing: Row, incoming: Row) -> str:
    """mergeguard.go mergeRefusal: why an incoming row may not merge into a standing one."""
    if not standing.cases:
        return (
            "the standing row records no per-case figures, so merging into it would replace "
            f"{standing.counts['attempts']} case(s) of measurement with the "
            f"{incoming.counts['attempts']} this run carries and no part of the record would say "
            "so; re-fold the run that published it, or drop the row"
        )
    a, b = standing.provenance, incoming.provenance
    differs = ""
    for name, field_name in (
        ("the GitLab version", "gitlab_version"),
        ("the instance edition", "edition"),
        ("the capability surface", "capability_surface"),
        ("the provider", "provider"),
    ):
        if a[field_name] != b[field_name]:
            differs = f"{name} ({go_quote(a[field_name])} and {go_quote(b[field_name])})"
            break
    else:
        if a["tier_confirmed"] != b["tier_confirmed"]:
            differs = (
                "whether the tier was confirmed "
                f"({str(a['tier_confirmed']).lower()} and {str(b['tier_confirmed']).lower()})"
            )
        elif a["served_tools"] != b["served_tools"]:
            differs = (
                f"how many tools the session served ({a['served_tools']} and {b['served_tools']})"
            )
        elif list(a["token_scopes"] or []) != list(b["token_scopes"] or []):
            differs = (
                f"the credential's scopes ({'+'.join(a['token_scopes'] or [])} and "
                f"{'+'.join(b['token_scopes'] or [])})"
            )
        elif dict(a["request_options"] or {}) != dict(b["request_options"] or {}):
            differs = (
                f"the request options ({_options(a['request_options'])} and "
                f"{_options(b['request_options'])})"
            )
    if differs:
        return (
            f"the two runs disagree about {differs}, which the row key does not hold and the "
            "merged figures would carry only one of; re-fold the whole run rather than merging "
            "part of it"
        )
    return ""


def _options(options: dict[str, str] | None) -> str:
    if not options:
        return "none"
    return ", ".join(sorted((f"{k}={v}" for k, v in options.items()), key=str.encode))


def merge_rows(held: list[Row], incoming: list[Row]) -> list[str]:
    """main.go mergeRows: each incoming row added, or merged case by case into the row of its
    key (its cases replacing theirs, every figure re-derived), or refused by the merge guard;
    `held` is changed in place and the lines upstream prints are returned."""
    lines = []
    index = {r.name: i for i, r in enumerate(held)}
    for row in incoming:
        name = row.name
        if name not in index:
            index[name] = len(held)
            held.append(row)
            continue
        standing = held[index[name]]
        if why := merge_refusal(standing, row):
            lines.append(report_text(f"refused to merge into the published row {name}: {why}"))
            continue
        replaced = sorted((c for c in row.cases if c in standing.cases), key=str.encode)
        kept = len(standing.cases) - len(replaced)
        row.cases = {**standing.cases, **row.cases}
        row.counts, row.columns, row.tokens = sum_cases(row.cases)
        row.case_count = len(row.cases)
        row.coverage = fnv1a64(list(row.cases))
        held[index[name]] = row
        lines.append(
            report_text(
                f"merged into the published row {name}: {len(replaced)} case(s) replaced "
                f"({', '.join(replaced)}), {kept} kept as they stood"
            )
        )
    return lines


# Go's encoding/json: which fields a struct leaves out when empty (`omitempty`), in field order.
_KEY_FIELDS = (
    ("model", False), ("surface", False), ("mode", False), ("tier", False), ("tier_pin", True),
    ("meta_param_schema", True), ("slice_size", True), ("corpus_digest", False),
    ("contract_digest", False), ("tool_schema_digest", False), ("repeat", False),
)  # fmt: skip
_PROVENANCE_FIELDS = (
    ("commit", False), ("date", False), ("gitlab_version", False), ("edition", False),
    ("tier", False), ("tier_confirmed", False), ("tier_pin", True), ("surface", False),
    ("mode", False), ("capability_surface", False), ("meta_param_schema", True),
    ("slice_size", True), ("token_scopes", False), ("served_tools", False), ("provider", False),
    ("model", False), ("request_options", False), ("repeat", False), ("corpus_digest", False),
    ("contract_digest", False), ("tool_schema_digest", False),
)  # fmt: skip
_COUNTS_FIELDS = (
    ("attempts", False), ("skipped", False), ("unobserved", False), ("provider_errors", False),
    ("harness_errors", False), ("gitlab_refused", False), ("turns", False), ("outcomes", False),
    ("declines", True), ("confirmations", True), ("shown", True),
)  # fmt: skip


def _struct(values: dict[str, Any], fields: tuple[tuple[str, bool], ...]) -> dict[str, Any]:
    out = {}
    for name, omitempty in fields:
        value = values.get(name)
        if omitempty and (value is None or value == "" or value == 0 or value == {} or value == []):
            continue
        out[name] = value
    return out


def _counts_json(counts: dict[str, Any]) -> dict[str, Any]:
    out = _struct(counts, _COUNTS_FIELDS)
    for tally in _TALLIES:
        if out.get(tally):
            out[tally] = {k: out[tally][k] for k in sorted(out[tally], key=str.encode)}
    if out.get("outcomes") == {}:
        out["outcomes"] = None
    if "shown" in out:
        out["shown"] = _struct(out["shown"], (("min", False), ("max", False), ("overflowed", True)))
    return out


def _columns_json(columns: dict[str, Any]) -> dict[str, Any]:
    out = {
        c: {"numerator": columns[c]["numerator"], "denominator": columns[c]["denominator"]}
        for c in COLUMN_KEYS
    }
    o = columns["overhead"]
    out["overhead"] = {
        "discovery": o["discovery"],
        "invalid_params": o["invalid_params"],
        "steps": o["steps"],
    }
    return out


def _tokens_json(tokens: dict[str, int]) -> dict[str, int]:
    return {k: tokens[k] for k in ("input", "output", "cache_created", "cache_read")}


def row_json(row: Row) -> dict[str, Any]:
    """A row as record.go's types marshal it: Go's field order and omitempty."""
    provenance = _struct(row.provenance, _PROVENANCE_FIELDS)
    if provenance.get("request_options"):
        options = provenance["request_options"]
        provenance["request_options"] = {k: options[k] for k in sorted(options, key=str.encode)}
    out: dict[str, Any] = {
        "key": _struct(row.key, _KEY_FIELDS),
        "provenance": provenance,
        "counts": _counts_json(row.counts),
        "columns": _columns_json(row.columns),
        "tokens": _tokens_json(row.tokens),
    }
    if row.cases:
        out["cases"] = {
            name: {
                "run": one["run"],
                "date": one["date"],
                "commit": one["commit"],
                "counts": _counts_json(one["counts"]),
                "columns": _columns_json(one["columns"]),
                "tokens": _tokens_json(one["tokens"]),
            }
            for name, one in sorted(row.cases.items(), key=lambda item: item[0].encode())
        }
    return out


def go_json(value: Any, indent: str = " ", level: int = 0) -> str:
    """`value` as Go's json.MarshalIndent(value, "", indent) writes it (HTML escaped)."""
    pad, inner = "\n" + indent * level, "\n" + indent * (level + 1)
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return go_json_string(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        members = [
            f"{go_json_string(k)}: {go_json(v, indent, level + 1)}" for k, v in value.items()
        ]
        return "{" + inner + ("," + inner).join(members) + pad + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        return (
            "["
            + inner
            + ("," + inner).join(go_json(v, indent, level + 1) for v in value)
            + pad
            + "]"
        )
    raise TypeError(f"no JSON for {type(value).__name__}")


def record_bytes(rows: list[Row]) -> bytes:
    """The committed record as `gen_model_results -shards` writes it: schema version, note,
    the rows sorted by key, one space of indent, a final newline."""
    ordered = sorted(rows, key=lambda r: r.name.encode())
    document = {
        "schema_version": SCHEMA_VERSION,
        "note": RECORD_NOTE,
        "rows": [row_json(r) for r in ordered] or None,
    }
    return (go_json(document) + "\n").encode()


# --- reading a committed record back (record.go unmarshalDocument) ----------------------------


class RecordError(ValueError):
    """A committed record upstream would not read, naming the file and the field."""

    def __init__(self, file: str, message: str, *, field: str | None = None) -> None:
        self.file, self.message, self.field = file, message, field
        super().__init__(f"{file}: {field + ': ' if field else ''}{message}")


STR, INT, BOOL = "string", "int", "bool"
_RATIO = {"numerator": INT, "denominator": INT}
_COUNTS = {
    **{name: INT for name in (*_ADDITIVE_COUNTS, "turns")},
    "outcomes": ("map", INT),
    "declines": ("map", INT),
    "confirmations": ("map", INT),
    "shown": ("pointer", {"min": INT, "max": INT, "overflowed": INT}),
}
_COLUMNS = {
    **{c: _RATIO for c in COLUMN_KEYS},
    "overhead": {"discovery": INT, "invalid_params": INT, "steps": INT},
}
_TOKENS = {"input": INT, "output": INT, "cache_created": INT, "cache_read": INT}
_ROW = {
    "key": {name: (INT if name in ("slice_size", "repeat") else STR) for name, _ in _KEY_FIELDS},
    "provenance": {
        **{name: STR for name, _ in _PROVENANCE_FIELDS},
        "tier_confirmed": BOOL,
        "slice_size": INT,
        "served_tools": INT,
        "repeat": INT,
        "token_scopes": ("list", STR),
        "request_options": ("map", STR),
    },
    "counts": _COUNTS,
    "columns": _COLUMNS,
    "tokens": _TOKENS,
    "cases": (
        "map",
        {
            "run": STR,
            "date": STR,
            "commit": STR,
            "counts": _COUNTS,
            "columns": _COLUMNS,
            "tokens": _TOKENS,
        },
    ),
}
_DOCUMENT = {"schema_version": INT, "note": STR, "rows": ("list", _ROW)}
_ZERO_OF = {STR: "", INT: 0, BOOL: False}


def _unmarshal(value: Any, schema: Any, path: str, file: str) -> Any:
    """`value` as Go's json.Unmarshal reads it into record.go's types: field names matched as
    Go matches them, unknown fields ignored, a null leaving the zero value, a value of another
    type refused by name."""
    if isinstance(schema, tuple):
        kind, inner = schema
        if value is None:
            return None
        if kind == "pointer":
            return _unmarshal(value, inner, path, file)
        if kind == "list":
            if not isinstance(value, list):
                raise RecordError(file, "must be a list", field=path)
            return [_unmarshal(v, inner, f"{path}[{i}]", file) for i, v in enumerate(value)]
        if not isinstance(value, dict):
            raise RecordError(file, "must be an object", field=path)
        return {k: _unmarshal(v, inner, f"{path}.{k}", file) for k, v in value.items()}
    if isinstance(schema, dict):
        out = {}
        for name, inner in schema.items():
            zero = _ZERO_OF.get(inner) if isinstance(inner, str) else None
            out[name] = zero if not isinstance(inner, dict) else _unmarshal({}, inner, path, file)
        if value is None:
            return out
        if not isinstance(value, dict):
            raise RecordError(file, "must be an object", field=path or None)
        for key, item in value.items():
            name = go_field(key, schema)
            if name is None:
                continue  # Go's Unmarshal ignores a field its type lacks
            where = f"{path}.{name}" if path else name
            if item is None and not isinstance(schema[name], tuple):
                continue
            out[name] = _unmarshal(item, schema[name], where, file)
        return out
    if value is None:
        return _ZERO_OF[schema]
    if schema == STR and not isinstance(value, str):
        raise RecordError(file, "must be a string", field=path)
    if schema == BOOL and not isinstance(value, bool):
        raise RecordError(file, "must be true or false", field=path)
    if schema == INT and (
        isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63
    ):
        raise RecordError(file, "must be a whole number that fits 64 bits", field=path)
    return value


def is_record(doc: Any) -> bool:
    """Whether a decoded .json document is a committed model results record."""
    return isinstance(doc, dict) and any(go_fold(k) == "SCHEMA_VERSION" for k in doc)


def read_record(doc: Any, file: str) -> tuple[str, list[Row]]:
    """A committed record's note and rows, read as `gen_model_results` reads one: another
    schema version is refused with upstream's words."""
    document = _unmarshal(doc, _DOCUMENT, "", file)
    version = document["schema_version"]
    if version != SCHEMA_VERSION:
        raise RecordError(
            file,
            f"carries schema version {version} and this command writes {SCHEMA_VERSION}; "
            "regenerate it with make gen-model-results",
            field="schema_version",
        )
    rows = []
    for one in document["rows"] or []:
        cases = one["cases"] or {}
        rows.append(
            Row(
                key=one["key"],
                provenance=one["provenance"],
                counts=one["counts"],
                columns=one["columns"],
                tokens=one["tokens"],
                cases=cases,
                coverage=fnv1a64(list(cases)) if cases else "",
                case_count=len(cases),
            )
        )
    return document["note"], rows
