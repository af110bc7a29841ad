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
- **actor, session, request ID**: from the run's ``context`` (a ``Turn``), never the model;
  the conversation for provenance is the run's input (``context_wrapper.turn_input``) and
  every call this adapter answered since, with its output (the SDK shows a tool nothing of
  the run's own items, so the adapter keeps them, per request ID).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agents import FunctionTool, RunConfig, RunContextWrapper, RunState, ToolApprovalItem
from agents.run_config import ToolErrorFormatterArgs

from callgate_rules.integrations.formats import openai_strict_schema, tool_result_text
from callgate_rules.integrations.frameworks import (
    OnDecision,
    Turn,
    offered_tools,
    proposal,
    turn_of,
)
from callgate_rules.pipeline.asynchronous import AsyncGate
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.preview import Preview

_TURNS_KEPT = 256  # the answered calls of this many recent turns are kept


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
        self._previews: dict[str, Preview] = {}  # call ID → what the approver was shown
        self._approvers: dict[str, str] = {}  # call ID → who approved it
        self._answered: dict[str, list[dict[str, Any]]] = {}  # request ID → calls answered

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
        """The approvals the gate asked for in a paused run, each with its ``draft``. An
        approval the SDK asks for on its own — it does for a call whose argument text it
        cannot parse — is let through here: the gate answers that call with its own message
        and holds whatever would still need a person."""
        asked = []
        for item in state.get_interruptions():
            if _call_id(item) in self._previews:
                asked.append(item)
            elif item.tool_name in self.names:
                state.approve(item)
        return asked

    def draft(self, item: ToolApprovalItem) -> str | None:
        """What the person approving ``item`` reads: the gate's draft, provenance warnings
        included (``None`` for an approval the gate did not ask for)."""
        found = self._previews.get(_call_id(item))
        return found.draft if found is not None else None

    def approve(self, state: RunState[Any, Any], item: ToolApprovalItem, *, by: str) -> None:
        """Approve ``item`` in ``state`` as ``by``; the resumed run confirms the write."""
        self._approvers[_call_id(item)] = by
        state.approve(item)

    def reject(self, state: RunState[Any, Any], item: ToolApprovalItem) -> None:
        """Reject ``item``: nothing is executed; the held write expires unconfirmed."""
        self._previews.pop(_call_id(item), None)
        state.reject(item)

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
        preview = await self.gate.apreview(
            proposal(self.gate.gate.config, name, arguments, call_id), actor=turn.actor,
            request_id=turn.request_id, session=turn.session, run=turn.run,
            conversation=self._conversation(context, turn))
        if not preview.needs_confirmation:
            return False  # the call itself answers: handled when the SDK invokes it
        if self.on_decision is not None:
            self.on_decision(preview.decision)
        self._previews[call_id] = preview
        return True

    async def _invoke(self, name: str, context: Any, arguments: str) -> str:
        turn = self.turn(context.context)
        call_id = context.tool_call_id
        call = proposal(self.gate.gate.config, name, arguments, call_id)
        conversation = self._conversation(context, turn)
        approved_by = self._approvers.pop(call_id, None)  # a person, through ``approve``
        if approved_by is not None and context.is_tool_approved(name, call_id):
            preview = self._previews.pop(call_id, None) or await self.gate.apreview(
                call, actor=turn.actor, request_id=turn.request_id, session=turn.session,
                run=turn.run, conversation=conversation)
            if preview.confirmation_token is not None:
                decision = await self.gate.aapprove(
                    call, preview.confirmation_token, actor=turn.actor,
                    request_id=turn.request_id, confirmed_by=approved_by, run=turn.run,
                    session=turn.session, conversation=conversation)
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
        answered = self._answered.pop(turn.request_id, [])
        self._answered[turn.request_id] = answered  # the newest turn last
        answered += [{"type": "function_call", "call_id": call["call_id"], "name": call["name"],
                      "arguments": arguments if isinstance(arguments, str)
                      else json.dumps(arguments)},
                     {"type": "function_call_output", "call_id": call["call_id"],
                      "output": text}]
        while len(self._answered) > _TURNS_KEPT:
            self._answered.pop(next(iter(self._answered)))
        return text

    def _conversation(self, context: RunContextWrapper[Any], turn: Turn) -> list[Any] | None:
        """The run's input and what this adapter answered in the turn so far."""
        items = [*(context.turn_input or ()), *self._answered.get(turn.request_id, ())]
        return items or None


def _call_id(item: ToolApprovalItem) -> str:
    raw = item.raw_item
    found = raw.get("call_id") if isinstance(raw, Mapping) else getattr(raw, "call_id", None)
    return str(found or getattr(raw, "id", ""))
