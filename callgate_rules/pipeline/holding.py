"""A write that needs a person, held: its draft kept in the receipt (so any instance's review
page and the API show it), a confirmation token bound to the operation, the actor, the
arguments and the expiry, and the decision that says so (route ``await_confirmation``)."""

from __future__ import annotations

from datetime import datetime, timedelta

from callgate_rules import confirmation
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.machine import WriteMachine
from callgate_rules.pipeline.progress import Progress
from callgate_rules.pipeline.record import draft
from callgate_rules.store.base import ReceiptState


def held_for_person(decision: Decision, progress: Progress, machine: WriteMachine, *,
                    secret: bytes, now: datetime, default_expiry: float) -> Decision | None:
    """``decision``'s write held for a person until its contract's confirmation expires
    (``default_expiry`` seconds, the routing table's, when it does not say), with its draft
    and a token signed with ``secret``; ``None`` when its receipt is past waiting (the same
    call was confirmed meanwhile)."""
    contract, operation = machine.contract, machine.operation
    seconds = contract.confirmation.expires_seconds or default_expiry
    expires_at = now + timedelta(seconds=seconds)
    held = draft(contract, progress.variables, progress.conversation, decision.rule,
                 decision.user_message)
    receipt = machine.store.hold_for_confirmation(operation, expires_at=expires_at, now=now,
                                                  detail=held.stored())
    if receipt.state != ReceiptState.AWAITING_CONFIRMATION:
        return None
    token = confirmation.issue(secret, operation.operation_id, machine.actor,
                               operation.args_hash, expires_at)
    progress.trace.append(("route", "confirmation", "draft held",
                           f"until {expires_at.isoformat()}"))
    return decision.replace(operation_id=operation.operation_id, draft=held.text(),
                            confirmation_token=token, trace=tuple(progress.trace),
                            log={**decision.log, "operation_id": operation.operation_id,
                                 "receipt_state": str(receipt.state)})
