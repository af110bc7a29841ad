"""Speaking the model APIs' formats: decisions as tool results, contracts as tool definitions.

The agent message is the only text that goes back to the model; the destination's original
result travels inside it for successful calls and stays in ``Decision.result`` for the host.
When the call did not reach the destination (a refusal, a question, a confirmation notice),
the message is the gate's own words and carries the gate's seal
(``provenance.seal``), so that, appended to the conversation, it never counts
as a tool result in the provenance of a later call.

Tool definitions come from the contracts, so the tool list a model is offered and the gate
that checks its calls can never drift apart. One renderer per API, each emitting only fields
that API's published SDK type accepts:

- ``openai``: ``openai.types.chat.ChatCompletionToolParam``; no field for examples.
- ``openai-responses``: ``openai.types.responses.FunctionToolParam``; no field for examples.
- ``anthropic``: ``anthropic.types.ToolParam``; the examples go to ``input_examples``.
- ``mcp``: ``mcp.types.Tool`` (wire names, camelCase) with ``title`` and ``outputSchema``
  (``spec.result``); no field for examples.
- ``openai-strict`` / ``openai-responses-strict``: the same with ``strict: true`` and the
  parameters in the subset strict mode accepts (``openai_strict_schema``): an optional field
  becomes required and nullable, keywords strict mode rejects move into the description.
  The gate keeps checking the full schema; ``from_strict_arguments`` turns the nulls a
  strict model sends for the fields it left out back into absent fields first.

Contract examples are never pasted into the description: the description is the text the
contract's owner wrote for the model, and ``callgate catalog`` shows the examples to people.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from callgate_rules.documents.model import Contract, GateConfig
from callgate_rules.errors import CallgateError
from callgate_rules.pipeline.decision import Decision
from callgate_rules.provenance.seal import Sealer, default_sealer


class ToolDefinitionError(CallgateError):
    """A contract cannot be offered in an API's format (a name or schema it rejects)."""


# Decisions as tool results ----------------------------------------------------------------


def tool_result_text(decision: Decision, call_id: str | None = None, *,
                     sealer: Sealer | None = None) -> str:
    """The text answering the model's call (``call_id``, by default the decision's own):
    the agent message, sealed as the gate's own words when it carries no result from the
    destination — for a host that builds its tool-result messages itself.

    The seal is made with ``sealer``, else the one the gate attached to the decision, else
    ``default_sealer()``; the gate reads conversations with the same one. A message that
    carries the destination's result is left as it is: that result is a tool's answer."""
    text = decision.agent_message
    if decision.result is not None:
        return text
    chosen = sealer or getattr(decision, "sealer", None) or default_sealer()
    assert isinstance(chosen, Sealer)
    return chosen.seal(text, call_id or decision.call_id or "")


def openai_tool_message(decision: Decision, call_id: str | None = None, *,
                        sealer: Sealer | None = None) -> dict[str, Any]:
    """A Chat Completions ``{"role": "tool", ...}`` message answering the model's call."""
    answers = call_id or decision.call_id or ""
    return {"role": "tool", "tool_call_id": answers,
            "content": tool_result_text(decision, answers, sealer=sealer)}


def openai_function_call_output(decision: Decision, call_id: str | None = None, *,
                                sealer: Sealer | None = None) -> dict[str, Any]:
    """A Responses API ``function_call_output`` item answering the model's call."""
    answers = call_id or decision.call_id or ""
    return {"type": "function_call_output", "call_id": answers,
            "output": tool_result_text(decision, answers, sealer=sealer)}


def anthropic_tool_result(decision: Decision, tool_use_id: str | None = None, *,
                          sealer: Sealer | None = None) -> dict[str, Any]:
    """An Anthropic ``tool_result`` content block; ``is_error`` when the call did not run."""
    answers = tool_use_id or decision.call_id or ""
    return {"type": "tool_result", "tool_use_id": answers,
            "content": tool_result_text(decision, answers, sealer=sealer),
            "is_error": decision.error_class is not None}


# Contracts as tool definitions ------------------------------------------------------------


