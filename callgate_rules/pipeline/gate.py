"""The gate: the seven steps of CALL-GATE-7, read top to bottom in ``_decide``.

    propose → parse → validate (arguments, references) → authorize → validate (rules)
            → execute → reconcile → route

Compile once (``Gate.from_paths``), then call ``check`` (steps 1–4, no side effects) or
``handle`` (all seven) once per proposal.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple, cast

from callgate_rules.documents.compiler import load
from callgate_rules.documents.model import Contract, GateConfig, LimitPath, Routing
from callgate_rules.errors import ConfirmationError
from callgate_rules.integrations import confirmation, decision_log, provenance
from callgate_rules.integrations.decision_log import DecisionLog
from callgate_rules.integrations.provenance import Conversation, read_conversation
from callgate_rules.pipeline import authorize, parse, propose, validate
from callgate_rules.pipeline.canonical import arguments_hash, operation_id
from callgate_rules.pipeline.decision import (
    Decision,
    Deferred,
    DeferredMessages,
    PairedMessage,
    RawTraceEntry,
    ShadowVerdict,
    TraceEntry,
    trace_entries,
)
from callgate_rules.pipeline.execute import ExecutionRequest, Executor, Failed, Finder, send
from callgate_rules.pipeline.express import ExpressLane, Foreseen, Reached
from callgate_rules.pipeline.messages import agent_message, user_message
from callgate_rules.pipeline.outcome import Rejection, as_decided, text_of
from callgate_rules.pipeline.route import (
    FAILURES,
    Ending,
    Run,
    Sleep,
    State,
    WriteMachine,
    backoff_delay,
    limit_route,
)
from callgate_rules.pipeline.validate import Resolver
from callgate_rules.store import open_store
from callgate_rules.store.base import NewOperation, NewReviewItem, ReceiptState, ReceiptStore
from callgate_rules.taxonomy import ErrorClass, Route

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class _Progress:
    """What the steps have learnt so far, so a rejection can still name tool and versions.

    A plain class with slots: one is made per decision, and a dataclass's generated
    ``__init__`` with default factories costs noticeably more."""

    __slots__ = ("trace", "shadow", "call", "variables", "permit", "started", "session",
                 "conversation", "contract_only", "plan")

    def __init__(self, started: float = 0.0, session: dict[str, Any] | None = None,
                 conversation: Conversation | None = None) -> None:
        self.trace: list[RawTraceEntry] = []
        self.shadow: list[ShadowVerdict] = []
        self.call: parse.ParsedCall | None = None
        self.variables: dict[str, Any] = {}
        self.permit: str | None = None
        self.started = started
        self.session: dict[str, Any] = session if session is not None else {}
        self.conversation = conversation
        self.contract_only: Contract | None = None  # known before the call fully parsed
        self.plan: _ToolPlan | None = None  # the tool's, once the call is parsed

    @property
    def contract(self) -> Contract | None:
        return self.call.contract if self.call else self.contract_only


class _ToolPlan:
    """What deciding about one tool needs that is the same for every call: worked out on the
    tool's first call, so that no decision recomputes it."""

    __slots__ = ("rules", "may_see", "example", "versions", "parsed", "passed",
                 "reads_provenance", "express", "foretold")

    def __init__(self, config: GateConfig, contract: Contract, tools: str) -> None:
        self.rules = authorize.ToolRules.of(config.policies, contract.name)
        self.may_see = authorize.may_see(config.policies, contract, self.rules)
        self.example = validate.example_call(contract)  # the hint of a rejected call
        self.versions = config.versions_for(contract.name)  # each decision gets a copy
        self.parsed: RawTraceEntry = ("parse", contract.name, "pass",
                                      f"contract v{contract.version}")
        self.passed = f"All checks passed for {contract.name}."  # the agent message
        # Working out every argument's origin costs as much as a rule: skipped when nothing
        # about this tool reads it and no conversation asks for it.
        self.reads_provenance = "provenance" in _variables_read(contract, self.rules)
        self.express = ExpressLane.of(contract, config.policies, self.rules.denies,
                                      self.rules.allows, self.reads_provenance, self.example)
        # how each rejection the lane may return is routed and worded, before any call
        self.foretold = {foreseen: _Foretold(foreseen, config.routing, contract, tools)
                         for foreseen in (self.express.foreseen if self.express else ())}


class _Routed(NamedTuple):
    """Where a rejection goes, and in whose words its messages speak."""

    route: Route
    speaks_as: ErrorClass  # a denial that depends on a record speaks as "not found"
    advice_route: Route  # the route whose advice the agent message gives
    entry: RawTraceEntry

    @classmethod
    def of(cls, rejection: Rejection, routing: Routing) -> _Routed:
        route = rejection.route or routing.route_for(rejection.error_class)
        speaks_as = rejection.speaks_as or rejection.error_class
        return cls(route, speaks_as,
                   routing.route_for(speaks_as) if rejection.speaks_as else route,
                   ("route", str(rejection.error_class), str(route)))


