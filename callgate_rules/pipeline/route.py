"""Step 7 — ROUTE: every outcome maps to one route, with its messages, through one table.

The routing table (``Routing.route_for``, its defaults from ``taxonomy``) says where each
error class goes; a rule may name its own route. ``Router.decided`` turns what steps 1–4
ended with (the allow rule's name, or a rejection) into the record of what was decided
(``Decided``) and the decision the host gets; ``Router.ended`` completes it with what
steps 5–6 did (an ``Ending``). The run's budgets and the limit path are in ``budgets``, a
rejection's routing and wording in ``rejection_messages``, what the steps learnt so far in
``progress``.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from callgate_rules.documents.model import Contract, GateConfig
from callgate_rules.pipeline import approvals
from callgate_rules.pipeline.budgets import limit_messages, limit_route
from callgate_rules.pipeline.decision import (
    FROM_RECORD,
    Decided,
    Decision,
    Finished,
    TraceEntry,
)
from callgate_rules.pipeline.endings import Ending
from callgate_rules.pipeline.messages import agent_message, user_message, with_note
from callgate_rules.pipeline.outcome import Rejection, as_decided
from callgate_rules.pipeline.progress import Progress
from callgate_rules.pipeline.record import compact
from callgate_rules.pipeline.rejection_messages import Routed
from callgate_rules.store.base import NewReviewItem, Receipt, ReceiptState, ReceiptStore
from callgate_rules.taxonomy import ErrorClass, Route


def _request_ids() -> Iterator[str]:
    """Request IDs for decisions the host named none: a random prefix per process and a
    count, so no two decisions share one and none tells anything about the machine.
    (``%`` formats the count in a fifth fewer instructions than ``str.format``.)"""
    return map(f"{os.urandom(8).hex()}%016x".__mod__, itertools.count(1))


def _renew_request_ids() -> None:  # a forked child must not repeat its parent's IDs
    global _REQUEST_IDS
    _REQUEST_IDS = _request_ids()


_REQUEST_IDS = _request_ids()
os.register_at_fork(after_in_child=_renew_request_ids)


def confirmation_rule(contract: Contract) -> str:
    """The name a decision gives the contract's ``confirmation.required`` as its rule."""
    return f"{contract.name}/confirmation"


