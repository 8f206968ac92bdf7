"""The words score tables are read by: each ratio column's key and title (the titles spelled
once, as upstream heads its tables), the legend, and the captions that say what the rows of one
table agree on. Pages, exports, forms and the gate name a column by these titles."""

from __future__ import annotations

from typing import Any

from records.formats.model_results import COLUMN_TITLES, coverage_caption
from records.models import Run
from records.scorer.score import RATIO_COLUMNS

__all__ = [
    "COLUMN_BY_TITLE",
    "COLUMN_TITLES",
    "LEGEND",
    "TITLED_COLUMNS",
    "TITLE_OF",
    "caption",
    "caption_parts",
    "coverage_caption",
]

# Each ratio column by its key (as exports and addresses name it) and its title (as pages and
# the legend show it).
TITLED_COLUMNS = list(zip(RATIO_COLUMNS, COLUMN_TITLES, strict=True))
TITLE_OF = dict(TITLED_COLUMNS)
COLUMN_BY_TITLE = {title: column for column, title in TITLED_COLUMNS}
COLUMN_TITLE = dict(TITLED_COLUMNS)


LEGEND = [
    (
        "Clean",
        "completed, unaided, every check held, and every step reached (or correctly declined), "
        "observed, confirmed when destructive and sent every compared argument right. Derived "
        "reading of upstream's Verdict.Clean (modelrecord.md C.7), not pinned upstream; a "
        "destructive step declined in read-only mode counts as unclean under this reading.",
    ),
    (
        "Reached",
        "required steps reached by a call (or declined correctly) over required steps, "
        "over attempts counted in the columns.",
    ),
    (
        "Accepted first time",
        "reached steps answered as the mode expects with no call retried "
        "before, over reached steps.",
    ),
    (
        "Argument fidelity",
        "compared arguments that carried the declared value, over compared "
        "arguments of reached steps.",
    ),
    (
        "Confirmation",
        "destructive steps confirmed (unaided or after the server asked), over destructive steps.",
    ),
    (
        "Unaided",
        "completed attempts with no call refused for invalid params or a missing "
        "confirmation, over counted attempts.",
    ),
    ("Completion", "completed attempts over counted attempts."),
    ("Overhead", "discovery calls plus invalid_params refusals, per reached step (may exceed 1)."),
    (
        "Counted apart",
        "skipped, unobserved, provider errors, harness errors and GitLab refusals "
        "are in no column above, with their steps.",
    ),
    (
        "Requested action",
        "read from the call line's recorded requested_action; upstream first "
        "identifies (tool, arguments) against its own catalog, so the two can disagree on calls "
        "the runner could not resolve.",
    ),
]


def caption_parts(row: Any, run: Run, coverage: str) -> list[str]:
    """What the rows of one table (`tables.TableRow`s) agree on, each part as the caption
    words it."""
    s = row.session
    mode = s.mode if s else ""  # as the row key spells it
    parts = [f"surface `{row.surface}`", f"mode `{mode}`", f"tier `{run.tier}`"]
    if s and s.tier_pin:
        parts.append(f"tier pinned to `{s.tier_pin}`")
    if s and s.meta_param_schema:
        parts.append(f"meta schema `{s.meta_param_schema}`")
    if s and s.slice_size:
        parts.append(f"slice of {s.slice_size} tools")
    parts.append(f"corpus `{run.corpus_digest}`")
    if coverage:
        parts.append(coverage)
    tools = (s.tool_schema_digests or {}).get(row.model, "") if s else ""
    parts += [
        f"contract `{run.contract_digest}`",
        f"tool schemas `{tools}`",
        f"repeat {run.repeat}",
    ]
    return parts


def caption(parts: list[str]) -> str:
    return "Compared as one table because these rows agree on " + ", ".join(parts) + "."
