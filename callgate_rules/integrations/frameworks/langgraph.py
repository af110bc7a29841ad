"""The LangGraph adapter (``pip install 'callgate-rules[langgraph]'``).

``CallgateToolNode(gate)`` is a tool node: add it where the prebuilt ``ToolNode`` would go.
It answers every tool call of the last AI message — unknown tools and calls whose
arguments LangChain could not parse (``invalid_tool_calls``) included — with a
``ToolMessage`` carrying the gate's agent message.

**Safe under resume.** LangGraph re-runs the whole node after an ``interrupt``. The node
therefore works in two phases: first it *previews* every call (``Gate.preview``: no side
effects) and asks a person, through ``interrupt``, about each write that needs one; only
after the last interrupt does it execute anything. A re-run after a resume repeats only
the side-effect-free phase, so every call is executed once and the model reads its result,
never "already done".

**Request ID.** One per user turn: the thread (``configurable.thread_id``) and the ID of the
turn's last human message, which ``add_messages`` gives every message and the checkpoint
keeps. A resumed run has the same last human message, so its calls are the same operations;
the same call in the user's next message is a new request, not a duplicate. (The thread ID
alone would make every legitimate repeat in a conversation a duplicate.)

**Confirmation** is an ``interrupt`` whose value is ``{"callgate": "confirm", "tool",
"call_id", "operation_id", "draft"}``; resume with ``Command(resume={"approved": True,
"by": "dana"})`` (or ``True`` / ``False``). **Actor and session** come from
``config["configurable"]["actor"]`` and ``["session"]``, never from the model; the
conversation for provenance is the graph's message history.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.errors import GraphInterrupt
from langgraph.graph import END
from langgraph.types import interrupt

from callgate_rules.integrations.formats import tool_definitions, tool_result_text
from callgate_rules.integrations.frameworks import OnDecision, proposal
from callgate_rules.pipeline.asynchronous import AsyncGate
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.preview import Preview
from callgate_rules.pipeline.route import Run

_RUNS_KEPT = 1024  # the budgets of this many recent turns are kept per node


@dataclass(frozen=True)
class _Call:
    call_id: str
    name: str
    arguments: Any  # an object, or the text LangChain could not parse


def request_id(config: RunnableConfig, messages: Sequence[BaseMessage]) -> str:
    """The request ID of the current user turn: thread ID and last human message ID."""
    configurable = config.get("configurable") or {}
    thread = configurable.get("thread_id", "no-thread")
    human = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
    turn = human.id if human is not None and human.id else f"message-{len(messages)}"
    return f"{thread}:{turn}"


def route_tools(state: Any, messages_key: str = "messages") -> str:
    """``"tools"`` while the last AI message has tool calls (parsed or not), else ``END``:
    ``tools_condition`` with malformed calls counted, so they reach the gate too."""
    messages = _messages(state, messages_key)
    last = messages[-1] if messages else None
    if isinstance(last, AIMessage) and (last.tool_calls or last.invalid_tool_calls):
        return "tools"
    return END


class CallgateToolNode(RunnableLambda[Any, dict[str, Any]]):
    """A LangGraph tool node whose every call is decided, executed and answered by
    ``gate``; ``on_decision`` sees each decision that answers the model or asks a person."""

    def __init__(self, gate: AsyncGate, *, name: str = "tools", messages_key: str = "messages",
                 on_decision: OnDecision | None = None) -> None:
        self.gate = gate
        self.messages_key = messages_key
        self.on_decision = on_decision
        self._runs: OrderedDict[str, Run] = OrderedDict()
        super().__init__(self._run_sync, afunc=self._run_async, name=name)

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The contracts as OpenAI strict tool definitions, for ``model.bind_tools(...)``:
        the tool list the model is offered comes from the contracts the node checks."""
        return tool_definitions(self.gate.gate.config, "openai-strict")

    def _run_sync(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """A synchronous graph's call: the same node, on an event loop of its own."""
        return asyncio.run(self._run_async(state, config))

    async def _run_async(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = _messages(state, self.messages_key)
        calls = _calls(messages)
        configurable = config.get("configurable") or {}
        actor: Mapping[str, Any] = configurable.get("actor") or {}
        session = configurable.get("session")
        request = request_id(config, messages)
        conversation = convert_to_openai_messages(list(messages))
        gate_config = self.gate.gate.config
        proposals = [proposal(gate_config, call.name, call.arguments, call.call_id)
                     for call in calls]
        # 1. No side effects: what every call would do, and a person's word on each write
        #    that needs one. A re-run after resume repeats only this phase.
        run = self._run(request)
        previews: list[Preview] = []
        for each in proposals:
            previews.append(await self.gate.apreview(each, actor=actor, request_id=request,
                                                     session=session, run=run,
                                                     conversation=conversation))
        approvers: dict[str, str | None] = {}
        for call, preview in zip(calls, previews, strict=True):
            if not preview.needs_confirmation:
                continue
            try:
                answer = interrupt({"callgate": "confirm", "tool": call.name,
                                    "call_id": call.call_id,
                                    "operation_id": preview.operation_id,
                                    "draft": preview.draft})
            except GraphInterrupt:  # asked now, not answered on a re-run: report it once
                self._seen(preview.decision)
                raise
            approvers[call.call_id] = _approver(answer, actor)
        # 2. After the last interrupt: each call executed once, answered with its result.
        answers = []
        for call, each, preview in zip(calls, proposals, previews, strict=True):
            if not preview.needs_confirmation:
                decision = await self.gate.ahandle(each, actor=actor, request_id=request,
                                                   run=run, session=session,
                                                   conversation=conversation)
            elif approvers[call.call_id] is None:
                answers.append(self._declined(call))
                continue
            else:
                assert preview.confirmation_token is not None
                decision = await self.gate.aapprove(
                    each, preview.confirmation_token, actor=actor, request_id=request,
                    confirmed_by=str(approvers[call.call_id]), run=run, session=session,
                    conversation=conversation)
            self._seen(decision)
            answers.append(ToolMessage(
                content=tool_result_text(decision, call.call_id), tool_call_id=call.call_id,
                name=call.name,
                status="success" if decision.error_class is None else "error"))
        return {self.messages_key: answers}

    def _declined(self, call: _Call) -> ToolMessage:
        """The person said no: nothing ran; the held write expires unconfirmed."""
        text = f"{call.name} was not approved by the person; nothing was done."
        return ToolMessage(content=self.gate.gate.sealer.seal(text, call.call_id),
                           tool_call_id=call.call_id, name=call.name, status="error")

    def _seen(self, decision: Decision) -> None:
        if self.on_decision is not None:
            self.on_decision(decision)

    def _run(self, request: str) -> Run:
        """The turn's budgets, kept across the node's runs within the turn."""
        run = self._runs.pop(request, None) or Run(started_at=self.gate.gate.clock())
        self._runs[request] = run
        while len(self._runs) > _RUNS_KEPT:
            self._runs.popitem(last=False)
        return run


def _messages(state: Any, key: str) -> Sequence[BaseMessage]:
    if isinstance(state, Mapping):
        found = state.get(key, ())
    elif isinstance(state, list):
        found = state
    else:
        found = getattr(state, key, ())
    return list(found)


def _calls(messages: Sequence[BaseMessage]) -> list[_Call]:
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    if last is None:
        return []
    calls = [_Call(str(c.get("id") or ""), c["name"], c.get("args", {}))
             for c in last.tool_calls]
    calls += [_Call(str(c.get("id") or ""), str(c.get("name") or ""), c.get("args") or "")
              for c in last.invalid_tool_calls]
    return calls


def _approver(answer: Any, actor: Mapping[str, Any]) -> str | None:
    """Who approved, from the value the graph was resumed with; ``None`` for a no."""
    default = str(actor.get("id", "the user"))
    if answer is True:
        return default
    if isinstance(answer, Mapping) and answer.get("approved") is True:
        return str(answer.get("by") or default)
    return None
