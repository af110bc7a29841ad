"""The closed taxonomy shared by code, YAML and logs: error classes and routes (SPEC §4).

Each error class and each route is defined here once; every table that speaks of them
(default routes and messages, route advice, the JSON Schemas' enums) is tied to these.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorClass(StrEnum):
    """Why a proposed call did not simply succeed (SPEC §4)."""

    MALFORMED = "malformed"  # not one parseable call
    UNKNOWN_TOOL = "unknown_tool"  # tool not on the allowlist
    UNEXPECTED_ARGUMENT = "unexpected_argument"  # a field the contract does not declare
    INVALID_ARGUMENT = "invalid_argument"  # wrong type, bound, format or date
    NOT_FOUND = "not_found"  # a referenced record does not exist
    AMBIGUOUS = "ambiguous"  # a reference matches several records
    FORBIDDEN = "forbidden"  # correct form, but not the actor's record or right
    CONFLICT = "conflict"  # the record's state forbids the action
    CONFIRMATION_REQUIRED = "confirmation_required"  # a human must approve this write
    TRANSIENT = "transient"  # rate limit or unavailability *before sending*
    UNKNOWN_OUTCOME = "unknown_outcome"  # timeout or broken connection *after sending*
    DUPLICATE = "duplicate"  # a receipt for this operation already exists
    PERMANENT = "permanent"  # the destination refused for good
    RECONCILE_FAILED = "reconcile_failed"  # reconciliation found a mismatch or cannot decide
    BUDGET_EXHAUSTED = "budget_exhausted"  # a per-call, per-tool or per-run limit is reached


class Route(StrEnum):
    """What the host does next (SPEC §4, "Routes")."""

    EXECUTE = "execute"  # all checks passed
    AWAIT_CONFIRMATION = "await_confirmation"  # checks passed, a human must confirm first
    RETURN_RESULT = "return_result"  # executed and verified
    RETURN_RECEIPT = "return_receipt"  # an earlier result, no new write
    RETRY = "retry"  # transport retry after backoff
    RECONCILE = "reconcile"  # read the destination's state by operation ID
    REGENERATE = "regenerate"  # one bounded corrected call from the model
    REPLAN = "replan"  # the call was wrong, not unlucky: choose another step
    CLARIFY = "clarify"  # ask the user
    REFUSE = "refuse"  # stop and explain
    REVIEW = "review"  # hand over to a person


# Routes that end a proposal without a write; they never loop on their own.
TERMINAL_ROUTES = frozenset(
    {Route.RETURN_RESULT, Route.RETURN_RECEIPT, Route.REFUSE, Route.REVIEW, Route.CLARIFY,
     Route.REPLAN, Route.AWAIT_CONFIRMATION}
)
