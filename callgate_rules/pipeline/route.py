"""Step 7 — ROUTE: every outcome maps to one route, with its messages, through one table.

The routing table (``Routing.route_for``, its defaults from ``taxonomy``) says where each
error class goes; a rule may name its own route. This module turns what steps 1–6 ended
with into the decision the host gets: the route, the three messages (agent, user, log),
the trace. Also here: the run's budgets (``Run``: calls per tool, failures,
regenerations, the run deadline) and the limit path that a run's or a call's limit leads
to, a real path (partial result, hand-over or refusal) with its own messages.

How a rejection is routed and worded is in ``rejection_messages``, what the steps learnt
so far in ``progress``; ``Progress`` and ``Foretold`` are imported from here too.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from callgate_rules.documents.model import Budgets, Contract, GateConfig, LimitPath, Routing
from callgate_rules.pipeline import approvals
from callgate_rules.pipeline.decision import (
    Decision,
    Deferred,
    DeferredMessages,
    PairedMessage,
    RawTraceEntry,
    TraceEntry,
)
from callgate_rules.pipeline.messages import agent_message, user_message
from callgate_rules.pipeline.outcome import Foreseen, Rejection, as_decided
from callgate_rules.pipeline.progress import Progress as Progress
from callgate_rules.pipeline.record import compact, executed_log, log_record
from callgate_rules.pipeline.rejection_messages import Foretold as Foretold
from callgate_rules.pipeline.rejection_messages import RejectionMessages as RejectionMessages
from callgate_rules.pipeline.rejection_messages import Routed
from callgate_rules.store.base import NewReviewItem, Receipt, ReceiptState, ReceiptStore
from callgate_rules.taxonomy import FAILURES, ErrorClass, Route


@dataclass
class Run:
    """One agent run's budgets: calls per tool, failures, regenerations, the deadline.

    The host keeps one per conversation turn (or task) and passes it to every ``handle``.
    """

    started_at: datetime
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    calls: Counter[str] = field(default_factory=Counter)
    failures: int = 0
    regenerations_in_a_row: int = 0

    def limit_reached(self, budgets: Budgets, tool: str | None, now: datetime) -> str | None:
        """Which run limit a new proposal would pass, in words, or ``None``."""
        if now - self.started_at > timedelta(seconds=budgets.run_deadline_seconds):
            return f"the run deadline of {budgets.run_deadline_seconds:g}s has passed"
        if self.failures >= budgets.failures_per_run:
            return f"{self.failures} failed calls in this run (limit {budgets.failures_per_run})"
        if tool is not None and self.calls[tool] >= budgets.calls_per_tool_per_run:
            return (f"{self.calls[tool]} calls of {tool} in this run "
                    f"(limit {budgets.calls_per_tool_per_run})")
        return None

    def admit(self, decision: Decision, budgets: Budgets, now: datetime) -> str | None:
        """Count a decided proposal against the run; which limit it passes, or ``None``.
        A regeneration spends the run's budget of corrected calls; a call that may go on
        resets it and counts against its tool."""
        limit = self.limit_reached(budgets, decision.tool, now)
        if limit is not None:
            return limit
        if decision.route == Route.REGENERATE:
            if self.regenerations_in_a_row >= budgets.regenerations_per_call:
                return (f"{self.regenerations_in_a_row} corrected call(s) already asked for "
                        f"(limit {budgets.regenerations_per_call})")
            self.regenerations_in_a_row += 1
        elif goes_on(decision):
            self.regenerations_in_a_row = 0
            assert decision.tool is not None
            self.calls[decision.tool] += 1
        return None

    def ended(self, decision: Decision) -> None:
        if decision.error_class in FAILURES:
            self.failures += 1


@dataclass(frozen=True)
class Ending:
    """How a call ended inside steps 5–7. ``detail`` is for the log only: it may carry what
    an executor, a finder or a store said, which the model and the user never see;
    ``said`` is what the messages may tell of it (by default, a phrase per error class)."""

    route: Route
    error_class: ErrorClass | None
    detail: str
    result: Any = None
    receipt_state: str | None = None
    late_confirmation: bool = False
    review_id: str | None = None
    limit_path: str | None = None
    retries: int = 0
    said: str = ""


def limit_route(path: LimitPath) -> Route:
    return {LimitPath.HAND_OVER: Route.REVIEW, LimitPath.REFUSE: Route.REFUSE,
            LimitPath.PARTIAL_RESULT: Route.REFUSE}[path]


def limit_ending(routing: Routing, detail: str, retries: int,
                 open_review: Callable[[], str], said: str = "") -> Ending:
    """The per-call limit path: a partial result, a refusal, or a hand-over to a person."""
    path = routing.on_limit
    route = limit_route(path)
    review_id = open_review() if route == Route.REVIEW else None
    return Ending(route, ErrorClass.BUDGET_EXHAUSTED, detail, limit_path=str(path),
                  review_id=review_id, retries=retries, said=said)


# What the messages say of an ending whose detail came from outside the gate.
_SAID: Mapping[ErrorClass, str] = {
    ErrorClass.TRANSIENT: "the destination could not be reached",
    ErrorClass.UNKNOWN_OUTCOME: "its answer was lost",
    ErrorClass.PERMANENT: "its reason is kept in the log for engineers",
    ErrorClass.CONFLICT: "the record's state does not allow it",
    ErrorClass.RECONCILE_FAILED: "the outcome could not be confirmed",
    ErrorClass.BUDGET_EXHAUSTED: "the retries of this call are spent",
}


def confirmation_rule(contract: Contract) -> str:
    """The name a decision gives the contract's ``confirmation.required`` as its rule."""
    return f"{contract.name}/confirmation"


