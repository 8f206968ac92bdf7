"""Scoring stored runs against stored corpus keys, and the score tables pages show.

The scorer itself is pure (`records.scoring.score`); this module loads a run's attempts back from
the database, stores one Verdict per attempt with its additive contribution to every C.8 column,
and adds verdicts up in the database. Scores are a pure function of what is stored, so any run can
be re-scored at any time; every scoring is kept so two scorings of a run can be compared.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, Count, IntegerField, Max, Sum, When

from records import beside
from records.formats.corpus_key import CorpusKey as KeyDoc
from records.formats.corpus_key import key_to_json, read_corpus_key
from records.models import (
    Attempt,
    Call,
    CorpusKey,
    KeyCase,
    Provider,
    Run,
    Scoring,
    Session,
    Upload,
    Verdict,
)
from records.scoring.batch import ADDITIVE, TOKENS, VERDICT_FIELDS, Chunk, score_chunk
from records.scoring.batch import worker as batch_worker
from records.scoring.score import (
    OUTCOMES,
    SCORER_VERSION,
    ScoringError,
)

# --- keys ----------------------------------------------------------------------------------------


def store_key(
    data: bytes, name: str, upload: Upload, *, allow_digest_mismatch: bool = False
) -> tuple[CorpusKey, bool]:
    """Store a corpus key (raises CorpusKeyError). Returns (key, created)."""
    doc = read_corpus_key(data, name, allow_digest_mismatch=allow_digest_mismatch)
    canonical = key_to_json(doc)
    canonical["corpus_digest"] = doc.declared_digest
    sha = hashlib.sha256(orjson.dumps(canonical, option=orjson.OPT_SORT_KEYS)).hexdigest()
    existing = CorpusKey.objects.filter(sha256=sha).first()
    if existing:
        return existing, False
    with transaction.atomic():
        key = CorpusKey.objects.create(
            digest=doc.digest,
            declared_digest=doc.declared_digest,
            verified=doc.verified,
            sha256=sha,
            name=name[:500],
            source=doc.source,
            upload=upload,
            case_count=len(doc.cases),
            document=canonical,
        )
        KeyCase.objects.bulk_create(
            KeyCase(
                key=key,
                position=i,
                case_id=c["id"],
                prompt=c["prompt"],
                recipe=c["recipe"],
                tier=c["needs"]["tier"],
                needs=c["needs"],
                surfaces_only=c["surfaces"]["only"],
                surfaces_reason=c["surfaces"]["reason"],
                steps=c["steps"],
            )
            for i, c in enumerate(canonical["cases"])
        )
    return key, True


def key_for_run(run: Run) -> CorpusKey | None:
    """The newest stored key whose digest is the run's corpus digest."""
    if not run.corpus_digest:
        return None
    return (
        CorpusKey.objects.filter(digest=run.corpus_digest)
        .defer("document")
        .order_by("-created_at", "-id")
        .first()
    )


def latest_scoring(run: Run) -> Scoring | None:
    # The key's document can be megabytes; pages need only its name and digest.
    return (
        run.scorings.select_related("key")
        .defer("key__document")
        .order_by("-created_at", "-id")
        .first()
    )


def cases_on(scoring: Scoring, surface: str) -> Any:
    """Every case scored on a surface, as a query a paginator can count and slice."""
    from records.models import ScoreCase

    keys = list(scoring.rows.filter(surface=surface).values_list("row_key", flat=True))
    return (
        ScoreCase.objects.filter(scoring=scoring, row_key__in=keys)
        .values_list("case", flat=True)
        .distinct()
        .order_by("case")
    )


# --- loading attempts back -----------------------------------------------------------------------


@dataclass
class _Placement:
    mode: str
    tier: str
    row_key: str


