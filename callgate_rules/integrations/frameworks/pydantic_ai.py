"""The pydantic-ai adapter (``pip install 'callgate-rules[pydantic-ai]'``).

``Callgate(gate)`` is a capability: ``Agent(model, capabilities=[Callgate(gate)],
output_type=[str, DeferredToolRequests])``. It brings the contracts as the agent's tools
(``CallgateToolset``: name, description and strict parameters from each contract) and sends
every call through the gate:

- **refusals**: the gate's agent message is the tool's return; the run goes on. The gate
  is the one parser: pydantic-ai's own argument validation is skipped for these tools
  (``before_tool_validate``), so a malformed argument text gets the gate's answer too;
- **unknown tools**: pydantic-ai answers a call to a tool it does not have before any tool
  runs; ``before_model_request`` replaces that answer with the gate's message, in the
  history too, before the model reads it;
- **confirmation**: a write that needs a person raises ``ApprovalRequired`` with the gate's
  draft (``metadata["draft"]``, provenance warnings and their evidence included, and
  ``metadata["draft_rows"]``, the same draft as rows: ``confirmation.drafts``), so the run ends with
  ``DeferredToolRequests``; resumed with ``DeferredToolResults(approvals={call_id: True},
  metadata={call_id: {"by": "dana"}})``, the call is confirmed through the gate (held, then
  confirmed with the preview's token). A denial executes nothing;
- **actor, session, request ID**: from ``deps`` (a ``Turn``, or deps with a ``callgate``
  attribute), never the model; the conversation for provenance is the run's message
  history (``ctx.messages``);
- **the run's intent**: the ``Turn``'s ``intent``, declared on its run before the first
  call is decided (``IntentDeclarations``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired, SkipToolValidation
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from callgate_rules.integrations.formats import openai_strict_schema, tool_result_text
from callgate_rules.integrations.frameworks import (
    IntentDeclarations,
    OnDecision,
    Turn,
    offered_tools,
    proposal,
    turn_of,
)
from callgate_rules.pipeline.asynchronous import AsyncGate
from callgate_rules.pipeline.decision import Decision

_RAW = "callgate_raw_arguments"  # the model's argument text, handed to the gate untouched
_ANYTHING = SchemaValidator(schema=core_schema.any_schema())


class CallgateToolset(AbstractToolset[Any]):
    """The contracts as pydantic-ai tools, every call decided by ``gate``."""

    def __init__(self, gate: AsyncGate, *, tools: Iterable[str] | None = None,
                 turn: Callable[[Any], Turn] = turn_of,
                 on_decision: OnDecision | None = None) -> None:
        self.gate = gate
        self.turn = turn
        self.on_decision = on_decision
        self.names = offered_tools(gate.gate.config, tools)
        self.intents = IntentDeclarations()  # each turn's intent, declared once
        self._tokens: dict[str, str] = {}  # call ID → the token its preview was shown with

    @property
    def id(self) -> str | None:
        return "callgate"

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        contracts = self.gate.gate.config.contracts
        return {name: ToolsetTool(
            toolset=self, max_retries=0, args_validator=_ANYTHING,
            tool_def=ToolDefinition(
                name=name, description=contracts[name].document.description,
                parameters_json_schema=openai_strict_schema(contracts[name].arguments_schema),
                strict=True))
            for name in self.names}

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> str:
        turn = self.turn(ctx.deps)
        await self.intents.declare(self.gate, turn)
        call_id = ctx.tool_call_id or ""
        call = proposal(self.gate.gate.config, name, tool_args.get(_RAW, tool_args), call_id)
        conversation = openai_messages(ctx.messages)
        keywords: dict[str, Any] = dict(actor=turn.actor, request_id=turn.request_id,
                                        session=turn.session, conversation=conversation)
        if ctx.tool_call_approved:  # a person approved what the preview showed
            token = self._tokens.pop(call_id, None) or (
                await self.gate.apreview(call, run=turn.run, **keywords)).confirmation_token
            if token is not None:
                metadata = ctx.tool_call_metadata
                by = metadata.get("by") if isinstance(metadata, Mapping) else None
                return self._answer(await self.gate.aapprove(
                    call, token, confirmed_by=str(by or turn.approver), run=turn.run,
                    **keywords), call_id)
        else:
            preview = await self.gate.apreview(call, run=turn.run, **keywords)
            if preview.needs_confirmation and preview.confirmation_token is not None:
                self._seen(preview.decision)
                self._tokens[call_id] = preview.confirmation_token
                raise ApprovalRequired(metadata={
                    "draft": preview.draft, "operation_id": preview.operation_id,
                    "draft_rows": preview.draft_rows.as_dict() if preview.draft_rows
                    else None,
                    "expires_at": preview.expires_at.isoformat() if preview.expires_at
                    else None})
        return self._answer(await self.gate.ahandle(call, run=turn.run, **keywords), call_id)

    def _answer(self, decision: Decision, call_id: str) -> str:
        self._seen(decision)
        return tool_result_text(decision, call_id)

    def _seen(self, decision: Decision) -> None:
        if self.on_decision is not None:
            self.on_decision(decision)


@dataclass
class Callgate(AbstractCapability[Any]):
    """The gate as a pydantic-ai capability: the contracts' tools, the gate as their only
    parser, and the gate's message for calls to tools that do not exist."""

    gate: AsyncGate
    tools: Iterable[str] | None = None
    turn: Callable[[Any], Turn] = turn_of
    on_decision: OnDecision | None = None
    toolset: CallgateToolset = field(init=False)

    def __post_init__(self) -> None:
        self.toolset = CallgateToolset(self.gate, tools=self.tools, turn=self.turn,
                                       on_decision=self.on_decision)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a gate: not spec-serialisable

    def get_toolset(self) -> CallgateToolset:
        return self.toolset

    async def before_tool_validate(self, ctx: RunContext[Any], *, call: ToolCallPart,
                                   tool_def: ToolDefinition, args: Any) -> Any:
        if tool_def.name in self.toolset.names:
            raise SkipToolValidation({_RAW: args})
        return args

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        """Answer calls to unknown tools in the gate's words, before the model reads them."""
        for messages in (request_context.messages, ctx.messages):
            for part in _unknown_tool_answers(messages):
                part.content = await self._unknown_tool_message(ctx, part)
        return request_context

    async def _unknown_tool_message(self, ctx: RunContext[Any], part: ToolReturnPart) -> str:
        turn = self.turn(ctx.deps)
        decision = await self.gate.acheck(
            proposal(self.gate.gate.config, part.tool_name, {}, part.tool_call_id),
            actor=turn.actor, request_id=turn.request_id, session=turn.session)
        if part.metadata != _ANSWERED:
            self.toolset._seen(decision)
        part.metadata = _ANSWERED
        return tool_result_text(decision, part.tool_call_id)


_ANSWERED = {"callgate": "unknown tool answered by the gate"}


def _unknown_tool_answers(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    return [part for message in messages if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart) and part.retry is not None
            and part.retry.cause == "unknown_tool"]


def openai_messages(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """pydantic-ai's message history as Chat Completions messages, for provenance: what the
    user and the system said, the model's calls, and what each tool returned."""
    chat: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    chat.append({"role": "system", "content": part.content})
                elif isinstance(part, UserPromptPart):
                    chat.append({"role": "user", "content": _text(part.content)})
                elif isinstance(part, ToolReturnPart):
                    chat.append({"role": "tool", "tool_call_id": part.tool_call_id,
                                 "content": _text(part.content)})
        elif isinstance(message, ModelResponse):
            calls = [{"id": part.tool_call_id, "type": "function",
                      "function": {"name": part.tool_name, "arguments": part.args_as_json_str()}}
                     for part in message.parts if isinstance(part, ToolCallPart)]
            text = "".join(part.content for part in message.parts if isinstance(part, TextPart))
            chat.append({"role": "assistant", "content": text,
                         **({"tool_calls": calls} if calls else {})})
    return chat


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and all(isinstance(each, str) for each in content):
        return "\n".join(content)
    return json.dumps(content, default=str)
