"""Failure modes across runs: the attempts that did not pass, grouped by their failure signature
(`records.scorer.score.failure_signature`), with where and when each mode shows.

Everything here reads the failure counts kept with each scoring (`FailureCount`), never a
verdict, except a mode's own page, which lists its attempts a page at a time through the
verdicts' mode index. A page's queries stay the same in number however many runs it covers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from typing import NamedTuple
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet, Sum
from django.urls import reverse

from records.models import Annotation, FailureCount, FailureMode, Run, Scoring, Verdict
from records.queries.cases import newest_digest
from records.queries.runs import previous_runs
from records.scorer.score import SIGNATURE_PARTS

MODES_PER_PAGE = 25
ATTEMPTS_PER_PAGE = 50


@dataclass(frozen=True)
class FailureFilter:
    """Which runs and attempts the failure pages cover: the runs named (run ids), else every
    run of a corpus digest (the newest key's when none is named), started on or after `since`;
    their attempts of one model, surface or case when named."""

    digest: str = ""
    runs: tuple[str, ...] = ()
    model: str = ""
    surface: str = ""
    case: str = ""
    since: date | None = None
    label: str = ""  # the modes that carry this label, unresolved

    def query(self, **changes: object) -> list[tuple[str, str]]:
        """The filter as query-string pairs (with `changes` on top), as the pages' form reads it."""
        pairs: list[tuple[str, str]] = []
        if self.digest:
            pairs.append(("digest", self.digest))
        pairs += [("run", r) for r in self.runs]
        for name in ("model", "surface", "case"):
            if getattr(self, name):
                pairs.append((name, getattr(self, name)))
        if self.since:
            pairs.append(("since", self.since.isoformat()))
        if self.label:
            pairs.append(("label", self.label))
        pairs += [(k, str(v)) for k, v in changes.items() if v not in (None, "")]
        return pairs


@dataclass
class Chosen:
    """The runs a filter covers, oldest first, each with its latest scoring; `unsigned`: the
    runs whose latest scoring was stored before failure signatures were made."""

    filter: FailureFilter
    digest: str
    runs: list[Run]
    scorings: dict[int, Scoring]  # by run id
    unsigned: list[Run]

    @property
    def newest(self) -> Run | None:
        return self.runs[-1] if self.runs else None

    @property
    def signed_ids(self) -> list[int]:
        return [s.pk for s in self.scorings.values() if s.signed]


def choose(f: FailureFilter) -> Chosen:
    """The runs of a filter and their latest scorings (two queries)."""
    digest = f.digest
    runs = Run.objects.all()
    if f.runs:
        runs = runs.filter(run_id__in=f.runs)
        if digest:
            runs = runs.filter(corpus_digest=digest)
    else:
        digest = digest or newest_digest() or ""
        runs = runs.filter(corpus_digest=digest)
    if f.since:
        runs = runs.filter(started_at__date__gte=f.since)
    listed = list(
        runs.only("id", "run_id", "commit", "started_at", "corpus_digest").order_by(
            "started_at", "id"
        )
    )
    scorings = Scoring.objects.latest_for(listed)
    scored = [r for r in listed if r.pk in scorings]
    unsigned = [r for r in scored if not scorings[r.pk].signed]
    return Chosen(f, digest, scored, scorings, unsigned)


def _counts(chosen: Chosen, modes: list[str] | None = None) -> QuerySet[FailureCount]:
    f = chosen.filter
    rows = FailureCount.objects.filter(scoring_id__in=chosen.signed_ids)
    if modes is not None:
        rows = rows.filter(mode__in=modes)
    if f.label:
        # The modes that carry the label unresolved (`records.queries.annotations.live`).
        labelled = Annotation.objects.filter(
            target=Annotation.Target.MODE, label__slug=f.label, resolved=False
        ).values("mode")
        rows = rows.filter(mode__in=labelled)
    for name in ("model", "surface", "case"):
        if getattr(f, name):
            rows = rows.filter(**{name: getattr(f, name)})
    return rows.order_by()


@dataclass
class Mode:
    """One failure mode over the runs chosen."""

    id: str
    attempts: int
    per_run: list[tuple[Run, int]]  # every run chosen, oldest first, with its attempts here
    signature: dict[str, str | None] = field(default_factory=dict)
    cases: list[tuple[str, int]] = field(default_factory=list)  # by case id
    models: dict[str, int] = field(default_factory=dict)
    surfaces: dict[str, int] = field(default_factory=dict)
    new: bool = False

    @property
    def seen(self) -> list[Run]:
        return [run for run, n in self.per_run if n]

    @property
    def first_run(self) -> Run:
        return self.seen[0]

    @property
    def last_run(self) -> Run:
        return self.seen[-1]

    def parts(self) -> list[tuple[str, str | None]]:
        """The signature's parts in order, for a page."""
        return [(part, self.signature.get(part)) for part in SIGNATURE_PARTS]


@dataclass
class Modes:
    """The failure modes of a filter, most attempts first: one `page` of them filled in."""

    chosen: Chosen
    total: int  # every mode of the filter
    attempts: int  # every not-passed attempt of the filter, each in exactly one mode
    new: int  # the modes first seen in the newest run of the filter
    page: Page


def _totals(chosen: Chosen) -> list[Mode]:
    """Every mode of the filter with its attempts per run, most attempts first (ties by id)."""
    position = {chosen.scorings[r.pk].pk: i for i, r in enumerate(chosen.runs)}
    per: dict[str, list[int]] = defaultdict(lambda: [0] * len(chosen.runs))
    for mode, scoring, n in (
        _counts(chosen)
        .values("mode", "scoring_id")
        .annotate(n=Sum("attempts"))
        .values_list("mode", "scoring_id", "n")
    ):
        per[mode][position[scoring]] += n
    newest = len(chosen.runs) - 1
    out = []
    for mode, counts in per.items():
        first = next(i for i, n in enumerate(counts) if n)
        out.append(
            Mode(
                mode,
                sum(counts),
                list(zip(chosen.runs, counts, strict=True)),
                new=first == newest,
            )
        )
    out.sort(key=lambda m: (-m.attempts, m.id))
    return out


def _fill(chosen: Chosen, modes: list[Mode]) -> None:
    """The signatures, cases, models and surfaces of `modes` (four queries; none for none)."""
    if not modes:
        return
    by_id = {m.id: m for m in modes}
    ids = list(by_id)
    for fm in FailureMode.objects.filter(pk__in=ids):
        by_id[fm.pk].signature = fm.signature
    counts = _counts(chosen, ids)
    for name in ("model", "surface", "case"):
        for mode, value, n in (
            counts.values("mode", name)
            .annotate(n=Sum("attempts"))
            .order_by("mode", name)
            .values_list("mode", name, "n")
        ):
            m = by_id[mode]
            if name == "case":
                m.cases.append((value, n))
            else:
                (m.models if name == "model" else m.surfaces)[value] = n


def modes(chosen: Chosen, page: int = 1, per_page: int = MODES_PER_PAGE) -> Modes:
    """The filter's failure modes, one page of them filled in (at most five queries past the
    runs)."""
    every = _totals(chosen)
    shown = Paginator(every, per_page).get_page(page)
    _fill(chosen, list(shown.object_list))
    return Modes(
        chosen,
        len(every),
        sum(m.attempts for m in every),
        sum(1 for m in every if m.new),
        shown,
    )


def every_mode(chosen: Chosen, per_page: int = 500) -> Iterator[Mode]:
    """Every failure mode of the filter, filled in a page at a time (for an export)."""
    every = _totals(chosen)
    for start in range(0, len(every), per_page):
        shown = every[start : start + per_page]
        _fill(chosen, shown)
        yield from shown


def one_mode(chosen: Chosen, mode_id: str) -> Mode | None:
    """One mode over the filter (None when none of its attempts fails in it), with its cases."""
    for m in _totals(chosen):
        if m.id == mode_id:
            _fill(chosen, [m])
            return m
    return None


def mode_attempts(chosen: Chosen, mode_id: str) -> QuerySet[Verdict]:
    """The verdicts of the filter's attempts that failed in a mode, newest run first, with
    their attempts and runs: a page lists them a window at a time."""
    f = chosen.filter
    verdicts = Verdict.objects.filter(scoring_id__in=chosen.signed_ids, failure_mode=mode_id)
    for name in ("model", "surface", "case"):
        if getattr(f, name):
            verdicts = verdicts.filter(**{name: getattr(f, name)})
    return (
        verdicts.select_related("attempt", "scoring__run")
        .only(
            "id",
            "case",
            "model",
            "surface",
            "outcome",
            "reason",
            "attempt__id",
            "attempt__key",
            "attempt__repeat",
            "scoring__id",
            "scoring__run__id",
            "scoring__run__run_id",
            "scoring__run__started_at",
        )
        .order_by("-scoring_id", "attempt_id")
    )


def search_link(chosen: Chosen, mode_id: str) -> str:
    """The search that finds the same attempts: the filter's runs (or digest), model, surface
    and case, and the mode."""
    f = chosen.filter
    query: list[tuple[str, str]] = []
    if f.runs or f.since:
        query += [("run", r.run_id) for r in chosen.runs]
    if chosen.digest:
        query.append(("digest", chosen.digest))
    for name in ("model", "surface", "case"):
        if getattr(f, name):
            query.append((name, getattr(f, name)))
    query.append(("failure", mode_id))
    return "/search/?" + urlencode(query)


def mode_url(chosen: Chosen, mode_id: str) -> str:
    """A mode's page under the same filter."""
    query = chosen.filter.query()
    return reverse("records:failure-mode", args=[mode_id]) + (
        "?" + urlencode(query) if query else ""
    )


def as_json(found: Modes, next_url: str | None) -> dict:
    """`/failures.json`: the page's modes, each with its signature and where it shows."""
    chosen = found.chosen
    return {
        "count": found.total,
        "modes": [
            {
                "id": m.id,
                "signature": {part: m.signature.get(part) for part in SIGNATURE_PARTS},
                "attempts": m.attempts,
                "cases": [case for case, _ in m.cases],
                "models": dict(m.models),
                "runs": {run.run_id: n for run, n in m.per_run if n},
                "first_run": m.first_run.run_id,
                "last_run": m.last_run.run_id,
                "new": m.new,
                "url": mode_url(chosen, m.id),
                "search_url": search_link(chosen, m.id),
            }
            for m in found.page.object_list
        ],
        "next": next_url,
    }


# --- a run against its baseline -----------------------------------------------------------------


@dataclass
class NewMode:
    """A failure mode a run has and its baseline has not, with the run's attempts in it."""

    id: str
    signature: dict[str, str | None]
    attempts: int
    run: Run  # the run it is new in

    @property
    def url(self) -> str:
        """Its page, showing its attempts in that run (a mode's page with no filter would read
        the newest corpus key's runs, perhaps not this run's digest)."""
        query = urlencode([("digest", self.run.corpus_digest), ("run", self.run.run_id)])
        return reverse("records:failure-mode", args=[self.id]) + "?" + query


def new_modes_since(run: Run, baseline_run: Run | None) -> list[NewMode] | None:
    """The failure modes of `run`'s latest scoring that `baseline_run`'s latest scoring has
    none of, most attempts first (ties by id); None when either has no scoring with failure
    signatures (or there is no baseline), since then nothing can be said. Three queries."""
    if baseline_run is None:
        return None
    latest = Scoring.objects.latest_for([run, baseline_run])
    mine, theirs = latest.get(run.pk), latest.get(baseline_run.pk)
    if mine is None or theirs is None or not (mine.signed and theirs.signed):
        return None
    before = FailureCount.objects.filter(scoring=theirs).values("mode")
    rows = (
        FailureCount.objects.filter(scoring=mine)
        .exclude(mode__in=before)
        .values("mode")
        .annotate(n=Sum("attempts"))
        .order_by()
        .values_list("mode", "n")
    )
    counts = dict(rows)
    signatures = {fm.pk: fm.signature for fm in FailureMode.objects.filter(pk__in=list(counts))}
    out = [NewMode(mode, signatures.get(mode, {}), n, run) for mode, n in counts.items()]
    out.sort(key=lambda m: (-m.attempts, m.id))
    return out


class NewFailures(NamedTuple):
    """The failure modes a run has and its previous run has not: how many, their attempts, the
    failures list of the two runs, and the previous run."""

    modes: list[NewMode]
    attempts: int
    url: str
    baseline: Run


def new_failures(run: Run) -> NewFailures | None:
    """The run overview's line of new failure modes (None: no previous run, or a scoring
    without failure signatures on either side)."""
    baseline_pk = previous_runs([run]).get(run.pk)
    if baseline_pk is None:
        return None
    baseline = Run.objects.filter(pk=baseline_pk).only("id", "run_id", "corpus_digest").first()
    modes = new_modes_since(run, baseline) if baseline is not None else None
    if modes is None or baseline is None:
        return None
    query = [("digest", run.corpus_digest), ("run", baseline.run_id), ("run", run.run_id)]
    url = reverse("records:failures") + "?" + urlencode(query)
    return NewFailures(modes, sum(m.attempts for m in modes), url, baseline)
