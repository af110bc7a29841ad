"""Steps 5 and 6 as a state machine: claim → send → answered → (reconcile) for one
operation, and the read of a read tool, both under one retry policy.

The gate runs the machine to its end (``run``): its executor sends, the machine sleeps its
backoffs. A host that executes its writes itself (``pipeline.hosted``) drives the very same
machine one step at a time (``advance`` with ``HOST_STEPS``): it pauses where the host must
act — at SEND (execute now), RECONCILE (ask the destination) and SLEEP (come back after a
delay) — and resumes at ANSWERED with what the destination said, or at RECONCILE with what
it holds.

Transport retries (the same operation sent again) are counted per call in ``Retries``;
regenerations (the model proposes a new call) are counted per run in ``budgets.Run``, and the
two never mix. Backoff is exponential with full jitter, never sooner than a destination's
Retry-After, and never past the call's deadline. A write holds its claim's lease until it
is decided; an unknown outcome is reconciled by operation ID, never blindly sent again.
The clock, the sleep and the random source are injectable.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import Any

from callgate_rules.canonical import operation_id, operation_keys
from callgate_rules.documents.model import Budgets, Contract, Routing
from callgate_rules.errors import LeaseLost, StoreError
from callgate_rules.pipeline.answers import readable
from callgate_rules.pipeline.budgets import seconds
from callgate_rules.pipeline.endings import Ending, limit_ending, told_a_person
from callgate_rules.pipeline.execute import (
    ExecutionRequest,
    Executor,
    Failed,
    Finder,
    Outcome,
    Sent,
    send,
)
from callgate_rules.pipeline.reconcile import Absent, Confirmed, Mismatch, reconcile
from callgate_rules.pipeline.record import Masking
from callgate_rules.store.base import (
    ClaimOutcome,
    NewOperation,
    NewReviewItem,
    ReceiptState,
    ReceiptStore,
    made,
)
from callgate_rules.taxonomy import ErrorClass, Route

Clock = Callable[[], datetime]
Sleep = Callable[[float], None]
Trace = Callable[[str, str, str], None]



def backoff_delay(attempt: int, budgets: Budgets, rng: random.Random,
                  retry_after: float | None = None) -> float:
    """Full jitter: uniform in [0, min(max, base * multiplier ** attempt)], but never less
    than a destination's Retry-After: coming back earlier than it asked only fails again.
    Whether the wait still fits the call's deadline is the caller's decision."""
    ceiling = min(budgets.backoff_max_seconds,
                  budgets.backoff_base_seconds * budgets.backoff_multiplier ** attempt)
    delay = rng.uniform(0.0, ceiling)
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay


@dataclass
class Retries:
    """One call's transport retries, reads and writes alike: the per-call budget, the call
    deadline, and the backoff between attempts."""

    budgets: Budgets
    clock: Clock
    sleep: Sleep
    rng: random.Random
    deadline: datetime = field(init=False)
    count: int = 0
    retry_after: float | None = None  # what the destination asked for, once

    def __post_init__(self) -> None:
        self.deadline = self.clock() + seconds(self.budgets.call_deadline_seconds)

    def spend(self) -> str | None:
        """Count one more retry, or say why none is left (the budget, the deadline), in
        words the model may hear."""
        budgets = self.budgets
        if self.count >= budgets.retries_per_call:
            return f"{self.count} transport retries (limit {budgets.retries_per_call})"
        if self.clock() >= self.deadline:
            return f"the call deadline of {budgets.call_deadline_seconds:g}s passed"
        self.count += 1
        return None

    def backoff(self) -> float | str:
        """The backoff before the next attempt, or why waiting it would pass the deadline."""
        delay = backoff_delay(self.count - 1, self.budgets, self.rng, self.retry_after)
        self.retry_after = None
        if self.clock() + timedelta(seconds=delay) > self.deadline:
            return (f"waiting {delay:.1f}s more would pass the call deadline of "
                    f"{self.budgets.call_deadline_seconds:g}s")
        return delay

    def wait(self, trace: Trace) -> str | None:
        """Sleep the backoff before the next attempt, or say why it would pass the deadline."""
        delay = self.backoff()
        if isinstance(delay, str):
            return delay
        trace("route", "retry", f"backoff {delay:.3f}s (attempt {self.count})")
        self.sleep(delay)
        return None


class State(StrEnum):
    CLAIM = "claim"
    SEND = "send"  # the executor (or the host) sends the operation
    ANSWERED = "answered"  # what the destination said: verified, or its failure classified
    RECONCILE = "reconcile"
    WAIT = "wait"  # the backoff before the next attempt, if the deadline leaves room
    SLEEP = "sleep"  # waiting it out (a host waits itself), then ``after_wait``


# Where a host that executes its own writes takes over: it sends, asks, and waits.
HOST_STEPS = frozenset({State.SEND, State.RECONCILE, State.SLEEP})



def new_operation(contract: Contract, request_id: str, arguments: Mapping[str, Any],
                  actor: Mapping[str, Any]) -> NewOperation:
    """The operation a write makes: its ID and arguments hash from the request ID, the
    tool and the canonical arguments, never from the model's text."""
    operation, args_hash = operation_keys(request_id, contract.name, contract.document.name,
                                          arguments)
    return made(NewOperation, {  # every field, in the dataclass's order
        "operation_id": operation, "request_id": request_id, "tool": contract.name,
        "contract_version": contract.version, "args_hash": args_hash,
        "arguments": arguments, "actor": dict(actor)})


