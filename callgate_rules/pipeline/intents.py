"""Step 4's bound from the user's request: the run's intent (``callgate_rules.intent``).

With a RoutingTable's ``spec.intent``, every proposal of a named run reads the run's intent
from the store (so every instance serving the run judges by the same one) before its
rules, which may read it as ``intent``:

    intent.declared   bool     an intent is bound to the run
    intent.version    int      1 when first declared, one more each time it was narrowed
    intent.tools      map      the tools the run may call, each with its bounds, as declared
    intent.totals     map      the run's totals, each with ``spent``: what ran so far
    intent.within     bool     this call is within the intent
    intent.leaves     list     what of the intent this call leaves, in words

A call the rules let through that is outside its run's intent goes where ``spec.intent
.outside`` says: a person's confirmation by default, whose draft names what it leaves.
A tool in ``spec.intent.required`` called in a run with no intent is outside it.

Declaring (``declare``): the first intent of a run is accepted only before the run has
decided any call and, when the host passes the conversation, before it holds any tool
output: an intent is made from what the user asked, not from what a tool said. Later
declarations must narrow it (``intent.narrowing``); a widening is refused
(``IntentWidened``), counted and written to the decision log.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from callgate_rules.cel import types as t
from callgate_rules.decision_log import DecisionLog
from callgate_rules.documents.model import Contract, GateConfig, IntentRouting
from callgate_rules.errors import StoreError
from callgate_rules.intent import (
    INTENT_RULE,
    NO_INTENT,
    BoundIntent,
    IntentError,
    IntentSource,
    RunIntent,
    compile_intent,
    leaves,
    spent_of,
    widenings,
)
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.outcome import Rejection
from callgate_rules.pipeline.runs import LeaseHost, RunHold, run_entries
from callgate_rules.provenance import Conversation
from callgate_rules.store.history import HistoryEntry, RunHistory
from callgate_rules.store.intents import RunIntents, StoredIntent
from callgate_rules.taxonomy import ErrorClass, Route

# A history entry spends the intent when its call ran or may have run (``ran``).
SPENDING_ROUTES = frozenset({str(Route.EXECUTE), str(Route.RECONCILE)})
SPENDING_ERRORS = frozenset({str(ErrorClass.UNKNOWN_OUTCOME),
                             str(ErrorClass.RECONCILE_FAILED)})
# What ``intent`` holds, for lint's type checker (the table above).
INTENT_TYPE = t.object_of(t.Shape((
    ("declared", t.Field(t.BOOL, required=True)),
    ("version", t.Field(t.INT)),
    ("declared_by", t.Field(t.STRING)),
    ("request", t.Field(t.STRING)),
    ("tools", t.Field(t.map_of(t.STRING, t.DYN), required=True)),
    ("totals", t.Field(t.map_of(t.STRING, t.DYN), required=True)),
    ("within", t.Field(t.BOOL, required=True)),
    ("leaves", t.Field(t.list_of(t.STRING), required=True)),
), declared=True, closed=True))
# Compiled intents kept per gate, by their text: a run's intent is read on every proposal.
COMPILED_KEPT = 256


class IntentWidened(IntentError):
    """A declaration that would widen the run's bound intent; ``widenings`` says how."""

    def __init__(self, run_id: str, found: list[str]) -> None:
        self.run_id, self.widenings = run_id, found
        super().__init__([f"it {part}" for part in found],
                         heading=f"run {run_id!r}: its intent can only be narrowed, and this "
                         "declaration would widen it")


class IntentRefused(IntentError):
    """A valid intent the run cannot take now: the configuration takes no run intents, or
    the run has already decided a call (or its conversation holds tool output)."""


class IntentKeeper(Protocol):
    """What declaring and reading a run's intent reads of the ``Gate``."""

    @property
    def config(self) -> GateConfig: ...
    @property
    def intents(self) -> RunIntents: ...
    @property
    def compiled_intents(self) -> CompiledIntents: ...
    @property
    def decision_log(self) -> DecisionLog | None: ...
    @property
    def histories(self) -> RunHistory: ...
    @property
    def history_retention(self) -> timedelta: ...


class IntentHost(LeaseHost, IntentKeeper, Protocol):
    """What judging a call by its run's intent reads of the ``Gate``."""


