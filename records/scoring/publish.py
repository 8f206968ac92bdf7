"""What upstream's `gen_model_results` would publish of stored runs: each scored row as the
committed record holds it (`records.formats.model_results.Row`), the rows its rules refuse with
upstream's reasons, and the managed blocks drawn from the rest."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields
from typing import Any

from django.db import transaction
from django.db.models import Case, IntegerField, Max, Min, Q, Sum, When

from records.formats.corpus_key import CorpusKeyError
from records.formats.model_results import (
    BLOCKS,
    Block,
    RecordError,
    Row,
    managed_block,
    merge_rows,
    read_record,
    record_bytes,
    refused_line,
    render_block,
    sum_cases,
    unpublished,
    unpublished_line,
)
from records.formats.rows import CONFIRMATIONS
from records.models import (
    Provider,
    PublishedRecord,
    PublishedRow,
    Run,
    Scoring,
    Upload,
    Verdict,
)
from records.models import ScoreRow as StoredRow
from records.scorer.score import OUTCOMES, go_quote
from records.scoring.run import candidates
from records.scoring.tables import (
    Group,
    RowKey,
    TableRow,
    count_where,
    score_groups,
    verdict_sums,
)

# The provenance fields upstream requires, with what a reader loses when one is empty
# (refusals.go requiredProvenance), in its order, which is the order refusals.py checks them in.
REQUIRED_PROVENANCE = {
    "commit": "nothing says which tree was measured",
    "date": "nothing says when",
    "gitlab_version": "nothing says which GitLab answered",
    "edition": "nothing says whether the instance was licensed",
    "tier": "nothing says which catalog was served",
    "surface": "nothing says which tool surface the model was given",
    "mode": "nothing says whether mutations were withheld or previewed",
    "capability_surface": "nothing says which resources and prompts were served",
    "token_scopes": "nothing says what the credential could reach",
    "served_tools": "nothing says how large a tool list the model read",
    "provider": "nothing says who was asked",
    "model": "nothing says which model",
    "request_options": "nothing says how it was asked",
    "repeat": "nothing says how many times each attempt was made",
    "corpus_digest": "nothing fingerprints what was asked",
    "contract_digest": "nothing fingerprints how it was framed",
    "tool_schema_digest": "nothing fingerprints the tool list this provider was served, and two "
    "rows whose runs both failed to note one agree on the empty string, which seats them in one "
    "cross-vendor table captioned with tool schemas neither recorded",
}


@dataclass
class Refusal:
    key: str
    rule: str
    reason: str

    def __str__(self) -> str:
        return refused_line(self.key, self.rule, self.reason)


@dataclass
class Publication:
    """What upstream would make of some runs: the rows it publishes, and what its command
    prints about the rest as it folds each run (`printed`: each run's refusals in `judge`'s
    candidate order, then the lines `mergeRows` printed), in the order it prints them."""

    rows: list[Row] = field(default_factory=list)
    printed: list[Refusal | str] = field(default_factory=list)
    corpus_cases: int = 0

    @property
    def refused(self) -> list[Refusal]:
        return [r for r in self.printed if isinstance(r, Refusal)]

    def report(self) -> list[str]:
        """The lines upstream's command prints about rows it does not publish as they came:
        what folding printed, then each row no block publishes, in the order the last fold's
        record holds them (main.go runWrite)."""
        return [str(line) for line in self.printed] + [
            unpublished_line(r) for r in unpublished(self.rows)
        ]

    def blocks(self) -> str:
        """The nine managed blocks with their markers, in the order a reader meets them."""
        return "\n\n".join(self.block(b) for b in BLOCKS) + "\n"

    def record(self) -> bytes:
        return record_bytes(self.rows)

    def block(self, block: Block) -> str:
        return managed_block(block, self.rows, self.corpus_cases)


def upstream_reason(rule: str, row: TableRow, run: Run, scoring: Scoring, why: str) -> str:
    """A refusal worded as refusals.go words it, from the rule evaldash found and its facts."""
    s, p = row.session, row.provider
    if rule == "filtered-run":
        return (
            f"the run was filtered with -run {go_quote(run.filter)}, so it put part of the corpus "
            "and the row would read as the whole of it"
        )
    if rule == "unobserved-session":
        return (
            f"session {go_quote(s.label if s else '')} made {s.call_count if s else 0} call(s) "
            "and the server's span described none of them"
        )
    if rule == "fake-provider":
        return f"{go_quote(row.model)} is the fake provider, which answers from the corpus key"
    if rule == "incomplete-provenance":
        if p is None:
            return (
                f"the run line describes no provider for model {go_quote(row.model)}, so the row "
                "carries neither a provider nor the options it was asked with"
            )
        name = why.removesuffix(" is empty")
        return f"the provenance field {go_quote(name)} is empty, so {REQUIRED_PROVENANCE[name]}"
    if rule == "stale-corpus":
        return (
            f"the run was put the corpus {run.corpus_digest} and the corpus at HEAD is "
            f"{scoring.key.digest}"
        )
    return why


def _shown_span() -> dict[str, Any]:
    """The aggregates a span of shown tool-list sizes is read from (record.go shownOf)."""
    shown = Q(attempt__shown_tools__gt=0)
    overflowed = When(shown, attempt__overflowed=True, then=1)
    return {
        "low": Min("attempt__shown_tools", filter=shown),
        "high": Max("attempt__shown_tools", filter=shown),
        "over": Sum(Case(overflowed, default=0, output_field=IntegerField())),
    }


def _span_of(f: dict) -> dict[str, int] | None:
    return (
        None if f["low"] is None else {"min": f["low"], "max": f["high"], "overflowed": f["over"]}
    )


def _shown(scoring: Scoring) -> dict[str, dict[str, int]]:
    """Per row key, the span of tool-list sizes its attempts were shown."""
    query = Verdict.objects.filter(scoring=scoring).values("row_key").annotate(**_shown_span())
    return {r["row_key"]: span for r in query.order_by() if (span := _span_of(r))}


def _named(figures: dict, names: dict[str, str]) -> dict[str, int] | None:
    """One of the scorer's tallies as the record spells it: nil when empty."""
    tally = {name: int(figures.get(column) or 0) for column, name in names.items()}
    tally = {k: v for k, v in sorted(tally.items()) if v}
    return tally or None


