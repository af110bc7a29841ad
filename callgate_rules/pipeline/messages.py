"""The three messages of every decision (SPEC §5), never mixed.

The agent message goes back into the model's context: what failed, whether another try
makes sense (derived from the route, so it can never contradict it), and what a valid call
looks like. The user message is safe to show in the chat. The log record is built by the
gate and is the only one that may carry technical detail.

The default texts of each error class and the advice of each route are rows of the
taxonomy's tables (``taxonomy.ERROR_CLASSES``, ``taxonomy.ROUTES``); a rule's or the
RoutingTable's text replaces the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from callgate_rules.documents.model import Routing
from callgate_rules.taxonomy import ERROR_CLASSES, ROUTES, ErrorClass, Route


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
        text = _fill(ERROR_CLASSES[error_class].agent_text, variables)
    parts = [text, ROUTES[route].advice]
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
    return ERROR_CLASSES[error_class].user_text


def _fill(text: str, variables: Mapping[str, Any]) -> str:
    try:
        return text.format_map(_Lenient(variables))
    except (ValueError, IndexError):
        return text


class _Lenient(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "?"


def with_note(agent_message: str, note: str | None) -> str:
    """The agent message with the parse step's note, if any: with several calls proposed
    and one taken, the model must hear that the others did not run."""
    return f"{agent_message} Note: {note}." if note else agent_message
