"""The OpenAI Agents SDK adapter (``pip install 'callgate-rules[openai-agents]'``).

``CallgateTools(gate)`` builds one ``FunctionTool`` per contract — name, description and
strict parameters from the contract, so the tools the model is offered and the gate that
checks them never drift apart — and every call goes through the gate:

- **refusals**: the gate's agent message is the tool's output; the run goes on and the model
  reads why (a malformed argument text reaches the gate as it is and gets its answer too);
- **unknown tools**: ``run_config()`` sets ``tool_not_found_behavior="return_error_to_model"``
  and a ``tool_error_formatter`` that asks the gate, so the model gets the gate's message
  instead of the run aborting with ``ModelBehaviorError``;
- **confirmation**: ``needs_approval`` is the gate's preview (no side effects): a write that
  needs a person interrupts the run as the SDK's approvals do; ``requests(state)`` lists
  them, ``draft(item)`` is what the person reads, and after ``approve(state, item, by=...)``
  the resumed run confirms the write through the gate (held, then confirmed with the
  preview's token; a call no person approved is only ever held);
- **across processes**: the pending approval — its draft, its token, who approved it — is
  kept in the run's ``Turn``, so a paused run saved with ``save(state)`` (the SDK's
  ``state.to_json`` with this adapter's ``context_serializer``) and restored with
  ``restore(agent, data)`` in another process (another web worker, after a restart) lists
  the same ``requests``, shows the same ``draft`` and confirms the write exactly once. The
  processes share the receipt store and the gate's secret (``CALLGATE_SECRET``);
- **actor, session, request ID**: from the run's ``context`` (a ``Turn``), never the model;
  the conversation for provenance is the run's input (``context_wrapper.turn_input``) and
  every call this adapter answered since, with its output (the SDK shows a tool nothing of
  the run's own items, so the adapter keeps them in the ``Turn``);
- **the run's intent**: the ``Turn``'s ``intent``, declared on its run before the first
  call is previewed (``IntentDeclarations``); a saved run remembers it was declared.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    RunConfig,
    RunContextWrapper,
    RunState,
    ToolApprovalItem,
)
from agents.run_config import ToolErrorFormatterArgs

from callgate_rules.integrations.formats import openai_strict_schema, tool_result_text
from callgate_rules.integrations.frameworks import (
    Approval,
    IntentDeclarations,
    OnDecision,
    Turn,
    offered_tools,
    proposal,
    turn_from_json,
    turn_of,
    turn_to_json,
)
from callgate_rules.pipeline.asynchronous import AsyncGate
from callgate_rules.pipeline.decision import Decision

_DRAFTS_KEPT = 1024  # the drafts of this many recent approvals are kept for ``draft(item)``


class CallgateTools:
    """The contracts as Agents SDK function tools, every call decided by ``gate``.

    ``turn`` finds the ``Turn`` in the run's context (default: the context is one, or has
    a ``callgate`` attribute); ``on_decision`` sees every decision that answers the model or
    pauses the run for a person, for logs or a trace."""

    def __init__(self, gate: AsyncGate, *, tools: Iterable[str] | None = None,
                 turn: Callable[[Any], Turn] = turn_of,
                 on_decision: OnDecision | None = None) -> None:
        self.gate = gate
        self.turn = turn
        self.on_decision = on_decision
        self.names = offered_tools(gate.gate.config, tools)
        self.intents = IntentDeclarations()  # each turn's intent, declared once
        self._drafts: dict[str, str | None] = {}  # call ID → what the approver reads

    @property
    def tools(self) -> list[FunctionTool]:
        """One strict ``FunctionTool`` per contract."""
        contracts = self.gate.gate.config.contracts
        return [FunctionTool(
            name=name, description=contracts[name].document.description,
            params_json_schema=openai_strict_schema(contracts[name].arguments_schema),
            on_invoke_tool=functools.partial(self._invoke, name), strict_json_schema=True,
            needs_approval=functools.partial(self._needs_approval, name))
            for name in self.names]

    def run_config(self, **settings: Any) -> RunConfig:
        """A ``RunConfig`` under which a call to a tool that does not exist gets the gate's
        message; other settings as given."""
        return RunConfig(tool_not_found_behavior="return_error_to_model",
                         tool_error_formatter=self.tool_error, **settings)

    # -- approvals, for the host ------------------------------------------------------------

    def requests(self, state: RunState[Any, Any]) -> list[ToolApprovalItem]:
        """The approvals the gate asked for in a paused run — made in this process or
        ``restore``d from another — each with its ``draft``. An approval the SDK asks for on
        its own — it does for a call whose argument text it cannot parse — is let through
        here: the gate answers that call with its own message and holds whatever would still
        need a person."""
        turn = self._turn_of_state(state)
        asked = []
        for item in state.get_interruptions():
            held = turn.approvals.get(_call_id(item))
            if held is not None:
                self._remember_draft(_call_id(item), held.draft)
                asked.append(item)
            elif item.tool_name in self.names:
                state.approve(item)
        return asked

    def draft(self, item: ToolApprovalItem) -> str | None:
        """What the person approving ``item`` reads: the gate's draft as
        ``confirmation.drafts`` renders it, warnings and evidence included (``None`` for an
        approval the gate did not ask for). A restored run's drafts are known here once
        ``requests(state)`` listed them."""
        return self._drafts.get(_call_id(item))

    def approve(self, state: RunState[Any, Any], item: ToolApprovalItem, *, by: str) -> None:
        """Approve ``item`` in ``state`` as ``by``; the resumed run confirms the write. Who
        approved is kept in the state: a run saved after this resumes approved."""
        held = self._turn_of_state(state).approvals.get(_call_id(item))
        if held is not None:
            held.approved_by = by
        state.approve(item)

    def reject(self, state: RunState[Any, Any], item: ToolApprovalItem) -> None:
        """Reject ``item``: nothing is executed, nothing is held."""
        self._turn_of_state(state).approvals.pop(_call_id(item), None)
        self._drafts.pop(_call_id(item), None)
        state.reject(item)

    # -- a paused run in another process -----------------------------------------------------

    @staticmethod
    def context_serializer(context: Any) -> dict[str, Any]:
        """For ``state.to_json(context_serializer=...)``: the run's ``Turn`` as JSON data."""
        return turn_to_json(turn_of(context))

    @staticmethod
    def context_deserializer(data: Mapping[str, Any]) -> Turn:
        """For ``RunState.from_json(..., context_deserializer=...)``: the ``Turn`` back."""
        return turn_from_json(data)

    def save(self, state: RunState[Any, Any]) -> dict[str, Any]:
        """``state.to_json()``, its ``Turn`` included (actor, request ID, pending approvals
        and their tokens). Keep it on the server: it carries confirmation tokens."""
        return state.to_json(context_serializer=self.context_serializer)

    async def restore(self, agent: Agent[Any],
                      data: Mapping[str, Any]) -> RunState[Any, Agent[Any]]:
        """The run ``save`` saved, in this process; resume it with ``Runner.run(agent,
        state, run_config=...)`` and no other context (its context is the restored
        ``Turn``)."""
        return await RunState.from_json(agent, dict(data),
                                        context_deserializer=self.context_deserializer)

    # -- what the SDK calls ------------------------------------------------------------------

    async def tool_error(self, error: ToolErrorFormatterArgs[Any]) -> str | None:
        """The gate's message for a call to a tool the agent does not have."""
        if error.kind != "tool_not_found":
            return None
        turn = self.turn(error.run_context.context)
        call = proposal(self.gate.gate.config, error.tool_name, {}, error.call_id)
        decision = await self.gate.acheck(call, actor=turn.actor, request_id=turn.request_id,
                                          session=turn.session)
        return self._answer(decision, call, turn)

    async def _needs_approval(self, name: str, context: RunContextWrapper[Any],
                              arguments: Mapping[str, Any], call_id: str) -> bool:
        turn = self.turn(context.context)
        if call_id in turn.approvals:  # asked already: the SDK asks again on resume
            return True
        await self.intents.declare(self.gate, turn)
        preview = await self.gate.apreview(
            proposal(self.gate.gate.config, name, arguments, call_id), actor=turn.actor,
            request_id=turn.request_id, session=turn.session, run=turn.run,
            conversation=self._conversation(context, turn))
        if not preview.needs_confirmation or preview.confirmation_token is None:
            return False  # the call itself answers: handled when the SDK invokes it
        if self.on_decision is not None:
            self.on_decision(preview.decision)
        turn.approvals[call_id] = Approval(name, preview.draft, preview.confirmation_token,
                                           preview.operation_id, preview.expires_at)
        self._remember_draft(call_id, preview.draft)
        return True

    async def _invoke(self, name: str, context: Any, arguments: str) -> str:
        turn = self.turn(context.context)
        await self.intents.declare(self.gate, turn)
        call_id = context.tool_call_id
        call = proposal(self.gate.gate.config, name, arguments, call_id)
        conversation = self._conversation(context, turn)
        held = turn.approvals.pop(call_id, None)
        self._drafts.pop(call_id, None)
        if (held is not None and held.approved_by is not None
                and context.is_tool_approved(name, call_id)):  # a person, through ``approve``
            decision = await self.gate.aapprove(
                call, held.token, actor=turn.actor, request_id=turn.request_id,
                confirmed_by=held.approved_by, run=turn.run, session=turn.session,
                conversation=conversation)
            return self._answer(decision, call, turn)
        decision = await self.gate.ahandle(call, actor=turn.actor, request_id=turn.request_id,
                                           run=turn.run, session=turn.session,
                                           conversation=conversation)
        return self._answer(decision, call, turn)

    def _answer(self, decision: Decision, call: Mapping[str, Any], turn: Turn) -> str:
        if self.on_decision is not None:
            self.on_decision(decision)
        text = tool_result_text(decision, str(call["call_id"]))
        arguments = call["arguments"]
        turn.answered += [
            {"type": "function_call", "call_id": call["call_id"], "name": call["name"],
             "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)},
            {"type": "function_call_output", "call_id": call["call_id"], "output": text}]
        return text

    def _conversation(self, context: RunContextWrapper[Any], turn: Turn) -> list[Any] | None:
        """The run's input and what this adapter answered in the turn so far."""
        items = [*(context.turn_input or ()), *turn.answered]
        return items or None

    def _remember_draft(self, call_id: str, draft: str | None) -> None:
        self._drafts[call_id] = draft
        while len(self._drafts) > _DRAFTS_KEPT:
            self._drafts.pop(next(iter(self._drafts)))

    def _turn_of_state(self, state: RunState[Any, Any]) -> Turn:
        """The ``Turn`` a paused run carries (the SDK keeps the run's context in the state,
        and offers no public accessor for it)."""
        wrapper = getattr(state, "_context", None)
        try:
            return self.turn(wrapper.context if wrapper is not None else None)
        except TypeError as error:
            raise TypeError(
                f"{error}. A run restored from JSON keeps its Turn only when it was saved "
                "with callgate's context serializer: save it with CallgateTools.save(state) "
                "and restore it with CallgateTools.restore(agent, data)") from None


def _call_id(item: ToolApprovalItem) -> str:
    raw = item.raw_item
    found = raw.get("call_id") if isinstance(raw, Mapping) else getattr(raw, "call_id", None)
    return str(found or getattr(raw, "id", ""))
