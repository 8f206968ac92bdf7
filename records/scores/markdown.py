"""A run's scores as upstream publishes them: the rows `gen_model_results` would publish, drawn
byte for byte as its render.go draws them (`records.formats.model_results`), then the rows it
would refuse, as its command reports them."""

from __future__ import annotations

from records.models import Run
from records.scores.publish import publication_of_run, upstream_markdown
from records.scores.run import latest_scoring
from records.scores.tables import Group


def markdown(groups: list[Group], run: Run, *, intervals: bool = False) -> str:
    """Upstream's detailed blocks for the run's published rows, then its refusals; with
    `intervals`, one more column holding each rate's 95% interval (evaldash's own)."""
    scoring = latest_scoring(run)
    return upstream_markdown(publication_of_run(scoring, groups, intervals=intervals))