_DECLINES = {"declined_by_refusal": "by-refusal", "declined_by_text": "by-text"}
_CONFIRMATIONS = {
    "confirmed_never": "never",
    "confirmed_server_aided": "server-aided",
    "confirmed_unaided": "unaided",
}


# The parts of a row key that the record (record.go's rowKey) names otherwise than `RowKey`.
_RECORD_NAMES = {
    "meta_schema": "meta_param_schema",
    "slice": "slice_size",
    "corpus": "corpus_digest",
    "contract": "contract_digest",
    "tools": "tool_schema_digest",
}


def record_key(k: RowKey) -> dict[str, Any]:
    """A row key (`tables.RowKey`) as the record spells it, its parts in the key's order."""
    return {_RECORD_NAMES.get(f.name, f.name): getattr(k, f.name) for f in fields(k)}


def record_row(row: TableRow, run: Run, corpus_cases: int, shown: dict | None) -> Row:
    """A scored row as upstream's record holds it."""
    f, s, p = row.figures, row.session, row.provider
    key = record_key(RowKey.of(row.model, row.surface, run, s))
    provenance = {
        "commit": run.commit,
        "date": _date(run),
        "gitlab_version": run.gitlab_version,
        "edition": run.edition,
        "tier": run.tier,
        "tier_confirmed": bool(run.tier_confirmed),
        "tier_pin": key["tier_pin"],
        "surface": s.surface if s else "",
        "mode": key["mode"],
        "capability_surface": s.capabilities if s else "",
        "meta_param_schema": key["meta_param_schema"],
        "slice_size": key["slice_size"],
        "token_scopes": list(s.token_scopes or []) if s else [],
        "served_tools": (s.served_tools or 0) if s else 0,
        "provider": p.name if p else "",
        "model": p.model if p else "",
        "request_options": dict(p.options or {}) if p else {},
        "repeat": run.repeat,
        "corpus_digest": run.corpus_digest,
        "contract_digest": run.contract_digest,
        "tool_schema_digest": key["tool_schema_digest"],
    }
    columns = {name: {"numerator": n, "denominator": d} for name, (n, d) in row.columns}
    columns["overhead"] = _overhead_of(f)
    return Row(
        key,
        provenance,
        _counts_of(f, shown),
        columns,
        _tokens_of(f),
        coverage=row.coverage,
        case_count=row.case_count,
        corpus_cases=corpus_cases,
    )


