"""Labels and notes beside the evidence: writing them (each change kept as an audit row), what
a case, an attempt or a failure mode carries, the label conditions and counts the search and
the case pages read, the review queue, and the cases a label excuses in the gate.

A label speaks for its target until it is resolved: the filters (`label=`), the facets, the
exports and the gate read unresolved labels only; the pages show both.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.urls import reverse
from django.utils import timezone

from records.formats.markdown import markdown_code
from records.models import (
    Annotation,
    AnnotationChange,
    ApiToken,
    Attempt,
    CorpusKey,
    Label,
    Run,
    ShardFile,
)
from records.queries import cases as case_queries
from records.queries.failures import new_failures

# The label that excuses a regressed case in the gate while it is unresolved.
EXCUSING = "known-flaky"
Target = Annotation.Target


def labels() -> list[Label]:
    """The vocabulary, in its order."""
    return list(Label.objects.all())


def failure_mode_url(mode: str) -> str:
    """A failure mode's page (`/failures/<id>/`)."""
    return f"/failures/{mode}/"


def case_url(digest: str, case: str) -> str:
    return reverse("records:case") + "?" + urlencode({"digest": digest, "case": case})


def evidence_url(a: Annotation) -> str:
    """The page of what the annotation is about."""
    if a.target == Target.CASE:
        return case_url(a.digest, a.case)
    if a.target == Target.ATTEMPT:
        return reverse("records:attempt", args=[a.attempt_id])
    return failure_mode_url(a.mode)


@dataclass(frozen=True)
class About:
    """What an annotation is on: a case of a digest, an attempt (by pk) or a failure mode."""

    target: str
    digest: str = ""
    case: str = ""
    attempt: int | None = None
    mode: str = ""

    def condition(self) -> Q:
        if self.target == Target.CASE:
            return Q(target=Target.CASE, digest=self.digest, case=self.case)
        if self.target == Target.ATTEMPT:
            return Q(target=Target.ATTEMPT, attempt=self.attempt)
        return Q(target=Target.MODE, mode=self.mode)

    def fields(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "digest": self.digest,
            "case": self.case,
            "attempt_id": self.attempt,
            "mode": self.mode,
        }


def on(about: About) -> QuerySet:
    """Every annotation of a target, newest first, with its label and its changes."""
    return (
        Annotation.objects.filter(about.condition())
        .select_related("label")
        .prefetch_related("changes")
    )


@dataclass(frozen=True)
class Writer:
    """Who writes: an account or an upload token, by the name the pages show."""

    name: str
    user: Any = None
    token: ApiToken | None = None

    @classmethod
    def of_user(cls, user: Any) -> Writer:
        return cls(user.get_username(), user=user)

    @classmethod
    def of_token(cls, token: ApiToken) -> Writer:
        return cls(f"token {token.name}", token=token)


def _change(a: Annotation, action: str, by: Writer, before: dict | None) -> None:
    AnnotationChange.objects.create(
        annotation=a, action=action, by=by.name, at=a.updated_at, before=before, after=a.state()
    )


def write(
    about: About,
    by: Writer,
    *,
    label: Label | None = None,
    note: str = "",
    link: str = "",
    client_key: str = "",
) -> tuple[Annotation, bool]:
    """A new annotation and its first audit row; with a `client_key` already used, the
    annotation made with it, untouched (and False)."""
    if client_key:
        known = Annotation.objects.select_related("label").filter(client_key=client_key).first()
        if known is not None:
            return known, False
    now = timezone.now()
    a = Annotation(
        **about.fields(),
        label=label,
        note=note,
        link=link,
        author=by.name,
        user=by.user,
        token=by.token,
        client_key=client_key,
        created_at=now,
        updated_at=now,
    )
    try:
        with transaction.atomic():
            a.save()
            _change(a, "created", by, None)
    except IntegrityError:
        # The same key written at the same moment by another request: theirs stands.
        known = Annotation.objects.select_related("label").filter(client_key=client_key).first()
        if client_key and known is not None:
            return known, False
        raise
    return a, True


def edit(a: Annotation, by: Writer, *, label: Label | None, note: str, link: str) -> Annotation:
    """Change an annotation's label, note or link, keeping the state before in an audit row
    (no row when nothing changed)."""
    before = a.state()
    a.label, a.note, a.link = label, note, link
    if a.state() == before:
        return a
    a.updated_at = timezone.now()
    with transaction.atomic():
        a.save(update_fields=["label", "note", "link", "updated_at"])
        _change(a, "edited", by, before)
    return a


def set_resolved(a: Annotation, by: Writer, resolved: bool = True) -> Annotation:
    """Resolve an annotation's label (or open it again), with its audit row."""
    if a.resolved == resolved:
        return a
    before = a.state()
    a.resolved = resolved
    a.updated_at = timezone.now()
    a.resolved_at = a.updated_at if resolved else None
    a.resolved_by = by.name if resolved else ""
    with transaction.atomic():
        a.save(update_fields=["resolved", "resolved_at", "resolved_by", "updated_at"])
        _change(a, "resolved" if resolved else "reopened", by, before)
    return a