def _row_key(model: str, surface: str, mode: str, run: Run, session: Session | None) -> str:
    """The C.9 row key string."""
    parts = [
        f"model={model}",
        f"surface={surface}",
        f"mode={mode}",  # as the session line writes it: an empty mode is its own row
        f"tier={run.tier}",
    ]
    if session is not None:
        if session.tier_pin:
            parts.append(f"tier-pin={session.tier_pin}")
        if session.meta_param_schema:
            parts.append(f"meta-schema={session.meta_param_schema}")
        if session.slice_size:
            parts.append(f"slice={session.slice_size}")
    tools = (session.tool_schema_digests or {}).get(model, "") if session else ""
    parts += [
        f"corpus={run.corpus_digest}",
        f"contract={run.contract_digest}",
        f"tools={tools}",
        f"repeat={run.repeat}",
    ]
    return " ".join(parts)


def _among(ids: list[int]) -> tuple[str, list[Any]]:
    """`col IN (...)` for a list of ids, and its parameters: PostgreSQL takes the list as one
    array (`= ANY`), which it plans several times faster than a thousand parameters."""
    if connection.vendor == "postgresql":
        return "= ANY(%s)", [ids]
    return f"IN ({', '.join(['%s'] * len(ids))})", ids


def _placements(run: Run) -> tuple[dict[tuple[str, str, int | None], _Placement], set[str]]:
    """Where each (model, surface, session) of the run's attempts goes (C.9), and the row keys
    upstream refuses before scoring them (E.3 rules 1-4, those a run alone decides).

    Attempts with a session are keyed by it. A sessionless attempt (a skip, an early harness
    error) joins the one row of the shard with its model and surface: the candidates are rows,
    so two sessions sharing one row key are one candidate. With none or several it forms a row
    of its own, keyed with no session, which the provenance rule refuses. A sessionless attempt
    is scored in the default mode at the run's tier, as upstream reads an attempt with no
    session."""
    sessions = {s.pk: s for s in run.sessions.all()}
    triples = list(
        Attempt.objects.filter(run=run)
        .values_list("model", "effective_surface", "session_id")
        .distinct()
        .order_by()
    )
    placed: dict[tuple[str, str, int | None], _Placement] = {}
    rows_of: dict[tuple[str, str], set[str]] = defaultdict(set)
    row_of: dict[str, tuple[str, int | None]] = {}  # row key: its model and session
    for model, surface, session_id in triples:
        session = sessions.get(session_id) if session_id else None
        if session is None:
            continue
        key = _row_key(model, surface, session.mode, run, session)
        placed[(model, surface, session_id)] = _Placement(
            session.mode, session.tier_pin or run.tier, key
        )
        rows_of[(model, surface)].add(key)
        row_of[key] = (model, max(session_id, row_of.get(key, (model, 0))[1] or 0))
    for model, surface, session_id in triples:
        if (model, surface, session_id) in placed:
            continue
        hosts = rows_of.get((model, surface), set())
        key = next(iter(hosts)) if len(hosts) == 1 else _row_key(model, surface, "", run, None)
        placed[(model, surface, session_id)] = _Placement("", run.tier, key)
        row_of.setdefault(key, (model, None))
    providers = {p.spec: p for p in run.providers.all()}
    unobserved = {sid for sid, s in sessions.items() if s.call_count and not s.observed_call_count}
    refused = {
        key
        for key, (model, sid) in row_of.items()
        if provenance_refusal(run, sessions.get(sid or 0), providers.get(model), unobserved)
    }
    return placed, refused


