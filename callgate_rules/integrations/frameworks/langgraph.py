"""The LangGraph adapter (``pip install 'callgate-rules[langgraph]'``).

``CallgateToolNode(gate)`` is a tool node — a ``ToolNode``, so it goes where the prebuilt
one would: in your own ``StateGraph``, or as the ``tools`` of ``create_react_agent``, which
binds the model to the contracts' tools. It answers every tool call of the last AI message —
unknown tools and calls whose arguments LangChain could not parse (``invalid_tool_calls``)
included — with a ``ToolMessage`` carrying the gate's agent message.

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

**Confirmation** is an ``interrupt`` in LangChain's human-in-the-loop shape
(``HumanInterrupt``: ``action_request`` — the tool and its arguments —, ``config`` — accept,
edit, respond and ignore allowed —, ``description`` — the gate's draft), with callgate's
own keys beside it (``"callgate": "confirm"``, ``tool``, ``call_id``, ``operation_id``,
``draft``, ``draft_rows``). Resume with a ``HumanResponse`` — ``{"type": "accept"}``,
``{"type": "edit", "args": {"action": TOOL, "args": {...}}}``, ``{"type": "ignore"}`` or
``{"type": "response", "args": "why not"}`` (a list of one, as inbox UIs send, too) —, with
LangChain's HITL middleware decisions (``approve`` / ``edit`` with ``edited_action`` /
``reject`` with ``message``), or with ``{"approved": True, "by": "dana"}`` / ``True`` /
``False``. A ``"by"`` key names the approver (default: the actor). An edited call goes
through the gate again, as a new call: checked, and run with the person's approval.

**Actor and session** come from the graph state's ``callgate`` key (``{"actor": ...,
"session": ...}``; declare it with ``CallgateState`` / ``CallgateAgentState`` and put it in
the turn's input), which the checkpointer keeps, so a run resumed from a saved checkpoint —
another process, no ``configurable`` — acts for the same person; or from
``config["configurable"]["actor"]`` and ``["session"]``, which win when given and which the
node copies into the state's ``callgate`` key once it answers. Never from the model. The
conversation for provenance is the graph's message history.

**The run's intent** — what the user asked, as a ``RunIntent``, its mapping or YAML text —
comes from ``config["configurable"]["intent"]`` (declared by ``["intent_by"]``, default the
actor): the node declares it on the turn's run before it previews the turn's first call,
unless the run has one already. The run's ID is made from the request ID, so a run resumed
in another process is the same run, judged by the intent the store keeps for it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from langgraph.errors import GraphInterrupt
from langgraph.graph import END, MessagesState
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.chat_agent_executor import AgentState
from langgraph.types import interrupt

from callgate_rules.integrations.formats import (
    openai_strict_schema,
    tool_definitions,
    tool_result_text,
)
from callgate_rules.integrations.frameworks import IntentDeclarations, OnDecision, proposal
from callgate_rules.pipeline.asynchronous import AsyncGate
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.preview import Preview

_RUNS_KEPT = 1024  # the budgets of this many recent turns are kept per node
_RUN_IDS = uuid.UUID("5f0c4c3e-8d0e-4f43-9d2a-63a11e0d7c1b")  # a turn's run ID: uuid5 of this
STATE_KEY = "callgate"  # the state key that carries the actor and session


class CallgateState(MessagesState):
    """``MessagesState`` with the ``callgate`` key: ``{"actor": ..., "session": ...}``,
    kept by the checkpointer with the messages."""

    callgate: NotRequired[dict[str, Any]]


class CallgateAgentState(AgentState):
    """``create_react_agent``'s state with the ``callgate`` key (``state_schema=``)."""

    callgate: NotRequired[dict[str, Any]]


@dataclass(frozen=True)
class _Call:
    call_id: str
    name: str
    arguments: Any  # an object, or the text LangChain could not parse


@dataclass(frozen=True)
class _Answer:
    """A person's answer to one confirmation."""

    approved_by: str | None  # None: rejected
    edited: Any = None  # the edited arguments (an edit), else None
    edited_tool: str | None = None
    message: str | None = None  # what the person said with a rejection


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