def live() -> QuerySet:
    """The annotations whose label speaks for their target: labelled and not resolved."""
    return Annotation.objects.filter(resolved=False, label__isnull=False)


# --- cases -------------------------------------------------------------------------------------


def case_labels(digest: str, cases: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Per case of a digest, the unresolved labels it carries (each once, in the vocabulary's
    order); only the cases named, when some are. One query."""
    wanted = live().filter(target=Target.CASE, digest=digest)
    if cases is not None:
        wanted = wanted.filter(case__in=list(cases))
    out: dict[str, list[str]] = defaultdict(list)
    for case, slug in wanted.order_by("label__order", "label__slug").values_list(
        "case", "label__slug"
    ):
        if slug not in out[case]:
            out[case].append(slug)
    return dict(out)


def label_facet(labelled: dict[str, list[str]], cases: Iterable[str]) -> dict[str, int]:
    """How many of `cases` carry each label, the commonest first."""
    counts: dict[str, int] = defaultdict(int)
    for case in cases:
        for slug in labelled.get(case, ()):
            counts[slug] += 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def excused_cases(digest: str, cases: Sequence[str]) -> dict[str, Annotation]:
    """Of a row's regressed cases (of corpus `digest`), those labelled `known-flaky` and not
    resolved, each with the newest such annotation: the gate does not fail a row whose regressed
    cases are all here (and `?ignore_labels=1` asks it not to look). One query."""
    out: dict[str, Annotation] = {}
    if not cases:
        return out
    excusing = (
        live()
        .filter(target=Target.CASE, digest=digest, case__in=list(cases), label__slug=EXCUSING)
        .select_related("label")
        .order_by("-created_at", "-id")
    )
    for a in excusing:
        out.setdefault(a.case, a)
    return out


# --- failure modes (by id: their own tables are the failure pages') -----------------------------


def mode_labels(modes: Iterable[str]) -> dict[str, list[str]]:
    """Per failure mode id, the unresolved labels it carries: for `/failures/`' column, facet
    and `label=` filter (a mode carries `label` when `label in mode_labels(ids)[id]`). One
    query."""
    out: dict[str, list[str]] = defaultdict(list)
    rows = (
        live()
        .filter(target=Target.MODE, mode__in=list(modes))
        .order_by("label__order", "label__slug")
        .values_list("mode", "label__slug")
    )
    for mode, slug in rows:
        if slug not in out[mode]:
            out[mode].append(slug)
    return dict(out)


def modes_annotated(modes: Iterable[str]) -> set[str]:
    """The failure modes that carry any annotation: a new mode leaves the review queue once
    someone has labelled it (as an item of kind "mode", `url` its `failure_mode_url`)."""
    return set(
        Annotation.objects.filter(target=Target.MODE, mode__in=list(modes)).values_list(
            "mode", flat=True
        )
    )


def excused_words(excused: dict[str, Annotation]) -> str:
    """What the gate's comment says of a row's excused cases, in Markdown (each case id in a
    code span no character of it can leave): "`MT-040`, `MT-041` excused as known-flaky"."""
    if not excused:
        return ""
    named = ", ".join(markdown_code(case) for case in sorted(excused))
    return f"{named} excused as {EXCUSING}"


# --- attempts: the search's condition, facet and export column ----------------------------------


def labelled(slug: str, prefix: str = "") -> Q:
    """An attempt (`prefix` empty) or a row's attempt (`prefix` "attempt__") that carries the
    label unresolved: on itself, or on its case of its run's corpus digest."""
    outer = prefix.removesuffix("__") or "pk"
    wanted = live().filter(label__slug=slug)
    on_attempt = wanted.filter(target=Target.ATTEMPT, attempt=OuterRef(outer))
    on_case = wanted.filter(
        target=Target.CASE,
        digest=OuterRef(f"{prefix}run__corpus_digest"),
        case=OuterRef(f"{prefix}case"),
    )
    return Q(Exists(on_attempt)) | Q(Exists(on_case))


def attempt_labels(attempts: Sequence[Attempt]) -> dict[int, list[str]]:
    """Per attempt (each with its run's `corpus_digest` read), the unresolved labels on it or
    on its case: one query. An attempt with none is left out."""
    return labels_by_key([(a.pk, a.run.corpus_digest, a.case) for a in attempts])


def labels_by_key(attempts: Sequence[tuple[int, str, str]]) -> dict[int, list[str]]:
    """`attempt_labels` for attempts given as (pk, corpus digest, case)."""
    if not attempts:
        return {}
    pairs = {(digest, case) for _, digest, case in attempts}
    cases = Q()
    for digest in {d for d, _ in pairs}:
        cases |= Q(digest=digest, case__among=[c for d, c in pairs if d == digest])
    rows = (
        live()
        .filter(
            Q(target=Target.ATTEMPT, attempt__among=[pk for pk, _, _ in attempts])
            | (Q(target=Target.CASE) & cases)
        )
        .order_by("label__order", "label__slug")
        .values_list("target", "attempt_id", "digest", "case", "label__slug")
    )
    by_attempt: dict[int, list[str]] = defaultdict(list)
    by_case: dict[tuple[str, str], list[str]] = defaultdict(list)
    for target, attempt, digest, case, slug in rows:
        if target == Target.ATTEMPT:
            by_attempt[attempt].append(slug)
        else:
            by_case[(digest, case)].append(slug)
    out = {}
    if by_attempt or by_case:  # most attempts of a whole-store export carry none
        for pk, digest, case in attempts:
            if slugs := by_attempt.get(pk, []) + by_case.get((digest, case), []):
                out[pk] = list(dict.fromkeys(slugs))
    return out


# --- the review queue --------------------------------------------------------------------------


@dataclass
class ReviewItem:
    """One thing that needs a person: why, what (a case of a digest, later a failure mode), the
    run it concerns, when, the page of its evidence, and what it says in a few words."""

    kind: str  # "flipped", "flaky" or "mode" (a failure mode new in the newest run)
    digest: str
    case: str
    run: Run | None
    when: datetime | None
    url: str
    detail: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    mode: str = ""  # a failure mode's id, for an item of kind "mode"

    DETAIL_SHOWN = 3

    @property
    def shown_detail(self) -> list[str]:
        """The first few lines of the detail (a case is often alike for every model)."""
        return self.detail[: self.DETAIL_SHOWN]

    @property
    def more_detail(self) -> int:
        return max(0, len(self.detail) - self.DETAIL_SHOWN)

    @property
    def title(self) -> str:
        return KIND_TITLES.get(self.kind, self.kind)


KIND_TITLES = {
    "flipped": "flipped in the newest run",
    "flaky": "flaky, no label",
    "mode": "new mode",
}


def _digests() -> list[str]:
    """Every corpus digest that has a stored key and a run."""
    return sorted(
        set(Run.objects.exclude(corpus_digest="").values_list("corpus_digest", flat=True))
        & set(CorpusKey.objects.values_list("digest", flat=True))
    )


def review_items(digest: str = "") -> list[ReviewItem]:
    """What needs a person, newest first: per corpus digest (or the one named), the cases that
    flipped in its newest run and carry no annotation made since that run arrived, and the flaky
    cases that carry no unresolved label. The flips and flakiness are the case pages' own
    (`records.queries.cases`)."""
    items: list[ReviewItem] = []
    for d in [digest] if digest else _digests():
        corpus = case_queries.corpus(case_queries.Choice(d))
        if not corpus.runs:
            continue
        newest = corpus.runs[-1]
        arrived = ShardFile.objects.filter(run=newest).values_list("created_at", flat=True).first()
        when = newest.started_at or arrived
        labelled_cases = case_labels(d)
        seen_since = (
            set(
                Annotation.objects.filter(
                    target=Target.CASE, digest=d, created_at__gte=arrived
                ).values_list("case", flat=True)
            )
            if arrived
            else set()
        )
        for line in corpus.cases:
            flipped = [
                m
                for m in line.by_model
                if m.flip and m.flip_run is not None and m.flip_run.pk == newest.pk
            ]
            if flipped and line.case not in seen_since:
                items.append(
                    ReviewItem(
                        "flipped",
                        d,
                        line.case,
                        newest,
                        when,
                        case_url(d, line.case),
                        [
                            f"{m.model} on {m.surface}: Clean {m.flip.after[0]}/{m.flip.after[1]}"
                            f" from {m.flip.before[0]}/{m.flip.before[1]}"
                            for m in flipped
                            if m.flip
                        ],
                        labelled_cases.get(line.case, []),
                    )
                )
            elif line.flaky and line.case not in labelled_cases:
                items.append(
                    ReviewItem(
                        "flaky",
                        d,
                        line.case,
                        newest,
                        when,
                        case_url(d, line.case),
                        [
                            f"{m.model} on {m.surface}: repeats disagree in "
                            f"{m.flakiness.disagreeing} of {m.flakiness.runs} runs"
                            for m in line.by_model
                            if m.flaky and m.flakiness
                        ],
                    )
                )
        # The failure modes new in the newest run, that nobody has annotated yet.
        found = new_failures(newest)
        if found is not None:
            done = modes_annotated([m.id for m in found.modes])
            for m in found.modes:
                if m.id in done:
                    continue
                sig = m.signature
                items.append(
                    ReviewItem(
                        "mode",
                        d,
                        "",
                        newest,
                        when,
                        m.url,
                        [
                            " ".join(str(v) for v in sig.values() if v),
                            f"{m.attempts} attempt{'s' if m.attempts != 1 else ''} in the newest run",
                        ],
                        mode=m.id,
                    )
                )
    order = {"mode": 0, "flipped": 1, "flaky": 2}
    items.sort(key=lambda i: (order.get(i.kind, 9), i.case))
    items.sort(key=lambda i: i.when or datetime.min.replace(tzinfo=UTC), reverse=True)
    return items
