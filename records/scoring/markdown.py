"""A run's scores as upstream publishes them: the rows `gen_model_results` would publish, drawn
byte for byte as its render.go draws them (`records.formats.model_results`), then the rows it
would refuse, as its command reports them."""

from __future__ import annotations

from records.formats.markdown import markdown_code
from records.models import Scoring
from records.scoring.publish import publication_of_run, upstream_markdown
from records.scoring.tables import Group


def markdown(scoring: Scoring, groups: list[Group], *, intervals: bool = False) -> str:
    """Upstream's detailed blocks for the published rows of `groups`, read from `scoring` (the
    same scoring, so a rescoring landing meanwhile is not mixed in), then its refusals; with
    `intervals`, one more column holding each rate's 95% interval (evaldash's own). A scoring
    against another corpus's key is fenced first."""
    text = upstream_markdown(publication_of_run(scoring, groups, intervals=intervals))
    if scoring.stale:
        text = (
            f"> **Stale corpus**: scored against key {markdown_code(scoring.key.digest)}, not "
            f"the run's corpus {markdown_code(scoring.run.corpus_digest)}.\n\n{text}"
        )
    return text
