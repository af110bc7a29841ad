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

if TYPE_CHECKING:  # for type checkers only; ``__getattr__`` imports at run time
    from callgate_rules.decision_log import (
        DecisionLog as DecisionLog,
    )
    from callgate_rules.documents.compiler import (
        Finding as Finding,
    )
    from callgate_rules.documents.compiler import (
        load as load,
    )
    from callgate_rules.errors import (
        AfterSending as AfterSending,
    )
    from callgate_rules.errors import (
        BeforeSending as BeforeSending,
    )
    from callgate_rules.errors import (
        CallgateError as CallgateError,
    )
    from callgate_rules.errors import (
        ConfigError as ConfigError,
    )
    from callgate_rules.errors import (
        ConfirmationError as ConfirmationError,
    )
    from callgate_rules.errors import (
        ConnectionLost as ConnectionLost,
    )
    from callgate_rules.errors import (
        InputError as InputError,
    )
    from callgate_rules.errors import (
        LeaseLost as LeaseLost,
    )
    from callgate_rules.errors import (
        OperationIdReused as OperationIdReused,
    )
    from callgate_rules.errors import (
        OutcomeTimeout as OutcomeTimeout,
    )
    from callgate_rules.errors import (
        RateLimited as RateLimited,
    )
    from callgate_rules.errors import (
        Refused as Refused,
    )
    from callgate_rules.errors import (
        StateConflict as StateConflict,
    )
    from callgate_rules.errors import (
        StoreConfigError as StoreConfigError,
    )
    from callgate_rules.errors import (
        StoreError as StoreError,
    )
    from callgate_rules.errors import (
        ToolError as ToolError,
    )
    from callgate_rules.errors import (
        Unavailable as Unavailable,
    )
    from callgate_rules.harness.world import (
        WorldResolvers as WorldResolvers,
    )
    from callgate_rules.integrations.formats import (
        ToolDefinitionError as ToolDefinitionError,
    )
    from callgate_rules.integrations.formats import (
        anthropic_tool as anthropic_tool,
    )
    from callgate_rules.integrations.formats import (
        anthropic_tool_result as anthropic_tool_result,
    )
    from callgate_rules.integrations.formats import (
        mcp_tool as mcp_tool,
    )
    from callgate_rules.integrations.formats import (
        openai_function_call_output as openai_function_call_output,
    )
    from callgate_rules.integrations.formats import (
        openai_responses_tool as openai_responses_tool,
    )
    from callgate_rules.integrations.formats import (
        openai_tool as openai_tool,
    )
    from callgate_rules.integrations.formats import (
        openai_tool_message as openai_tool_message,
    )
    from callgate_rules.integrations.formats import (
        tool_definitions as tool_definitions,
    )
    from callgate_rules.integrations.formats import (
        tool_result_text as tool_result_text,
    )
    from callgate_rules.intent import (
        BoundIntent as BoundIntent,
    )
    from callgate_rules.intent import (
        IntentError as IntentError,
    )
    from callgate_rules.intent import (
        RunIntent as RunIntent,
    )
    from callgate_rules.intent import (
        compile_intent as compile_intent,
    )
    from callgate_rules.intent.drafting import (
        draft_intent as draft_intent,
    )
    from callgate_rules.pipeline.asynchronous import (
        AsyncGate as AsyncGate,
    )
    from callgate_rules.pipeline.budgets import (
        Run as Run,
    )
    from callgate_rules.pipeline.decision import (
        Decision as Decision,
    )
    from callgate_rules.pipeline.decision import (
        ShadowVerdict as ShadowVerdict,
    )
    from callgate_rules.pipeline.decision import (
        TraceEntry as TraceEntry,
    )
    from callgate_rules.pipeline.execute import (
        DeadlineKeeping as DeadlineKeeping,
    )
    from callgate_rules.pipeline.execute import (
        ExecutionRequest as ExecutionRequest,
    )
    from callgate_rules.pipeline.execute import (
        Executor as Executor,
    )
    from callgate_rules.pipeline.execute import (
        Finder as Finder,
    )
    from callgate_rules.pipeline.execute import (
        keeps_deadline as keeps_deadline,
    )
    from callgate_rules.pipeline.gate import (
        Gate as Gate,
    )
    from callgate_rules.pipeline.intents import (
        IntentWidened as IntentWidened,
    )
    from callgate_rules.pipeline.preview import (
        Preview as Preview,
    )
    from callgate_rules.pipeline.preview import (
        approve as approve,
    )
    from callgate_rules.provenance import (
        ConversationError as ConversationError,
    )
    from callgate_rules.provenance import (
        ReadingLimits as ReadingLimits,
    )
    from callgate_rules.provenance import (
        Sealer as Sealer,
    )
    from callgate_rules.store import (
        open_store as open_store,
    )
    from callgate_rules.taxonomy import (
        ErrorClass as ErrorClass,
    )
    from callgate_rules.taxonomy import (
        Route as Route,
    )

    __version__: str

# Where each public name is defined: the one list of them (``__all__`` is made from it,
# and ``tests/test_import_set.py`` holds the type checkers' imports above to it).
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
    **dict.fromkeys(("BoundIntent", "IntentError", "RunIntent", "compile_intent"),
                    "callgate_rules.intent"),
    "draft_intent": "callgate_rules.intent.drafting",
    "IntentWidened": "callgate_rules.pipeline.intents",
    **dict.fromkeys(("Preview", "approve"), "callgate_rules.pipeline.preview"),
    "Run": "callgate_rules.pipeline.budgets",
    "open_store": "callgate_rules.store",
    **dict.fromkeys(("ErrorClass", "Route"), "callgate_rules.taxonomy"),
}

__all__ = sorted([*_EXPORTED_FROM, "__version__"])


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