class CallgateToolNode(ToolNode):
    """A LangGraph tool node whose every call is decided, executed and answered by
    ``gate``; ``on_decision`` sees each decision that answers the model or asks a person."""

    def __init__(self, gate: AsyncGate, *, name: str = "tools", messages_key: str = "messages",
                 on_decision: OnDecision | None = None) -> None:
        contracts = gate.gate.config.contracts
        # The contracts as LangChain tools, for ``create_react_agent`` to bind the model to;
        # never invoked: this node decides every call itself.
        super().__init__([StructuredTool(
            name=tool, description=contracts[tool].document.description or tool,
            args_schema=openai_strict_schema(contracts[tool].arguments_schema),
            func=_decided_by_the_node) for tool in sorted(contracts)],
            name=name, messages_key=messages_key)
        self.gate = gate
        self.messages_key = messages_key
        self.on_decision = on_decision
        self._runs: OrderedDict[str, Run] = OrderedDict()
        self._declared: set[str] = set()  # the runs (of ``_runs``) whose intent is bound
        self._intents = IntentDeclarations()

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The contracts as OpenAI strict tool definitions, for ``model.bind_tools(...)``:
        the tool list the model is offered comes from the contracts the node checks."""
        return tool_definitions(self.gate.gate.config, "openai-strict")

    def _func(self, input: Any, config: RunnableConfig, runtime: Any) -> Any:  # noqa: A002
        """A synchronous graph's call: the same node, on an event loop of its own."""
        return asyncio.run(self._afunc(input, config, runtime))

    async def _afunc(self, input: Any, config: RunnableConfig,  # noqa: A002
                     runtime: Any) -> Any:
        state, calls = _state_and_calls(input, self.messages_key)
        messages = _messages(state, self.messages_key)
        actor, session = _actor_and_session(state, config)
        request = request_id(config, messages)
        run = self._run(request)
        await self._declare_intent(run, config, actor)
        conversation = convert_to_openai_messages(list(messages))
        gate_config = self.gate.gate.config
        proposals = [proposal(gate_config, call.name, call.arguments, call.call_id)
                     for call in calls]
        keywords: dict[str, Any] = dict(actor=actor, request_id=request, session=session,
                                        run=run, conversation=conversation)
        # 1. No side effects: what every call would do, and a person's word on each write
        #    that needs one. A re-run after resume repeats only this phase.
        previews: list[Preview] = [await self.gate.apreview(each, **keywords)
                                   for each in proposals]
        answers: dict[str, _Answer] = {}
        for call, preview in zip(calls, previews, strict=True):
            if not preview.needs_confirmation:
                continue
            try:
                answer = interrupt(_confirmation_request(call, preview))
            except GraphInterrupt:  # asked now, not answered on a re-run: report it once
                self._seen(preview.decision)
                raise
            answers[call.call_id] = _answer_of(answer, actor)
        # 2. After the last interrupt: each call executed once, answered with its result.
        replies = []
        for call, each, preview in zip(calls, proposals, previews, strict=True):
            answer = answers.get(call.call_id)
            if not preview.needs_confirmation:
                decision = await self.gate.ahandle(each, **keywords)
            elif answer is None or answer.approved_by is None:
                replies.append(self._declined(call, answer))
                continue
            elif answer.edited is not None:
                decision = await self._edited(call, answer, keywords)
            else:
                assert preview.confirmation_token is not None
                decision = await self.gate.aapprove(
                    each, preview.confirmation_token, confirmed_by=answer.approved_by,
                    **keywords)
            self._seen(decision)
            replies.append(ToolMessage(
                content=tool_result_text(decision, call.call_id), tool_call_id=call.call_id,
                name=call.name,
                status="success" if decision.error_class is None else "error"))
        return {self.messages_key: replies,
                STATE_KEY: {"actor": dict(actor), "session": session}}

    async def _edited(self, call: _Call, answer: _Answer,
                      keywords: dict[str, Any]) -> Decision:
        """The call as the person edited it, through the gate as a call of its own: checked
        again (a refusal answers it), and run with the person's approval."""
        edited = proposal(self.gate.gate.config, answer.edited_tool or call.name,
                          answer.edited, call.call_id)
        preview = await self.gate.apreview(edited, **keywords)
        if not preview.needs_confirmation or preview.confirmation_token is None:
            return await self.gate.ahandle(edited, **keywords)
        return await self.gate.aapprove(edited, preview.confirmation_token,
                                        confirmed_by=str(answer.approved_by), **keywords)

    def _declined(self, call: _Call, answer: _Answer | None) -> ToolMessage:
        """The person said no: nothing ran."""
        text = f"{call.name} was not approved by the person; nothing was done."
        if answer is not None and answer.message:
            text += f" The person said: {answer.message}"
        return ToolMessage(content=self.gate.gate.sealer.seal(text, call.call_id),
                           tool_call_id=call.call_id, name=call.name, status="error")

    def _seen(self, decision: Decision) -> None:
        if self.on_decision is not None:
            self.on_decision(decision)

    def _run(self, request: str) -> Run:
        """The turn's budgets, kept across the node's runs within the turn. Its ID is made
        from the request's, the same in every process, when that names a thread and a
        message; else (no checkpointer to resume from) it is a new one."""
        run = self._runs.pop(request, None)
        if run is None:
            started_at = self.gate.gate.clock()
            named = not request.startswith("no-thread:") and ":message-" not in request
            run = (Run(started_at=started_at, run_id=uuid.uuid5(_RUN_IDS, request).hex)
                   if named else Run(started_at=started_at))
        self._runs[request] = run
        while len(self._runs) > _RUNS_KEPT:
            self._declared.discard(self._runs.popitem(last=False)[1].run_id)
        return run

    async def _declare_intent(self, run: Run, config: RunnableConfig,
                              actor: Mapping[str, Any]) -> None:
        """Bind the configured intent to the turn's run once, before any call is decided;
        a run that has one (declared before a resume, perhaps in another process) keeps
        it."""
        configurable = config.get("configurable") or {}
        intent = configurable.get("intent")
        if intent is None or run.run_id in self._declared:
            return

        async def declare() -> None:  # once, even for calls sent to the node concurrently
            if run.run_id in self._declared:
                return
            if await self.gate.aintent_of(run) is None:
                by = configurable.get("intent_by") or actor.get("id", "the user")
                await self.gate.adeclare_intent(run, intent, declared_by=str(by))
            self._declared.add(run.run_id)
        await self._intents.once(run.run_id, declare)


