"""The gate's decisions as MCP tool results, and the ``_meta`` keys the gateway reads and
writes.

Read from the client's ``tools/call`` ``_meta``:

- ``callgate/request_id`` — the user's request this call belongs to. The same call within
  one request is one operation: sent again after a lost answer, it gets the receipt, not a
  second write; a new request ID is a new request, which writes again.
- ``callgate/run_id`` — the agent run this call belongs to (an HTTP client may send the
  ``Callgate-Run-Id`` header instead, for every call of its connection). Gateway instances
  on one shared store see one ``history`` for it; see ``server``'s docstring.
- ``callgate/intent`` — the run's intent (``callgate_rules.intent``: a RunIntent document or
  its spec), for a call that names its run: declared before the call is decided (the
  first time, before the run decided anything), then only narrowed; sending the same
  intent with every call changes nothing. A call outside it waits for a person.
- ``callgate/conversation`` — the conversation that led to the call (an OpenAI Chat
  Completions or Responses message list, or an Anthropic ``{"system", "messages"}``), from
  which the ``provenance`` of every argument is worked out. Absent, every value's origin
  is ``unknown``.

Written by the gateway:

- ``callgate/operation_id`` on the upstream ``tools/call`` of a write: its idempotency key;
- on every result to the client: ``callgate/route``, ``callgate/error_class`` (when the
  gate stopped the call), ``callgate/operation_id`` (for writes), and
  ``callgate/confirmation_reference`` (a held write waiting for a person) or
  ``callgate/review_id`` (an outcome handed to a person).

A result the upstream gave (``return_result``, ``return_receipt``) passes through as it
came, ``_meta`` added; every other route is an ``isError`` result whose text is the gate's
agent message, which says what failed and whether another try makes sense.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from callgate_rules.gateway.binding import OPERATION_ID_META
from callgate_rules.pipeline.decision import Decision
from callgate_rules.taxonomy import Route

REQUEST_ID_META = "callgate/request_id"
RUN_ID_META = "callgate/run_id"
RUN_ID_HEADER = "callgate-run-id"
CONVERSATION_META = "callgate/conversation"
INTENT_META = "callgate/intent"
ROUTE_META = "callgate/route"
ERROR_CLASS_META = "callgate/error_class"
REFERENCE_META = "callgate/confirmation_reference"
REVIEW_META = "callgate/review_id"

PASSED_THROUGH = (Route.RETURN_RESULT, Route.RETURN_RECEIPT)


def decision_meta(decision: Decision) -> dict[str, Any]:
    meta: dict[str, Any] = {ROUTE_META: str(decision.route)}
    if decision.error_class is not None:
        meta[ERROR_CLASS_META] = str(decision.error_class)
    if decision.operation_id is not None:
        meta[OPERATION_ID_META] = decision.operation_id
    review_id = decision.extra.get("review_id")
    if review_id:
        meta[REVIEW_META] = review_id
    return meta


def result_of(decision: Decision) -> types.CallToolResult:
    """The client's answer to one decided call."""
    meta = decision_meta(decision)
    if (decision.route in PASSED_THROUGH and isinstance(decision.result, dict)
            and "content" in decision.result):
        result = types.CallToolResult.model_validate(decision.result)
        result.meta = {**(result.meta or {}), **meta}
        return result
    return error_result(decision.agent_message, meta)


def error_result(text: str, meta: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True,
                                _meta=meta)


def declined(decision: Decision, why: str) -> types.CallToolResult:
    """A held write a person did not approve: refused, nothing written."""
    meta = {**decision_meta(decision), ROUTE_META: str(Route.REFUSE)}
    return error_result(
        f"{decision.tool} was not executed: {why}; nothing was written. Do not send this "
        "call again unless the user asks for it anew.", meta)


def pending(decision: Decision, reference: str) -> types.CallToolResult:
    """A held write waiting for a person who confirms out of band. The model is told what
    happens in plain words, never an operator's command (``callgate review resolve`` is for
    the person, in the docs and ``callgate review list``)."""
    meta = {**decision_meta(decision), REFERENCE_META: reference}
    return error_result(
        f"{decision.agent_message}\n\nWhat a person is asked to confirm:\n{decision.draft}\n\n"
        f"Confirmation reference: {reference}. Nothing has been written yet. A person "
        "decides whether it may be carried out. Once they have approved it, the same call "
        "in the same request carries it out; if they decline it, it is refused. Tell the "
        "user it is waiting for approval.", meta)
