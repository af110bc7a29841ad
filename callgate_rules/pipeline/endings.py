"""How a call ended inside steps 5–7 (``Ending``), for step 7 to route, and the per-call
limit path."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from callgate_rules.documents.model import Routing
from callgate_rules.pipeline.budgets import limit_route
from callgate_rules.taxonomy import ErrorClass, Route


@dataclass(frozen=True)
class Ending:
    """How a call ended inside steps 5–7. ``detail`` is for the log only: it may carry what
    an executor, a finder or a store said, which the model and the user never see;
    ``said`` is what the messages may tell of it (by default, a phrase per error class)."""

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


# What the messages say of an ending whose detail came from outside the gate.
_SAID: Mapping[ErrorClass, str] = {
    ErrorClass.TRANSIENT: "the destination could not be reached",
    ErrorClass.UNKNOWN_OUTCOME: "its answer was lost",
    ErrorClass.PERMANENT: "its reason is kept in the log for engineers",
    ErrorClass.CONFLICT: "the record's state does not allow it",
    ErrorClass.RECONCILE_FAILED: "the outcome could not be confirmed",
    ErrorClass.BUDGET_EXHAUSTED: "the retries of this call are spent",
}