def _variables_read(contract: Contract, rules: authorize.ToolRules) -> set[str]:
    """Every variable an expression or message template about ``contract`` reads."""
    names: set[str] = set()
    expressions = [*(r.when for r in rules.rules), *(r.expression for r in contract.rules),
                   *(lookup.key for lookup in contract.lookups),
                   *(lookup.when for lookup in contract.lookups if lookup.when is not None),
                   contract.verify, contract.reconcile_match]
    for expression in expressions:
        if expression is not None:
            names.update(expression.variables)
    templates = [*(r.message for r in rules.rules), *(r.message for r in contract.rules),
                 *(r.user_message for r in contract.rules),
                 *(lookup.message for lookup in contract.lookups),
                 contract.verify_message, contract.confirmation.summary]
    for template in templates:
        if template is not None:
            names.update(path[0] for path in template.fields if path)
    return names


class _Plan:
    """What the decision path needs of a configuration that is the same for every call: a
    ``_ToolPlan`` per tool (on its first call), the versions of a call with no known tool,
    and the list of tools an unknown one is told about."""

    __slots__ = ("config", "tool_list", "tools", "no_tool_versions")

    def __init__(self, config: GateConfig) -> None:
        self.config = config
        self.tool_list = ", ".join(sorted(config.contracts))
        self.tools: dict[str, _ToolPlan] = {}  # by tool name, made by ``tool``
        self.no_tool_versions = config.versions_for(None)  # each decision gets a copy

    def tool(self, contract: Contract) -> _ToolPlan:
        plan = self.tools.get(contract.name)
        if plan is None:
            plan = self.tools[contract.name] = _ToolPlan(self.config, contract, self.tool_list)
        return plan