def _chunks(
    run: Run,
    doc: KeyDoc,
    placed: dict[tuple[str, str, int | None], _Placement] | None = None,
    chunk: int = 300,
) -> Iterator[Chunk]:
    """The run's attempts and what the scorer reads of them, a chunk at a time (bounded
    memory), as plain rows (`records.scoring.batch`): plain SQL, JSON left as text. Chunks
    are small enough to wait whole in the pipe to a scorer process, so reading the next one
    overlaps scoring this one.

    A call's result, the bulk of a run, is read only for attempts whose case binds an argument
    to an earlier step's result (a `produced` truth): no other rule looks at it."""
    producing = {
        c.id for c in doc.cases if any(a.truth.kind == "produced" for s in c.steps for a in s.args)
    }
    if placed is None:
        placed = _placements(run)[0]
    qn = connection.ops.quote_name
    a_t, c_t = (qn(m._meta.db_table) for m in (Attempt, Call))
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT id, {qn('key')}, {qn('case')}, model, effective_surface, session_id, "
            # then what the scorer reads of the turns and checks, and the tries and tokens each
            # verdict copies (with the session)
            f"ended_by, reason, last_turn_has_tool_call, failed_checks, try_count, "
            f"input_tokens, output_tokens, cache_created_tokens, cache_read_tokens "
            f"FROM {a_t} WHERE run_id = %s ORDER BY id",
            [run.pk],
        )
        rows = cur.fetchall()
    for start in range(0, len(rows), chunk):
        attempts = []
        for row in rows[start : start + chunk]:
            pk, key, case, model, surface, session_id, ended_by, reason = row[:8]
            place = placed[(model, surface, session_id)]
            mode, tier, row_key = place.mode, place.tier, place.row_key
            attempts.append(
                (pk, key, case, model, surface, mode, tier, ended_by, reason, row_key)
                + (*row[8:10], session_id, *row[10:])  # last turn, failed checks; copied
            )
        # The chunk's attempts are a range of ids (in id order), read by range; where another
        # run's attempts lie between them (ids taken by two ingests at once), their rows are
        # dropped here.
        lo, hi = attempts[0][0], attempts[-1][0]
        mine = None if hi - lo + 1 == len(attempts) else {a[0] for a in attempts}
        reading = [a[0] for a in attempts if a[2] in producing]
        if reading:
            reading_among, reading = _among(reading)
            result = f"CASE WHEN attempt_id {reading_among} THEN CAST(result AS TEXT) END"
        else:
            result = "NULL"
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT id, CAST(facts AS TEXT) FROM {a_t} WHERE id >= %s AND id <= %s "
                f"AND run_id = %s AND facts IS NOT NULL",
                [lo, hi, run.pk],
            )
            facts = cur.fetchall()
            # The text is read only for the meta decline test (C.2): skip it elsewhere.
            cur.execute(
                f"SELECT attempt_id, {qn('index')}, line, tool, CAST(arguments AS TEXT), "
                f"requested_action, dispatched_action, dispatched_tool, outcome, "
                f"{result}, result_truncated, "
                f"CASE WHEN outcome = 'refused:invalid_params' THEN text ELSE '' END, "
                f"dispatch_observed FROM {c_t} WHERE attempt_id >= %s AND attempt_id <= %s "
                f"ORDER BY attempt_id, {qn('index')}, line",
                [*reading, lo, hi],
            )
            calls = cur.fetchall()
        if mine is not None:
            calls = [r for r in calls if r[0] in mine]
        yield attempts, facts, calls


SCORER_PROCESSES = 2


def _verdicts(run: Run, doc: KeyDoc, stale: bool) -> Iterator[tuple[list[tuple], int, int, int]]:
    """Verdict rows chunk by chunk, scored here or, for a large run, by two scorer processes
    while this one reads the next chunks and writes the verdicts (`records.beside`). Scoring
    takes more time than reading and writing, so two scorers keep this process busy; chunks
    go to them in turn and their answers are taken in the same order, so the verdicts, and the
    first error, are those of scoring in line."""
    placed, refused = _placements(run)
    if run.attempt_count < settings.EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS or not beside.available():
        for chunk in _chunks(run, doc, placed):
            yield score_chunk(doc, stale, chunk, refused)
        return
    what = f"the scoring of run {run.pk}"
    scorers = beside.Beside.several(SCORER_PROCESSES, batch_worker, (doc, stale, refused), what)
    n = len(scorers)
    sent = received = 0
    finished = False

    def answer(msg: Any) -> tuple[list[tuple], int, int, int]:
        if msg[0] == "error":
            raise ScoringError(msg[1])
        return msg[1], msg[2], msg[3], msg[4]

    try:
        for chunk in _chunks(run, doc, placed):
            if not scorers[sent % n].send(beside.pack(chunk)):
                # A scorer is gone: the answers up to what it said last (an error, or
                # nothing) end this.
                while True:
                    received += 1
                    yield answer(scorers[(received - 1) % n].receive())
            sent += 1
            while received < sent:
                msg = scorers[received % n].receive(block=False)
                if msg is beside.NOTHING:
                    break
                received += 1
                yield answer(msg)
        for scorer in scorers:
            scorer.end_input()
        while received < sent:
            received += 1
            yield answer(scorers[(received - 1) % n].receive())
        finished = True
    finally:
        for scorer in scorers:
            if not finished:
                scorer.stop()
            scorer.close()


