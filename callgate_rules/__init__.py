"""callgate — a declarative gate between a model's proposed tool call and its action.

    from callgate_rules import Gate, Run, open_store

    gate = Gate.from_paths("contracts", "policies", resolvers=..., executors=...,
                           finder=..., store=open_store("sqlite:///receipts.sqlite3"))
    decision = gate.handle(model_output, actor=session_actor, request_id=request.id, run=run)
"""

from .compiler import Finding, load
from .decision import Decision, ShadowVerdict, TraceEntry
from .decision_log import DecisionLog
from .errors import (
    AfterSending,
    BeforeSending,
    CallgateError,
    ConfigError,
    ConfirmationError,
    ConnectionLost,
    ErrorClass,
    InputError,
    LeaseLost,
    OperationIdReused,
    OutcomeTimeout,
    RateLimited,
    Refused,
    Route,
    StateConflict,
    StoreConfigError,
    StoreError,
    ToolError,
    Unavailable,
)
from .execute import ExecutionRequest, Executor, Finder
from .formats import (
    ToolDefinitionError,
    anthropic_tool,
    anthropic_tool_result,
    mcp_tool,
    openai_function_call_output,
    openai_responses_tool,
    openai_tool,
    openai_tool_message,
    tool_definitions,
)
from .gate import Gate
from .route import Run
from .store import open_store
from .world import WorldResolvers

__all__ = [
    "AfterSending", "BeforeSending", "CallgateError", "ConfigError", "ConfirmationError",
    "ConnectionLost", "Decision", "DecisionLog", "ErrorClass", "ExecutionRequest", "Executor",
    "Finder", "Finding", "Gate", "InputError", "LeaseLost", "OperationIdReused",
    "OutcomeTimeout", "RateLimited", "Refused", "Route", "Run", "ShadowVerdict",
    "StateConflict", "StoreConfigError", "StoreError", "ToolDefinitionError", "ToolError",
    "TraceEntry", "Unavailable", "openai_responses_tool",
    "WorldResolvers", "anthropic_tool", "anthropic_tool_result", "load", "mcp_tool",
    "open_store", "openai_function_call_output", "openai_tool", "openai_tool_message",
    "tool_definitions",
]