def goes_on(decision: Decision) -> bool:
    """Does the decision of steps 1–4 go on to execution (or to a person's confirmation)?"""
    return decision.route in (Route.EXECUTE, Route.AWAIT_CONFIRMATION) and \
        decision.error_class in (None, ErrorClass.CONFIRMATION_REQUIRED)


def _noted(agent: str | Deferred[str], note: str) -> str:
    text = agent() if isinstance(agent, Deferred) else agent
    return f"{text} Note: {note}."


def _noted_pair(messages: DeferredMessages, note: str) -> tuple[PairedMessage, PairedMessage]:
    agent, user = messages()
    return (Deferred(_noted, agent, note) if isinstance(agent, Deferred)
            else _noted(agent, note)), user


# Enum members are looked up through a descriptor in Python 3.11: hot paths compare with these.
_UNKNOWN_TOOL = ErrorClass.UNKNOWN_TOOL
_perf_counter, _wall_clock = time.perf_counter, time.time  # a decision reads both once
_EXECUTE = Route.EXECUTE
_ROUTED_TO_EXECUTE: RawTraceEntry = ("route", "allowed", str(Route.EXECUTE))
# No parsed call, as a ParsedCall unpacked (once: a NamedTuple's field read by name costs more)
_NO_CALL = (None, None, None, None, None)
_decision_of_check = Decision.of_check  # a class method, bound once