def publishable(
    scoring: Scoring, groups: list[Group], printed: list[Refusal | str]
) -> list[TableRow]:
    """The rows of `groups` upstream would take from the run folded on its own (`-shards`, or
    `-refold` over a record holding its keys: no row of it is a duplicate), in refusals.go
    `judge`'s candidate order (record.go groupShard's); each row it refuses is added to
    `printed` in that order, with upstream's reason, the rows it refuses before scoring whose
    attempts could not be scored included."""
    run = scoring.run
    placing = candidates(run)
    scored = {r.row_key: r for g in groups for r in g.rows}
    before = dict(placing.refusals(run))
    providers: dict[str, Provider] = {}
    if before.keys() - scored.keys():
        providers = {p.spec: p for p in run.providers.all()}
    kept = []
    for key in [*placing.order, *sorted(scored.keys() - set(placing.order))]:
        r = scored.get(key)
        if r is None:
            if key not in before:
                continue  # no verdict and no refusal: its attempts named retired cases
            model, sid = placing.row_of[key]
            r = TableRow(key, model, "", {}, provider=providers.get(model))
            r.session = placing.sessions.get(sid or 0)
            r.refusal = before[key]
        if not r.refusal or r.refusal[0] == "duplicate-row":
            kept.append(r)
            continue
        rule, why = r.refusal
        printed.append(Refusal(key, rule, upstream_reason(rule, r, run, scoring, why)))
    return kept


def publishes(scoring: Scoring | None) -> bool:
    """Whether upstream's fold of the scored run goes through: the scoring holds verdicts, or
    upstream refuses every row of the run before scoring it (refusals.go judge), where it
    prints the refusals and publishes no row (`"rows": null`, exit 0), although none of the
    attempts could be scored."""
    if scoring is None:
        return False
    if scoring.verdict_count:
        return True
    placing = candidates(scoring.run)
    return bool(placing.order) and set(placing.order) <= placing.refused(scoring.run)


def publication_of_run(
    scoring: Scoring, groups: list[Group] | None = None, *, intervals: bool = False
) -> Publication:
    """What `gen_model_results -shards` prints and publishes of one scored run (its `groups`,
    as `score_groups` reads them) folded on its own into an empty record: earlier runs of its
    setup are `/publish/`'s to fold; with `intervals`, each row carries its 95% intervals."""
    out = Publication(corpus_cases=scoring.key.case_count)
    shown = _shown(scoring)
    groups = score_groups(scoring) if groups is None else groups
    for r in publishable(scoring, groups, out.printed):
        one = record_row(r, scoring.run, out.corpus_cases, shown.get(r.row_key))
        if intervals:
            one.intervals = "; ".join(
                ci.points() if ci else "-" for _, _, ci in r.columns_with_intervals
            )
        out.rows.append(one)
    return out


def upstream_markdown(publication: Publication) -> str:
    """The detailed blocks' bodies for the published rows, byte for byte as render.go draws
    them, then one line per row upstream would not publish, as its command prints them."""
    parts = [
        render_block(block, publication.rows)
        for block in BLOCKS
        if block.detailed and any(block.selects(r) for r in publication.rows)
    ]
    text = "\n\n".join(parts) + "\n" if parts else ""
    report = publication.report()
    if report:
        text += ("\n" if text else "") + "\n".join(report) + "\n"
    return text or "Nothing here would be published.\n"


# --- several runs, as folded one after another into an empty record --------------------------


def _cases(scoring: Scoring, run: Run, keys: list[str]) -> dict[str, dict[str, dict]]:
    """Per row key, each case's figures as record.go's caseFigures holds them, summed in the
    database in one query."""
    if not keys:
        return {}
    query = (
        Verdict.objects.filter(scoring=scoring, row_key__in=keys)
        .values("row_key", "case")
        .annotate(
            attempts=count_where("counted"),
            **verdict_sums(),
            **{c: Sum(c) for c in CONFIRMATIONS},
            **{o: count_where("outcome", o) for o in OUTCOMES},
            **_shown_span(),
        )
        .order_by()
    )
    date = _date(run)
    out: dict[str, dict[str, dict]] = {}
    for f in query:
        # PostgreSQL sums a bigint as a numeric.
        f = {k: v if isinstance(v, str) or v is None else int(v) for k, v in f.items()}
        columns = {
            name: {"numerator": int(n or 0), "denominator": int(d or 0)}
            for name, (n, d) in _columns_of(f)
        }
        columns["overhead"] = _overhead_of(f)
        out.setdefault(f["row_key"], {})[f["case"]] = {
            "run": run.run_id,
            "date": date,
            "commit": run.commit,
            "counts": _counts_of(f, _span_of(f)),
            "columns": columns,
            "tokens": _tokens_of(f),
        }
    return out


def _columns_of(f: dict) -> list[tuple[str, tuple[int, int]]]:
    return TableRow("", "", "", {k: v or 0 for k, v in f.items()}).columns


def _counts_of(f: dict, shown: dict | None) -> dict:
    outcomes = {o: int(f.get(o) or 0) for o in sorted(OUTCOMES)}
    return {
        "attempts": int(f["attempts"] or 0),
        "skipped": int(f.get("skipped") or 0),
        "unobserved": int(f.get("unobserved") or 0),
        "provider_errors": int(f.get("provider_error") or 0),
        "harness_errors": int(f.get("harness_error") or 0),
        "gitlab_refused": int(f.get("gitlab_refused") or 0),
        "turns": int(f.get("turns") or 0),
        "outcomes": {o: n for o, n in outcomes.items() if n} or None,
        "declines": _named(f, _DECLINES),
        "confirmations": _named(f, _CONFIRMATIONS),
        "shown": shown,
    }