def operation_id_of(contract: Contract, request_id: str, arguments: Mapping[str, Any]) -> str:
    """``new_operation``'s ID alone: what a host is told of a write allowed to go on, before
    it claims it (the arguments hash is made at the claim)."""
    return operation_id(request_id, contract.name, contract.document.name, arguments)


@dataclass
class WriteMachine:
    """Claim → send → (reconcile) for one operation, holding the lease until it is decided."""

    contract: Contract
    operation: NewOperation
    executor: Executor
    finder: Finder | None
    store: ReceiptStore
    routing: Routing
    worker: str
    clock: Clock
    sleep: Sleep
    rng: random.Random
    actor: Mapping[str, Any]
    variables: Mapping[str, Any]
    records: Mapping[str, Any]
    trace: Trace
    retries: Retries = field(init=False)
    after_wait: State = State.CLAIM
    delay: float = 0.0  # the backoff SLEEP waits out
    answer: Outcome | None = None  # what the executor (or the host) reported, for ANSWERED
    reconciled: bool = False
    sent: bool = False  # has the operation been handed to the executor yet?

    def __post_init__(self) -> None:
        self.retries = Retries(self.routing.budgets, self.clock, self.sleep, self.rng)

    def run(self, start: State = State.CLAIM) -> Ending:
        """From ``start`` to the ending: the executor sends, the backoffs are slept."""
        ending = self.advance(start)
        assert isinstance(ending, Ending)
        return ending

    def advance(self, start: State, pause: frozenset[State] = frozenset()) -> State | Ending:
        """Run ``start``, then step on until an ending, or until a state in ``pause`` is
        next (``start`` itself always runs: it is where a paused machine resumes)."""
        state: State | Ending = start
        try:
            state = _TRANSITIONS[start](self)
            while isinstance(state, State) and state not in pause:
                state = _TRANSITIONS[state](self)
        except StoreError as error:
            return store_failed(error, self.sent, self.route_of(ErrorClass.TRANSIENT))
        return state

    @property
    def lease(self) -> timedelta:
        return seconds(self.routing.lease_seconds)

    # -- states

    def claim(self) -> State | Ending:
        claim = self.store.claim(self.operation, worker=self.worker, lease=self.lease,
                                 now=self.clock())
        self.trace("execute", f"claim {self.operation.operation_id}", str(claim.outcome))
        if claim.may_execute:
            return State.SEND
        if claim.outcome == ClaimOutcome.RECONCILE:
            return State.RECONCILE
        if claim.outcome == ClaimOutcome.BUSY:
            # Another worker is executing this very operation: wait for its answer.
            return self.after_failure(ErrorClass.TRANSIENT, "another worker holds the claim",
                                      then=State.CLAIM)
        receipt = claim.receipt
        if receipt.state == ReceiptState.SUCCEEDED:
            return Ending(Route.RETURN_RECEIPT, ErrorClass.DUPLICATE,
                          "a receipt for this operation already exists", receipt.result,
                          str(receipt.state))
        if receipt.state == ReceiptState.AWAITING_CONFIRMATION:
            return Ending(self.route_of(ErrorClass.CONFIRMATION_REQUIRED),
                          ErrorClass.CONFIRMATION_REQUIRED,
                          "the operation is waiting for a person's confirmation",
                          receipt_state=str(receipt.state))
        if receipt.state == ReceiptState.IN_REVIEW:
            return Ending(Route.REVIEW, ErrorClass.DUPLICATE,
                          "the operation is with a person for review",
                          receipt_state=str(receipt.state))
        error_class = ErrorClass(receipt.error_class or ErrorClass.PERMANENT)
        return Ending(self.route_of(error_class), error_class,
                      f"an earlier attempt of this operation failed: {receipt.detail}",
                      receipt.result, str(receipt.state))

    def request(self) -> ExecutionRequest | None:
        """What is sent now, with the deadline of its answer: the contract's timeout within
        what is left of the call deadline; ``None`` once the call deadline has passed."""
        now, deadline = self.clock(), self.retries.deadline
        if deadline <= now:
            return None
        return made(ExecutionRequest, {  # every field, in the dataclass's order
            "tool": self.contract.name, "arguments": self.operation.arguments,
            "operation_id": self.operation.operation_id,
            "deadline": min(deadline, now + seconds(self.contract.timeout_seconds)),
            "actor": self.actor, "records": self.records})

    def send(self) -> State | Ending:
        request = self.request()
        if request is None:
            return self.give_up(ReceiptState.FAILED, ErrorClass.TRANSIENT,
                                "the call deadline passed before sending")
        self.sent = True
        self.answer = send(self.executor, request, self.contract,
                           (request.deadline - self.clock()).total_seconds())
        return State.ANSWERED

    def answered(self) -> State | Ending:
        outcome = self.answer
        assert outcome is not None, "ANSWERED follows SEND, or a host's report"
        if isinstance(outcome, Sent):
            self.trace("execute", "send", "answered")
            return self.verified(outcome.result, late=False)
        self.trace("execute", "send", f"{outcome.error_class}: {outcome.detail}")
        return self.failed(outcome)

    def failed(self, outcome: Failed) -> State | Ending:
        if outcome.error_class == ErrorClass.UNKNOWN_OUTCOME:
            if self.route_of(ErrorClass.UNKNOWN_OUTCOME) == Route.RECONCILE:
                return State.RECONCILE  # keep the lease: nobody else may touch it meanwhile
            return self.to_review(ErrorClass.UNKNOWN_OUTCOME, outcome.detail)
        if outcome.error_class == ErrorClass.ANSWER_TOO_LARGE:
            # It ran and answered, unread: whether it did what was asked is not known from
            # its answer, and sending it again brings the same bytes. A person checks; the
            # claim stays held in review, so nothing sends it again meanwhile.
            return self.to_review(ErrorClass.ANSWER_TOO_LARGE, outcome.detail)
        if self.route_of(outcome.error_class) == Route.RETRY:
            # Before sending: release the claim so the retry claims it afresh.
            self.finish(ReceiptState.FAILED, error_class=outcome.error_class,
                        detail=outcome.detail)
            self.retries.retry_after = outcome.retry_after
            return self.after_failure(outcome.error_class, outcome.detail, then=State.CLAIM)
        self.finish(ReceiptState.FAILED, error_class=outcome.error_class, detail=outcome.detail)
        return Ending(self.route_of(outcome.error_class), outcome.error_class, outcome.detail,
                      retries=self.retries.count)

    def reconcile(self) -> State | Ending:
        self.reconciled = True
        verdict = reconcile(self.contract, self.finder, self.operation.operation_id,
                            self.variables)
        self.trace("reconcile", self.operation.operation_id, type(verdict).__name__.lower())
        if isinstance(verdict, Confirmed):
            return self.verified(verdict.result, late=True)
        if isinstance(verdict, Absent):
            if verdict.resend_is_safe:
                # The destination deduplicates by this ID: sending it again cannot write twice.
                return self.after_failure(ErrorClass.UNKNOWN_OUTCOME,
                                          "not found at the destination; resending under the "
                                          "same operation ID", then=State.SEND)
            return self.after_failure(ErrorClass.UNKNOWN_OUTCOME,
                                      "not found at the destination yet", then=State.RECONCILE,
                                      exhausted=lambda: self.to_review(
                                          ErrorClass.RECONCILE_FAILED, _NEVER_SHOWN,
                                          told=_NEVER_SHOWN))
        if isinstance(verdict, Mismatch):
            return self.to_review(ErrorClass.RECONCILE_FAILED, verdict.detail,
                                  told=verdict.said)
        return self.to_review(ErrorClass.RECONCILE_FAILED, verdict.detail, told=verdict.said)

    def wait(self) -> State | Ending:
        delay = self.retries.backoff()
        if isinstance(delay, str):
            if self.after_wait == State.RECONCILE:  # still holding an unknown outcome
                return self.to_review(ErrorClass.RECONCILE_FAILED, delay, told=delay)
            return self.exhausted(delay, delay)
        self.delay = delay
        self.trace("route", "retry", f"backoff {delay:.3f}s (attempt {self.retries.count})")
        return State.SLEEP

    def slept(self) -> State:
        self.sleep(self.delay)
        return self.after_wait

    # -- transitions shared by the states

    def after_failure(self, error_class: ErrorClass, detail: str, *, then: State,
                      exhausted: Callable[[], Ending] | None = None) -> State | Ending:
        """Retry within the per-call budget and deadline, or take the limit path."""
        said = self.retries.spend()
        if said is not None:
            return exhausted() if exhausted else self.exhausted(f"{said}: {detail}", said)
        self.after_wait = then
        return State.WAIT

    def exhausted(self, detail: str, said: str = "") -> Ending:
        """The per-call limit path. A claim still held is recorded first: an unknown outcome
        stays unknown (and goes to a person), a failure before sending is a failure."""
        receipt = self.store.get(self.operation.operation_id)
        holding = (receipt is not None and receipt.lease_owner == self.worker
            and receipt.state == ReceiptState.CLAIMED)
        if holding and self.reconciled:
            return self.to_review(ErrorClass.BUDGET_EXHAUSTED, detail, told=said or None)
        if holding:
            self.finish(ReceiptState.FAILED, error_class=ErrorClass.TRANSIENT, detail=detail)
        return limit_ending(self.routing, detail, self.retries.count,
                            lambda: self.open_review(ErrorClass.BUDGET_EXHAUSTED, said or None),
                            said)

    def verified(self, result: Any, *, late: bool) -> Ending:
        verify = self.contract.verify
        if verify is not None:
            try:
                ok = verify({**self.variables, "result": readable(result)}) is True
            except Exception as error:  # noqa: BLE001 - a failing check is a failed check
                ok, why = False, f"verify failed to evaluate: {error}"
            else:
                why = "the destination's answer does not pass the contract's verify rule"
            if not ok:
                self.trace("execute", "verify", "fail")
                return self.to_review(ErrorClass.RECONCILE_FAILED, why, result=result,
                                      told=why)
        self.finish(ReceiptState.SUCCEEDED, result=result)
        self.trace("execute", "verify", "pass" + (" (late confirmation)" if late else ""))
        return Ending(Route.RETURN_RESULT, None, "late confirmation" if late else "executed",
                      result, str(ReceiptState.SUCCEEDED), late_confirmation=late,
                      retries=self.retries.count)

    def to_review(self, error_class: ErrorClass, detail: str, result: Any = None,
                  told: str | None = None) -> Ending:
        """Hand the operation to a person. ``detail`` goes to the receipt and the log;
        ``told`` is what the review item says, in the gate's own words (by default, a
        phrase for ``error_class``): ``detail`` may carry what an executor, a finder or a
        store said — an address, a password in a URL, a stack — which a person reading
        the queue never sees."""
        self.finish(ReceiptState.OUTCOME_UNKNOWN, error_class=error_class, detail=detail,
                    result=result)
        review_id = self.open_review(error_class, told)
        return Ending(Route.REVIEW, error_class, detail, result, str(ReceiptState.IN_REVIEW),
                      review_id=review_id, retries=self.retries.count)

    def give_up(self, state: ReceiptState, error_class: ErrorClass, detail: str) -> Ending:
        self.finish(state, error_class=error_class, detail=detail)
        return self.exhausted(detail, detail)  # the gate's own words: the deadline

    def open_review(self, error_class: ErrorClass, told: str | None = None) -> str:
        """A review item on the operation; its summary says ``told`` (the gate's own words)
        or the phrase for ``error_class``, never what came from outside the gate."""
        masking = Masking(self.contract, self.operation.arguments)  # a view people list
        said = told or told_a_person(error_class)
        item = self.store.open_review(NewReviewItem(
            tool=self.contract.name, reason=str(error_class),
            summary=masking(f"{self.contract.name} {self.operation.operation_id}: {said}"),
            operation_id=self.operation.operation_id,
            payload={"arguments": masking.arguments, "actor": dict(self.actor)},
        ), now=self.clock())
        self.trace("route", "review", f"queued as {item.review_id}")
        return item.review_id

    def finish(self, state: ReceiptState, **fields: Any) -> None:
        try:
            self.store.finish(self.operation.operation_id, worker=self.worker, state=state,
                              now=self.clock(), **fields)
        except LeaseLost:
            # Our lease expired mid-call; whoever holds it now reconciles. Never overwrite.
            self.trace("execute", "finish", "lease lost; another worker reconciles")

    def route_of(self, error_class: ErrorClass) -> Route:
        return self.routing.route_for(error_class)