class CompiledIntents:
    """Intents compiled against one configuration, by their stored text (at most
    ``COMPILED_KEPT``, the least recently used dropped first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # by (the configuration's identity, the text): each kept with its configuration,
        # so an identity reused by a later configuration never finds another's intent
        self._kept: OrderedDict[tuple[int, str], tuple[GateConfig, RunIntent]] = OrderedDict()

    def of(self, stored: Mapping[str, Any], config: GateConfig) -> RunIntent:
        """``stored`` compiled against ``config``; ``IntentError`` when it does not fit
        it (a configuration reloaded without a tool the intent names)."""
        # the exact text: two intents that differ only in a string's normal form are two
        key = (id(config), json.dumps(stored, sort_keys=True, ensure_ascii=False,
                                      separators=(",", ":"), default=repr))
        with self._lock:
            found = self._kept.get(key)
            if found is not None and found[0] is config:
                self._kept.move_to_end(key)
                return found[1]
        intent = compile_intent(stored, config, name="the run's stored intent")
        with self._lock:
            self._kept[key] = (config, intent)
            while len(self._kept) > COMPILED_KEPT:
                self._kept.popitem(last=False)
        return intent


def bound(host: IntentKeeper, config: GateConfig, run_id: str) -> BoundIntent | None:
    """The run's intent as the store holds it, compiled (``None``: none declared)."""
    stored = host.intents.run_intent(run_id)
    return None if stored is None else _bound(host, config, stored)


def _bound(host: IntentKeeper, config: GateConfig, stored: StoredIntent) -> BoundIntent:
    return BoundIntent(stored.run_id, stored.version,
                       host.compiled_intents.of(stored.intent, config),
                       stored.declared_by, stored.declared_at)


def judge(host: IntentHost, contract: Contract, arguments: Mapping[str, Any], *,
          run: Run | None, history: Sequence[HistoryEntry] | None, hold: RunHold | None,
          now: datetime, variables: dict[str, Any]) -> tuple[str, ...]:
    """Read the run's intent, judge the call by it, set ``intent`` in ``variables``; what
    the call leaves (empty: within). A call in no named run has no intent. A store that
    fails is ``transient``: the call is never judged by a guess."""
    config = host.config
    routing = config.routing.intent
    assert routing is not None
    try:
        current = None if run is None else bound(host, config, run.run_id)
    except StoreError as error:
        raise Rejection(ErrorClass.TRANSIENT, f"the run's intent: {error}",
                        contract=contract) from None
    except IntentError as error:  # bound under a configuration since replaced: none fits
        unfit = f"the run's intent no longer fits the configuration ({error.problems[0]})"
        variables["intent"] = {**NO_INTENT, "declared": True, "within": False,
                               "leaves": [unfit]}
        return (unfit,)
    left: tuple[str, ...]
    if current is None:
        left = ((f"{contract.name} needs an intent for the run, and none was declared",)
                if routing.requires(contract.name) else ())
        variables["intent"] = {**NO_INTENT, "within": not left, "leaves": list(left)}
        return left
    intent = current.intent
    spent = None
    if intent.bounded_by_history(contract.name):
        # the lease is already held when the rules read the history: not taken twice
        entries = run_entries(host, contract, run, history, now,
                              hold if hold is not None and hold.holder is None else None)
        spent = spent_of(intent, entries, ran)
    left = leaves(intent, contract.name, arguments, spent)
    variable = current.as_variable()
    for total in variable.get("totals", {}).values():
        total["spent"] = 0
    if spent is not None:
        for name, value in spent.totals.items():
            variable["totals"][name]["spent"] = value
    variables["intent"] = {**variable, "within": not left, "leaves": list(left)}
    return left


class IntentPlan(Protocol):
    """What the intent step reads of a tool's plan (``plan.ToolPlan``)."""

    @property
    def contract(self) -> Contract: ...
    @property
    def reads_intent(self) -> bool: ...


def judgement(host: IntentHost, plan: IntentPlan, arguments: Mapping[str, Any], *,
              run: Run | None, history: Sequence[HistoryEntry] | None, hold: RunHold | None,
              now: datetime, variables: dict[str, Any]) -> Judgement:
    """The call's judgement by its run's intent, with intents on (off, there is none),
    judged now when the tool's rules read ``intent``."""
    judged = Judgement(host, plan.contract, arguments, run=run, history=history, hold=hold,
                       now=now, variables=variables)
    if plan.reads_intent:
        judged.judge()
    return judged


class Judgement:
    """One call judged by its run's intent, once: before the rules when they read
    ``intent``, else after them, and then only for a call they let through or hold for a
    person (a refused call costs no read of the intent)."""

    __slots__ = ("host", "contract", "arguments", "run", "history", "hold", "now",
                 "variables", "left")

    def __init__(self, host: IntentHost, contract: Contract, arguments: Mapping[str, Any], *,
                 run: Run | None, history: Sequence[HistoryEntry] | None,
                 hold: RunHold | None, now: datetime, variables: dict[str, Any]) -> None:
        self.host, self.contract, self.arguments = host, contract, arguments
        self.run, self.history, self.hold, self.now = run, history, hold, now
        self.variables = variables
        self.left: tuple[str, ...] | None = None  # once judged

    def judge(self) -> tuple[str, ...]:
        if self.left is None:
            self.left = judge(self.host, self.contract, self.arguments, run=self.run,
                              history=self.history, hold=self.hold, now=self.now,
                              variables=self.variables)
        return self.left

    def routed(self, outcome: str | Rejection) -> str | Rejection:
        """Step 4's outcome once the intent is judged (``routed``)."""
        routing = self.host.config.routing.intent
        if routing is None or (isinstance(outcome, Rejection) and outcome.error_class
                               != ErrorClass.CONFIRMATION_REQUIRED):
            return outcome
        return routed(outcome, self.contract, self.judge(), routing)