def _overhead_of(f: dict) -> dict[str, int]:
    return {
        "discovery": int(f["discovery"] or 0),
        "invalid_params": int(f["invalid_params"] or 0),
        "steps": int(f["steps"] or 0),
    }


def _date(run: Run) -> str:
    return run.started_at.strftime("%Y-%m-%d") if run.started_at else ""


def _tokens_of(f: dict) -> dict[str, int]:
    return {
        "input": int(f.get("input_tokens") or 0),
        "output": int(f.get("output_tokens") or 0),
        "cache_created": int(f.get("cache_created_tokens") or 0),
        "cache_read": int(f.get("cache_read_tokens") or 0),
    }


def publication_of_runs(scorings: list[Scoring]) -> Publication:
    """What upstream publishes of several scored runs folded one after another into an empty
    record, the first with `-shards DIR`, each later one with `-shards DIR -refold`: a row of a
    key already published is merged into it case by case, or refused by the merge guard. Each
    row carries its cases, and its figures are their sum, as record.go derives them."""
    out = Publication(corpus_cases=scorings[0].key.case_count if scorings else 0)
    for i, scoring in enumerate(scorings):
        run = scoring.run
        incoming = [
            (r, record_row(r, run, out.corpus_cases, None))
            for r in publishable(scoring, score_groups(scoring), out.printed)
        ]
        cases = _cases(scoring, run, [r.row_key for r, _ in incoming])
        rows = []
        for r, one in incoming:
            one.cases = cases.get(r.row_key, {})
            one.counts, one.columns, one.tokens = sum_cases(one.cases)
            rows.append(one)
        if i:
            # Each later run is folded by a command of its own, into the record the last one
            # wrote: its rows sorted by key (record.go marshal), as runWrite reads them back.
            out.rows.sort(key=lambda r: r.name.encode())
        out.printed += merge_rows(out.rows, rows)
    return out


# --- a committed record, uploaded -----------------------------------------------------------


class RecordUploadError(CorpusKeyError):
    """A record upstream would not read: reported as every refused .json document is."""


def store_record(data: bytes, doc: Any, name: str, upload: Upload) -> dict[str, Any]:
    """Store an uploaded record's rows as published rows, all of them or none."""
    try:
        note, rows = read_record(doc, name)
    except RecordError as exc:
        raise RecordUploadError(exc.file, exc.message, field=exc.field) from None
    sha = hashlib.sha256(data).hexdigest()
    if existing := PublishedRecord.objects.filter(sha256=sha).first():
        return {"file": name, "record": existing.pk, "rows": existing.row_count, "created": False}
    with transaction.atomic():
        record = PublishedRecord.objects.create(
            name=name[:500], sha256=sha, note=note, row_count=len(rows), upload=upload
        )
        PublishedRow.objects.bulk_create(
            PublishedRow(
                record=record,
                position=i,
                row_key=row.name,
                model=row.key["model"],
                surface=row.key["surface"],
                corpus_digest=row.key["corpus_digest"],
                date=row.provenance.get("date") or "",
                key=row.key,
                provenance=row.provenance,
                counts=row.counts,
                columns=row.columns,
                tokens=row.tokens,
                cases=row.cases,
            )
            for i, row in enumerate(rows)
        )
    return {"file": name, "record": record.pk, "rows": len(rows), "created": True}


def stored_rows_like(
    keys: list[str], per_key: int
) -> dict[str, list[tuple[Run, list[tuple[int, int]]]]]:
    """For each row key, the latest scored runs (at most `per_key`) whose row has that key, with
    that row's columns: what an imported row is compared with. One query."""
    out: dict[str, list[tuple[Run, list[tuple[int, int]]]]] = {}
    seen: set[tuple[str, int]] = set()
    for stored in (
        StoredRow.objects.filter(row_key__in=keys, scoring__verdict_count__gt=0)
        .select_related("scoring__run")
        .order_by("row_key", "-scoring__run__started_at", "-scoring__run_id", "-scoring_id")
    ):
        run = stored.scoring.run
        found = out.setdefault(stored.row_key, [])
        if (stored.row_key, run.pk) in seen or len(found) >= per_key:
            continue  # the run's latest scoring only
        seen.add((stored.row_key, run.pk))
        row = TableRow(stored.row_key, stored.model, stored.surface, stored.figures)
        found.append((run, [pair for _, pair in row.columns]))
    return out
