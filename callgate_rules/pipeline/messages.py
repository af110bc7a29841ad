"""The three messages of every decision (SPEC §5), never mixed.

The agent message goes back into the model's context: what failed, whether another try
makes sense (derived from the route, so it can never contradict it), and what a valid call
looks like. The user message is safe to show in the chat. The log record is built by the
gate and is the only one that may carry technical detail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from callgate_rules.documents.model import Routing
from callgate_rules.pipeline.validate import NOT_FOUND_USER_MESSAGE
from callgate_rules.taxonomy import ErrorClass, Route

AGENT_DEFAULTS: Mapping[ErrorClass, str] = {
    ErrorClass.MALFORMED: "Your tool call could not be read: {detail}.",
    ErrorClass.UNKNOWN_TOOL: "There is no tool named {proposed_tool}. Available tools: {tools}.",
    ErrorClass.UNEXPECTED_ARGUMENT:
        "{tool} has no argument `{field}`; send only the arguments the tool declares.",
    ErrorClass.INVALID_ARGUMENT: "An argument of {tool} is invalid: {detail}.",
    ErrorClass.NOT_FOUND: "The record you referred to was not found.",
    ErrorClass.AMBIGUOUS: "The reference matches several records.",
    ErrorClass.FORBIDDEN: "You are not allowed to call {tool} for this user.",
    ErrorClass.CONFLICT: "{tool} cannot be done in the record's current state.",
    ErrorClass.CONFIRMATION_REQUIRED:
        "{tool} needs the user's confirmation; a draft was shown to them.",
    ErrorClass.TRANSIENT: "The destination of {tool} is temporarily unavailable.",
    ErrorClass.UNKNOWN_OUTCOME: "It is not yet known whether {tool} took effect.",
    ErrorClass.DUPLICATE: "{tool} was already done with these arguments; this is its result.",
    ErrorClass.PERMANENT: "The destination refused {tool}: {detail}.",
    ErrorClass.RECONCILE_FAILED: "It could not be confirmed whether {tool} took effect.",
    ErrorClass.BUDGET_EXHAUSTED: "The limit for tool calls has been reached ({detail}).",
}

USER_DEFAULTS: Mapping[ErrorClass, str] = {
    ErrorClass.MALFORMED: "Something went wrong while preparing the action.",
    ErrorClass.UNKNOWN_TOOL: "That action isn't available here.",
    ErrorClass.UNEXPECTED_ARGUMENT: "Some details of the request weren't valid.",
    ErrorClass.INVALID_ARGUMENT: "Some details of the request weren't valid.",
    ErrorClass.NOT_FOUND: NOT_FOUND_USER_MESSAGE,
    ErrorClass.AMBIGUOUS: "Several records match. Which one do you mean?",
    ErrorClass.FORBIDDEN: "You don't have permission to do that.",
    ErrorClass.CONFLICT: "This can't be done in the record's current state.",
    ErrorClass.CONFIRMATION_REQUIRED: "Please review and confirm this action before it runs.",
    ErrorClass.TRANSIENT: "The system is busy; trying again shortly.",
    ErrorClass.UNKNOWN_OUTCOME: "Checking whether the action went through.",
    ErrorClass.DUPLICATE: "This was already done; here is the earlier result.",
    ErrorClass.PERMANENT: "The system refused this action.",
    ErrorClass.RECONCILE_FAILED: "A person will check whether the action went through.",
    ErrorClass.BUDGET_EXHAUSTED: "I've stopped trying; a person will follow up.",
}

# What the model should do next, by route: appended so advice always matches the route.
ROUTE_ADVICE: Mapping[Route, str] = {
    Route.EXECUTE: "",
    Route.AWAIT_CONFIRMATION: "Do not call it again; wait for the user's decision.",
    Route.RETURN_RESULT: "",
    Route.RETURN_RECEIPT: "Do not call it again.",
    Route.RETRY: "The gate retries it itself; do not call it again.",
    Route.RECONCILE: "The gate is checking the destination; do not call it again.",
    Route.REGENERATE: "You may send one corrected call.",
    Route.REPLAN: "Do not repeat this call; choose another step.",
    Route.CLARIFY: "Ask the user to choose, then call again with the chosen id.",
    Route.REFUSE: "Do not retry this call.",
    Route.REVIEW: "A person will handle it; do not retry.",
}


def agent_message(
    error_class: ErrorClass,
    route: Route,
    routing: Routing,
    specific: str | None,
    hint: str | None,
    variables: Mapping[str, Any],
) -> str:
    override = routing.messages.get(error_class)
    if specific is not None:
        text = specific
    elif override is not None and override.agent is not None:
        text = override.agent.render(variables)
    else:
        text = _fill(AGENT_DEFAULTS[error_class], variables)
    parts = [text, ROUTE_ADVICE[route]]
    if hint and route in (Route.REGENERATE, Route.REFUSE) and error_class in (
        ErrorClass.MALFORMED, ErrorClass.UNEXPECTED_ARGUMENT, ErrorClass.INVALID_ARGUMENT,
    ):
        parts.append(hint)
    return " ".join(p for p in parts if p)


def user_message(
    error_class: ErrorClass, routing: Routing, specific: str | None, variables: Mapping[str, Any]
) -> str:
    if specific is not None:
        return specific
    override = routing.messages.get(error_class)
    if override is not None and override.user is not None:
        return override.user.render(variables)
    return USER_DEFAULTS[error_class]


def _fill(text: str, variables: Mapping[str, Any]) -> str:
    try:
        return text.format_map(_Lenient(variables))
    except (ValueError, IndexError):
        return text


class _Lenient(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "?"