class Gate:
    """A compiled configuration bound to the host's resolvers, executors, store and clock."""

    def __init__(
        self,
        config: GateConfig,
        *,
        resolvers: Mapping[str, Resolver] | None = None,
        executors: Mapping[str, Executor] | None = None,
        finder: Finder | None = None,
        store: ReceiptStore | str | None = None,
        clock: Clock = utc_now,
        sleep: Sleep = time.sleep,
        rng: random.Random | None = None,
        decision_log: DecisionLog | None = None,
        secret: bytes | None = None,
        worker: str | None = None,
    ) -> None:
        self.config = config
        self.resolvers: Mapping[str, Resolver] = resolvers if resolvers is not None else {}
        self.executors: Mapping[str, Executor] = dict(executors or {})
        self.finder = finder
        self._store = open_store(store) if isinstance(store, str) else store
        self.clock = clock
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.decision_log = decision_log
        # Tokens signed with a per-process secret do not survive a restart: pass a stable
        # secret (or set CALLGATE_SECRET) when confirmations may outlive the process.
        env_secret = os.environ.get("CALLGATE_SECRET")
        self.secret = secret or (env_secret.encode() if env_secret else secrets.token_bytes(32))
        self.worker = worker or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.counters: Counter[str] = Counter()
        self._counters_lock = threading.Lock()
        self._plan_of_config = _Plan(config)
        # Steps 3–4 try the express lane first (see ``express``); False sends every call
        # through the general steps alone, to compare the two or to measure the lane.
        self.express = True

    @property
    def _plan(self) -> _Plan:
        """The plan of the current configuration (``config`` may be replaced)."""
        plan = self._plan_of_config
        if plan.config is not self.config:
            plan = self._plan_of_config = _Plan(self.config)
        return plan

    @property
    def store(self) -> ReceiptStore:
        """The receipt store; by default the SQLite file named by ``CALLGATE_STORE`` or
        ``callgate.sqlite3`` in the working directory, opened on first use."""
        if self._store is None:
            self._store = open_store(os.environ.get("CALLGATE_STORE",
                                                    "sqlite:///callgate.sqlite3"))
        return self._store

    @classmethod
    def from_paths(cls, *paths: str | Path, **bindings: Any) -> Gate:
        """Load and compile every document under ``paths`` (default: contracts, policies)."""
        return cls(load(paths or ("contracts", "policies")), **bindings)

    # -- steps 1–4 ----------------------------------------------------------------------------

    def check(
        self,
        model_output: Any,
        *,
        actor: Mapping[str, Any],
        now: datetime | None = None,
        request_id: str | None = None,
        session: Mapping[str, Any] | None = None,
        conversation: Any = None,
    ) -> Decision:
        """Decide about one proposal without executing anything (steps 1–4 and the route).

        ``session`` holds facts about the session that no argument can prove (declared by
        the AccessPolicy's ``session`` schema); ``conversation`` is the message list that
        led to the proposal (OpenAI or Anthropic format), from which the ``provenance`` of
        every argument value is worked out."""
        # Without a request ID, one is drawn when the log record is first read.
        return self._check(model_output, actor, now or self.clock(), request_id, session,
                           conversation)[0]

    def _check(self, model_output: Any, actor: Mapping[str, Any], now: datetime,
               request_id: str | None, session: Mapping[str, Any] | None = None,
               conversation: Any = None) -> tuple[Decision, _Progress]:
        started = time.perf_counter()
        progress = _Progress(started=started, session=dict(session) if session else {},
                             conversation=read_conversation(conversation)
                             if conversation is not None else None)
        try:
            rejection = self._decide(model_output, actor, now, progress)
        except Rejection as raised:
            # Its messages are rendered when first read and keep it until then; its
            # traceback would keep every frame of the steps with it.
            rejection = raised.with_traceback(None)
        if rejection is None:
            return self._allowed(progress, actor, request_id, started), progress
        if isinstance(rejection, Foreseen):
            return self._foreseen(rejection, progress, actor, request_id, started), progress
        return self._rejected(rejection, progress, actor, request_id, started), progress

    def _decide(
        self, model_output: Any, actor: Mapping[str, Any], now: datetime, progress: _Progress
    ) -> Rejection | Foreseen | None:
        """Steps 1–4. A step that rejects the call raises; the express lane, which decides
        the plainest rejections without the general steps, returns one it foresaw (raising
        costs a good part of a rejected call)."""
        limits = self.config.routing.input_limits
        trace = progress.trace

        calls = propose.read(model_output, limits)  # 1 PROPOSE
        trace.append((_ONE_CALL_IN.get(calls[0].format) if len(calls) == 1 else None)
                     or _proposed(calls[0].format, len(calls)))
        call = progress.call = parse.one_call(calls, self.config.contracts, limits)  # 2 PARSE
        contract = call.contract
        plans = self._plan
        plan = progress.plan = plans.tools.get(contract.name) or plans.tool(contract)
        trace.append(plan.parsed if call.note is None else (*plan.parsed[:3], call.note))

        # Steps 3–4 the common way first; the general steps take over where it stops.
        reached, outcome = plan.express.run(
            call.arguments, actor, progress.session, now, self.resolvers, progress.variables,
            trace) if plan.express and self.express and progress.conversation is None \
            else (_NOTHING, None)
        if reached is _REJECTED:
            return outcome  # type: ignore[return-value]  # a Foreseen
        if reached >= _AUTHORIZED:
            progress.permit = outcome  # type: ignore[assignment]  # the allow rule
            if reached is _EVERYTHING:
                return None
        variables = progress.variables
        policies = self.config.policies
        if reached < _LOOKING_UP:
            validate.arguments(contract, call.arguments, trace)  # 3 VALIDATE: schema
            variables = progress.variables = {
                "args": call.arguments, "actor": actor, "now": now, "tool": contract.name,
                "session": progress.session,
            }
            authorize.check_actor(policies, actor, progress.session)
        if reached < _REFERENCES:
            validate.references(  # 3 VALIDATE: referenced records, from the actor's view
                contract, variables, self.resolvers, plan.may_see, trace,
                cast(validate.Resume, outcome) if reached is _LOOKING_UP else None)
            if progress.conversation is not None:  # where each value came from
                variables["provenance"] = provenance.trace_sources(
                    call.arguments, progress.conversation, _looked_up(contract, variables),
                    self.config.routing.provenance)
                for path, sources in provenance.flatten(variables["provenance"]):
                    trace.append(("validate", f"provenance {path}",
                                  ", ".join(sources) or "nowhere"))
            elif plan.reads_provenance:  # nothing to trace: every value's origin unknown
                variables["provenance"] = provenance.unknown_sources(call.arguments)
        if reached < _AUTHORIZED:
            progress.permit = authorize.authorize(  # 4 AUTHORIZE
                policies, contract, variables, trace, progress.shadow, plan.rules)
        if reached < _EVERYTHING:
            validate.business_rules(  # 3 VALIDATE: rules
                contract, variables, trace, progress.shadow, plan.example)
        return None

    # -- steps 5–7 ----------------------------------------------------------------------------

    def handle(
        self,
        model_output: Any,
        *,
        actor: Mapping[str, Any],
        request_id: str,
        run: Run | None = None,
        now: datetime | None = None,
        session: Mapping[str, Any] | None = None,
        conversation: Any = None,
    ) -> Decision:
        """All seven steps for one proposal: decide, then execute at most once, reconcile and
        route. ``request_id`` identifies the user's request: the same call proposed twice
        within it is one operation. Pass the same ``run`` for every proposal of one agent run
        so its budgets (calls per tool, failures, regenerations, deadline) hold."""
        now = now or self.clock()
        run = run or Run(started_at=now)
        decision, progress = self._check(model_output, actor, now, request_id, session,
                                         conversation)
        limit = run.limit_reached(self.config.routing.budgets, decision.tool, now)
        if limit is not None:
            decision = self._limit_path(decision, limit, actor)
        elif decision.route == Route.REGENERATE:
            budget = self.config.routing.budgets.regenerations_per_call
            if run.regenerations_in_a_row >= budget:
                decision = self._limit_path(
                    decision, f"{run.regenerations_in_a_row} corrected call(s) already asked "
                              f"for (limit {budget})", actor)
            else:
                run.regenerations_in_a_row += 1
        elif decision.route in (Route.EXECUTE, Route.AWAIT_CONFIRMATION) and \
                decision.error_class in (None, ErrorClass.CONFIRMATION_REQUIRED):
            run.regenerations_in_a_row = 0
            assert decision.tool is not None
            run.calls[decision.tool] += 1
            decision = self._execute(decision, progress, actor, request_id)
        if decision.error_class in FAILURES:
            run.failures += 1
        return self._record(decision)

    def confirm(
        self,
        token: str,
        *,
        actor: Mapping[str, Any],
        confirmed_by: str,
        now: datetime | None = None,
        session: Mapping[str, Any] | None = None,
    ) -> Decision:
        """The separate server-side step that executes a confirmed write: the actor's rights
        are checked again, the token must match operation, actor and arguments and be
        unexpired, and it can be used once."""
        now = now or self.clock()
        try:
            claims = confirmation.read(token)
        except ConfirmationError as error:
            return self._record(self._refused_confirmation(str(error)))
        receipt = self.store.get(claims.operation_id)
        if receipt is None:
            return self._record(self._refused_confirmation(
                "no operation is waiting for this confirmation"))
        call = {"name": receipt.tool, "arguments": dict(receipt.arguments)}
        decision, progress = self._check(call, actor, now, receipt.request_id, session)
        if decision.error_class != ErrorClass.CONFIRMATION_REQUIRED:
            return self._record(decision)  # rights or rules changed since the draft
        try:
            confirmation.verify(self.secret, token, actor, receipt.args_hash, now)
        except ConfirmationError as error:
            return self._record(self._refused_confirmation(str(error), decision))
        machine = self._machine(decision, progress, actor, receipt.request_id)
        claim = self.store.claim_confirmed(
            receipt.operation_id, confirmed_by=confirmed_by, worker=self.worker,
            lease=machine.lease, now=now)
        if not claim.may_execute:
            return self._record(self._refused_confirmation(
                f"this confirmation was already used (the operation is {claim.receipt.state})",
                decision))
        progress.trace.append(("execute", "confirmation", "accepted", f"by {confirmed_by}"))
        ending = machine.run(start=State.SEND)
        return self._record(self._ended(decision, progress, ending, receipt.operation_id))

    def _execute(self, decision: Decision, progress: _Progress, actor: Mapping[str, Any],
                 request_id: str) -> Decision:
        contract = progress.contract
        assert contract is not None and progress.call is not None
        if not contract.is_write:
            return self._ended(decision, progress, self._read(contract, progress, actor), None)
        machine = self._machine(decision, progress, actor, request_id)
        operation = machine.operation
        if decision.error_class == ErrorClass.CONFIRMATION_REQUIRED:
            return self._hold(decision, progress, operation, actor)
        ending = machine.run()
        return self._ended(decision, progress, ending, operation.operation_id)

    def _machine(self, decision: Decision, progress: _Progress, actor: Mapping[str, Any],
                 request_id: str) -> WriteMachine:
        contract = progress.contract
        assert contract is not None and progress.call is not None
        arguments = progress.call.arguments
        operation = NewOperation(
            operation_id=operation_id(request_id, contract.name, contract.document.name,
                                      arguments),
            request_id=request_id, tool=contract.name, contract_version=contract.version,
            args_hash=arguments_hash(arguments), arguments=arguments, actor=dict(actor))
        return WriteMachine(
            contract=contract, operation=operation, executor=self._executor(contract),
            finder=self.finder, store=self.store, routing=self.config.routing,
            worker=self.worker, clock=self.clock, sleep=self.sleep, rng=self.rng,
            actor=actor, variables=progress.variables,
            records=_records(contract, progress.variables),
            trace=lambda step, subject, result: progress.trace.append((step, subject, result)),
        )

    def _executor(self, contract: Contract) -> Executor:
        executor = self.executors.get(contract.name)
        if executor is None:
            raise LookupError(f"no executor bound for {contract.name}; bind one with "
                              "Gate(executors={...})")
        return executor

    def _read(self, contract: Contract, progress: _Progress,
              actor: Mapping[str, Any]) -> Ending:
        """A read changes nothing, so any failure may be retried within the budget."""
        assert progress.call is not None
        budgets = self.config.routing.budgets
        executor = self._executor(contract)
        deadline = self.clock() + timedelta(seconds=budgets.call_deadline_seconds)
        retries = 0
        while True:
            now = self.clock()
            request = ExecutionRequest(contract.name, progress.call.arguments, "",
                                       now + timedelta(seconds=contract.timeout_seconds), actor,
                                       _records(contract, progress.variables))
            outcome = send(executor, request, contract, contract.timeout_seconds)
            if not isinstance(outcome, Failed):
                return Ending(Route.RETURN_RESULT, None, "read", outcome.result, retries=retries)
            retryable = outcome.error_class in (ErrorClass.TRANSIENT, ErrorClass.UNKNOWN_OUTCOME)
            if not retryable:
                route = self.config.routing.route_for(outcome.error_class)
                return Ending(route, outcome.error_class, outcome.detail, retries=retries)
            delay = backoff_delay(retries, budgets, self.rng, outcome.retry_after)
            if retries >= budgets.retries_per_call:
                return self._read_limit(contract, f"{retries} retries (limit "
                                        f"{budgets.retries_per_call}): {outcome.detail}", retries)
            if self.clock() + timedelta(seconds=delay) > deadline:
                return self._read_limit(contract, f"waiting {delay:.1f}s more would pass the "
                                        f"call deadline of {budgets.call_deadline_seconds:g}s",
                                        retries)
            retries += 1
            progress.trace.append(("route", "retry", f"backoff {delay:.3f}s"))
            self.sleep(delay)

    def _read_limit(self, contract: Contract, detail: str, retries: int) -> Ending:
        """The limit path of a read: nothing was written, so a hand-over has no receipt."""
        path = self.config.routing.on_limit
        route = limit_route(path)
        review_id = None
        if route == Route.REVIEW:
            review_id = self.store.open_review(NewReviewItem(
                tool=contract.name, reason=str(ErrorClass.BUDGET_EXHAUSTED),
                summary=f"{contract.name}: {detail}"), now=self.clock()).review_id
        return Ending(route, ErrorClass.BUDGET_EXHAUSTED, detail, limit_path=str(path),
                      review_id=review_id, retries=retries)

    def _hold(self, decision: Decision, progress: _Progress, operation: NewOperation,
              actor: Mapping[str, Any]) -> Decision:
        contract = progress.contract
        assert contract is not None
        now = self.clock()
        seconds = contract.confirmation.expires_seconds or \
            self.config.routing.confirmation_expires_seconds
        expires_at = now + timedelta(seconds=seconds)
        receipt = self.store.hold_for_confirmation(operation, expires_at=expires_at, now=now)
        if receipt.state != ReceiptState.AWAITING_CONFIRMATION:
            # The same call was already confirmed and run within this request.
            ending = WriteMachine.run(self._machine(decision, progress, actor,
                                                    operation.request_id))
            return self._ended(decision, progress, ending, operation.operation_id)
        token = confirmation.issue(self.secret, operation.operation_id, actor,
                                   operation.args_hash, expires_at)
        draft = _draft(contract, progress.variables)
        progress.trace.append(("route", "confirmation", "draft held",
                               f"until {expires_at.isoformat()}"))
        return replace(decision, operation_id=operation.operation_id, draft=draft,
                       confirmation_token=token, trace=trace_entries(tuple(progress.trace)),
                       log={**decision.log, "operation_id": operation.operation_id,
                            "receipt_state": str(receipt.state)})

    def _ended(self, decision: Decision, progress: _Progress, ending: Ending,
               operation: str | None) -> Decision:
        """The decision of steps 1–4, completed with what execution did."""
        contract = progress.contract
        assert contract is not None
        routing = self.config.routing
        variables = {"tool": contract.name, "tools": self._plan.tool_list,
                     "detail": ending.detail, "args": decision.arguments or {},
                     "actor": progress.variables.get("actor", {})}
        if ending.error_class is None:
            agent = f"{contract.name} succeeded. Result: {_compact(ending.result)}"
            if ending.late_confirmation:
                agent = f"{contract.name} succeeded (confirmed after a lost answer). " \
                        f"Result: {_compact(ending.result)}"
            user = ""
        elif ending.error_class == ErrorClass.DUPLICATE and ending.route == Route.RETURN_RECEIPT:
            agent = f"{contract.name} was already done for this request; no new write was " \
                    f"made. Earlier result: {_compact(ending.result)}"
            user = user_message(ErrorClass.DUPLICATE, routing, None, variables)
        elif ending.limit_path is not None:
            agent, user = self._limit_messages(variables)
        else:
            agent = agent_message(ending.error_class, ending.route, routing, None, None,
                                  variables)
            user = user_message(ending.error_class, routing, None, variables)
        if progress.call is not None and progress.call.note:
            agent = f"{agent} Note: {progress.call.note}."
        progress.trace.append(("route", str(ending.error_class or "executed"),
                               str(ending.route)))
        log = {
            **decision.log,
            "route": str(ending.route),
            "error_class": str(ending.error_class) if ending.error_class else None,
            "detail": ending.detail,
            "operation_id": operation,
            "receipt_state": ending.receipt_state,
            "result": ending.result,  # the destination's own answer, never the model's retelling
            "retries": ending.retries,
            "reconciled": any(step == "reconcile" for step, *_ in progress.trace),
            "unknown_outcome": any("unknown_outcome" in result
                                   for _, _, result, *_ in progress.trace),
            "review_id": ending.review_id,
            "elapsed_ms": round((time.perf_counter() - progress.started) * 1000, 3),
        }
        return replace(decision, route=ending.route, error_class=ending.error_class,
                       agent_message=agent, user_message=user, result=ending.result,
                       operation_id=operation, limit_path=ending.limit_path,
                       trace=trace_entries(tuple(progress.trace)), log=log,
                       extra={"review_id": ending.review_id} if ending.review_id else {})

    def _limit_path(self, decision: Decision, detail: str,
                    actor: Mapping[str, Any]) -> Decision:
        path = self.config.routing.on_limit
        route = limit_route(path)
        agent, user = self._limit_messages({
            "tool": decision.tool, "tools": self._plan.tool_list, "detail": detail,
            "args": decision.arguments or {}, "actor": actor})
        review_id = None
        if route == Route.REVIEW and decision.tool is not None:
            review_id = self.store.open_review(NewReviewItem(
                tool=decision.tool, reason=str(ErrorClass.BUDGET_EXHAUSTED),
                summary=f"{decision.tool}: {detail}", payload=dict(decision.log)),
                now=self.clock()).review_id
        trace = (*decision.trace, TraceEntry("route", "budget_exhausted", str(route), detail))
        return replace(decision, route=route, error_class=ErrorClass.BUDGET_EXHAUSTED,
                       agent_message=agent, user_message=user, limit_path=str(path),
                       trace=trace, log={**decision.log, "route": str(route),
                                         "error_class": str(ErrorClass.BUDGET_EXHAUSTED),
                                         "detail": detail, "review_id": review_id})

    def _limit_messages(self, variables: Mapping[str, Any]) -> tuple[str, str]:
        """The limit path's messages; ``variables`` are what their templates may name."""
        routing = self.config.routing
        detail = variables["detail"]
        agent = routing.on_limit_messages.agent.render(variables) \
            if routing.on_limit_messages.agent else {
                LimitPath.PARTIAL_RESULT: "The tool-call limit is reached ({detail}). Stop "
                                          "calling tools and give the user the partial result "
                                          "you have, saying what is missing.",
                LimitPath.HAND_OVER: "The tool-call limit is reached ({detail}). Stop calling "
                                     "tools; a person takes over. Tell the user so.",
                LimitPath.REFUSE: "The tool-call limit is reached ({detail}). Stop calling "
                                  "tools and tell the user this cannot be done now.",
            }[routing.on_limit].format(detail=detail)
        user = routing.on_limit_messages.user.render(variables) \
            if routing.on_limit_messages.user else \
            user_message(ErrorClass.BUDGET_EXHAUSTED, routing, None, variables)
        return agent, user

    def _refused_confirmation(self, why: str, basis: Decision | None = None) -> Decision:
        log = {**(basis.log if basis else {}), "ts": utc_now().isoformat(), "route": "refuse",
               "error_class": str(ErrorClass.FORBIDDEN), "rule": "confirmation-token",
               "detail": why}
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

    def _record(self, decision: Decision) -> Decision:
        """Count the decision and write its log line."""
        with self._counters_lock:
            decision_log.count(self.counters, decision.log)
        if self.decision_log is not None:
            self.decision_log.write(decision.log)
        return decision

    # -- building decisions -------------------------------------------------------------------

    def _allowed(
        self,
        progress: _Progress,
        actor: Mapping[str, Any],
        request_id: str | None,
        started: float,
    ) -> Decision:
        assert progress.call is not None
        contract = progress.call.contract
        if contract.confirmation.required:
            return self._rejected(
                Rejection(ErrorClass.CONFIRMATION_REQUIRED, "the contract requires a person's "
                          "confirmation before execution", rule=progress.permit),
                progress, actor, request_id, started,
            )
        progress.trace.append(_ROUTED_TO_EXECUTE)
        assert progress.plan is not None
        return self._decision(_EXECUTE, None, progress.permit, progress.plan.passed,
                              "", "allowed", progress, actor, request_id, started)

    def _rejected(
        self,
        rejection: Rejection,
        progress: _Progress,
        actor: Mapping[str, Any],
        request_id: str | None,
        started: float,
    ) -> Decision:
        routing = self.config.routing
        routed = _Routed.of(rejection, routing)
        progress.trace.append(routed.entry)
        if progress.call is None and rejection.contract is not None:
            progress.contract_only = rejection.contract
        contract, call = progress.contract, progress.call
        # the arguments and the actor as decided on, should the host change them afterwards
        arguments = dict(call.arguments) if call is not None else None
        decided_actor = dict(actor)
        messages = DeferredMessages(_RejectionMessages(
            rejection, routed, routing, contract, arguments, decided_actor,
            self._plan.tool_list).both)
        return self._decision(
            routed.route, rejection.error_class, rejection.rule, messages, messages,
            rejection.detail, progress, actor, request_id, started, rejection.candidates,
            rejection.extra, decided_actor, arguments)

    def _foreseen(
        self,
        foreseen: Foreseen,
        progress: _Progress,
        actor: Mapping[str, Any],
        request_id: str | None,
        started: float,
    ) -> Decision:
        """``_rejected`` for a rejection the express lane foresaw: its route and constant
        parts were worked out with the tool's plan; the rejection itself, with its
        messages, is made from the variables as decided when someone reads a message."""
        assert progress.plan is not None
        told = progress.plan.foretold[foreseen]
        progress.trace.append(told.routed.entry)
        rejection, variables = foreseen.template, progress.variables
        arguments, decided_actor = dict(variables["args"]), dict(actor)
        messages = DeferredMessages(
            _Foretold.messages, told, arguments, decided_actor,
            as_decided(variables, foreseen.more_reads) if foreseen.more_reads else None)
        return self._decision(
            told.routed.route, rejection.error_class, rejection.rule, messages, messages,
            rejection.detail, progress, actor, request_id, started, rejection.candidates,
            rejection.extra, decided_actor, arguments)

    def _decision(
        self,
        route: Route,
        error_class: ErrorClass | None,
        rule: str | None,
        agent: str | Deferred[str] | DeferredMessages,
        user: str | Deferred[str] | DeferredMessages,
        detail: str,
        progress: _Progress,
        actor: Mapping[str, Any],
        request_id: str | None,
        started: float,
        candidates: tuple[Mapping[str, Any], ...] = (),
        extra: Mapping[str, Any] | None = None,
        decided_actor: dict[str, Any] | None = None,
        decided_arguments: dict[str, Any] | None = None,
    ) -> Decision:
        """``decided_actor``, ``decided_arguments``: the actor and the arguments copied as
        decided on, when the caller has made those copies already."""
        elapsed, decided_at = time.perf_counter() - started, time.time()
        call = progress.call
        contract = call.contract if call is not None else progress.contract_only
        # The plan's versions are never changed: the log keeps them; the decision hands out
        # its own copy, which a host may change.
        if progress.plan is not None:
            decided_versions = progress.plan.versions
        else:
            plan = self._plan
            decided_versions = plan.tool(contract).versions if contract \
                else plan.no_tool_versions
        if error_class == _UNKNOWN_TOOL:
            # The allowlist that refused the tool: every contract's version.
            decided_versions = {**decided_versions, **{
                c.document.key: c.version for c in self.config.contracts.values()}}
        versions = dict(decided_versions)
        if call is not None and call.note:
            # several calls and the policy took one: the model must hear the others did not run
            if isinstance(agent, DeferredMessages):
                agent = user = DeferredMessages(_noted_pair, agent, call.note)
            else:
                agent = Deferred(_noted, agent, call.note)
        shadow = tuple(progress.shadow) if progress.shadow else ()
        # The log record is put together when someone first reads ``decision.log``. What the
        # host handed in and may change afterwards is copied now, one level deep.
        if decided_actor is None:
            decided_actor = dict(actor)
            decided_arguments = dict(call.arguments) if call is not None else None
        log: Deferred[Mapping[str, Any]] = Deferred(
            _log_record, decided_at, request_id, contract, call, decided_versions, route,
            error_class, rule, detail, decided_actor, decided_arguments, shadow, elapsed,
            extra or None)
        return Decision.of_check(
            route, error_class, contract.name if contract else None,
            contract.version if contract else None, rule, agent, user, log, versions,
            Deferred(trace_entries, tuple(progress.trace)),
            call.arguments if call is not None else None,
            call.call_id if call is not None else None, candidates,
            # warn-mode verdicts travel with the decision; audit ones only in the log
            tuple(v for v in shadow if v.mode == "warn") if shadow else (),
        )


