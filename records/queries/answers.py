"""Each run's answer against its previous comparable run, as the CI gate reads it: the runs list's
first column of evidence.

The baseline is the gate's (`previous_runs`: the latest earlier run of the same corpus digest,
models and surfaces) and the decision is the gate's own (`records.queries.decisions`, on Clean):
the same words the comparison, the history and the gate give for the same pair. The cases are
read from the per-case figures kept with each scoring, never from verdicts, so a page of runs
costs the same few queries however many runs, rows and attempts it shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django.urls import reverse

from records.models import Run
from records.queries.decisions import RunDecision, decide_pairs
from records.queries.runs import previous_runs

COLUMN = "clean"  # the gate's default column, and the runs list's headline


@dataclass(frozen=True)
class Answer:
    """A run's Clean against its baseline: "regressed", "improved", "within noise", "no
    baseline" (no earlier comparable run) or "not compared" (one side is not scored, or no
    row of the two can be compared)."""

    label: str
    baseline: int | None = None  # the baseline run's pk
    candidate: int | None = None
    decision: RunDecision | None = None

    @property
    def rows(self) -> int:
        """Rows tested case by case."""
        return 0 if self.decision is None else len(self.decision.rows)

    @property
    def comparison_url(self) -> str | None:
        if self.baseline is None or self.candidate is None:
            return None
        query = urlencode({"kind": "runs", "baseline": self.baseline, "candidate": self.candidate})
        return f"{reverse('records:compare')}?{query}"

    @property
    def sentence(self) -> str:
        if self.label == "no baseline":
            return "no earlier run has the same corpus digest, models and surfaces"
        assert self.decision is not None
        return self.decision.sentence


def answers(runs: list[Run]) -> dict[int, Answer]:
    """Each run's answer against its previous comparable run, by run pk: a few queries for a
    page of runs (previous runs, then `decide_pairs`)."""
    previous = previous_runs(runs)
    out = {r.pk: Answer("no baseline") for r in runs if r.pk not in previous}
    for candidate, decision in decide_pairs(previous, (COLUMN,)).items():
        out[candidate] = Answer(decision.label, decision.baseline, candidate, decision)
    return out