# The table of transitions: what each state runs (made once, not per call).
_TRANSITIONS: dict[State, Callable[[WriteMachine], State | Ending]] = {
    State.CLAIM: WriteMachine.claim,
    State.SEND: WriteMachine.send,
    State.ANSWERED: WriteMachine.answered,
    State.RECONCILE: WriteMachine.reconcile,
    State.WAIT: WriteMachine.wait,
    State.SLEEP: WriteMachine.slept,
}

_RETRIED_READS = (ErrorClass.TRANSIENT, ErrorClass.UNKNOWN_OUTCOME)


def read(contract: Contract, executor: Executor, arguments: Mapping[str, Any],
         actor: Mapping[str, Any], records: Mapping[str, Any], *, routing: Routing,
         store: ReceiptStore, retries: Retries, trace: Trace) -> Ending:
    """A read tool's call. A read changes nothing, so a failure before sending and an
    unknown outcome alike are retried, within the same budget and deadline as a write's
    transport retries; at the limit, a hand-over has no receipt."""
    while True:
        now = retries.clock()
        request = ExecutionRequest(contract.name, arguments, "",
                                   now + seconds(contract.timeout_seconds), actor,
                                   records)
        outcome = send(executor, request, contract, contract.timeout_seconds)
        if not isinstance(outcome, Failed):
            return Ending(Route.RETURN_RESULT, None, "read", outcome.result,
                          retries=retries.count)
        if outcome.error_class not in _RETRIED_READS:
            route = routing.route_for(outcome.error_class)
            # routed to a person by the RoutingTable: one is told, as the route promises
            review_id = (_open_read_review(store, contract, str(outcome.error_class),
                                          told_a_person(outcome.error_class), retries.clock)
                if route == Route.REVIEW else None)
            return Ending(route, outcome.error_class, outcome.detail, review_id=review_id,
                          retries=retries.count)
        retries.retry_after = outcome.retry_after
        said = retries.spend() or retries.wait(trace)
        if said is not None:
            why = f"{said}: {outcome.detail}"
            return limit_ending(routing, why, retries.count,
                                partial(_open_read_review, store, contract,
                                        str(ErrorClass.BUDGET_EXHAUSTED), said, retries.clock),
                                said)


def _open_read_review(store: ReceiptStore, contract: Contract, reason: str, told: str,
                      clock: Clock) -> str:
    """A read handed to a person goes without a receipt: nothing was written. Its summary
    is ``told``, the gate's own words (the executor's are in the log only)."""
    return store.open_review(NewReviewItem(
        tool=contract.name, reason=reason,
        summary=f"{contract.name}: {told}"), now=clock()).review_id


_NEVER_SHOWN = ("the destination never showed the operation; it cannot deduplicate, so it "
                "is not sent again")


def store_failed(error: StoreError, sent: bool, retry_route: Route) -> Ending:
    """The receipt store failed mid-call. Before sending nothing happened: a transient
    failure. After sending, the write may have happened with no receipt to show it: a
    person checks, and the claim left behind makes any later attempt reconcile by
    operation ID instead of writing again."""
    if not sent:
        return Ending(retry_route, ErrorClass.TRANSIENT, f"receipt store: {error}",
                      said="the receipt store is unavailable; nothing was sent")
    return Ending(Route.REVIEW, ErrorClass.RECONCILE_FAILED,
                  f"sent, but the receipt store failed: {error}",
                  said="the write was sent, but its receipt could not be recorded; a person "
                       "will check whether it took effect")