# Enum members are looked up through a descriptor in Python 3.11: hot paths compare with these.
_UNKNOWN_TOOL = ErrorClass.UNKNOWN_TOOL
_NOTHING, _LOOKING_UP, _REFERENCES = Reached.NOTHING, Reached.LOOKING_UP, Reached.REFERENCES
_AUTHORIZED, _EVERYTHING, _REJECTED = Reached.AUTHORIZED, Reached.EVERYTHING, Reached.REJECTED
_EXECUTE = Route.EXECUTE
_ROUTED_TO_EXECUTE: RawTraceEntry = ("route", "allowed", str(Route.EXECUTE))


def _proposed(format: str, calls: int) -> RawTraceEntry:
    return ("propose", "format", format, "1 call" if calls == 1 else f"{calls} calls")


# the commonest first trace entries, made once
_ONE_CALL_IN = {format: _proposed(format, 1) for format in propose.FORMATS}


class _RejectionMessages:
    """A rejected call's agent and user messages, put together when first read: from the
    rejection's own words, the routing table's and the route's advice."""

    __slots__ = ("rejection", "routed", "routing", "contract", "arguments", "actor", "tools",
                 "named")

    def __init__(self, rejection: Rejection, routed: _Routed, routing: Routing,
                 contract: Contract | None, arguments: Mapping[str, Any] | None,
                 actor: Mapping[str, Any], tools: str) -> None:
        """``arguments``, ``actor``: as decided on (copies the host cannot change)."""
        self.rejection, self.routed, self.routing = rejection, routed, routing
        self.contract, self.tools = contract, tools
        self.arguments, self.actor = arguments, actor
        self.named: dict[str, Any] | None = None

    def both(self) -> tuple[PairedMessage, PairedMessage]:
        return _rendered(self.agent), _rendered(self.user)

    def agent(self) -> str:
        rejection, routed = self.rejection, self.routed
        return agent_message(routed.speaks_as, routed.advice_route, self.routing,
                             text_of(rejection.agent_message), rejection.hint,
                             self.variables())

    def user(self) -> str:
        return user_message(self.routed.speaks_as, self.routing,
                            text_of(self.rejection.user_message), self.variables())

    def variables(self) -> dict[str, Any]:
        """What the routing table's message templates may name (worked out once)."""
        if self.named is None:
            rejection = self.rejection
            self.named = {
                "tool": self.contract.name if self.contract else None,
                "tools": self.tools,
                "detail": rejection.detail,
                **{k: v for k, v in rejection.extra.items() if isinstance(k, str)},
                "args": self.arguments if self.arguments is not None else {},
                "actor": self.actor,
            }
        return self.named