class Router:
    """Step 7 for one configuration: the decision for every way a call can end.

    ``versions_of(contract)``: the versions of the documents that decide about a call of
    ``contract`` (or of no known tool), never changed; ``tools``: the list of tools an
    unknown one is told about."""

    def __init__(self, config: GateConfig, tools: str,
                 versions_of: Callable[[Contract | None], Mapping[str, str]]) -> None:
        self.config, self.routing, self.tools = config, config.routing, tools
        self.versions_of = versions_of

    # -- steps 1–4 ----------------------------------------------------------------------

    def decided(self, outcome: str | Rejection | Foreseen | None, progress: Progress,
                actor: Mapping[str, Any], request_id: str | None) -> Decision:
        """The decision of steps 1–4: the deciding allow rule's name, or a rejection."""
        if type(outcome) is str:
            progress.permit = outcome
            return self.allowed(progress, actor, request_id)
        if type(outcome) is Foreseen:
            return self.foreseen(outcome, progress, actor, request_id)
        assert isinstance(outcome, Rejection)
        return self.rejected(outcome, progress, actor, request_id)

    def allowed(self, progress: Progress, actor: Mapping[str, Any],
                request_id: str | None) -> Decision:
        assert progress.call is not None and progress.plan is not None
        contract = progress.call.contract
        if contract.confirmation.required:
            # The contract's confirmation decides where the call goes, not the allow rule
            # that let it through; the log's detail keeps that one.
            rejection = Rejection(
                ErrorClass.CONFIRMATION_REQUIRED, "the contract requires a person's "
                f"confirmation before execution (allowed by {progress.permit})",
                rule=confirmation_rule(contract))
            covers = contract.confirmation.approval_covers
            if not covers or not approvals.covered(
                    confirmation_rule(contract), covers, rejection, progress.variables,
                    progress.trace, "confirmation"):
                return self.rejected(rejection, progress, actor, request_id)
        progress.trace.append(_ROUTED_TO_EXECUTE)
        return self._decision(_EXECUTE, None, progress.permit, progress.plan.passed,
                              "", "allowed", progress, actor, request_id)

    def rejected(self, rejection: Rejection, progress: Progress, actor: Mapping[str, Any],
                 request_id: str | None) -> Decision:
        routed = Routed.of(rejection, self.routing)
        progress.trace.append(routed.entry)
        if progress.call is None and rejection.contract is not None:
            progress.contract_only = rejection.contract
        call = progress.call
        # the arguments and the actor as decided on, should the host change them afterwards
        arguments = dict(call.arguments) if call is not None else None
        decided_actor = dict(actor)
        messages = DeferredMessages(RejectionMessages(
            rejection, routed, self.routing, progress.contract, arguments, decided_actor,
            self.tools).both)
        return self._decision(
            routed.route, rejection.error_class, rejection.rule, messages, messages,
            rejection.detail, progress, actor, request_id, rejection.candidates,
            rejection.extra, decided_actor, arguments)

    def foreseen(self, foreseen: Foreseen, progress: Progress, actor: Mapping[str, Any],
                 request_id: str | None) -> Decision:
        """``rejected`` for a rejection the plan foresaw: its route and constant parts were
        worked out with the plan; the rejection itself, with its messages, is made from the
        variables as decided when someone reads a message."""
        assert progress.plan is not None
        told = progress.plan.foretold[foreseen]
        entry, route, error_class, rule, detail, candidates, extra = told.decided
        progress.trace.append(entry)
        arguments, decided_actor = dict(progress.variables["args"]), dict(actor)
        messages = DeferredMessages(Foretold.messages, told, arguments, decided_actor, as_decided(
            progress.variables, foreseen.more_reads) if foreseen.more_reads else None)
        return self._decision(route, error_class, rule, messages, messages, detail, progress,
                              actor, request_id, candidates, extra, decided_actor, arguments)

    def _decision(
        self, route: Route, error_class: ErrorClass | None, rule: str | None,
        agent: str | Deferred[str] | DeferredMessages,
        user: str | Deferred[str] | DeferredMessages, detail: str, progress: Progress,
        actor: Mapping[str, Any], request_id: str | None,
        candidates: tuple[Mapping[str, Any], ...] = (), extra: Mapping[str, Any] | None = None,
        decided_actor: dict[str, Any] | None = None,
        decided_arguments: dict[str, Any] | None = None,
    ) -> Decision:
        """``decided_actor``, ``decided_arguments``: the actor and the arguments copied as
        decided on, when the caller has made those copies already."""
        elapsed, decided_at = _perf_counter() - progress.started, _wall_clock()
        call, plan = progress.call, progress.plan
        contract, arguments, call_id, _, note = call if call is not None else _NO_CALL
        contract = progress.contract_only if call is None else contract
        # The plan's versions are never changed: the log keeps them; the decision hands out
        # its own copy, which a host may change.
        decided_versions = plan.versions if plan is not None else self.versions_of(contract)
        if error_class is _UNKNOWN_TOOL:
            # The allowlist that refused the tool: every contract's version.
            decided_versions = {**decided_versions, **{
                c.document.key: c.version for c in self.config.contracts.values()}}
        if note:
            # several calls and the policy took one: the model must hear the others did not run
            if isinstance(agent, DeferredMessages):
                agent = user = DeferredMessages(_noted_pair, agent, note)
            else:
                agent = Deferred(_noted, agent, note)
        shadow = tuple(progress.shadow) if progress.shadow else ()
        # The log record is put together when someone first reads ``decision.log``. What the
        # host handed in and may change afterwards is copied now, one level deep.
        if decided_actor is None:
            decided_actor = dict(actor)
            decided_arguments = dict(arguments) if arguments is not None else None
        log: Deferred[Mapping[str, Any]] = Deferred(
            log_record, decided_at, request_id, contract, call, decided_versions, route,
            error_class, rule, detail, decided_actor, decided_arguments, shadow, elapsed,
            extra or None, progress.session, progress.variables)
        return _decision_of_check(
            route, error_class, contract.name if contract is not None else None,
            contract.version if contract is not None else None, rule, agent, user, log,
            dict(decided_versions), tuple(progress.trace),  # its entries made when read
            arguments, call_id, candidates,
            # warn-mode verdicts travel with the decision; audit ones only in the log
            tuple(v for v in shadow if v.mode == "warn") if shadow else (),
        )

    # -- steps 5–7 ----------------------------------------------------------------------

    def ended(self, decision: Decision, progress: Progress, ending: Ending,
              operation: str | None) -> Decision:
        """The decision of steps 1–4, completed with what execution did. Its log record
        and trace are put together when first read, as a check's are; what the counters
        read of the log (``counted``) is worked out now."""
        contract = progress.contract
        assert contract is not None
        agent, user = self._ending_messages(decision, progress, ending, contract)
        if progress.call is not None and progress.call.note:
            agent = f"{agent} Note: {progress.call.note}."
        progress.trace.append(("route", str(ending.error_class or "executed"),
                               str(ending.route)))
        trace = tuple(progress.trace)
        reconciled = unknown_outcome = False
        for entry in trace:  # one pass: an executed write's trace has a score of entries
            reconciled = reconciled or entry[0] == "reconcile"
            unknown_outcome = unknown_outcome or "unknown_outcome" in entry[2]
        counted = {
            "route": str(ending.route),
            "error_class": str(ending.error_class) if ending.error_class else None,
            "retries": ending.retries,
            "reconciled": reconciled,
            "unknown_outcome": unknown_outcome,
            "shadow": [verdict.__dict__ for verdict in progress.shadow],
        }
        elapsed_ms = round((time.perf_counter() - progress.started) * 1000, 3)
        return _completed(decision, {
            "route": ending.route, "error_class": ending.error_class,
            "agent_message": agent, "user_message": user, "result": ending.result,
            "operation_id": operation, "limit_path": ending.limit_path,
            "trace": trace,  # its entries made when read, as a check's are
            # the check's record as it stands (read inside this one's first read, which
            # holds the lock of first reads: not through the field again)
            "log": Deferred(executed_log, counted, decision.__dict__["log"],
                            decision.arguments, contract, operation, ending.detail,
                            ending.receipt_state, ending.result, ending.review_id,
                            elapsed_ms),
            "extra": {"review_id": ending.review_id} if ending.review_id else {},
        })

    def _ending_messages(self, decision: Decision, progress: Progress, ending: Ending,
                         contract: Contract) -> tuple[str, str]:
        routing = self.routing
        told = ending.said or (_SAID.get(ending.error_class, "") if ending.error_class else "")
        variables = {"tool": contract.name, "tools": self.tools, "detail": told,
                     "args": decision.arguments or {},
                     "actor": progress.variables.get("actor", {})}
        if ending.error_class is None:
            how = " (confirmed after a lost answer)" if ending.late_confirmation else ""
            return f"{contract.name} succeeded{how}. Result: {compact(ending.result)}", ""
        if ending.error_class == ErrorClass.DUPLICATE and ending.route == Route.RETURN_RECEIPT:
            return (f"{contract.name} was already done for this request; no new write was "
                    f"made. Earlier result: {compact(ending.result)}",
                    user_message(ErrorClass.DUPLICATE, routing, None, variables))
        if ending.limit_path is not None:
            return self.limit_messages(variables)
        return (agent_message(ending.error_class, ending.route, routing, None, None, variables),
                user_message(ending.error_class, routing, None, variables))

    def limit_path(self, decision: Decision, detail: str, actor: Mapping[str, Any],
                   store: Callable[[], ReceiptStore], now: datetime) -> Decision:
        """A run limit reached: the routing table's limit path, instead of the decision."""
        route = limit_route(self.routing.on_limit)
        agent, user = self.limit_messages({
            "tool": decision.tool, "tools": self.tools, "detail": detail,
            "args": decision.arguments or {}, "actor": actor})
        review_id = None
        if route == Route.REVIEW and decision.tool is not None:
            review_id = store().open_review(NewReviewItem(
                tool=decision.tool, reason=str(ErrorClass.BUDGET_EXHAUSTED),
                summary=f"{decision.tool}: {detail}", payload=dict(decision.log)),
                now=now).review_id
        trace = (*decision.trace, TraceEntry("route", "budget_exhausted", str(route), detail))
        return replace(decision, route=route, error_class=ErrorClass.BUDGET_EXHAUSTED,
                       agent_message=agent, user_message=user,
                       limit_path=str(self.routing.on_limit), trace=trace,
                       log={**decision.log, "route": str(route),
                            "error_class": str(ErrorClass.BUDGET_EXHAUSTED),
                            "detail": detail, "review_id": review_id})

    def limit_messages(self, variables: Mapping[str, Any]) -> tuple[str, str]:
        """The limit path's messages; ``variables`` are what their templates may name."""
        routing = self.routing
        written = routing.on_limit_messages
        agent = written.agent.render(variables) if written.agent else \
            _LIMIT_AGENT_MESSAGES[routing.on_limit].format(detail=variables["detail"])
        user = written.user.render(variables) if written.user else \
            user_message(ErrorClass.BUDGET_EXHAUSTED, routing, None, variables)
        return agent, user

    def refused_confirmation(self, why: str, basis: Decision | None = None,
                             detail: str | None = None) -> Decision:
        """A confirmation that cannot be used: nothing was executed. ``why`` is shown to
        the person; ``detail``, when given, only to the log."""
        log = {**(basis.log if basis else {}), "ts": datetime.now(UTC).isoformat(),
               "route": "refuse", "error_class": str(ErrorClass.FORBIDDEN),
               "rule": "confirmation-token", "detail": detail or why}
        return Decision(
            route=Route.REFUSE, error_class=ErrorClass.FORBIDDEN,
            tool=basis.tool if basis else None,
            contract_version=basis.contract_version if basis else None,
            rule="confirmation-token",
            agent_message="The confirmation was not accepted; nothing was executed. "
                          "Propose the call again if it is still wanted.",
            user_message=f"This confirmation can't be used: {why}.",
            log=log, versions=basis.versions if basis else {},
            trace=(*(basis.trace if basis else ()),
                   TraceEntry("execute", "confirmation", "refused", why)),
            arguments=basis.arguments if basis else None,
        )

    def used_confirmation(self, receipt: Receipt, basis: Decision | None = None) -> Decision:
        """A confirmation used before, whose write did not succeed (or is still running):
        nothing new is executed, and the model hears that the write was already tried, so
        that it neither proposes it again nor tells the user nothing happened."""
        state = ReceiptState(receipt.state)
        told = _USED_CONFIRMATION.get(state, f"the operation is {state}")
        refused = self.refused_confirmation(
            f"this confirmation was already used: {told}", basis,
            f"confirmation already used; operation {receipt.operation_id} is {state}")
        agent = (f"This confirmation was already used: {told}. No new write was made now. "
                 f"Do not propose {receipt.tool} again for this request; tell the user "
                 "what is known.")
        return replace(refused, tool=receipt.tool, agent_message=agent,
                       operation_id=receipt.operation_id,
                       log={**refused.log, "tool": receipt.tool,
                            "operation_id": receipt.operation_id,
                            "receipt_state": str(state)})

    def already_confirmed(self, receipt: Receipt) -> Decision:
        """A confirmation of a write that was already confirmed and done: its receipt."""
        done = f"{receipt.tool} was already confirmed and done; no new write was made. " \
               f"Earlier result: {compact(receipt.result)}"
        log = {"ts": datetime.now(UTC).isoformat(), "request_id": receipt.request_id,
               "tool": receipt.tool, "contract_version": receipt.contract_version,
               "route": str(Route.RETURN_RECEIPT), "error_class": str(ErrorClass.DUPLICATE),
               "rule": "confirmation-token", "detail": "the confirmed operation already ran",
               "operation_id": receipt.operation_id, "receipt_state": str(receipt.state)}
        return Decision(
            route=Route.RETURN_RECEIPT, error_class=ErrorClass.DUPLICATE, tool=receipt.tool,
            contract_version=receipt.contract_version, rule="confirmation-token",
            agent_message=done,
            user_message=user_message(ErrorClass.DUPLICATE, self.routing, None,
                                      {"tool": receipt.tool, "tools": self.tools}),
            log=log, versions={}, result=receipt.result, operation_id=receipt.operation_id,
            trace=(TraceEntry("execute", "confirmation", "already done",
                              receipt.operation_id),))


