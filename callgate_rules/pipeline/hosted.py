"""Writes the host executes itself: decide, claim, finish, reconcile and confirm as a library
API — the decision service's ``/v1`` endpoints are exactly this, over HTTP.

A host in any language keeps callgate's guarantees without handing it an executor:

    decide    steps 1–4 and the route; an allowed write gets its operation ID, a write that
              needs a person is held with its draft and a confirmation token
    claim     the atomic claim: EXECUTE now (operation ID, deadline, lease) or the earlier
              receipt, never a second execution
    finish    what the destination said → verified, the receipt, the next step (DONE with the
              result, RETRY or EXECUTE again after a delay, RECONCILE, DONE in review)
    reconcile what the destination holds under the operation ID → late confirmation, a safe
              resend, or review
    confirm   a confirmation token and the confirming person → rights re-checked, and the
              write claimed for the host to EXECUTE

Every step drives the gate's own ``WriteMachine`` (``machine.HOST_STEPS``): it pauses where
the gate would call an executor or sleep, and resumes with what the host reports, so the
claim, the verification, the retry budget and the reconciliation are the library's, not a
copy; steps 1–4, the hold and the record are the gate's too, through the small interface
``Gate`` keeps for such flows (``decide_steps``, ``write_machine``, ``hold_for_person``,
``recorded``). The host holds the lease it is given (``Step.lease``) and passes it back:
a host whose lease expired and was taken over is fenced off (``LeaseLost``), and one that
dies between claim and finish leaves a lease that the next claim turns into
reconciliation.

A person approving or declining on a review page (``approve``, ``decline``) releases or
refuses a held write without the token: the approver's login is the authority, recorded in
the receipt. A released write waits as "failed before sending" (state ``failed``, class
``transient``, detail naming the approver), which the host's next claim takes as safe to
execute.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import quote, unquote

from callgate_rules import confirmation
from callgate_rules.canonical import canonical_json
from callgate_rules.documents.model import GateConfig
from callgate_rules.errors import (
    CallgateError,
    ConfirmationError,
    LeaseLost,
    OperationIdReused,
    StoreError,
)
from callgate_rules.pipeline.approvals import record_approval
from callgate_rules.pipeline.budgets import Run, goes_on, seconds
from callgate_rules.pipeline.decision import FROM_RECORD, Decision
from callgate_rules.pipeline.endings import Ending
from callgate_rules.pipeline.execute import ExecutionRequest, Failed, Sent
from callgate_rules.pipeline.gate import STORE_DOWN, Gate
from callgate_rules.pipeline.history import entry_of, kept_in_history, kept_result, run_history_now
from callgate_rules.pipeline.machine import HOST_STEPS, State, WriteMachine, store_failed
from callgate_rules.pipeline.progress import Progress
from callgate_rules.pipeline.runs import run_from_history
from callgate_rules.store.base import Receipt, ReceiptState, holds_lease
from callgate_rules.store.history import HistoryEntry
from callgate_rules.store.scoping import Scope
from callgate_rules.taxonomy import FAILURES, ErrorClass, Route

Observer = Callable[[Decision], None]  # called with every decision the flow records


class Action(StrEnum):
    EXECUTE = "execute"  # send it now under operation_id, answered before deadline
    RECONCILE = "reconcile"  # ask the destination what it holds under operation_id
    RETRY = "retry"  # claim again after retry_after seconds
    DONE = "done"  # the decision says how it ended


@dataclass(frozen=True)
class Step:
    """What the host does next for one operation."""

    action: Action
    operation_id: str
    decision: Decision | None = None  # for DONE: route, messages, result or receipt
    lease: str | None = None  # pass it back with finish and reconcile
    lease_expires_at: datetime | None = None
    deadline: datetime | None = None  # for EXECUTE: the answer must come before this
    retry_after: float | None = None  # wait this long first (EXECUTE, RECONCILE, RETRY)
    arguments: Mapping[str, Any] | None = None  # for EXECUTE: the validated arguments


@dataclass(frozen=True)
class Failure:
    """A host's report that the destination call failed. ``sent`` says whether the request
    may have reached the destination: before sending a retry is safe, after it only
    reconciliation decides. ``error_class`` narrows it (``permanent``, ``conflict``: the
    destination answered and refused)."""

    sent: bool
    detail: str = ""
    error_class: ErrorClass | None = None
    retry_after: float | None = None

    def outcome(self) -> Failed:
        error_class = self.error_class or (
            ErrorClass.UNKNOWN_OUTCOME if self.sent else ErrorClass.TRANSIENT)
        return Failed(error_class, self.detail or f"the host reported {error_class}",
                      self.retry_after)


class UnknownOperation(CallgateError):
    """No operation of this actor has this ID (another actor's reads the same: unknown)."""

    exit_code = 2


REPORTED_CLASSES = frozenset({ErrorClass.TRANSIENT, ErrorClass.UNKNOWN_OUTCOME,
                              ErrorClass.PERMANENT, ErrorClass.CONFLICT})


def host_executes(request: ExecutionRequest) -> Any:
    """The executor bound to every tool of a hosted gate: the host sends, never the gate."""
    raise RuntimeError(f"{request.tool} is executed by the host; the hosted flow pauses "
                       "before sending")


class HostedWrites:
    """The hosted flow over one compiled configuration and one receipt store."""

    def __init__(self, config: GateConfig, *, observers: Sequence[Observer] = (),
                 **bindings: Any) -> None:
        executors = {name: host_executes for name in config.contracts}
        self.gate = Gate(config, executors=executors, **bindings)
        self.observers = list(observers)

    # -- decide --------------------------------------------------------------------------

    def decide(self, model_output: Any, *, actor: Mapping[str, Any], request_id: str,
               session: Mapping[str, Any] | None = None, conversation: Any = None,
               now: datetime | None = None, run_id: str | None = None) -> Decision:
        """Steps 1–4 and the route. An allowed write carries its operation ID (claim it
        next); one that needs a person is held, with its draft and confirmation token.
        ``run_id`` names the agent run: its budgets hold across requests (``pipeline.runs``)
        and the proposal joins its history."""
        decision, progress = self._checked(model_output, actor, request_id, session=session,
                                           conversation=conversation, now=now, run_id=run_id)
        return self.decided(decision, progress, actor=actor, request_id=request_id,
                            run_id=run_id)

    def decided(self, decision: Decision, progress: Progress, *, actor: Mapping[str, Any],
                request_id: str, run_id: str | None = None) -> Decision:
        """The rest of ``decide`` once steps 1–4 and the route are done (``Gate.decide_steps``,
        outside a named run): an allowed write's operation ID, or its hold (``holds``), the
        run's history, the record. The decision service runs the steps on its event loop
        and finishes here, in a worker thread only when the store is written."""
        contract = progress.contract
        if goes_on(decision) and contract is not None and contract.is_write:
            decision = self._write_decided(decision, progress, actor, request_id)
        return self._record(self._remembered(decision, progress, run_id, request_id))

    @staticmethod
    def holds(decision: Decision, progress: Progress) -> bool:
        """Whether ``decided`` holds the write for a person, reading and writing the store:
        outside a named run, the only part of a decision that does."""
        contract = progress.contract
        return (goes_on(decision) and contract is not None and contract.is_write and
                decision.error_class == ErrorClass.CONFIRMATION_REQUIRED)

    def _write_decided(self, decision: Decision, progress: Progress,
                       actor: Mapping[str, Any], request_id: str) -> Decision:
        """An allowed write with its operation ID (its log names it when read), or held for
        a person."""
        if not self.holds(decision, progress):
            operation = self.gate.operation_id(progress, request_id)
            return decision.replace(operation_id=operation, log=FROM_RECORD)
        try:
            machine = self.gate.write_machine(progress, actor, request_id)
            # never another actor's held write: no token for it, no hold over it (an
            # allowed write's ID alone says nothing; its claim checks the same)
            self._not_anothers(machine.operation.operation_id, actor, request_id)
            return self._hold(decision, progress, machine)
        except OperationIdReused:
            raise  # a refusal (409), not the store failing
        except StoreError as error:
            return self._ended(decision, progress, store_failed(
                error, False, self.gate.config.routing.route_for(ErrorClass.TRANSIENT)), None)

    # -- claim, finish, reconcile ----------------------------------------------------------

    def claim(self, model_output: Any, *, actor: Mapping[str, Any], request_id: str,
              session: Mapping[str, Any] | None = None, conversation: Any = None,
              now: datetime | None = None, run_id: str | None = None) -> Step:
        """Decide, and for an allowed write claim it: EXECUTE, or the earlier receipt."""
        decision, progress = self._checked(model_output, actor, request_id, session=session,
                                           conversation=conversation, now=now, run_id=run_id)
        contract = progress.contract
        if (not goes_on(decision) or contract is None or not contract.is_write or
                decision.error_class == ErrorClass.CONFIRMATION_REQUIRED):  # held, as by decide
            if goes_on(decision) and contract is not None and contract.is_write:
                decision = self._write_decided(decision, progress, actor, request_id)
            done = self._record(self._remembered(decision, progress, run_id, request_id))
            return Step(Action.DONE, done.operation_id or "", done)
        machine = self._hosted_machine(progress, actor, request_id, rule=decision.rule)
        operation = machine.operation.operation_id
        self._not_anothers(operation, actor, request_id)
        if run_id is not None and not self._in_run(operation, run_id):  # else decide did
            self._remembered(decision.replace(operation_id=operation), progress, run_id,
                             request_id)
        return self._paused(decision, progress, machine, machine.advance(State.CLAIM,
                                                                         HOST_STEPS))

    def claim_operation(self, operation_id: str, *, actor: Mapping[str, Any],
                        session: Mapping[str, Any] | None = None) -> Step:
        """Claim an operation already known to the store: after a failure before sending,
        after a person released it, or after its holder's lease expired (RECONCILE).
        A write a person released is decided again with the ``session`` the host passes
        now, as ``confirm`` does: if the actor's rights no longer hold, nothing runs."""
        receipt = self._receipt(operation_id, actor)
        if released_by_a_person(receipt):  # the approval's time is checked again here
            lapsed = approval_lapsed(receipt, self.gate.clock())
            if lapsed is not None:
                return self._done(self.gate.plans.router.refused_confirmation(lapsed))
        decision, progress, machine = self._resumed(receipt, session, lease=None)
        if released_by_a_person(receipt) and not goes_on(decision):
            return self._done(self.gate.plans.router.refused_confirmation(
                f"the call no longer passes its checks ({decision.error_class or 'allowed'})",
                decision))
        if released_by_a_person(receipt) and receipt.confirmed_by is not None:  # approval_covers
            record_approval(self.gate.histories, self.gate.count, progress.variables,
                            receipt, approved_by=receipt.confirmed_by, now=self.gate.clock())
        return self._paused(decision, progress, machine, machine.advance(State.CLAIM,
                                                                         HOST_STEPS))

    def finish(self, operation_id: str, lease: str, *, actor: Mapping[str, Any],
               result: Any = None, failure: Failure | None = None,
               session: Mapping[str, Any] | None = None) -> Step:
        """The destination's answer (``result``) or its failure, for the lease holder."""
        receipt = self._receipt(operation_id, actor)
        decision, progress, machine = self._resumed(receipt, session, lease)
        machine.sent = True
        machine.answer = Sent(result) if failure is None else failure.outcome()
        return self._paused(decision, progress, machine,
                            machine.advance(State.ANSWERED, HOST_STEPS))

    def reconcile(self, operation_id: str, lease: str, *, actor: Mapping[str, Any],
                  found: Any, session: Mapping[str, Any] | None = None) -> Step:
        """What the destination holds under the operation ID (``None``: nothing)."""
        receipt = self._receipt(operation_id, actor)
        decision, progress, machine = self._resumed(receipt, session, lease)
        machine.sent = True
        machine.finder = lambda tool, operation: found
        return self._paused(decision, progress, machine,
                            machine.advance(State.RECONCILE, HOST_STEPS))

    # -- confirmation ----------------------------------------------------------------------

    def confirm(self, token: str, *, actor: Mapping[str, Any], confirmed_by: str,
                session: Mapping[str, Any] | None = None, scope: Scope | None = None) -> Step:
        """A person confirmed: the token is verified (operation, actor, arguments, expiry),
        the actor's rights are checked again, and the write is claimed for the host."""
        gate, router = self.gate, self.gate.plans.router
        now = gate.clock()
        try:
            if not self._confirmable(token, actor, scope):  # another actor's: as if missing
                raise ConfirmationError(confirmation.NOTHING_WAITING)
            receipt = confirmation.waiting_receipt(gate.store, gate.secret, token, actor, now)
        except ConfirmationError as error:
            return self._done(router.refused_confirmation(str(error)))
        except StoreError as error:
            return self._done(router.refused_confirmation(STORE_DOWN, detail=str(error)))
        decision, progress, machine = self._resumed(receipt, session, lease=None)
        if receipt.state == ReceiptState.AWAITING_CONFIRMATION and not goes_on(decision):
            return self._done(router.refused_confirmation(
                f"the call no longer passes its checks ({decision.error_class or 'allowed'})",
                decision))
        try:
            claim = gate.store.claim_confirmed(receipt.operation_id, confirmed_by=confirmed_by,
                                               worker=machine.worker, lease=machine.lease,
                                               now=now)
        except StoreError as error:
            return self._done(router.refused_confirmation(STORE_DOWN, decision, str(error)))
        if not claim.may_execute:  # replayed, or released on the page: claim as usual
            return self.claim_operation(receipt.operation_id, actor=actor, session=session)
        progress.trace.append(("execute", "confirmation", "accepted", f"by {confirmed_by}"))
        record_approval(gate.histories, gate.count, progress.variables, receipt,  # covers
                        approved_by=confirmed_by, now=now)
        return self._paused(decision, progress, machine, State.SEND)

    def approve(self, operation_id: str, *, approver: str, note: str = "") -> Receipt:
        """A person approved a held write on the review page: released for the host's next
        claim, with the approver recorded. The approver's login is the authority for the
        approval; the actor's rights, which may depend on session facts only the host
        has (none are stored), are checked again when the host claims it
        (``claim_operation`` with the session)."""
        receipt = self._held(operation_id)
        now = self.gate.clock()  # the server's clock decides, at the moment of approval
        expires = receipt.confirmation_expires_at
        if expires is not None and now >= expires:
            raise ConfirmationExpired(
                f"this confirmation expired at {expires.isoformat()} and can no longer be "
                "approved; nothing was executed. The assistant has to propose the call again.")
        said = (f"confirmed by {approver}; released for the host to execute" +
            (f" ({note})" if note else ""))
        return self._settle(receipt, approver, ErrorClass.TRANSIENT, said, now)

    def decline(self, operation_id: str, *, by: str, note: str = "") -> Receipt:
        """A person declined a held write: it is refused for good, with who and why (an
        expired one too: declining runs nothing)."""
        receipt = self._held(operation_id)
        said = f"declined by {by}" + (f": {note}" if note else "")
        return self._settle(receipt, by, ErrorClass.FORBIDDEN, said)

    def pending(self, limit: int = 100, scope: Scope | None = None) -> list[Receipt]:
        """The writes waiting for a person, oldest first (their drafts in ``detail``); only
        those ``scope`` admits, when given."""
        return self.gate.store.list_receipts(state=ReceiptState.AWAITING_CONFIRMATION,
                                             limit=limit, scope=scope)

    # -- the parts -------------------------------------------------------------------------

    def _checked(self, model_output: Any, actor: Mapping[str, Any], request_id: str, *,
                 session: Mapping[str, Any] | None, conversation: Any,
                 now: datetime | None, run_id: str | None = None) -> tuple[Decision, Progress]:
        """Steps 1–4 and the route; in a named run, judged against the run's budgets as
        ``Gate.handle`` judges its ``Run`` (a run limit reached takes the limit path)."""
        gate = self.gate
        now = now or gate.clock()
        if run_id is None:
            return gate.decide_steps(model_output, actor, now, request_id=request_id,
                                     session=session, conversation=conversation)
        try:
            # through this process's view of the run: only what changed since is read
            run: Run | None = run_from_history(run_id, run_history_now(
                gate.histories, run_id, now - gate.history_retention)[0], now)
        except StoreError as error:  # the run's budgets must not be judged on a guess
            run, unread = None, error
        decision, progress = gate.decide_steps(model_output, actor, now, request_id=request_id,
                                               session=session, conversation=conversation,
                                               run=run)
        if run is None:
            return self._ended(decision, progress, store_failed(
                unread, False, gate.config.routing.route_for(ErrorClass.TRANSIENT)),
                None), progress
        limit = run.admit(decision, gate.config.routing.budgets, now)
        if limit is not None:
            decision = gate.plans.router.limit_path(decision, limit, actor,
                                                    lambda: gate.store, now)
        return decision, progress

    def _remembered(self, decision: Decision, progress: Progress, run_id: str | None,
                    request_id: str) -> Decision:
        """The decision, recorded in its run's history when it belongs to a named run."""
        if run_id is not None:
            now = self.gate.clock()
            contract = progress.contract
            entry = (entry_of(decision, contract, run_id, request_id, now)
                if contract is not None else HistoryEntry(
                    run_id=run_id, at=now, tool=decision.tool or "", arguments={},
                    route=str(decision.route), request_id=request_id,
                    error_class=str(decision.error_class) if decision.error_class else None))
            kept_in_history(lambda: self.gate.histories.record_history(entry), self.gate.count)
        return decision

    def _run_ended(self, decision: Decision) -> None:
        """A write of a named run ended: a success marks its entries executed (the result
        kept as the history keeps results), a failure is an entry of its own, masked as
        every entry is (the run's failure budget counts it)."""
        operation, histories = decision.operation_id, self.gate.histories
        contract = self.gate.config.contracts.get(decision.tool or "")
        if operation is None or contract is None:
            return
        run_id = histories.run_of(operation)
        if run_id is None:
            return
        now = self.gate.clock()
        if decision.route == Route.RETURN_RESULT:
            histories.mark_executed(operation, at=now, route=str(decision.route),
                                    result=kept_result(contract, decision.result))
        elif decision.error_class in FAILURES:
            receipt = self.gate.store.get(operation)
            histories.record_history(entry_of(decision, contract, run_id, receipt.request_id
                                              if receipt is not None else "", now))

    def _in_run(self, operation_id: str, run_id: str) -> bool:
        """Is the operation in the run's history already (decided there, then claimed)?"""
        try:
            return self.gate.histories.run_of(operation_id) == run_id
        except StoreError:
            return False

    def _hosted_machine(self, progress: Progress, actor: Mapping[str, Any], request_id: str,
                        lease: str | None = None, *, rule: str | None = None) -> WriteMachine:
        machine = self.gate.write_machine(progress, actor, request_id)
        # The lease the host holds names when it was taken: the call deadline runs from there;
        # and the rule that allowed the write, which finish names (``_lease_rule``).
        machine.worker = lease or (f"host:{uuid.uuid4().hex}:{quote(rule or '', safe='')}:"
                                   f"{int(self.gate.clock().timestamp() * 1000)}")
        return machine

    def _resumed(self, receipt: Receipt, session: Mapping[str, Any] | None,
                 lease: str | None) -> tuple[Decision, Progress, WriteMachine]:
        """The decision and machine of a stored operation, decided again from its receipt
        (the variables verify and reconcile read), its budget carried over: the retries its
        attempts spent, and the call deadline from when the lease was taken (each claim
        that takes one is an attempt, so both together bound the whole operation). Rules
        that read ``history`` read the operation's run, as ``Gate.confirm`` has them."""
        gate, now = self.gate, self.gate.clock()
        call = {"name": receipt.tool, "arguments": dict(receipt.arguments)}
        run_id = (gate.histories.run_of(receipt.operation_id)
            if gate.plans.records_history else None)
        decision, progress = gate.decide_steps(
            call, receipt.actor, now, request_id=receipt.request_id, session=session,
            run=None if run_id is None else Run(started_at=now, run_id=run_id))
        if progress.contract is None or progress.call is None:
            raise UnknownOperation(f"operation {receipt.operation_id!r} names tool "
                                   f"{receipt.tool!r}, which the documents no longer have")
        if lease is not None and not holds_lease(receipt, lease):
            raise LeaseLost(f"lease {lease!r} no longer holds operation "
                            f"{receipt.operation_id!r} (it is {receipt.state}); claim it again")
        allowed_by = _lease_rule(lease) if lease is not None else None
        if allowed_by:  # the rule that allowed it at the claim, not today's check's verdict
            decision = decision.replace(rule=allowed_by,
                                        log={**decision.log, "rule": allowed_by})
        machine = self._hosted_machine(progress, receipt.actor, receipt.request_id, lease,
                                       rule=decision.rule if goes_on(decision) else None)
        retries = machine.retries
        retries.count = max(receipt.attempts - 1, 0)
        retries.deadline = (_lease_taken(machine.worker, receipt) +
            seconds(retries.budgets.call_deadline_seconds))
        return decision, progress, machine

    def _paused(self, decision: Decision, progress: Progress, machine: WriteMachine,
                state: State | Ending) -> Step:
        """The step the host takes where the machine paused, or the recorded ending."""
        operation = machine.operation.operation_id
        if isinstance(state, Ending):
            return self._done(self._ended(decision, progress, state, operation))
        now = self.gate.clock()
        wait = machine.delay if state == State.SLEEP else None
        then = machine.after_wait if state == State.SLEEP else state
        if then == State.CLAIM:  # nothing held: come back and claim
            return Step(Action.RETRY, operation, retry_after=wait)
        if then == State.SEND and wait is None:
            request = machine.request()
            if request is None:  # the call deadline passed: the machine's limit path
                return self._paused(decision, progress, machine, machine.advance(State.SEND))
            deadline = request.deadline
        else:
            deadline = None
        expires = now + machine.lease
        action = Action.EXECUTE if then == State.SEND else Action.RECONCILE
        if wait is not None or action == Action.RECONCILE:  # a lease claimed earlier
            try:
                self.gate.store.renew(operation, worker=machine.worker, lease=machine.lease,
                                      now=now)
            except StoreError as error:
                return self._done(self._ended(decision, progress, store_failed(
                    error, machine.sent, machine.route_of(ErrorClass.TRANSIENT)), operation))
        return Step(action, operation, lease=machine.worker, lease_expires_at=expires,
                    deadline=deadline, retry_after=wait,
                    arguments=machine.operation.arguments if action == Action.EXECUTE
                    else None)

    def _hold(self, decision: Decision, progress: Progress, machine: WriteMachine) -> Decision:
        """A write that needs a person: held with its draft (the review page shows it) and a
        token, as the gate holds one; one already released or done is left to the host's
        claim (the gate would run it here)."""
        operation = machine.operation.operation_id
        return self.gate.hold_for_person(decision, progress, machine) or decision.replace(
            operation_id=operation, log=FROM_RECORD)

    def _held(self, operation_id: str) -> Receipt:
        receipt = self.gate.store.get(operation_id)
        if receipt is None:
            raise UnknownOperation(f"no operation {operation_id!r}")
        if receipt.state != ReceiptState.AWAITING_CONFIRMATION:
            raise AlreadyDecided(already_decided(receipt))
        return receipt

    def _not_anothers(self, operation_id: str, actor: Mapping[str, Any],
                      request_id: str) -> None:
        """An operation ID is made from the request ID and the call, not the actor: a
        decision or a claim that meets another actor's receipt under it (a request ID
        reused) is refused, never answered with that receipt, its token or its hold, nor
        allowed to take its claim over. (The service puts the caller's pinned identity into
        the request ID, ``server.api.scoped_request_id``, so another tenant never meets
        it at all.)"""
        try:
            found = self.gate.store.get(operation_id)
        except StoreError:
            return  # the claim itself meets the store's failure, and routes it
        if found is not None and canonical_json(found.actor) != canonical_json(dict(actor)):
            raise OperationIdReused(f"request_id {request_id!r} already names another call; "
                                    "send each call with a request_id of its own")

    def _confirmable(self, token: str, actor: Mapping[str, Any], scope: Scope | None) -> bool:
        """May this caller use the token at all: its operation, if stored, is the actor's
        and in the caller's scope (anything else answers as a missing operation)."""
        found = self.gate.store.get(confirmation.read(token).operation_id)
        if found is None:
            return True  # waiting_receipt says it is missing
        return (canonical_json(found.actor) == canonical_json(dict(actor)) and
            (scope is None or scope.admits(found.tool, found.actor)))

    def _settle(self, receipt: Receipt, by: str, error_class: ErrorClass,
                detail: str, now: datetime | None = None) -> Receipt:
        """Take a held write out of waiting: as the person ``by``, then record it. The
        store's ``claim_confirmed`` moves only a waiting receipt, so of two people deciding
        at once one is recorded and the other told it was already decided."""
        store, now = self.gate.store, now or self.gate.clock()
        worker = f"page:{uuid.uuid4().hex}"
        claim = store.claim_confirmed(receipt.operation_id, confirmed_by=by, worker=worker,
                                      lease=timedelta(seconds=30), now=now)
        if not claim.may_execute:
            raise AlreadyDecided(already_decided(claim.receipt))
        return store.finish(receipt.operation_id, worker=worker, state=ReceiptState.FAILED,
                            now=now, error_class=str(error_class), detail=detail)

    def _receipt(self, operation_id: str, actor: Mapping[str, Any]) -> Receipt:
        receipt = self.gate.store.get(operation_id)
        if receipt is None or canonical_json(receipt.actor) != canonical_json(dict(actor)):
            raise UnknownOperation(f"no operation {operation_id!r} for this actor")
        return receipt

    def _ended(self, decision: Decision, progress: Progress, ending: Ending,
               operation: str | None) -> Decision:
        return self.gate.plans.router.ended(decision, progress, ending, operation)

    def _done(self, decision: Decision) -> Step:
        kept_in_history(lambda: self._run_ended(decision), self.gate.count)
        return Step(Action.DONE, decision.operation_id or "", self._record(decision))

    def _record(self, decision: Decision) -> Decision:
        recorded = self.gate.recorded(decision)
        for observer in self.observers:
            observer(recorded)
        return recorded


class ConfirmationExpired(ConfirmationError):
    """A person tried to approve a draft after its confirmation expired."""


class AlreadyDecided(ConfirmationError):
    """A person tried to approve or decline a draft someone already decided."""


def already_decided(receipt: Receipt) -> str:
    """Who decided a draft before, in words for the person who tried again."""
    operation = receipt.operation_id
    if receipt.confirmed_by is None:
        return (f"operation {operation!r} is no longer waiting for a person (it is "
                f"{receipt.state}); nothing was changed")
    verdict = ("declined" if receipt.error_class == ErrorClass.FORBIDDEN and
        receipt.state == ReceiptState.FAILED else "approved")
    when = f" at {receipt.confirmed_at.isoformat()}" if receipt.confirmed_at else ""
    return (f"already decided: operation {operation!r} was {verdict} by "
            f"{receipt.confirmed_by}{when}; a decision is recorded once, nothing was changed")


def approval_lapsed(receipt: Receipt, now: datetime) -> str | None:
    """Why a write a person released may not run now, or ``None``: the approval must have
    been given before the confirmation expired, and the host must claim it before then too
    (an expired draft never executes, however it was released)."""
    expires = receipt.confirmation_expires_at
    if expires is None:
        return None
    if receipt.confirmed_at is None or receipt.confirmed_at >= expires:
        return f"it was approved after its confirmation expired at {expires.isoformat()}"
    if now >= expires:
        return (f"its confirmation expired at {expires.isoformat()}, before the host claimed "
                "the approved write")
    return None


def released_by_a_person(receipt: Receipt) -> bool:
    """Was the write confirmed or approved by a person, and is it waiting to be sent?"""
    return (receipt.confirmed_by is not None and receipt.state == ReceiptState.FAILED and
        receipt.error_class == ErrorClass.TRANSIENT)


def _lease_rule(lease: str) -> str | None:
    """The rule that allowed the write a lease of ``_hosted_machine``'s making was taken for
    (the store fences the lease, so a host cannot alter it): ``finish`` and ``reconcile``
    name it, even when the host does not repeat the session the rule read."""
    parts = lease.split(":")
    return unquote(parts[2]) or None if len(parts) == 4 and parts[0] == "host" else None


def _lease_taken(lease: str, receipt: Receipt) -> datetime:
    """When a lease of ``_hosted_machine``'s making was taken (it holds the store's
    fence, so a host cannot move this without losing the lease); a lease of another
    making (one issued before leases carried their time) runs from the receipt's start."""
    taken = lease.rsplit(":", 1)[-1]
    if taken.isdigit():
        return datetime.fromtimestamp(int(taken) / 1000, tz=UTC)
    return receipt.confirmed_at or receipt.created_at