class _Foretold:
    """How a rejection the express lane foresaw is routed and worded: worked out once, with
    the tool's plan."""

    __slots__ = ("foreseen", "routed", "routing", "contract", "tools")

    def __init__(self, foreseen: Foreseen, routing: Routing, contract: Contract,
                 tools: str) -> None:
        self.foreseen, self.routing, self.contract, self.tools = \
            foreseen, routing, contract, tools
        self.routed = _Routed.of(foreseen.template, routing)

    def messages(self, arguments: dict[str, Any], actor: dict[str, Any],
                 more: dict[str, Any] | None) -> tuple[PairedMessage, PairedMessage]:
        """The agent and user messages for the values a call was decided on (``more``:
        those of ``Foreseen.more_reads``): the rejection made (``Foreseen.make``) and
        worded as any other."""
        decided = {"args": arguments, "actor": actor, "tool": self.contract.name,
                   **(more or {})}
        return _RejectionMessages(self.foreseen.make(decided), self.routed, self.routing,
                                  self.contract, arguments, actor, self.tools).both()


def _rendered(render: Callable[[], str]) -> PairedMessage:
    """The message, or, should it fail to render, what fails again on each read of it."""
    try:
        return render()
    except Exception:
        return Deferred(render)


def _noted(agent: str | Deferred[str], note: str) -> str:
    text = agent() if isinstance(agent, Deferred) else agent
    return f"{text} Note: {note}."