def _parameters(contract: Contract) -> dict[str, Any]:
    """A private copy of the compiled arguments schema (objects already closed with
    ``additionalProperties: false``), so a caller editing the list cannot touch the gate."""
    return copy.deepcopy(dict(contract.arguments_schema))


def _json_value(value: Any) -> Any:
    """Example arguments as JSON: YAML may have loaded an unquoted date as a date object."""
    if isinstance(value, Mapping):
        return {str(key): _json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(item) for item in value]
    if isinstance(value, date):
        return value.isoformat()
    return value


def openai_tool(contract: Contract) -> dict[str, Any]:
    """A Chat Completions tool definition.

    ``strict`` is sent as false on purpose: strict mode accepts only a subset of JSON Schema
    (every property required, no ``format``), and callgate validates the full schema anyway.
    """
    return {"type": "function", "function": {
        "name": contract.name, "description": contract.document.description,
        "parameters": _parameters(contract), "strict": False}}


def openai_responses_tool(contract: Contract) -> dict[str, Any]:
    """A Responses API function tool. The Responses API turns strict mode *on* when
    ``strict`` is missing, so it is always sent (false, as for Chat Completions)."""
    return {"type": "function", "name": contract.name,
            "description": contract.document.description,
            "parameters": _parameters(contract), "strict": False}


def anthropic_tool(contract: Contract) -> dict[str, Any]:
    """An Anthropic custom tool; the contract's examples go to ``input_examples``."""
    tool: dict[str, Any] = {"name": contract.name, "description": contract.document.description,
                            "input_schema": _parameters(contract)}
    if contract.examples:
        tool["input_examples"] = [_json_value(example.arguments)
                                  for example in contract.examples]
    return tool


def mcp_tool(contract: Contract) -> dict[str, Any]:
    """An MCP ``Tool`` (wire names, camelCase): the contract's ``spec.title`` (else one made
    from the name: ``createFollowUp`` → "Create follow up"), and ``spec.result`` as the
    ``outputSchema`` when the contract declares one.

    ``destructiveHint`` is true for a write: a contract does not say a write only adds, and
    true is the careful reading. ``idempotentHint`` is true only for reads: the gate
    suppresses a repeated write within one request (same operation ID), but the same
    arguments in a new request are a new write, so a client must not assume repeating a
    write is free. The MCP gateway, which itself keeps the request ID per session, marks
    ``idempotency: key`` writes idempotent (``gateway.binding.tool``).
    """
    tool: dict[str, Any] = {
        "name": contract.name, "title": contract.title or title_of(contract.name),
        "description": contract.document.description, "inputSchema": _parameters(contract),
        "annotations": {"readOnlyHint": not contract.is_write,
                        "destructiveHint": contract.is_write,
                        "idempotentHint": not contract.is_write}}
    if contract.result_schema is not None:
        tool["outputSchema"] = copy.deepcopy(dict(contract.result_schema))
    return tool


