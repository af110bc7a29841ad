"""How a call ended inside steps 5–7 (``Ending``), for step 7 to route, and the per-call
limit path."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from callgate_rules.documents.model import Routing
from callgate_rules.pipeline.budgets import limit_route
from callgate_rules.taxonomy import ErrorClass, Route


class Ending(NamedTuple):
    """How a call ended inside steps 5–7. ``detail`` is for the log only: it may carry what
    an executor, a finder or a store said, which the model and the user never see;
    ``said`` is what the messages may tell of it (by default, a phrase per error class).
    (A named tuple, not a frozen dataclass, which sets each of its ten fields through
    ``object.__setattr__``: about 12,000 instructions an executed write.)"""

    route: Route
    error_class: ErrorClass | None
    detail: str
    result: Any = None
    receipt_state: str | None = None
    late_confirmation: bool = False
    review_id: str | None = None
    limit_path: str | None = None
    retries: int = 0
    said: str = ""

    def told(self) -> str:
        """What the messages may tell of how it ended."""
        if self.said or self.error_class is None:
            return self.said
        return _SAID.get(self.error_class, "")


def limit_ending(routing: Routing, detail: str, retries: int,
                 open_review: Callable[[], str], said: str = "") -> Ending:
    """The per-call limit path: a partial result, a refusal, or a hand-over to a person."""
    path = routing.on_limit
    route = limit_route(path)
    review_id = open_review() if route == Route.REVIEW else None
    return Ending(route, ErrorClass.BUDGET_EXHAUSTED, detail, limit_path=str(path),
                  review_id=review_id, retries=retries, said=said)


def told_a_person(error_class: ErrorClass) -> str:
    """A review item's words for why a call came to a person, when nothing the gate said
    itself fits."""
    return _TOLD_A_PERSON.get(error_class, f"it ended {error_class}; the log has the details")


# What the gate says of an ending whose reason came from outside it (an executor's, a
# finder's or a store's words, which go to the log only): in the messages to the model and
# the user (``Ending.told``), and in a review item, to the person who settles it.
_SPENT = "the retries of this call are spent"
_SAID: Mapping[ErrorClass, str] = {
    ErrorClass.TRANSIENT: "the destination could not be reached",
    ErrorClass.UNKNOWN_OUTCOME: "its answer was lost",
    ErrorClass.PERMANENT: "its reason is kept in the log for engineers",
    ErrorClass.CONFLICT: "the record's state does not allow it",
    ErrorClass.RECONCILE_FAILED: "the outcome could not be confirmed",
    ErrorClass.BUDGET_EXHAUSTED: _SPENT,
}
_TOLD_A_PERSON: Mapping[ErrorClass, str] = {
    ErrorClass.UNKNOWN_OUTCOME: "it was sent and its answer was lost; check at the "
                                "destination whether it took effect",
    ErrorClass.RECONCILE_FAILED: "whether it took effect could not be confirmed",
    ErrorClass.BUDGET_EXHAUSTED: _SPENT,
    ErrorClass.ANSWER_TOO_LARGE: "it answered with more than the gate reads from one "
                                 "answer, so nothing of its answer was read; check at the "
                                 "destination what it did",
}