def ran(entry: HistoryEntry) -> bool:
    """An entry whose call ran, or may have: what the intent's counts and totals spend —
    known to have run; let through to run (the service's host runs it after the decision,
    and until it finishes it counts); sent with its outcome unknown. A write still held
    for a person does not count (an injected call waiting to be declined must not use up
    what the user asked for); once confirmed and run, it does."""
    return (entry.executed or entry.route in SPENDING_ROUTES
            or entry.error_class in SPENDING_ERRORS)


def routed(outcome: str | Rejection, contract: Contract, left: tuple[str, ...],
           routing: IntentRouting) -> str | Rejection:
    """Step 4's outcome once the run's intent is judged: a call outside it goes where
    ``spec.intent.outside`` says. A call a rule already holds for a person stays held (its
    draft names what it leaves, from ``intent.leaves``) unless the route is stricter."""
    if not left or routing.outside == "rules":
        return outcome
    if type(outcome) is str or routing.outside != str(Route.AWAIT_CONFIRMATION):
        return outside(contract, left, routing)
    return outcome


def outside(contract: Contract, left: tuple[str, ...], routing: IntentRouting) -> Rejection:
    """The rejection of a call the rules let through that leaves its run's intent."""
    detail = "outside the run's intent: " + "; ".join(left)
    if routing.outside == str(Route.AWAIT_CONFIRMATION):
        return Rejection(ErrorClass.CONFIRMATION_REQUIRED, detail, rule=INTENT_RULE,
                         contract=contract, user_message=_said_to_person(left))
    return Rejection(ErrorClass.FORBIDDEN, detail, rule=INTENT_RULE, contract=contract,
                     route=Route(routing.outside), user_message=_said_to_person(left))


def _said_to_person(left: tuple[str, ...]) -> str:
    return ("This call goes beyond what was asked for at the start of the run: "
            + "; ".join(left) + ".")


def declare(host: IntentKeeper, run_id: str, written: IntentSource, *, declared_by: str,
            now: datetime, conversation: Conversation | None = None,
            count: Callable[[str], None]) -> BoundIntent:
    """Bind ``written`` to the run, or narrow the run's intent to it (see the module's
    docstring); the intent as bound. The same intent declared again changes nothing (a
    client may send it with every call). Two declarations racing on one run: the second
    re-reads the first's and must narrow it."""
    config = host.config
    if config.routing.intent is None:
        raise IntentRefused(["this configuration takes no run intents: add an `intent:` "
                           "section to its RoutingTable's spec (spec.intent.outside: "
                           "await_confirmation), so every instance reads them"])
    intent = compile_intent(written, config)
    for _ in range(8):  # a declaration that lost a race reads the winner's and tries again
        current = host.intents.run_intent(run_id)
        if current is not None and current.intent == intent.as_data():
            return _bound(host, config, current)  # declared again as it is: nothing changes
        if current is None:
            _check_first(host, run_id, now, conversation)
            version = 1
        else:
            found = widenings(intent, _bound(host, config, current).intent)
            if found:
                count("intent_widening_refused")
                _log_refusal(host.decision_log, run_id, declared_by, found, now)
                raise IntentWidened(run_id, found)
            version = current.version + 1
        if host.intents.bind_run_intent(run_id, intent.as_data(), version=version,
                                        declared_by=declared_by, now=now):
            count("intent_declared" if version == 1 else "intent_narrowed")
            return BoundIntent(run_id, version, intent, declared_by, now)
    raise StoreError(f"run {run_id!r}: its intent changed under every try to declare one")


def _check_first(host: IntentKeeper, run_id: str, now: datetime,
                 conversation: Conversation | None) -> None:
    """A first intent comes before the run reads anything."""
    earlier = host.histories.run_history(run_id, since=now - host.history_retention, limit=1)
    if earlier:
        raise IntentRefused([f"run {run_id!r} has already decided a call ({earlier[0].tool}): "
                           "an intent is declared before the run reads any tool output; "
                           "declare it first, or start a new run"])
    if conversation is not None and (conversation.unreadable or any(
            segment.kind == "tool" for segment in conversation.segments)):
        raise IntentRefused([f"run {run_id!r}: the conversation already holds tool output "
                           "(or cannot be read); an intent is made from the user's request "
                           "alone, before any tool answers"])


def _log_refusal(log: DecisionLog | None, run_id: str, declared_by: str,
                 found: list[str], now: datetime) -> None:
    if log is not None:
        log.write({"event": "intent_widening_refused", "run_id": run_id,
                   "declared_by": declared_by, "widenings": found,
                   "at": now.isoformat()})