def _noted_pair(messages: DeferredMessages, note: str) -> tuple[PairedMessage, PairedMessage]:
    agent, user = messages()
    return (Deferred(_noted, agent, note) if isinstance(agent, Deferred)
            else _noted(agent, note)), user


def _log_record(
    decided_at: float, request_id: str | None, contract: Contract | None,
    call: parse.ParsedCall | None, versions: Mapping[str, str], route: Route,
    error_class: ErrorClass | None, rule: str | None, detail: str,
    actor: Mapping[str, Any], arguments: dict[str, Any] | None,
    shadow: tuple[ShadowVerdict, ...], elapsed: float, extra: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The decision's log record: one JSON line for engineers, with the actor summarised
    and the contract's sensitive arguments masked."""
    record = {
        "ts": datetime.fromtimestamp(decided_at, UTC).isoformat(),
        "request_id": request_id or uuid.uuid4().hex,
        "tool": contract.name if contract else (extra or {}).get("proposed_tool"),
        "contract_version": contract.version if contract else None,
        "versions": dict(versions),
        "route": str(route),
        "error_class": str(error_class) if error_class else None,
        "rule": rule,
        "detail": detail,
        "actor": _actor_summary(actor),
        "arguments": mask(arguments, contract.mask) if arguments is not None and contract
        else None,
        "shadow": [v.__dict__ for v in shadow],
        "elapsed_ms": round(elapsed * 1000, 3),
    }
    if extra and "evaluation_error" in extra:
        record["evaluation_error"] = extra["evaluation_error"]
    if call is not None and call.note:
        record["note"] = call.note
    return record


def _actor_summary(actor: Mapping[str, Any]) -> dict[str, Any]:
    """Identify the actor in logs without copying everything the host knows about them."""
    return {k: actor[k] for k in ("id", "tenant", "role", "roles") if k in actor}


MASK = "***"


def mask(arguments: Mapping[str, Any], paths: tuple[tuple[str, ...], ...]) -> dict[str, Any]:
    """A copy of ``arguments`` with the contract's sensitive fields replaced by ``***``."""
    masked: dict[str, Any] = dict(arguments)
    for path in paths:
        _mask_path(masked, path)
    return masked


def _mask_path(node: dict[str, Any], path: tuple[str, ...]) -> None:
    head, rest = path[0], path[1:]
    if head not in node:
        return
    if not rest:
        node[head] = MASK
    elif isinstance(node[head], dict):
        node[head] = dict(node[head])
        _mask_path(node[head], rest)


def _records(contract: Contract, variables: Mapping[str, Any]) -> dict[str, Any]:
    return {lookup.name: variables.get(lookup.name) for lookup in contract.lookups}


def _draft(contract: Contract, variables: Mapping[str, Any]) -> str:
    """What the person confirms: the summary, then every argument as it will be sent."""
    summary = contract.confirmation.summary.render(variables) \
        if contract.confirmation.summary else f"Run {contract.name}"
    lines = [summary + ":"]
    for key, value in variables.get("args", {}).items():
        lines.append(f"  {key}: {value if isinstance(value, str) else _compact(value)}")
    # Only the values whose origin a rule of this contract cares about get a warning.
    watched = {".".join(("args", *path[1:])) for rule in contract.rules
               for path in rule.expression.references if path[0] == "provenance"}
    sources = dict(provenance.flatten(variables.get("provenance", {})))
    for path, found in sources.items():
        if path not in watched:
            continue
        if found and all(s.startswith(provenance.TOOL) for s in found):
            tools = ", ".join(s.split(":", 1)[1] for s in found if ":" in s) or "a tool"
            lines.append(f"WARNING: {path.removeprefix('args.')} was not given by the user: "
                         f"it appears only in content the assistant read ({tools}). "
                         "Check it before you confirm.")
        elif not found:
            lines.append(f"WARNING: {path.removeprefix('args.')} appears nowhere in the "
                         "conversation or the records: the assistant produced it.")
    return "\n".join(lines)


def _looked_up(contract: Contract, variables: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The records looked up for this call, flattened: evidence of where a value came from."""
    records: list[Mapping[str, Any]] = []
    for lookup in contract.lookups:
        value = variables.get(lookup.name)
        if isinstance(value, Mapping):
            records.append(value)
        elif isinstance(value, list):
            records.extend(v for v in value if isinstance(v, Mapping))
    return records


def _compact(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 2000 else text[:1997] + "..."