# --- scoring -------------------------------------------------------------------------------------

_VERDICT_COLUMNS = ["scoring", *VERDICT_FIELDS]


def score_run(run: Run, key: CorpusKey, doc: KeyDoc | None = None) -> Scoring:
    """Score every attempt of `run` against `key` and store the verdicts in one transaction."""
    doc = doc or key.load()
    stale = key.digest != run.corpus_digest or not key.verified
    from records.ingest import _Table, gc_paused

    table = _Table(Verdict, _VERDICT_COLUMNS)
    with gc_paused(), transaction.atomic():
        scoring = Scoring.objects.create(
            run=run, key=key, scorer_version=SCORER_VERSION, stale=stale
        )
        count = 0
        skipped_retired = skipped_unknown = skipped_refused = 0
        try:
            for rows, retired, unknown, refused in _verdicts(run, doc, stale):
                skipped_retired += retired
                skipped_unknown += unknown
                skipped_refused += refused
                count += len(rows)
                table.rows = [(scoring.pk, *row) for row in rows]
                with connection.cursor() as cur:
                    table.flush(cur)
        except ScoringError as exc:
            transaction.set_rollback(True)
            error = str(exc)
        except RuntimeError as exc:  # a scorer process died: the scoring fails, nothing else
            transaction.set_rollback(True)
            error = f"the scoring did not finish: {exc}"
        else:
            error = ""
    if error:
        # The verdicts were rolled back; keep the failed scoring so the run page can say why.
        scoring = Scoring.objects.create(
            run=run, key=key, scorer_version=SCORER_VERSION, stale=stale, error=error
        )
        return scoring
    _store_rows(scoring)
    from records.ingest import analyze_if_large
    from records.models import ScoreCase

    analyze_if_large(count, (Verdict, ScoreCase))
    notes = []
    if skipped_retired:
        notes.append(f"{skipped_retired} attempt(s) name retired cases and are not scored")
    if skipped_unknown:
        notes.append(f"{skipped_unknown} attempt(s) name cases this key does not have")
    if skipped_refused:
        notes.append(
            f"{skipped_refused} attempt(s) could not be scored and stand in rows upstream "
            "refuses before scoring, so they are not scored"
        )
    Scoring.objects.filter(pk=scoring.pk).update(verdict_count=count, error="; ".join(notes))
    scoring.verdict_count, scoring.error = count, "; ".join(notes)
    return scoring


def rescore_for_key(key: CorpusKey) -> list[Scoring]:
    """Score every stored run that carries this key's digest."""
    doc = key.load()
    return [score_run(run, key, doc) for run in Run.objects.filter(corpus_digest=key.digest)]


def score_if_key(run: Run) -> Scoring | None:
    key = key_for_run(run)
    return score_run(run, key) if key else None


# --- score tables --------------------------------------------------------------------------------


def count_where(name: str, value: Any = True) -> Sum:
    """How many of the grouped rows have `name` equal to `value`."""
    return Sum(Case(When(**{name: value}, then=1), default=0, output_field=IntegerField()))


def verdict_sums() -> dict[str, Any]:
    """The figures every grouping of verdicts sums: counts, the additive C.8 contributions and
    the attempts' tries and tokens (one definition for the score rows and the case figures)."""
    return {
        "total": Count("id"),
        "clean": count_where("clean"),
        "unaided": count_where("unaided"),
        **{name: Sum(name) for name in ADDITIVE},
        "turns": Sum("tries"),
        **{t: Sum(t) for t in TOKENS},
    }


