"""The gate: the seven steps of CALL-GATE-7, read top to bottom in ``check`` and ``handle``.

    propose → parse → validate (arguments, references) → authorize → validate (rules)
            → execute → reconcile → route

Compile once (``Gate.from_paths``), then call ``check`` (steps 1–4 and the route, no side
effects) or ``handle`` (all seven) once per proposal. Steps 3–4 of each tool are its plan
(``plan.ToolPlan``), compiled on the tool's first call; step 7 is ``route.Router``.
"""

from __future__ import annotations

import os
import random
import secrets
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Self

from callgate_rules import confirmation, decision_log
from callgate_rules.decision_log import DecisionLog
from callgate_rules.documents.compiler import load
from callgate_rules.documents.model import Contract, GateConfig
from callgate_rules.errors import ConfirmationError, StoreError
from callgate_rules.pipeline import intents, parse, propose
from callgate_rules.pipeline.approvals import record_approval
from callgate_rules.pipeline.budgets import Run, goes_on
from callgate_rules.pipeline.decision import Decision, RawTraceEntry
from callgate_rules.pipeline.endings import Ending
from callgate_rules.pipeline.execute import Executor, Finder
from callgate_rules.pipeline.history import entry_of, kept_in_history, kept_result
from callgate_rules.pipeline.holding import held_for_person
from callgate_rules.pipeline.logged import logged
from callgate_rules.pipeline.lookups import AbandonedLookups, abandoned
from callgate_rules.pipeline.machine import (
    Retries,
    Sleep,
    State,
    WriteMachine,
    new_operation,
    operation_id_of,
    read,
    store_failed,
)
from callgate_rules.pipeline.outcome import Rejection
from callgate_rules.pipeline.plan import Plans, ToolPlan
from callgate_rules.pipeline.preview import Preview, previewed
from callgate_rules.pipeline.progress import Progress
from callgate_rules.pipeline.run_state import KeepsRuns
from callgate_rules.pipeline.runs import RunHold, read_run
from callgate_rules.pipeline.validate import Resolver
from callgate_rules.provenance import Sealer, default_sealer, read_conversation
from callgate_rules.store import open_store
from callgate_rules.store.base import Receipt, ReceiptState, ReceiptStore
from callgate_rules.store.history import HistoryEntry
from callgate_rules.taxonomy import ErrorClass, Route

Clock = Callable[[], datetime]
# What a person is told when the receipt store cannot be reached; the log keeps why.
STORE_DOWN = "the receipt store is unavailable right now; nothing was executed, try again shortly"
# How far back a run's ``history`` reaches by default (``Gate(history_retention=...)``).
HISTORY_RETENTION = timedelta(days=1)
# How long a proposal waits for its run's lease, held by another decision of the same run
# (``Gate(run_lease_wait=...)``), before it is ``transient``.
RUN_LEASE_WAIT = timedelta(seconds=10)


def utc_now() -> datetime:
    return datetime.now(UTC)


def secret_bytes(secret: object) -> bytes | None:
    """``Gate(secret=...)`` as bytes: bytes as given, a str as its UTF-8 bytes (as the
    ``CALLGATE_SECRET`` variable is read); anything else is refused in one line here rather
    than deep inside ``hmac`` at the first confirmation."""
    if secret is None or isinstance(secret, bytes):
        return secret
    if isinstance(secret, str):
        return secret.encode("utf-8", "surrogatepass")
    if isinstance(secret, bytearray | memoryview):
        return bytes(secret)
    raise TypeError(f"Gate(secret=...) takes bytes or a str (encoded as UTF-8), not "
                    f"{type(secret).__name__}; e.g. Gate(config, secret=os.environ"
                    "[\"CALLGATE_SECRET\"])")


class ClosesItsStore:
    """How a ``Gate`` closes: ``close()`` (or the end of a ``with Gate(...) as gate:``
    block) closes the receipt store the gate opened itself — from a URL, or the default one
    — and leaves alone a store object the caller passed in, which the caller closes. A second
    ``close()`` does nothing."""

    _store: ReceiptStore | None
    _owns_store: bool

    def close(self) -> None:
        if self._store is not None and self._owns_store:
            self._store.close()  # idempotent; a closed store answers every call StoreError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        self.close()


