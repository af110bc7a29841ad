"""callgate — a declarative gate between a model's proposed tool call and its action.

    from callgate_rules import Gate, Run, open_store

    gate = Gate.from_paths("contracts", "policies", resolvers=..., executors=...,
                           finder=..., store=open_store("sqlite:///receipts.sqlite3"))
    decision = gate.handle(model_output, actor=session_actor, request_id=request.id, run=run)
"""

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
from callgate_rules.integrations.decision_log import DecisionLog
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
from callgate_rules.integrations.provenance import ConversationError, ReadingLimits, Sealer
from callgate_rules.pipeline.decision import Decision, ShadowVerdict, TraceEntry
from callgate_rules.pipeline.execute import ExecutionRequest, Executor, Finder
from callgate_rules.pipeline.gate import Gate
from callgate_rules.pipeline.route import Run
from callgate_rules.store import open_store
from callgate_rules.taxonomy import ErrorClass, Route

__all__ = [
    "AfterSending", "BeforeSending", "CallgateError", "ConfigError", "ConfirmationError",
    "ConversationError", "ReadingLimits", "Sealer", "tool_result_text",
    "ConnectionLost", "Decision", "DecisionLog", "ErrorClass", "ExecutionRequest", "Executor",
    "Finder", "Finding", "Gate", "InputError", "LeaseLost", "OperationIdReused",
    "OutcomeTimeout", "RateLimited", "Refused", "Route", "Run", "ShadowVerdict",
    "StateConflict", "StoreConfigError", "StoreError", "ToolDefinitionError", "ToolError",
    "TraceEntry", "Unavailable", "openai_responses_tool",
    "WorldResolvers", "anthropic_tool", "anthropic_tool_result", "load", "mcp_tool",
    "open_store", "openai_function_call_output", "openai_tool", "openai_tool_message",
    "tool_definitions",
]