def _decided_by_the_node(**arguments: Any) -> str:
    raise RuntimeError("callgate's tools are run by CallgateToolNode, never directly")


def _confirmation_request(call: _Call, preview: Preview) -> dict[str, Any]:
    """A ``HumanInterrupt`` for ``call``, callgate's own keys beside it."""
    arguments = call.arguments if isinstance(call.arguments, Mapping) else {}
    return {
        "action_request": {"action": call.name, "args": dict(arguments)},
        "config": {"allow_accept": True, "allow_edit": True, "allow_respond": True,
                   "allow_ignore": True},
        "description": preview.draft,
        "callgate": "confirm", "tool": call.name, "call_id": call.call_id,
        "operation_id": preview.operation_id, "draft": preview.draft,
        "draft_rows": preview.draft_rows.as_dict() if preview.draft_rows else None,
    }


def _answer_of(answer: Any, actor: Mapping[str, Any]) -> _Answer:
    """The person's answer, from the value the graph was resumed with: a ``HumanResponse``
    (or a list of one), a HITL middleware decision (or ``{"decisions": [one]}``), or
    ``{"approved": bool, "by": ...}`` / ``True`` / ``False``. Anything else is a no."""
    default = str(actor.get("id", "the user"))
    if isinstance(answer, list | tuple) and len(answer) == 1:
        answer = answer[0]
    if (isinstance(answer, Mapping) and isinstance(answer.get("decisions"), list)
            and len(answer["decisions"]) == 1):
        answer = answer["decisions"][0]
    if answer is True:
        return _Answer(default)
    if not isinstance(answer, Mapping):
        return _Answer(None)
    by = str(answer.get("by") or default)
    kind = answer.get("type")
    if answer.get("approved") is True or kind in ("accept", "approve"):
        return _Answer(by)
    if kind == "edit":
        action = answer.get("edited_action") or answer.get("args")
        if isinstance(action, Mapping) and isinstance(action.get("args"), Mapping):
            tool = action.get("name") or action.get("action")
            return _Answer(by, dict(action["args"]), str(tool) if tool else None)
        return _Answer(None, message="the edit carried no arguments")
    said = (answer.get("message") if kind == "reject" else
        answer.get("args") if kind == "response" else None)
    return _Answer(None, message=str(said) if isinstance(said, str) and said else None)


def _state_and_calls(input: Any, key: str) -> tuple[Any, list[_Call]]:  # noqa: A002
    """The graph state and the calls to answer: every call of the last AI message, or the
    one call ``create_react_agent`` sends (``Send`` with a ``tool_call_with_context``)."""
    if isinstance(input, Mapping) and input.get("__type") == "tool_call_with_context":
        each = input["tool_call"]
        return input.get("state", {}), [_Call(str(each.get("id") or ""), each["name"],
                                              each.get("args", {}))]
    return input, _calls(_messages(input, key))


def _actor_and_session(state: Any, config: RunnableConfig) -> tuple[Mapping[str, Any], Any]:
    """Who acts: the run's ``configurable`` when it names an actor, else the state's
    ``callgate`` key the checkpointer kept. Neither: no actor, and the gate refuses."""
    configurable = config.get("configurable") or {}
    if configurable.get("actor"):
        return configurable["actor"], configurable.get("session")
    kept = (state.get(STATE_KEY) if isinstance(state, Mapping) else
        getattr(state, STATE_KEY, None))
    if isinstance(kept, Mapping) and isinstance(kept.get("actor"), Mapping):
        return kept["actor"], kept.get("session")
    return {}, None


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
