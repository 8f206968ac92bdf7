"""What an attempt's page reads besides its trace: the price it is costed at, the step its
verdict turns on, and the attempts beside it in the list it was opened from."""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from records.models import Attempt, Verdict
from records.queries.search import Search, SearchQuery
from records.scorer.score import RECORDED_ENDINGS
from records.scoring.run import Account, account


def price_for(attempt: Attempt) -> tuple[Any, str]:
    """The price the attempt's model is costed at (None when unknown), and a note saying where
    it comes from or why there is none."""
    provider = attempt.run.providers.filter(spec=attempt.model).first()
    if provider is None:
        return None, "the run line lists no provider with this spec, so cost is unknown"
    if not provider.priced:
        return None, "the run line carries no price for this model, so cost is unknown"
    return provider.price, f"priced from the run line, retrieved on {provider.retrieved_on or '?'}"


def verdict_account(scoring: Any, attempt: Attempt) -> tuple[Verdict | None, Account | None]:
    """The attempt's verdict in `scoring` and the scorer's account of it step by step
    (`records.scoring.run.account`); (None, None) when the attempt has no verdict there."""
    verdict = Verdict.objects.filter(scoring=scoring, attempt=attempt).first() if scoring else None
    if verdict is None:
        return None, None
    verdict.scoring, verdict.attempt = scoring, attempt  # read once already
    return verdict, account(verdict)


def failing_step(steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The step the verdict turns on: the first that did not complete, where a call reached it."""
    return next((st for st in steps if not st.get("complete") and st.get("reached")), None)


def signature_step(ended_by: str, steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The step a failure signature names as where the attempt went wrong
    (`records.scorer.score.failure_signature`): none where the runner's own ending decided the
    verdict; else the first step not observed or not complete, reached by a call or not."""
    if ended_by in RECORDED_ENDINGS:
        return None
    return next((st for st in steps if not (st.get("observed") and st.get("complete"))), None)


def neighbours(attempt: Attempt, query: SearchQuery) -> tuple[int | None, int | None]:
    """The attempts before and after `attempt` in the list `query` describes (within its run)."""
    found = Search(query)
    order = [f for f in found.query.order() if f.lstrip("-") != "run_id"]  # one run
    qs = found.attempts.order_by(*order)
    previous = (
        qs.filter(_beyond(attempt, order, before=True))
        .order_by(*(_flip(f) for f in order))
        .values_list("pk", flat=True)
        .first()
    )
    following = qs.filter(_beyond(attempt, order, before=False)).values_list("pk", flat=True)
    return previous, following.first()


def _flip(field: str) -> str:
    return field[1:] if field.startswith("-") else f"-{field}"


def _beyond(attempt: Attempt, order: list[str], *, before: bool) -> Q:
    """The rows after `attempt` in the list's order (`before`: the rows ahead of it): for
    each field of the order, equal on the fields before it and past it on this one."""
    condition = Q(pk__in=[])
    equal = Q()
    for field in order:
        name = field.lstrip("-")
        ascending = not field.startswith("-")
        value = getattr(attempt, name)
        past = "lt" if ascending == before else "gt"
        condition |= equal & Q(**{f"{name}__{past}": value})
        equal &= Q(**{name: value})
    return condition
