"""Score tables as Markdown, in upstream's table format (E.6)."""

from __future__ import annotations

from records.models import (
    Run,
)
from records.scores.tables import COLUMN_TITLES, Group, TableRow


def _md_table(header: list[str], rows: list[list[str]], right: set[int]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]

    def cell(text: str, i: int) -> str:
        return text.rjust(widths[i]) if i in right else text.ljust(widths[i])

    lines = [
        "| " + " | ".join(cell(h, i) for i, h in enumerate(header)) + " |",
        "| "
        + " | ".join(
            ("-" * (widths[i] - 1) + ":") if i in right else "-" * widths[i]
            for i in range(len(header))
        )
        + " |",
    ]
    lines += ["| " + " | ".join(cell(c, i) for i, c in enumerate(r)) + " |" for r in rows]
    return "\n".join(lines)


def _md_text(value: str) -> str:
    """Untrusted text inside a Markdown table cell: no pipes, no HTML, no line breaks."""
    return (
        value.replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\n", " ")
        .replace("`", "'")
    )


def _ratio(pair: tuple[int, int]) -> str:
    n, d = pair
    return "-" if d == 0 else f"{n} / {d}"


def _intervals(r: TableRow) -> str:
    """Each column's 95% interval, in column order (`-` where there is no rate)."""
    return "; ".join(ci.points() if ci else "-" for _, _, ci in r.columns_with_intervals)


def markdown(groups: list[Group], run: Run, *, intervals: bool = False) -> str:
    """Upstream's table format; with `intervals`, one more column holding each rate's 95%
    interval, so the default stays byte for byte upstream's."""
    out = []
    for g in groups:
        out.append(g.caption.replace("<", "&lt;").replace(">", "&gt;").replace("\n", " "))
        out.append("")
        header = ["Model", *COLUMN_TITLES, "Overhead"]
        rows = [
            [f"`{_md_text(r.model)}`", *(_ratio(p) for _, p in r.columns), r.overhead]
            for r in g.rows
        ]
        if intervals:
            header.append("95% intervals (" + ", ".join(COLUMN_TITLES) + ")")
            for row, r in zip(rows, g.rows, strict=True):
                row.append(_intervals(r))
        out.append(_md_table(header, rows, right=set(range(1, 9))))
        if g.opaque_meta:
            out += [
                "",
                "Argument fidelity on meta rows with the `opaque` parameter schema is not "
                "comparable with dynamic or individual rows.",
            ]
        out += ["", "Counted apart, in no column above:", ""]
        out.append(
            _md_table(
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
                [
                    [
                        f"`{_md_text(r.model)}`",
                        str(r.figures["attempts"]),
                        str(r.figures["turns"] or 0),
                        str(r.figures["skipped"]),
                        str(r.figures["unobserved"]),
                        str(r.figures["provider_error"]),
                        str(r.figures["harness_error"]),
                        str(r.figures["gitlab_refused"]),
                    ]
                    for r in g.rows
                ],
                right=set(range(1, 8)),
            )
        )
        out += ["", "Tokens, every attempt and every try:", ""]
        out.append(
            _md_table(
                ["Model", "Input", "Output", "Cache created", "Cache read"],
                [
                    [
                        f"`{_md_text(r.model)}`",
                        *(
                            str(r.figures[k] or 0)
                            for k in (
                                "input_tokens",
                                "output_tokens",
                                "cache_created_tokens",
                                "cache_read_tokens",
                            )
                        ),
                    ]
                    for r in g.rows
                ],
                right={1, 2, 3, 4},
            )
        )
        out += [""]
        out.append(
            _md_table(
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
                [_provenance_cells(r, run) for r in g.rows],
                right={5},
            )
        )
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _provenance_cells(r: TableRow, run: Run) -> list[str]:
    s, p = r.session, r.provider
    options = (
        ", ".join(f"`{_md_text(k)}={_md_text(v)}`" for k, v in sorted((p.options or {}).items()))
        if p
        else ""
    )
    return [
        f"`{_md_text(r.model)}`",
        f"`{_md_text(p.name)}`" if p else "-",
        f"`{_md_text(run.commit[:9])}`" if run.commit else "-",
        run.started_at.strftime("%Y-%m-%d") if run.started_at else "",
        _md_text(f"{run.gitlab_version} {run.edition}".strip()),
        str(s.served_tools) if s else "-",
        _md_text(", ".join(s.token_scopes)) if s and s.token_scopes else "-",
        options or "-",
    ]
