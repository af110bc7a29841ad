"""What an approval hook shows a person, without side effects, and how the approval lands.

A framework's own approval step (the OpenAI Agents SDK's ``needs_approval``, pydantic-ai's
deferred tools, LangGraph's ``interrupt``) runs *before* the tool does. ``Gate.preview``
answers it: check's decision (steps 1–4 and the route, nothing executed, nothing held) and,
for a write that needs a person, the draft the person reads — provenance warnings included —
and a confirmation token bound, as ``handle``'s are, to the operation ID, the actor and the
arguments.

``approve`` is the other half: once the person said yes, the call is handled as usual (the
write is held for confirmation, exactly as ``handle`` holds it) and the preview's token then
confirms it through ``Gate.confirm`` — the same single-use claim, the same second check of
the actor's rights, the same receipt. A token for other arguments or another actor finds no
held operation or fails its signature; a second approval finds the receipt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from callgate_rules import confirmation
from callgate_rules.canonical import operation_keys
from callgate_rules.confirmation.drafts import Draft
from callgate_rules.documents.model import Routing
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.record import draft
from callgate_rules.taxonomy import ErrorClass

if TYPE_CHECKING:  # types only: the gate calls ``previewed``
    from callgate_rules.pipeline.budgets import Run
    from callgate_rules.pipeline.gate import Gate
    from callgate_rules.pipeline.progress import Progress


@dataclass(frozen=True)
class Preview:
    """What a person approving one call needs; nothing was executed or stored to make it."""

    decision: Decision  # check's decision: its route, messages and trace
    operation_id: str | None = None  # the write's operation ID under this request ID
    draft: str | None = None  # what the person confirms, with provenance warnings
    confirmation_token: str | None = None  # confirms it through ``approve``
    expires_at: datetime | None = None  # the token's expiry
    # the same draft as rows (confirmation.drafts), for a host that draws its own dialog
    draft_rows: Draft | None = None

    @property
    def needs_confirmation(self) -> bool:
        """Does a person have to approve this call before it runs?"""
        return self.decision.error_class == ErrorClass.CONFIRMATION_REQUIRED


def previewed(decision: Decision, progress: Progress, actor: Mapping[str, Any],
              request_id: str, *, secret: bytes, routing: Routing, now: datetime) -> Preview:
    """The preview of a checked call: for a write that waits for a person, its draft and a
    token made exactly as ``Gate.handle`` would make them for the held operation."""
    contract, call = progress.contract, progress.call
    if (decision.error_class != ErrorClass.CONFIRMATION_REQUIRED or contract is None
            or call is None):
        return Preview(decision)
    operation, hashed = operation_keys(request_id, contract.name, contract.document.name,
                                       call.arguments)
    seconds = contract.confirmation.expires_seconds or routing.confirmation_expires_seconds
    expires_at = now + timedelta(seconds=seconds)
    token = confirmation.issue(secret, operation, actor, hashed, expires_at)
    held = draft(contract, progress.variables, progress.conversation, decision.rule,
                 decision.user_message)
    return Preview(decision, operation, held.text(), token, expires_at, held)


def approve(gate: Gate, model_output: Any, token: str, *, actor: Mapping[str, Any],
            request_id: str, confirmed_by: str, run: Run | None = None,
            session: Mapping[str, Any] | None = None, conversation: Any = None) -> Decision:
    """Run a call a person approved from its preview: ``handle`` holds the write (or answers
    as it always would: a refusal, a receipt), then ``confirm`` executes it with the
    preview's token. Call it with the same request ID the preview was made under."""
    held = gate.handle(model_output, actor=actor, request_id=request_id, run=run,
                       session=session, conversation=conversation)
    if held.error_class != ErrorClass.CONFIRMATION_REQUIRED or held.operation_id is None:
        return held
    return gate.confirm(token, actor=actor, confirmed_by=confirmed_by, session=session)