def title_of(name: str) -> str:
    """A title people read, from a tool's name: ``getTicketStatus`` → "Get ticket status"."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|[_.-]+", " ", name).split()
    return " ".join(words).lower().capitalize() if words else name


# OpenAI strict mode ------------------------------------------------------------------------

# What strict mode rejects (OpenAI's Structured Outputs subset; the list pydantic-ai's OpenAI
# profile checks a schema against): moved into the description, for the model to read.
_STRICT_UNSUPPORTED = ("minLength", "maxLength", "patternProperties", "unevaluatedProperties",
                       "propertyNames", "minProperties", "maxProperties", "unevaluatedItems",
                       "contains", "minContains", "maxContains", "uniqueItems", "default",
                       "not", "if", "then", "else", "dependentRequired", "dependentSchemas")
_STRICT_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname",
                             "ipv4", "ipv6", "uuid"})
_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")
_SUBSCHEMA_LISTS = ("anyOf", "allOf", "prefixItems")


def openai_strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` in the subset OpenAI's strict mode accepts: every object closed and every
    property required — an optional one nullable instead —, ``oneOf`` as ``anyOf``, and each
    keyword strict mode rejects (a length bound, a format it does not know, a look-around
    pattern, a default) moved into the description as ``keyword=value``. Strict mode only
    shapes what the model writes: the gate checks the full schema."""
    return _strict(copy.deepcopy(dict(schema)))


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    notes = [f"{key}={json.dumps(schema.pop(key), sort_keys=True, default=str)}"
             for key in _STRICT_UNSUPPORTED if key in schema]
    if "format" in schema and schema["format"] not in _STRICT_FORMATS:
        notes.append(f"format={schema.pop('format')}")
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and any(token in pattern for token in _LOOKAROUND):
        notes.append(f"pattern={schema.pop('pattern')}")
    if "oneOf" in schema:
        schema["anyOf"] = [*schema.get("anyOf", ()), *schema.pop("oneOf")]
    if notes:
        said = "; ".join(notes)
        schema["description"] = (f"{schema['description']} ({said})"
            if schema.get("description") else f"({said})")
    for key in _SUBSCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            schema[key] = [_strict(dict(each)) if isinstance(each, Mapping) else each
                           for each in schema[key]]
    if isinstance(schema.get("items"), Mapping):
        schema["items"] = _strict(dict(schema["items"]))
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), Mapping):
            schema[key] = {name: _strict(dict(each)) for name, each in schema[key].items()}
    if schema.get("type") == "object" or "properties" in schema:
        required = set(schema.get("required", ()))
        properties = {name: _strict(dict(each)) if isinstance(each, Mapping) else each
                      for name, each in dict(schema.get("properties") or {}).items()}
        schema["properties"] = {name: each if name in required else _nullable(each)
                                for name, each in properties.items()}
        schema["required"] = list(properties)
        schema["additionalProperties"] = False
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` accepting null as well: how strict mode says a field may be left out (a
    scalar type gains ``"null"``; an object, an array or an enum is wrapped in ``anyOf``)."""
    if _accepts_null(schema):
        return schema
    kind = schema.get("type")
    scalar = kind not in ("object", "array") and not (isinstance(kind, list) and (
        "object" in kind or "array" in kind))
    if (isinstance(kind, str | list) and scalar and "enum" not in schema
            and "const" not in schema):
        schema["type"] = [*([kind] if isinstance(kind, str) else kind), "null"]
        return schema
    if isinstance(schema.get("anyOf"), list) and "type" not in schema:
        schema["anyOf"].append({"type": "null"})
        return schema
    outer: dict[str, Any] = {"anyOf": [schema, {"type": "null"}]}
    if "description" in schema:
        outer["description"] = schema.pop("description")
    return outer


def _accepts_null(schema: Any) -> bool:
    if not isinstance(schema, Mapping) or not schema:
        return isinstance(schema, Mapping) or schema is True  # {} and true accept anything
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return "enum" not in schema or None in schema["enum"]
    if "const" in schema:
        return schema["const"] is None
    if "enum" in schema and kind is None:
        return None in schema["enum"]
    return any(_accepts_null(each) for key in ("anyOf", "oneOf")
               for each in schema.get(key) or ())


def from_strict_arguments(schema: Mapping[str, Any], arguments: Any) -> Any:
    """A strict-mode call's arguments as the full ``schema`` means them: the null a model
    sends for an optional field it leaves out becomes an absent field (a field whose own
    schema accepts null keeps it), in nested objects and arrays too. Anything that is not
    an object of the expected shape is passed on as it is, for the gate to judge."""
    if isinstance(arguments, list) and isinstance(schema.get("items"), Mapping):
        return [from_strict_arguments(schema["items"], each) for each in arguments]
    properties = schema.get("properties")
    if not isinstance(arguments, Mapping) or not isinstance(properties, Mapping):
        return arguments
    required = set(schema.get("required", ()))
    back: dict[str, Any] = {}
    for key, value in arguments.items():
        own = properties.get(key)
        if (value is None and key not in required and isinstance(own, Mapping)
                and not _accepts_null(own)):
            continue
        back[key] = from_strict_arguments(own, value) if isinstance(own, Mapping) else value
    return back


def openai_strict_tool(contract: Contract) -> dict[str, Any]:
    """A Chat Completions tool definition in strict mode (``openai_strict_schema``)."""
    return {"type": "function", "function": {
        "name": contract.name, "description": contract.document.description,
        "parameters": openai_strict_schema(contract.arguments_schema), "strict": True}}


def openai_responses_strict_tool(contract: Contract) -> dict[str, Any]:
    """A Responses API function tool in strict mode (``openai_strict_schema``)."""
    return {"type": "function", "name": contract.name,
            "description": contract.document.description,
            "parameters": openai_strict_schema(contract.arguments_schema), "strict": True}


# What each API accepts ----------------------------------------------------------------------


@dataclass(frozen=True)
class ToolFormat:
    """One API's tool definition: how to render a contract and which names it accepts."""

    title: str
    render: Callable[[Contract], dict[str, Any]]
    name_pattern: re.Pattern[str]
    name_rule: str
    # OpenAI and Anthropic reject a parameters schema whose top is a oneOf/anyOf/allOf.
    top_level_combinators_allowed: bool


_OPENAI_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_OPENAI_NAME_RULE = "letters, digits, _ and -, at most 64 characters"

TOOL_FORMATS: Mapping[str, ToolFormat] = {
    "openai": ToolFormat("OpenAI Chat Completions", openai_tool, _OPENAI_NAME,
                         _OPENAI_NAME_RULE, False),
    "openai-responses": ToolFormat("OpenAI Responses", openai_responses_tool, _OPENAI_NAME,
                                   _OPENAI_NAME_RULE, False),
    "anthropic": ToolFormat("Anthropic", anthropic_tool, _OPENAI_NAME, _OPENAI_NAME_RULE,
                            False),
    "mcp": ToolFormat("MCP", mcp_tool, re.compile(r"^[A-Za-z0-9_.-]{1,128}$"),
                      "letters, digits, _, - and ., at most 128 characters", True),
    "openai-strict": ToolFormat("OpenAI Chat Completions (strict)", openai_strict_tool,
                                _OPENAI_NAME, _OPENAI_NAME_RULE, False),
    "openai-responses-strict": ToolFormat("OpenAI Responses (strict)",
                                          openai_responses_strict_tool, _OPENAI_NAME,
                                          _OPENAI_NAME_RULE, False),
}

_COMBINATORS = ("oneOf", "anyOf", "allOf")


def _problems(contract: Contract, tool_format: ToolFormat) -> list[str]:
    where = f"{contract.document.location}: tool {contract.name!r}"
    problems = []
    if not tool_format.name_pattern.match(contract.name):
        problems.append(f"{where}: {tool_format.title} accepts tool names of "
                        f"{tool_format.name_rule}; rename the tool")
    schema = contract.arguments_schema
    if schema.get("type") != "object":
        problems.append(f"{where}: {tool_format.title} needs `type: object` at the top of "
                        "spec.arguments")
    if (tool_format.render is mcp_tool and contract.result_schema is not None
            and contract.result_schema.get("type") != "object"):
        problems.append(f"{where}: MCP needs `type: object` at the top of spec.result (an "
                        "outputSchema describes a result object); wrap the result in one")
    if not tool_format.top_level_combinators_allowed:
        found = [keyword for keyword in _COMBINATORS if keyword in schema]
        if found:
            problems.append(f"{where}: {tool_format.title} rejects {', '.join(found)} at the "
                            "top of spec.arguments; move it into a property")
    return problems


def tool_definitions(config: GateConfig, style: str) -> list[dict[str, Any]]:
    """The contracts as the tool list of ``style`` (one of ``TOOL_FORMATS``), sorted by name.

    Raises ``ToolDefinitionError`` naming every contract the API would refuse, rather than
    letting the API refuse the whole request later.
    """
    if style not in TOOL_FORMATS:
        raise ToolDefinitionError(f"unknown tool format {style!r}; use one of: "
                                  f"{', '.join(TOOL_FORMATS)}")
    tool_format = TOOL_FORMATS[style]
    contracts = [config.contracts[name] for name in sorted(config.contracts)]
    problems = [problem for contract in contracts for problem in _problems(contract, tool_format)]
    if problems:
        raise ToolDefinitionError("\n".join(problems))
    return [tool_format.render(contract) for contract in contracts]
