"""callgate inside the agent frameworks: one adapter per framework, each an optional extra.

- ``frameworks.pydantic_ai`` (``callgate-rules[pydantic-ai]``): ``CallgateToolset``;
- ``frameworks.openai_agents`` (``callgate-rules[openai-agents]``): ``CallgateTools``;
- ``frameworks.langgraph`` (``callgate-rules[langgraph]``): ``CallgateToolNode``.

This package imports no framework; each adapter module imports its own. What they share is
here: the ``Turn`` — who acts, in which user turn — that every adapter takes from the
framework's run context (pydantic-ai's ``deps``, the Agents SDK's ``context``, LangGraph's
``config``), never from the model, the run's intent it declares (``IntentDeclarations``),
and the proposal each adapter hands the gate.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from callgate_rules.documents.model import GateConfig
from callgate_rules.integrations.formats import from_strict_arguments
from callgate_rules.intent import IntentSource, RunIntent
from callgate_rules.pipeline.asynchronous import AsyncGate
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.outcome import Rejection
from callgate_rules.pipeline.propose import NonFiniteNumber, read_json

OnDecision = Callable[[Decision], None]


@dataclass
class Approval:
    """A write the gate asked a person about, kept in the ``Turn`` so that it travels with a
    paused run saved in one process and resumed in another: what the person reads, the
    confirmation token the approval lands with, and who approved it (``None`` until a
    person did, through the adapter)."""

    tool: str
    draft: str | None
    token: str
    operation_id: str | None = None
    expires_at: datetime | None = None
    approved_by: str | None = None


@dataclass
class Turn:
    """One user turn as the gate sees it: the actor and session the application
    authenticated, and the request ID that makes a call proposed twice in this turn one
    operation. Make a new ``Turn`` (a new request ID) for every message the user sends, and
    keep it while a paused run resumes: the resumed calls are the same operations.

    ``intent`` (a ``RunIntent``, its document or spec as a mapping, or YAML text) bounds the
    turn's run by what the user asked: the adapter declares it on ``run`` before the first
    call it decides (``IntentDeclarations``), as ``intent_by`` (default: the approver)."""

    actor: Mapping[str, Any]
    request_id: str
    session: Mapping[str, Any] | None = None
    confirmed_by: str | None = None  # who approves this turn's held writes (default: actor id)
    run: Run = field(default_factory=lambda: Run(started_at=datetime.now(UTC)))
    approvals: dict[str, Approval] = field(default_factory=dict)  # by the call's ID
    # the calls an adapter answered in this turn, with their output (Responses items): the
    # conversation provenance reads, since a framework shows a tool none of the run's items
    answered: list[dict[str, Any]] = field(default_factory=list)
    intent: IntentSource | None = None  # what the user asked, as the run's intent
    intent_by: str | None = None  # who declared it (default: the approver)
    intent_declared: bool = False  # declared on ``run`` already: never declared again

    @property
    def approver(self) -> str:
        return self.confirmed_by or str(self.actor.get("id", "the user"))


def turn_to_json(turn: Turn) -> dict[str, Any]:
    """``turn`` as JSON-ready data — actor, session, request ID, budgets, pending approvals
    and their tokens — for a paused run saved to resume in another process
    (``turn_from_json`` reads it back). Keep it where the application keeps its run state,
    on the server: it carries confirmation tokens."""
    run = turn.run
    return {
        "actor": dict(turn.actor), "request_id": turn.request_id,
        "session": dict(turn.session) if turn.session is not None else None,
        "confirmed_by": turn.confirmed_by,
        "run": {"started_at": run.started_at.isoformat(), "run_id": run.run_id,
                "calls": dict(run.calls), "failures": run.failures,
                "regenerations_in_a_row": run.regenerations_in_a_row},
        "approvals": {call_id: {
            "tool": held.tool, "draft": held.draft, "token": held.token,
            "operation_id": held.operation_id, "approved_by": held.approved_by,
            "expires_at": held.expires_at.isoformat() if held.expires_at else None}
            for call_id, held in turn.approvals.items()},
        "answered": list(turn.answered),
        "intent": turn.intent.as_data() if isinstance(turn.intent, RunIntent)
        else dict(turn.intent) if isinstance(turn.intent, Mapping) else turn.intent,
        "intent_by": turn.intent_by, "intent_declared": turn.intent_declared,
    }


def turn_from_json(data: Mapping[str, Any]) -> Turn:
    """The ``Turn`` ``turn_to_json`` saved."""
    run = data["run"]
    return Turn(
        actor=dict(data["actor"]), request_id=str(data["request_id"]),
        session=dict(data["session"]) if data.get("session") is not None else None,
        confirmed_by=data.get("confirmed_by"),
        run=Run(started_at=datetime.fromisoformat(run["started_at"]), run_id=run["run_id"],
                calls=Counter(run.get("calls", {})), failures=run.get("failures", 0),
                regenerations_in_a_row=run.get("regenerations_in_a_row", 0)),
        approvals={call_id: Approval(
            tool=held["tool"], draft=held.get("draft"), token=held["token"],
            operation_id=held.get("operation_id"), approved_by=held.get("approved_by"),
            expires_at=datetime.fromisoformat(held["expires_at"])
            if held.get("expires_at") else None)
            for call_id, held in data.get("approvals", {}).items()},
        answered=list(data.get("answered", [])),
        intent=data.get("intent"), intent_by=data.get("intent_by"),
        intent_declared=bool(data.get("intent_declared", False)),
    )


class IntentDeclarations:
    """Each run's intent declared once by an adapter, before the run's first call is
    decided, even when the framework decides a turn's calls concurrently: the calls that
    come while it is being declared wait for it. A declaration the gate refuses raises its
    ``IntentError`` in every one of them: no call runs unbounded.

    The conversation is not passed to the gate: the host made the intent from the user's
    message before the run began, and a chat's earlier turns may hold tool output that
    this run's intent was not made from."""

    def __init__(self) -> None:
        self._pending: dict[str, asyncio.Future[None]] = {}  # by run ID, while declaring

    async def declare(self, gate: AsyncGate, turn: Turn) -> None:
        """The ``Turn``'s intent on its run, unless it has none or was declared."""
        if turn.intent is None or turn.intent_declared:
            return
        intent = turn.intent

        async def declare() -> None:
            if not turn.intent_declared:
                await gate.adeclare_intent(turn.run, intent,
                                           declared_by=turn.intent_by or turn.approver)
                turn.intent_declared = True
        await self.once(turn.run.run_id, declare)

    async def once(self, run_id: str, declare: Callable[[], Awaitable[None]]) -> None:
        """``declare()``, unless one for the run is under way: then wait for that one."""
        pending = self._pending.get(run_id)
        if pending is None:
            pending = asyncio.ensure_future(declare())
            self._pending[run_id] = pending
            pending.add_done_callback(lambda _: self._pending.pop(run_id, None))
        await pending


