"""Speaking the model APIs' formats: decisions as tool results, contracts as tool definitions.

The agent message is the only text that goes back to the model; the destination's original
result travels inside it for successful calls and stays in ``Decision.result`` for the host.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .decision import Decision
from .documents import Contract, GateConfig


def _content(decision: Decision) -> str:
    return decision.agent_message


def openai_tool_message(decision: Decision, call_id: str | None = None) -> dict[str, Any]:
    """A Chat Completions ``{"role": "tool", ...}`` message answering the model's call."""
    return {"role": "tool", "tool_call_id": call_id or decision.call_id or "",
            "content": _content(decision)}


def openai_function_call_output(decision: Decision, call_id: str | None = None
                                ) -> dict[str, Any]:
    """A Responses API ``function_call_output`` item answering the model's call."""
    return {"type": "function_call_output", "call_id": call_id or decision.call_id or "",
            "output": _content(decision)}


def anthropic_tool_result(decision: Decision, tool_use_id: str | None = None
                          ) -> dict[str, Any]:
    """An Anthropic ``tool_result`` content block; ``is_error`` when the call did not run."""
    return {"type": "tool_result", "tool_use_id": tool_use_id or decision.call_id or "",
            "content": _content(decision), "is_error": decision.error_class is not None}


def _parameters(contract: Contract) -> Mapping[str, Any]:
    return contract.arguments_schema


def openai_tool(contract: Contract) -> dict[str, Any]:
    """A Chat Completions tool definition (``strict`` stays off: callgate's own validation
    is richer than strict mode's subset of JSON Schema)."""
    return {"type": "function", "function": {
        "name": contract.name, "description": contract.document.description,
        "parameters": dict(_parameters(contract))}}


def anthropic_tool(contract: Contract) -> dict[str, Any]:
    return {"name": contract.name, "description": contract.document.description,
            "input_schema": dict(_parameters(contract))}


def mcp_tool(contract: Contract) -> dict[str, Any]:
    return {"name": contract.name, "description": contract.document.description,
            "inputSchema": dict(_parameters(contract)),
            "annotations": {"readOnlyHint": not contract.is_write,
                            "idempotentHint": contract.idempotency != "none"
                            if contract.is_write else True}}


def tool_definitions(config: GateConfig, style: str) -> list[dict[str, Any]]:
    render = {"openai": openai_tool, "anthropic": anthropic_tool, "mcp": mcp_tool}[style]
    return [render(config.contracts[name]) for name in sorted(config.contracts)]