@dataclass
class ScoreRow:
    row_key: str
    model: str
    surface: str
    figures: dict[str, Any]
    provider: Provider | None = None
    session: Session | None = None
    case_count: int = 0
    coverage: str = ""
    refusal: tuple[str, str] | None = None

    def ratio(self, name: str) -> tuple[int, int]:
        return self.figures[f"{name}_n"], self.figures[f"{name}_d"]

    @property
    def columns(self) -> list[tuple[str, tuple[int, int]]]:
        f = self.figures
        return [
            ("clean", (f["clean"], f["attempts"])),
            ("reached", self.ratio("reached")),
            ("accepted_first_time", self.ratio("aft")),
            ("argument_fidelity", self.ratio("fidelity")),
            ("confirmation", self.ratio("confirmation")),
            ("unaided", (f["unaided"], f["attempts"])),
            ("completion", (f["completed"], f["attempts"])),
        ]

    @property
    def overhead(self) -> str:
        f = self.figures
        if not f["steps"]:
            return "-"
        return (
            f"{f['discovery'] + f['invalid_params']} / {f['steps']} "
            f"({f['discovery']} find, {f['invalid_params']} invalid_params)"
        )


def score_rows(scoring: Scoring) -> list[ScoreRow]:
    """The scoring's rows, as summed when it was stored."""
    return [
        ScoreRow(
            r.row_key,
            r.model,
            r.surface,
            {**r.figures, "session_id": r.session_id},
            case_count=r.case_count,
            coverage=r.coverage,
        )
        for r in scoring.rows.order_by("row_key")
    ]


def _store_rows(scoring: Scoring) -> None:
    """Sum the scoring's rows and its per-case counts once, in the database."""
    from records.models import ScoreCase
    from records.models import ScoreRow as StoredRow

    qn = connection.ops.quote_name
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {qn(ScoreCase._meta.db_table)} (scoring_id, row_key, {qn('case')}, "
            f"completed, counted, total) SELECT scoring_id, row_key, {qn('case')}, "
            f"SUM(CASE WHEN outcome = 'completed' THEN 1 ELSE 0 END), "
            f"SUM(CASE WHEN counted THEN 1 ELSE 0 END), COUNT(*) "
            f"FROM {qn(Verdict._meta.db_table)} WHERE scoring_id = %s "
            f"GROUP BY scoring_id, row_key, {qn('case')}",
            [scoring.pk],
        )
    cases: dict[str, list[str]] = defaultdict(list)
    for row_key, case in (
        ScoreCase.objects.filter(scoring=scoring)
        .order_by("row_key", "case")
        .values_list("row_key", "case")
    ):
        cases[row_key].append(case)
    StoredRow.objects.bulk_create(
        StoredRow(
            scoring=scoring,
            row_key=r.row_key,
            model=r.model,
            surface=r.surface,
            session_id=r.figures.pop("session_id"),
            figures={
                k: v for k, v in r.figures.items() if k not in ("row_key", "model", "surface")
            },
            case_count=len(cases[r.row_key]),
            coverage=fnv1a64(cases[r.row_key]),
        )
        for r in _sum_rows(scoring)
    )


def _sum_rows(scoring: Scoring) -> list[ScoreRow]:
    """One row per C.9 row key, summed in the database."""
    qs = (
        Verdict.objects.filter(scoring=scoring)
        .values("row_key", "model", "surface")
        .annotate(
            attempts=count_where("counted"),
            **verdict_sums(),
            declined_by_refusal=Sum("declined_by_refusal"),
            declined_by_text=Sum("declined_by_text"),
            confirmed_unaided=Sum("confirmed_unaided"),
            confirmed_server_aided=Sum("confirmed_server_aided"),
            confirmed_never=Sum("confirmed_never"),
            session_id=Max("session_id"),
            **{o: count_where("outcome", o) for o in OUTCOMES},
        )
        .order_by("row_key")
    )
    rows = [ScoreRow(r["row_key"], r["model"], r["surface"], r) for r in qs]
    return rows