_ROUTED_TO_EXECUTE = ("route", "allowed", str(Route.EXECUTE))
# ``Decided._make(fields)`` and ``Finished._make(fields)`` without their Python-level length
# check: one C call, and each caller lists every field in order
_new_tuple = tuple.__new__


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

    def decided(self, outcome: str | Rejection, progress: Progress, actor: Mapping[str, Any],
                request_id: str | None) -> Decision:
        """The decision of steps 1–4, for the deciding allow rule's name, or a rejection (one
        a step raised, or one the tool's plan prepared): the record of what was decided, and
        the decision made of it, whose messages, log and trace are worked out from the record
        when first read."""
        call, plan, trace = progress.call, progress.plan, progress.trace
        contract: Contract | None
        if call is not None:
            contract, arguments, _, _, note = call  # a ParsedCall's fields, read at once
        else:
            contract, arguments, note = progress.contract_only, None, None
        rule: str | None
        if isinstance(outcome, Rejection):
            rejection: Rejection | None = outcome
        else:  # allowed by the rule named, unless the contract holds the call for a person
            assert contract is not None
            rejection = (self._confirmation_wanted(progress, outcome)
                         if contract.confirmation.required else None)
            rule = outcome
        if rejection is None:
            trace.append(_ROUTED_TO_EXECUTE)
            route, error_class, detail = Route.EXECUTE, None, "allowed"
        else:
            route, _, _, entry = rejection.routed or Routed.of(rejection, self.routing)
            trace.append(entry)
            if call is None and rejection.contract is not None:
                progress.contract_only = contract = rejection.contract
            error_class, rule, detail = rejection.error_class, rejection.rule, rejection.detail
        # The plan's versions are never changed: the record keeps them; the decision hands
        # out its own copy, which a host may change.
        versions = plan.versions if plan is not None else self.versions_of(contract)
        if error_class is not None and error_class == ErrorClass.UNKNOWN_TOOL:  # not allowed
            # The allowlist that refused the tool: every contract's version.
            versions = {**versions, **{c.document.key: c.version
                                       for c in self.config.contracts.values()}}
        more = (as_decided(progress.variables, rejection.more_reads)
                if rejection is not None and rejection.more_reads else None)
        decided = _new_tuple(Decided, (  # its fields in their order
            route, error_class, rule, detail, rejection,  # the verdict
            contract, call, versions,  # what it was about, and what it read, as decided on:
            dict(actor), dict(arguments) if arguments is not None else None,  # copies
            progress.session, progress.variables, more, tuple(progress.shadow),
            # for which request (one named now when the host named none), and when
            request_id or next(_REQUEST_IDS), time.time(), time.perf_counter() - progress.started,
            self.routing, self.tools))  # how its messages are worded
        progress.decided_entries = len(trace)
        if rejection is not None:
            return Decision.of(decided, tuple(trace))
        assert plan is not None  # allowed: its message is the plan's (with the parse step's
        # note, when one of several calls was taken)
        return Decision.of(decided, tuple(trace),
                           plan.passed if note is None else with_note(plan.passed, note), "")

    def _confirmation_wanted(self, progress: Progress, permit: str) -> Rejection | None:
        """The contract's confirmation, when it holds an allowed call for a person (and
        no earlier approval in the run covers it): the contract decides where the call
        goes, not the allow rule that let it through; the log's detail keeps that one."""
        assert progress.call is not None
        contract = progress.call.contract
        rejection = Rejection(
            ErrorClass.CONFIRMATION_REQUIRED, "the contract requires a person's "
            f"confirmation before execution (allowed by {permit})",
            rule=confirmation_rule(contract))
        covers = contract.confirmation.approval_covers
        if covers and approvals.covered(confirmation_rule(contract), covers, rejection,
                                        progress.variables, progress.trace, "confirmation"):
            return None
        return rejection

    # -- steps 5–7 ----------------------------------------------------------------------

    def ended(self, decision: Decision, progress: Progress, ending: Ending,
              operation: str | None) -> Decision:
        """The decision of steps 1–4, completed with what execution did. Its log record
        and trace are put together when first read, as a check's are; what the counters
        read of the log is worked out now."""
        contract = progress.contract
        assert contract is not None
        agent, user = self._ending_messages(decision, progress, ending, contract)
        call, trace = progress.call, progress.trace
        if call is not None:
            agent = with_note(agent, call.note)
        route, error_class, result, review_id = (ending.route, ending.error_class,
                                                 ending.result, ending.review_id)
        trace.append(("route", str(error_class or "executed"), str(route)))
        reconciled = unknown_outcome = False
        for entry in trace[progress.decided_entries:]:  # steps 1–4 neither reconcile nor send
            if entry[0] == "reconcile":
                reconciled = True
            if "unknown_outcome" in entry[2]:
                unknown_outcome = True
        counted = {
            "route": str(route), "error_class": str(error_class) if error_class else None,
            "retries": ending.retries, "reconciled": reconciled,
            "unknown_outcome": unknown_outcome,
            # (a comprehension makes a function on every call; most calls have no verdict)
            "shadow": [verdict.__dict__ for verdict in progress.shadow] if progress.shadow
            else [],
        }
        finished = _new_tuple(Finished, (  # its fields in their order
            decision, contract, operation, ending.detail, ending.receipt_state, result, review_id,
            round((time.perf_counter() - progress.started) * 1000, 3), counted))
        return decision.replaced({
            "route": route, "error_class": error_class, "agent_message": agent,
            "user_message": user, "result": result, "operation_id": operation,
            "limit_path": ending.limit_path, "trace": tuple(trace), "log": FROM_RECORD,
            "finished": finished, "extra": {"review_id": review_id} if review_id else {}})

    def _ending_messages(self, decision: Decision, progress: Progress, ending: Ending,
                         contract: Contract) -> tuple[str, str]:
        if ending.error_class is None:
            how = " (confirmed after a lost answer)" if ending.late_confirmation else ""
            return f"{contract.name} succeeded{how}. Result: {compact(ending.result)}", ""
        routing = self.routing
        variables = {"tool": contract.name, "tools": self.tools, "detail": ending.told(),
                     "args": decision.arguments or {},
                     "actor": progress.variables.get("actor", {})}
        if ending.error_class == ErrorClass.DUPLICATE and ending.route == Route.RETURN_RECEIPT:
            return (f"{contract.name} was already done for this request; no new write was "
                    f"made. Earlier result: {compact(ending.result)}",
                    user_message(ErrorClass.DUPLICATE, routing, None, variables))
        if ending.limit_path is not None:
            return limit_messages(routing, variables)
        return (agent_message(ending.error_class, ending.route, routing, None, None, variables),
                user_message(ending.error_class, routing, None, variables))

    def limit_path(self, decision: Decision, detail: str, actor: Mapping[str, Any],
                   store: Callable[[], ReceiptStore], now: datetime) -> Decision:
        """A run limit reached: the routing table's limit path, instead of the decision."""
        route = limit_route(self.routing.on_limit)
        agent, user = limit_messages(self.routing, {
            "tool": decision.tool, "tools": self.tools, "detail": detail,
            "args": decision.arguments or {}, "actor": actor})
        review_id = None
        if route == Route.REVIEW and decision.tool is not None:
            review_id = store().open_review(NewReviewItem(
                tool=decision.tool, reason=str(ErrorClass.BUDGET_EXHAUSTED),
                summary=f"{decision.tool}: {detail}",
                # a person reads it: never the detail, which may hold what a store said
                payload={key: value for key, value in decision.log.items()
                         if key != "detail"}),
                now=now).review_id
        trace = (*decision.trace, TraceEntry("route", "budget_exhausted", str(route), detail))
        return decision.replace(
            route=route, error_class=ErrorClass.BUDGET_EXHAUSTED, agent_message=agent,
            user_message=user, limit_path=str(self.routing.on_limit), trace=trace,
            log={**decision.log, "route": str(route),
                 "error_class": str(ErrorClass.BUDGET_EXHAUSTED), "detail": detail,
                 "review_id": review_id},
            extra={**decision.extra, "review_id": review_id} if review_id else decision.extra)

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
        return refused.replace(tool=receipt.tool, agent_message=agent,
                              operation_id=receipt.operation_id,
                              log={**refused.log, "tool": receipt.tool,
                                   "operation_id": receipt.operation_id,
                                   "receipt_state": str(state)})

    def already_confirmed(self, receipt: Receipt) -> Decision:
        """A confirmation of a write that was already confirmed and done: its receipt."""
        done = (f"{receipt.tool} was already confirmed and done; no new write was made. "
               f"Earlier result: {compact(receipt.result)}")
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