# What a used confirmation tells of its write, by the state the write's receipt is in.
_USED_CONFIRMATION: Mapping[ReceiptState, str] = {
    ReceiptState.CLAIMED: "the write it confirmed is being executed right now",
    ReceiptState.FAILED: "the write it confirmed was already tried and did not succeed",
    ReceiptState.OUTCOME_UNKNOWN: "the write it confirmed was already sent and its outcome "
                                  "is not known yet; it is being settled, never sent twice",
    ReceiptState.IN_REVIEW: "the write it confirmed was already tried and a person is "
                            "settling its outcome",
}


_LIMIT_AGENT_MESSAGES = {
    LimitPath.PARTIAL_RESULT: "The tool-call limit is reached ({detail}). Stop calling tools "
                              "and give the user the partial result you have, saying what is "
                              "missing.",
    LimitPath.HAND_OVER: "The tool-call limit is reached ({detail}). Stop calling tools; a "
                         "person takes over. Tell the user so.",
    LimitPath.REFUSE: "The tool-call limit is reached ({detail}). Stop calling tools and tell "
                      "the user this cannot be done now.",
}


def _completed(decision: Decision, changes: Mapping[str, Any]) -> Decision:
    """``dataclasses.replace(decision, **changes)`` without reading every field: a field
    still to be worked out (a ``Deferred``) stays so in the copy. ``replace`` reads each
    field and sets each through ``object.__setattr__``, a good part of an executed write."""
    completed = object.__new__(Decision)
    object.__setattr__(completed, "__dict__", {**decision.__dict__, **changes})
    return completed