def fnv1a64(case_ids: Iterable[str]) -> str:
    h = 0xCBF29CE484222325
    for cid in sorted(case_ids):
        for b in cid.encode() + b"\x00":
            h ^= b
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return format(h, "x")


def coverage_caption(count: int, coverage: str, corpus_cases: int) -> str:
    """E.4's case coverage caption, from a row's case count and FNV-1a hash."""
    if not count:
        return ""
    if count == corpus_cases:
        return f"the whole corpus ({corpus_cases} cases)"
    return f"{count} of {corpus_cases} cases (`{coverage}`)"


# --- refusal rules (E.3) and comparison groups (E.4) ---------------------------------------------

REFUSAL_RULES = (
    "filtered-run",
    "unobserved-session",
    "fake-provider",
    "incomplete-provenance",
    "stale-corpus",
    "duplicate-row",
)


def provenance_refusal(
    run: Run, s: Session | None, p: Provider | None, unobserved: set[int]
) -> tuple[str, str] | None:
    """E.3 rules 1-4, which the run, the row's session and its provider decide; upstream
    judges them before scoring, so a row they refuse is never scored."""
    if run.filter:
        return "filtered-run", f"the run was filtered with -run {run.filter!r}"
    if s is not None and s.pk in unobserved:
        return "unobserved-session", f"session {s.label!r} made calls and none was observed"
    if p is not None and p.name == "fake":
        return "fake-provider", "the provider is the fake one"
    if p is None:
        return "incomplete-provenance", "the run line has no provider with this row's model"
    checks = [
        ("commit", run.commit),
        ("date", run.started_at),
        ("gitlab_version", run.gitlab_version),
        ("edition", run.edition),
        ("tier", run.tier),
        # The session line's own surface, as upstream's provenance reads it: an attempt's
        # surface does not fill a hole in its session line.
        ("surface", s.surface if s else ""),
        ("mode", s.mode if s else ""),
        ("capability_surface", s.capabilities if s else ""),
        ("token_scopes", s.token_scopes if s else []),
        ("served_tools", (s.served_tools if s else 0) > 0),
        ("provider", p.name),
        ("model", p.model),
        ("request_options", p.options),
        ("repeat", run.repeat > 0),
        ("corpus_digest", run.corpus_digest),
        ("contract_digest", run.contract_digest),
        ("tool_schema_digest", (s.tool_schema_digests or {}).get(p.spec) if s else ""),
    ]
    for name, value in checks:
        if not value:
            return "incomplete-provenance", f"{name} is empty"
    return None


def _refusal(
    row: ScoreRow, run: Run, scoring: Scoring, unobserved: set[int], claimed: set[str]
) -> tuple[str, str] | None:
    """The first E.3 rule a row trips, as (rule, reason); None when upstream would publish it."""
    first = provenance_refusal(run, row.session, row.provider, unobserved)
    if first:
        return first
    if scoring.stale:
        return "stale-corpus", (
            f"the run's corpus digest {run.corpus_digest} is not the key's {scoring.key.digest}"
        )
    if row.row_key in claimed:
        return "duplicate-row", "an earlier run already produced a row with this key"
    return None


@dataclass
class Group:
    caption: str
    rows: list[ScoreRow]
    opaque_meta: bool = False


