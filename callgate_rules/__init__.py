"""callgate — a declarative gate between a model's proposed tool call and its action.

    from callgate_rules import Gate, Run, open_store

    gate = Gate.from_paths("contracts", "policies", resolvers=..., executors=...,
                           finder=..., store=open_store("sqlite:///receipts.sqlite3"))
    decision = gate.handle(model_output, actor=session_actor, request_id=request.id, run=run)

Every name below is imported when it is first used (PEP 562), so ``import callgate_rules``
costs a command, a CI job or a serverless cold start nothing it does not use:
``tests/test_import_set.py`` holds the modules a plain import loads to none at all.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from callgate_rules.decision_log import DecisionLog
    from callgate_rules.documents.compiler import Finding, load
    from callgate_rules.errors import (
        AfterSending,
        BeforeSending,
        CallgateError,
        ConfigError,
        ConfirmationError,
        ConnectionLost,
        InputError,
        LeaseLost,
        OperationIdReused,
        OutcomeTimeout,
        RateLimited,
        Refused,
        StateConflict,
        StoreConfigError,
        StoreError,
        ToolError,
        Unavailable,
    )
    from callgate_rules.harness.world import WorldResolvers
    from callgate_rules.integrations.formats import (
        ToolDefinitionError,
        anthropic_tool,
        anthropic_tool_result,
        mcp_tool,
        openai_function_call_output,
        openai_responses_tool,
        openai_tool,
        openai_tool_message,
        tool_definitions,
        tool_result_text,
    )
    from callgate_rules.pipeline.asynchronous import AsyncGate
    from callgate_rules.pipeline.decision import Decision, ShadowVerdict, TraceEntry
    from callgate_rules.pipeline.execute import (
        DeadlineKeeping,
        ExecutionRequest,
        Executor,
        Finder,
        keeps_deadline,
    )
    from callgate_rules.pipeline.gate import Gate
    from callgate_rules.pipeline.preview import Preview, approve
    from callgate_rules.pipeline.route import Run
    from callgate_rules.provenance import ConversationError, ReadingLimits, Sealer
    from callgate_rules.store import open_store
    from callgate_rules.taxonomy import ErrorClass, Route

    __version__: str

# Where each public name is defined.
_EXPORTED_FROM = {
    **dict.fromkeys(("Finding", "load"), "callgate_rules.documents.compiler"),
    **dict.fromkeys((
        "AfterSending", "BeforeSending", "CallgateError", "ConfigError", "ConfirmationError",
        "ConnectionLost", "InputError", "LeaseLost", "OperationIdReused", "OutcomeTimeout",
        "RateLimited", "Refused", "StateConflict", "StoreConfigError", "StoreError",
        "ToolError", "Unavailable"), "callgate_rules.errors"),
    "WorldResolvers": "callgate_rules.harness.world",
    "DecisionLog": "callgate_rules.decision_log",
    **dict.fromkeys((
        "ToolDefinitionError", "anthropic_tool", "anthropic_tool_result", "mcp_tool",
        "openai_function_call_output", "openai_responses_tool", "openai_tool",
        "openai_tool_message", "tool_definitions", "tool_result_text"),
        "callgate_rules.integrations.formats"),
    **dict.fromkeys(("ConversationError", "ReadingLimits", "Sealer"),
                    "callgate_rules.provenance"),
    **dict.fromkeys(("Decision", "ShadowVerdict", "TraceEntry"),
                    "callgate_rules.pipeline.decision"),
    **dict.fromkeys(("DeadlineKeeping", "ExecutionRequest", "Executor", "Finder",
                     "keeps_deadline"),
                    "callgate_rules.pipeline.execute"),
    "AsyncGate": "callgate_rules.pipeline.asynchronous",
    "Gate": "callgate_rules.pipeline.gate",
    **dict.fromkeys(("Preview", "approve"), "callgate_rules.pipeline.preview"),
    "Run": "callgate_rules.pipeline.route",
    "open_store": "callgate_rules.store",
    **dict.fromkeys(("ErrorClass", "Route"), "callgate_rules.taxonomy"),
}

__all__ = [
    "AsyncGate", "Preview", "approve",
    "AfterSending", "BeforeSending", "CallgateError", "ConfigError", "ConfirmationError",
    "ConversationError", "ReadingLimits", "Sealer", "tool_result_text",
    "ConnectionLost", "Decision", "DecisionLog", "ErrorClass", "ExecutionRequest", "Executor",
    "Finder", "Finding", "Gate", "InputError", "LeaseLost", "OperationIdReused",
    "OutcomeTimeout", "RateLimited", "Refused", "Route", "Run", "ShadowVerdict",
    "StateConflict", "StoreConfigError", "StoreError", "ToolDefinitionError", "ToolError",
    "TraceEntry", "Unavailable", "openai_responses_tool",
    "WorldResolvers", "anthropic_tool", "anthropic_tool_result", "load", "mcp_tool",
    "open_store", "openai_function_call_output", "openai_tool", "openai_tool_message",
    "tool_definitions", "DeadlineKeeping", "keeps_deadline", "__version__",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept here after that."""
    if name == "__version__":
        value: Any = _version()
    elif name in _EXPORTED_FROM:
        value = getattr(import_module(_EXPORTED_FROM[name]), name)
    else:
        raise AttributeError(f"module 'callgate_rules' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("callgate-rules")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"