def opened(store: ReceiptStore | str | None) -> tuple[ReceiptStore | None, bool]:
    """The store a gate uses (opened from a URL; ``None``: the default, opened on first use),
    and whether the gate opened it — and so closes it."""
    return ((open_store(store) if isinstance(store, str) else store),
        store is None or isinstance(store, str))


class Gate(ClosesItsStore, KeepsRuns):
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
        secret: bytes | str | None = None,
        worker: str | None = None,
        history_retention: timedelta = HISTORY_RETENTION,
        run_lease_wait: timedelta = RUN_LEASE_WAIT,
        bundle: str | None = None,
    ) -> None:
        self.config = config
        # the digest of the bundle the configuration came from (``from_bundle``): each
        # decision's log line records it
        self.bundle = bundle
        self.resolvers: Mapping[str, Resolver] = resolvers if resolvers is not None else {}
        self.executors: Mapping[str, Executor] = dict(executors or {})
        self.finder = finder
        self._store, self._owns_store = opened(store)
        self.clock = clock
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.decision_log = decision_log
        # Tokens signed with a per-process secret do not survive a restart: pass a stable
        # secret (or set CALLGATE_SECRET) when confirmations may outlive the process.
        # A str secret is its UTF-8 bytes, as CALLGATE_SECRET is.
        secret = secret_bytes(secret)
        env_secret = os.environ.get("CALLGATE_SECRET")
        self.secret = secret or (env_secret.encode() if env_secret else secrets.token_bytes(32))
        # The gate's own tool-result texts are sealed with this, and recognised by it when a
        # conversation brings them back: they are never evidence of where a value came from.
        self.sealer = Sealer(self.secret) if secret or env_secret else default_sealer()
        self.worker = worker or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.counters: Counter[str] = Counter()
        self._counters_lock = threading.Lock()
        self._plans_of_config = Plans(config)
        self.history_retention = history_retention
        self.run_lease_wait = run_lease_wait

    @property
    def abandoned_lookups(self) -> AbandonedLookups:
        """Look-ups given up at their deadline, process-wide (``pipeline.lookups``)."""
        return abandoned()

    @property
    def plans(self) -> Plans:
        """The plans of the current configuration (``config`` may be replaced)."""
        plans = self._plans_of_config
        if plans.config is not self.config:
            plans = self._plans_of_config = Plans(self.config)
        return plans

    def plan(self, tool: str) -> ToolPlan:
        """The compiled plan of ``tool``'s steps 3–4; ``.source`` shows its code."""
        return self.plans.tool(self.config.contracts[tool])

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

    @classmethod
    def from_bundle(cls, location: str | Path, *, public_key: Any = None,
                    allow_unsigned: bool = False, **bindings: Any) -> Gate:
        """Load, verify and compile the bundle at ``location`` (a file or an http(s) URL)
        signed by ``public_key`` (its PEM file); ``BundleError`` names each problem of an
        unsigned (unless ``allow_unsigned``), wrongly signed or tampered one."""
        from callgate_rules.documents.bundle import open_bundle

        bundle = open_bundle(location, public_key, allow_unsigned=allow_unsigned)
        return cls(bundle.compile(), bundle=bundle.digest, **bindings)

    # -- steps 1–4 ----------------------------------------------------------------------

    def check(self, model_output: Any, *, actor: Mapping[str, Any],
              now: datetime | None = None, request_id: str | None = None,
              session: Mapping[str, Any] | None = None, conversation: Any = None,
              run: Run | None = None,
              history: Sequence[HistoryEntry] | None = None) -> Decision:
        """Decide about one proposal without executing anything (steps 1–4 and the route).

        ``session`` holds facts about the session that no argument can prove (declared by
        the AccessPolicy's ``session`` schema); ``conversation`` is the message list that
        led to the proposal (OpenAI or Anthropic format), from which the ``provenance`` of
        every argument value is worked out. Without a request ID, the decision draws one
        for its log. ``run`` or ``history``: what ``history`` holds (see
        ``handle``); nothing is recorded."""
        return self._sealed(self.decide_steps(
            model_output, actor, now or self.clock(), request_id=request_id, session=session,
            conversation=conversation, run=run, history=history)[0])

    def preview(self, model_output: Any, *, actor: Mapping[str, Any], request_id: str,
                now: datetime | None = None, session: Mapping[str, Any] | None = None,
                conversation: Any = None, run: Run | None = None,
                history: Sequence[HistoryEntry] | None = None) -> Preview:
        """``check``, and for a write that needs a person its draft and the token that
        confirms it (``preview.approve``): what an approval hook shows, nothing executed
        or held. Pass the ``run`` that ``approve`` will handle it in, so rules over its
        ``history`` preview as they will decide."""
        now = now or self.clock()
        decision, progress = self.decide_steps(model_output, actor, now, request_id=request_id,
                                         session=session, conversation=conversation, run=run,
                                         history=history)
        return previewed(self._sealed(decision), progress, actor, request_id,
                         secret=self.secret, routing=self.config.routing, now=now)

    def decide_steps(self, model_output: Any, actor: Mapping[str, Any], now: datetime, *,
                     request_id: str | None, session: Mapping[str, Any] | None = None,
                     conversation: Any = None, run: Run | None = None,
                     history: Sequence[HistoryEntry] | None = None,
                     hold: RunHold | None = None) -> tuple[Decision, Progress]:
        """Steps 1–4 and the route, nothing stored: what ``pipeline.hosted`` reuses (with
        ``write_machine``, ``hold_for_person``, ``recorded``), never copies."""
        config = self.config  # ``plans``, without a call while the configuration stays
        plans = self._plans_of_config if self._plans_of_config.config is config else self.plans
        limits = config.routing.input_limits
        progress = Progress(time.perf_counter(), dict(session) if session else {},
                            read_conversation(conversation, sealer=self.sealer)
                            if conversation is not None else None)
        trace = progress.trace
        try:
            calls = propose.read(model_output, limits)  # 1 PROPOSE
            trace.append(propose.entry(calls))
            call = progress.call = parse.one_call(calls, config.contracts, limits)  # 2 PARSE
            contract = call.contract
            plan = progress.plan = plans.tools.get(contract.name) or plans.tool(contract)
            trace.append(plan.parsed if call.note is None else (*plan.parsed[:3], call.note))
            if plan.reads_history:  # the run so far (and its approvals), for the rules
                read_run(self, contract, run, history, now,
                         hold=hold, variables=progress.variables)
            judged = None if config.routing.intent is None else intents.judgement(
                self, plan, call.arguments, run=run, history=history, hold=hold, now=now,
                variables=progress.variables)
            # 3 VALIDATE, 4 AUTHORIZE: the tool's plan, then within what the user asked
            outcome = plan.decide(call.arguments, actor, now, self.resolvers, progress)
            if judged is not None:
                outcome = judged.routed(outcome)
        except Rejection as raised:
            # Its messages are rendered when first read and keep it until then; its
            # traceback would keep every frame of the steps with it.
            outcome = raised.with_traceback(None)
        return plans.router.decided(outcome, progress, actor, request_id), progress  # 7 ROUTE

    # -- steps 5–7 ----------------------------------------------------------------------

    def handle(self, model_output: Any, *, actor: Mapping[str, Any], request_id: str,
               run: Run | None = None, now: datetime | None = None,
               session: Mapping[str, Any] | None = None, conversation: Any = None,
               history: Sequence[HistoryEntry] | None = None) -> Decision:
        """All seven steps for one proposal: decide, then execute at most once, reconcile and
        route. ``request_id`` identifies the user's request: the same call proposed twice
        within it is one operation. Pass the same ``run`` for every proposal of one agent run
        so its budgets (calls per tool, failures, regenerations, deadline) hold, and its
        ``history`` (kept by the store under ``run.run_id``) reaches every rule that reads
        it; a host that keeps the history itself passes ``history`` and records nothing
        here (``pipeline.history.entry_of`` makes the entry)."""
        now = now or self.clock()
        # a named run may be served by other instances: hold its lease (runs.RunHold)
        hold = RunHold(self, run.run_id if run is not None and history is None else None)
        named = run  # a run made here is new: no history and no intent to read for it
        run = run or Run(started_at=now)
        with hold:
            decision, progress = self.decide_steps(  # 1–4
                model_output, actor, now, request_id=request_id, session=session,
                conversation=conversation, run=named, history=history, hold=hold)
            limit = run.admit(decision, self.config.routing.budgets, now)
            if limit is not None:  # 7 ROUTE: a run limit reached takes the limit path
                decision = self.plans.router.limit_path(decision, limit, actor,
                                                        lambda: self.store, self.clock())
            elif goes_on(decision):  # 5 EXECUTE, 6 RECONCILE, 7 ROUTE
                decision = self._execute(decision, progress, actor, request_id)
            run.ended(decision)
            if (history is None and progress.contract is not None
                    and self.plans.records_history):
                entry = entry_of(decision, progress.contract, run.run_id, request_id, now)
                kept_in_history(lambda: self.histories.record_history(entry), self.count)
        return self.recorded(decision)

    def confirm(self, token: str, *, actor: Mapping[str, Any], confirmed_by: str,
                now: datetime | None = None,
                session: Mapping[str, Any] | None = None) -> Decision:
        """The separate server-side step that executes a confirmed write: the actor's rights
        are checked again, the token must match operation, actor and arguments and be
        unexpired, and it can be used once."""
        now = now or self.clock()
        router = self.plans.router
        try:
            receipt = confirmation.waiting_receipt(self.store, self.secret, token, actor, now)
        except ConfirmationError as error:
            return self.recorded(router.refused_confirmation(str(error)))
        except StoreError as error:
            return self.recorded(router.refused_confirmation(STORE_DOWN, detail=str(error)))
        if receipt.state == ReceiptState.SUCCEEDED:
            return self.recorded(router.already_confirmed(receipt))
        if receipt.state != ReceiptState.AWAITING_CONFIRMATION:  # used: its write ran or runs
            return self.recorded(router.used_confirmation(receipt))
        try:
            run_id = (self.histories.run_of(receipt.operation_id)
                if self.plans.records_history else None)
        except StoreError as error:
            return self.recorded(router.refused_confirmation(STORE_DOWN, detail=str(error)))
        # Rules over the run are decided again, holding its lease until the write's entry
        # says it ran, as ``handle`` holds it.
        with RunHold(self, run_id) as hold:
            return self._confirmed(receipt, actor, confirmed_by, now, session=session,
                                   run_id=run_id, hold=hold)

    def _confirmed(self, receipt: Receipt, actor: Mapping[str, Any], confirmed_by: str,
                   now: datetime, *, session: Mapping[str, Any] | None, run_id: str | None,
                   hold: RunHold) -> Decision:
        """``confirm`` once the token named a waiting receipt: checked again, claimed, run."""
        router = self.plans.router
        call = {"name": receipt.tool, "arguments": dict(receipt.arguments)}
        decision, progress = self.decide_steps(
            call, actor, now, request_id=receipt.request_id, session=session,
            run=None if run_id is None else Run(started_at=now, run_id=run_id), hold=hold)
        if decision.error_class == ErrorClass.TRANSIENT:  # the run's history or lease: later
            return self.recorded(decision)
        if not goes_on(decision):  # rights or rules changed (covered meanwhile: it goes on)
            return self.recorded(router.refused_confirmation(
                f"the call no longer passes its checks ({decision.error_class or 'allowed'})",
                decision))
        machine = self.write_machine(progress, actor, receipt.request_id)
        try:
            claim = self.store.claim_confirmed(
                receipt.operation_id, confirmed_by=confirmed_by, worker=self.worker,
                lease=machine.lease, now=now)
        except StoreError as error:
            return self.recorded(router.refused_confirmation(STORE_DOWN, decision, str(error)))
        if not claim.may_execute:
            if claim.receipt.state == ReceiptState.SUCCEEDED:  # another confirmation won
                return self.recorded(router.already_confirmed(claim.receipt))
            return self.recorded(router.used_confirmation(claim.receipt, decision))
        progress.trace.append(("execute", "confirmation", "accepted", f"by {confirmed_by}"))
        record_approval(self.histories, self.count, progress.variables, receipt,
                        approved_by=confirmed_by, now=now, run_id=run_id)
        ending = machine.run(start=State.SEND)
        if run_id is not None and ending.route == Route.RETURN_RESULT:
            kept_in_history(lambda: self.histories.mark_executed(
                receipt.operation_id, at=now, route=str(ending.route),
                result=kept_result(machine.contract, ending.result)), self.count)
        return self.recorded(router.ended(decision, progress, ending, receipt.operation_id))

    def _execute(self, decision: Decision, progress: Progress, actor: Mapping[str, Any],
                 request_id: str) -> Decision:
        """Steps 5–6 for a call steps 1–4 let through; a write waits for a person first
        when it needs one."""
        contract = progress.contract
        assert contract is not None and progress.call is not None
        router, operation = self.plans.router, None
        try:
            if not contract.is_write and decision.error_class is None:
                ending = read(contract, self._executor(contract), progress.call.arguments,
                              actor, records(contract, progress.variables),
                              routing=self.config.routing, store=self.store,
                              retries=self._retries(), trace=_tracer(progress.trace))
                return router.ended(decision, progress, ending, None)
            machine = self.write_machine(progress, actor, request_id)
            operation = machine.operation.operation_id
            if decision.error_class == ErrorClass.CONFIRMATION_REQUIRED:
                return self._hold(decision, progress, machine)
            ending = machine.run()
        except StoreError as error:  # nothing was sent: the machine catches its own
            ending = store_failed(error, False,
                                  self.config.routing.route_for(ErrorClass.TRANSIENT))
        return router.ended(decision, progress, ending, operation)

    def operation_id(self, progress: Progress, request_id: str) -> str:
        """A write's operation ID alone, as its write machine's: what a host is told of a
        write allowed to go on, before it claims it (the arguments hash comes then)."""
        contract, call = progress.contract, progress.call
        assert contract is not None and call is not None
        return operation_id_of(contract, request_id, call.arguments)

    def write_machine(self, progress: Progress, actor: Mapping[str, Any],
                      request_id: str) -> WriteMachine:
        """A write's operation and its ``WriteMachine``; nothing is claimed yet."""
        contract = progress.contract
        assert contract is not None and progress.call is not None
        operation = new_operation(contract, request_id, progress.call.arguments, actor)
        return WriteMachine(
            contract=contract, operation=operation, executor=self._executor(contract),
            finder=self.finder, store=self.store, routing=self.config.routing,
            worker=self.worker, clock=self.clock, sleep=self.sleep, rng=self.rng,
            actor=actor, variables=progress.variables,
            records=records(contract, progress.variables), trace=_tracer(progress.trace))

    def _retries(self) -> Retries:
        return Retries(self.config.routing.budgets, self.clock, self.sleep, self.rng)

    def _executor(self, contract: Contract) -> Executor:
        executor = self.executors.get(contract.name)
        if executor is None:
            raise LookupError(f"no executor bound for {contract.name}; bind one with "
                              "Gate(executors={...})")
        return executor

    def _hold(self, decision: Decision, progress: Progress, machine: WriteMachine) -> Decision:
        """A write that needs a person: held in the store, with a draft and a token."""
        held = self.hold_for_person(decision, progress, machine)
        if held is None:  # the same call was already confirmed and run within this request
            ending: Ending = machine.run()
            return self.plans.router.ended(decision, progress, ending,
                                           machine.operation.operation_id)
        return held

    def hold_for_person(self, decision: Decision, progress: Progress,
                        machine: WriteMachine) -> Decision | None:
        """The write held for a person (``pipeline.holding``); ``None`` when its receipt is
        past waiting (confirmed meanwhile)."""
        return held_for_person(decision, progress, machine, secret=self.secret, now=self.clock(),
                               default_expiry=self.config.routing.confirmation_expires_seconds)

    def _sealed(self, decision: Decision) -> Decision:
        """The decision, with the sealer the formats helpers seal its message with."""
        decision.sealer = self.sealer
        return decision

    def recorded(self, decision: Decision) -> Decision:
        """Count the decision and write its log line."""
        self._sealed(decision)
        with self._counters_lock:
            decision_log.count(self.counters, decision.counted())  # the log: when read
        if self.decision_log is not None:  # an executed write's receipt names its line
            logged(self.decision_log, decision, self.bundle, lambda: self.store, self.count)
        return decision

    def count(self, counter: str) -> None:
        with self._counters_lock:
            self.counters[counter] += 1


def records(contract: Contract, variables: Mapping[str, Any]) -> dict[str, Any]:
    """The records looked up for a call, by look-up name, as the executor gets them."""
    return {lookup.name: variables.get(lookup.name) for lookup in contract.lookups}


def _tracer(trace: list[RawTraceEntry]) -> Callable[[str, str, str], None]:
    return lambda step, subject, result: trace.append((step, subject, result))