def score_groups(scoring: Scoring, rows: list[ScoreRow] | None = None) -> list[Group]:
    """Rows grouped by the cross-vendor key (row key less the model, plus case coverage)."""
    run = scoring.run
    rows = score_rows(scoring) if rows is None else rows
    sessions = {s.pk: s for s in run.sessions.all()}
    providers = {p.spec: p for p in run.providers.all()}
    unobserved = {sid for sid, s in sessions.items() if s.call_count and not s.observed_call_count}
    from records.models import ScoreRow as StoredRow

    # Row keys an earlier run already produced (upstream's duplicate-row), in one query.
    claimed = set(
        StoredRow.objects.filter(
            row_key__in=[r.row_key for r in rows], scoring__run__pk__lt=run.pk
        ).values_list("row_key", flat=True)
    )
    corpus_cases = scoring.key.case_count
    groups: dict[tuple[str, str], Group] = {}
    for row in rows:
        row.session = sessions.get(row.figures.get("session_id"))
        row.provider = providers.get(row.model)
        row.refusal = _refusal(row, run, scoring, unobserved, claimed)
        rest = row.row_key.split(" ", 1)[1]
        coverage = coverage_caption(row.case_count, row.coverage, corpus_cases)
        gk = (rest, coverage)
        if gk not in groups:
            groups[gk] = Group(_caption(row, run, coverage), [])
        groups[gk].rows.append(row)
    out = sorted(groups.values(), key=lambda g: g.caption)
    for g in out:
        g.rows.sort(key=lambda r: r.model)
        g.opaque_meta = any(
            r.surface == "meta" and r.session and r.session.meta_param_schema == "opaque"
            for r in g.rows
        )
    return out


def _caption(row: ScoreRow, run: Run, coverage: str) -> str:
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
    return "Compared as one table because these rows agree on " + ", ".join(parts) + "."


# --- Markdown in upstream's table format (E.6) ---------------------------------------------------

COLUMN_TITLES = [
    "Clean",
    "Reached",
    "Accepted first time",
    "Argument fidelity",
    "Confirmation",
    "Unaided",
    "Completion",
]


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


def markdown(groups: list[Group], run: Run) -> str:
    out = []
    for g in groups:
        out.append(g.caption.replace("<", "&lt;").replace(">", "&gt;").replace("\n", " "))
        out.append("")
        out.append(
            _md_table(
                ["Model", *COLUMN_TITLES, "Overhead"],
                [
                    [f"`{_md_text(r.model)}`", *(_ratio(p) for _, p in r.columns), r.overhead]
                    for r in g.rows
                ],
                right=set(range(1, 9)),
            )
        )
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


def _provenance_cells(r: ScoreRow, run: Run) -> list[str]:
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


# --- legend, matrices and flips -------------------------------------------------------------------

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


def case_matrix(scoring: Scoring, surface: str, cases: list[str]) -> tuple[list[str], dict]:
    """Outcomes per (case, model) on one surface, repeats side by side, for the given cases."""
    cells: dict[tuple[str, str], list[tuple[int, int, str, bool]]] = defaultdict(list)
    models: set[str] = set()
    for case, model, attempt_id, repeat, outcome, clean in (
        Verdict.objects.filter(scoring=scoring, surface=surface, case__in=cases)
        .order_by("case", "model", "attempt__repeat", "attempt_id")
        .values_list("case", "model", "attempt_id", "attempt__repeat", "outcome", "clean")
    ):
        cells[(case, model)].append((attempt_id, repeat, outcome, clean))
        models.add(model)
    return sorted(models), cells


def flips(before: Scoring, after: Scoring) -> list[dict[str, Any]]:
    """Attempts whose outcome or Clean changed between two scorings of one run."""
    old = {
        a: (o, c, r)
        for a, o, c, r in Verdict.objects.filter(scoring=before).values_list(
            "attempt_id", "outcome", "clean", "reason"
        )
    }
    out = []
    for a, o, c, r, key, model, surface, case in (
        Verdict.objects.filter(scoring=after)
        .values_list(
            "attempt_id", "outcome", "clean", "reason", "attempt__key", "model", "surface", "case"
        )
        .order_by("model", "surface", "case", "attempt_id")
    ):
        was = old.pop(a, None)
        if was is None or was[0] != o or was[1] != c:
            out.append(
                {
                    "attempt": a,
                    "key": key,
                    "model": model,
                    "surface": surface,
                    "case": case,
                    "before": was[0] if was else "not scored",
                    "before_clean": was[1] if was else None,
                    "before_reason": was[2] if was else "",
                    "after": o,
                    "after_clean": c,
                    "after_reason": r,
                }
            )
    return out