def offered_tools(config: GateConfig, tools: Iterable[str] | None) -> list[str]:
    """The tools an adapter offers the model: ``tools`` (every contract when ``None``),
    sorted; a name without a contract is a ``ValueError`` naming the contracts."""
    names = sorted(tools) if tools is not None else sorted(config.contracts)
    unknown = [name for name in names if name not in config.contracts]
    if unknown:
        raise ValueError(f"no contract for tool(s) {', '.join(unknown)}; the contracts "
                         f"are: {', '.join(sorted(config.contracts))}")
    return names


def turn_of(context: Any) -> Turn:
    """The ``Turn`` in a framework's run context: the context itself, or its ``callgate``
    attribute or key (so an application's own dependencies object can carry one)."""
    if isinstance(context, Turn):
        return context
    found = (context.get("callgate") if isinstance(context, Mapping)
        else getattr(context, "callgate", None))
    if isinstance(found, Turn):
        return found
    raise TypeError(
        f"callgate needs a Turn (actor, request ID) from the run context, got "
        f"{type(context).__name__}; pass a callgate Turn as the run's context/deps, or give "
        "your context a `callgate` attribute holding one")


def proposal(config: GateConfig, name: str, arguments: Any, call_id: str,
             strict: bool = True) -> dict[str, Any]:
    """The model's call as the gate reads it (a Responses ``function_call`` item). A JSON
    text is decoded here only to turn a strict-mode null back into an absent field; text
    that is not JSON goes to the gate as it is, which answers it in its own words."""
    contract = config.contracts.get(name)
    if strict and contract is not None:
        decoded = arguments
        if isinstance(arguments, str):
            try:  # as the gate reads it: a repeated key or NaN is for the gate to refuse
                decoded = read_json(arguments, "arguments are", finite=True)
            except (Rejection, NonFiniteNumber):
                decoded = None
        if isinstance(decoded, Mapping):
            arguments = from_strict_arguments(contract.arguments_schema, decoded)
    return {"type": "function_call", "call_id": call_id, "name": name,
            "arguments": arguments if isinstance(arguments, str) else dict(arguments)
            if isinstance(arguments, Mapping) else arguments}
