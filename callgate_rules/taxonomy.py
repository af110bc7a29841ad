"""The closed taxonomy shared by code, YAML and logs: error classes and routes (SPEC §4).

Each error class and each route is one row of one table here. Everything else derives from
these tables: the default routes a RoutingTable overrides, the default agent and user
messages, the advice appended to every agent message, which classes count against a run's
failure budget, which routes end a proposal. The JSON Schemas' enums live once, in
``documents/schemas/common.json``, and ``tests/test_taxonomy.py`` ties them to these tables.

Adding an error class: a member of ``ErrorClass``, its row in ``ERROR_CLASSES``, its value in
``common.json``'s ``error_class`` enum, and its key under ``routes`` and ``messages`` in
``RoutingTable.json``. Adding a route: a member of ``Route``, its row in ``ROUTES`` and its
value in ``common.json``'s ``route`` enum. The test names whatever is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


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
    ANSWER_TOO_LARGE = "answer_too_large"  # the destination answered more than is read
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


@dataclass(frozen=True)
class ErrorClassRow:
    """Everything callgate assumes about one error class until a document says otherwise."""

    # The source article's route (SPEC §4); a RoutingTable's ``routes`` overrides it.
    default_route: Route
    # The agent message when neither the rule nor the RoutingTable gives one; ``{tool}``,
    # ``{detail}`` and the like are filled in, an unknown placeholder shows as ``?``.
    agent_text: str
    # The user message when neither the rule nor the RoutingTable gives one; shown as is.
    user_text: str
    # Counts against the run's ``failures_per_run`` budget.
    is_failure: bool


@dataclass(frozen=True)
class RouteRow:
    """Everything callgate assumes about one route."""

    # Appended to every agent message with this route, so the advice can never contradict
    # what the gate does next; empty where the model needs none.
    advice: str
    # Ends a proposal without a write; a terminal route never loops on its own.
    terminal: bool


ERROR_CLASSES: Mapping[ErrorClass, ErrorClassRow] = MappingProxyType({
    ErrorClass.MALFORMED: ErrorClassRow(
        Route.REGENERATE,
        "Your tool call could not be read: {detail}.",
        "Something went wrong while preparing the action.",
        is_failure=True),
    ErrorClass.UNKNOWN_TOOL: ErrorClassRow(
        Route.REFUSE,
        "There is no tool named {proposed_tool}. Available tools: {tools}.",
        "That action isn't available here.",
        is_failure=True),
    ErrorClass.UNEXPECTED_ARGUMENT: ErrorClassRow(
        Route.REFUSE,
        "{tool} has no argument `{field}`; send only the arguments the tool declares.",
        "Some details of the request weren't valid.",
        is_failure=True),
    ErrorClass.INVALID_ARGUMENT: ErrorClassRow(
        Route.REGENERATE,
        "An argument of {tool} is invalid: {detail}.",
        "Some details of the request weren't valid.",
        is_failure=True),
    ErrorClass.NOT_FOUND: ErrorClassRow(
        Route.REPLAN,
        "The record you referred to was not found.",
        # Also what the person is told of a record they may not access (NOT_FOUND_USER_MESSAGE).
        "I couldn't find that record among the ones you can access.",
        is_failure=True),
    ErrorClass.AMBIGUOUS: ErrorClassRow(
        Route.CLARIFY,
        "The reference matches several records.",
        "Several records match. Which one do you mean?",
        is_failure=True),
    ErrorClass.FORBIDDEN: ErrorClassRow(
        Route.REFUSE,
        "You are not allowed to call {tool} for this user.",
        "You don't have permission to do that.",
        is_failure=True),
    ErrorClass.CONFLICT: ErrorClassRow(
        Route.REFUSE,
        "{tool} cannot be done in the record's current state.",
        "This can't be done in the record's current state.",
        is_failure=True),
    ErrorClass.CONFIRMATION_REQUIRED: ErrorClassRow(
        Route.AWAIT_CONFIRMATION,
        "{tool} needs the user's confirmation; a draft was shown to them.",
        "Please review and confirm this action before it runs.",
        is_failure=False),  # the call was right; a person decides
    ErrorClass.TRANSIENT: ErrorClassRow(
        Route.RETRY,
        "The destination of {tool} is temporarily unavailable.",
        "The system is busy; trying again shortly.",
        is_failure=True),
    ErrorClass.UNKNOWN_OUTCOME: ErrorClassRow(
        Route.RECONCILE,
        "It is not yet known whether {tool} took effect.",
        "Checking whether the action went through.",
        is_failure=True),
    ErrorClass.DUPLICATE: ErrorClassRow(
        Route.RETURN_RECEIPT,
        "{tool} was already done with these arguments; this is its result.",
        "This was already done; here is the earlier result.",
        is_failure=False),  # the earlier write's result is returned
    ErrorClass.PERMANENT: ErrorClassRow(
        Route.REFUSE,
        "The destination refused {tool}: {detail}.",
        "The system refused this action.",
        is_failure=True),
    # Asked again, a read brings the same bytes (not retry); its arguments were valid (not
    # regenerate, which spends the corrected calls meant for wrong ones); a narrower call —
    # a filter, a page, a shorter range — is another step (replan, terminal: it never
    # loops); nobody has to act on a read (not review) and the user has nothing to choose
    # (not clarify). A write is handed to a person whatever the route (``machine``): it ran,
    # and what it did cannot be read from an answer nobody read. Not a failure of the run:
    # the destination said too much, the model's call was not wrong.
    ErrorClass.ANSWER_TOO_LARGE: ErrorClassRow(
        Route.REPLAN,
        "{tool} answered with more data than the gate reads from one answer; none of it "
        "was read.",
        "The result was too large to handle here.",
        is_failure=False),
    ErrorClass.RECONCILE_FAILED: ErrorClassRow(
        Route.REVIEW,
        "It could not be confirmed whether {tool} took effect.",
        "A person will check whether the action went through.",
        is_failure=True),
    ErrorClass.BUDGET_EXHAUSTED: ErrorClassRow(
        Route.REVIEW,
        "The limit for tool calls has been reached ({detail}).",
        "I've stopped trying; a person will follow up.",
        is_failure=True),
})

ROUTES: Mapping[Route, RouteRow] = MappingProxyType({
    Route.EXECUTE: RouteRow("", terminal=False),
    Route.AWAIT_CONFIRMATION: RouteRow(
        "Do not call it again; wait for the user's decision.", terminal=True),
    Route.RETURN_RESULT: RouteRow("", terminal=True),
    Route.RETURN_RECEIPT: RouteRow("Do not call it again.", terminal=True),
    Route.RETRY: RouteRow("The gate retries it itself; do not call it again.", terminal=False),
    Route.RECONCILE: RouteRow(
        "The gate is checking the destination; do not call it again.", terminal=False),
    Route.REGENERATE: RouteRow("You may send one corrected call.", terminal=False),
    Route.REPLAN: RouteRow("Do not repeat this call; choose another step.", terminal=True),
    Route.CLARIFY: RouteRow(
        "Ask the user to choose, then call again with the chosen id.", terminal=True),
    Route.REFUSE: RouteRow("Do not retry this call.", terminal=True),
    Route.REVIEW: RouteRow("A person will handle it; do not retry.", terminal=True),
})

# Derived from the tables, read-only: what the rest of the package asks of them.
DEFAULT_ROUTE: Mapping[ErrorClass, Route] = MappingProxyType(
    {error_class: row.default_route for error_class, row in ERROR_CLASSES.items()})
# Error classes that count as failures of a run (budget "failures per run").
FAILURES = frozenset(error_class for error_class, row in ERROR_CLASSES.items() if row.is_failure)
# Routes that end a proposal without a write; they never loop on their own.
TERMINAL_ROUTES = frozenset(route for route, row in ROUTES.items() if row.terminal)
# Shown to the person both for a missing record and for one they may not access, so the two
# cannot be told apart.
NOT_FOUND_USER_MESSAGE = ERROR_CLASSES[ErrorClass.NOT_FOUND].user_text
