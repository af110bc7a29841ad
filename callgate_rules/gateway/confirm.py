"""A write that needs a person: asked through MCP elicitation when the client can show it,
otherwise held with a confirmation reference a person resolves out of band.

- **Elicitation** (the client declared the ``elicitation`` capability): the draft, with
  its warnings and their evidence, is shown as a form with one ``approve`` checkbox. The
  draft is ``Decision.draft``, the text ``confirmation.drafts`` renders, the one renderer
  of drafts: this module formats no argument itself. Accepted and
  approved → ``Gate.confirm`` (rights checked again) → executed. Declined, cancelled,
  not approved or unanswered within the confirmation timeout → refused, nothing written.
  On a 2025 (handshake) connection the gateway sends ``elicitation/create`` while the call
  waits; on a 2026-07-28 connection it answers ``input_required`` with the same request,
  and the client's retry carries the answer (the request is carried in a signed
  ``requestState``, so the retry is the same operation).
- **A confirmation reference** (no elicitation): the draft goes to the review queue as an
  item of reason ``confirmation_required`` (``callgate review list``/``take`` show it);
  ``callgate review resolve ID --as succeeded`` approves, ``--as failed`` declines. The
  client gets the draft and the reference; the same call sent again in the same request
  then runs (approved), is refused (declined), or gets the reference again (still open).
  The person recorded as confirming is the one who resolved the item.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from callgate_rules.gateway.results import declined, pending
from callgate_rules.integrations.identity import Identity
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.gate import Gate
from callgate_rules.store.base import NewReviewItem, ReviewItem, ReviewStatus

CONFIRM_KEY = "callgate/confirm"  # the key of the elicitation in an input_required result
CONFIRMATION_REASON = "confirmation_required"
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve",
                               "description": "Carry out this write exactly as shown"}},
    "required": ["approve"],
}

Settled = Decision | types.CallToolResult | types.InputRequiredResult


@dataclass
class Confirmer:
    """Settles a held write with a person, by elicitation or by reference."""

    gate: Gate
    timeout: float  # how long an elicitation waits for the person

    async def settle(self, ctx: ServerRequestContext[Any, Any],
                     params: types.CallToolRequestParams, decision: Decision,
                     identity: Identity, request_id: str) -> Settled:
        if not _can_elicit(ctx):
            return await self._by_reference(decision, identity)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return await self._round_trip(params, decision, identity, request_id)
        try:
            with anyio.fail_after(self.timeout):
                answer = await ctx.session.elicit_form(
                    message=_message(decision), requested_schema=APPROVAL_SCHEMA,
                    related_request_id=ctx.request_id)
        except TimeoutError:
            return declined(decision, f"no one confirmed it within {self.timeout:g}s")
        return await self._answered(answer, decision, identity)

    async def _round_trip(self, params: types.CallToolRequestParams, decision: Decision,
                          identity: Identity, request_id: str) -> Settled:
        answer = (params.input_responses or {}).get(CONFIRM_KEY)
        if isinstance(answer, types.ElicitResult):
            return await self._answered(answer, decision, identity)
        request = types.ElicitRequest(params=types.ElicitRequestFormParams(
            message=_message(decision), requested_schema=APPROVAL_SCHEMA))
        return types.InputRequiredResult(
            input_requests={CONFIRM_KEY: request},
            request_state=seal(self.gate.secret, {"request_id": request_id}))

    async def _answered(self, answer: types.ElicitResult, decision: Decision,
                        identity: Identity) -> Settled:
        if answer.action != "accept":
            return declined(decision, f"the person chose {answer.action}")
        if not (answer.content or {}).get("approve"):
            return declined(decision, "the person did not approve it")
        return await self._confirm(decision, identity, identity.principal)

    async def _confirm(self, decision: Decision, identity: Identity,
                       confirmed_by: str) -> Decision:
        assert decision.confirmation_token is not None
        return await anyio.to_thread.run_sync(partial(
            self.gate.confirm, decision.confirmation_token, actor=identity.actor,
            confirmed_by=confirmed_by, session=identity.session))

    async def _by_reference(self, decision: Decision, identity: Identity) -> Settled:
        item = await anyio.to_thread.run_sync(
            partial(reference_item, self.gate, decision, identity))
        if item.status != ReviewStatus.RESOLVED:
            return pending(decision, item.review_id)
        if item.resolution != "succeeded":
            # the reviewer's note is for people: nothing an operator types reaches the model
            return declined(decision, "a person declined it")
        return await self._confirm(decision, identity, item.resolved_by or "reviewer")


def _can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    if not ctx.session.check_client_capability(wanted):
        return False
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or ctx.session.can_send_request


def _message(decision: Decision) -> str:
    return (f"An assistant wants to carry out {decision.tool}. Approve only if this is "
            f"what you want done:\n\n{decision.draft}")


# The review queue as the place of out-of-band confirmations --------------------------------


def reference_item(gate: Gate, decision: Decision, identity: Identity) -> ReviewItem:
    """The review item that confirms ``decision``'s held write: the newest one for its
    operation (a person's answer stands), else a new open one. It names the operation
    only in its payload: an item *on* the operation would move the held receipt out of
    ``awaiting_confirmation``, and the confirmation could then never run."""
    store = gate.store
    operation_id = decision.operation_id
    mine = [item for item in store.list_reviews()
            if item.reason == CONFIRMATION_REASON and item.operation_id is None
            and item.payload.get("operation_id") == operation_id]
    if mine:
        return max(mine, key=lambda item: item.created_at)
    first_line = (decision.draft or "").splitlines()[0] if decision.draft else ""
    return store.open_review(NewReviewItem(
        tool=decision.tool or "", reason=CONFIRMATION_REASON,
        summary=f"confirm {decision.tool} {operation_id}: {first_line}",
        payload={"operation_id": operation_id, "draft": decision.draft,
                 "arguments": dict(decision.arguments or {}), "actor": dict(identity.actor),
                 "requested_by": identity.principal}),
        now=datetime.now(UTC))


# A request state the client echoes and cannot forge ----------------------------------------


def seal(secret: bytes, state: Mapping[str, Any]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(dict(state), sort_keys=True).encode()).decode()
    return f"{body}.{_signature(secret, body)}"


def unseal(secret: bytes, token: str | None) -> dict[str, Any] | None:
    """The state ``seal`` made, or ``None`` for anything else (absent, altered, foreign)."""
    if not token or token.count(".") != 1:
        return None
    body, signature = token.split(".")
    if not hmac.compare_digest(signature, _signature(secret, body)):
        return None
    try:
        state = json.loads(base64.urlsafe_b64decode(body.encode()))
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


def _signature(secret: bytes, body: str) -> str:
    digest = hmac.new(secret, b"callgate/request-state:" + body.encode(), hashlib.sha256)
    return digest.hexdigest()
