"""The gate bound to an upstream MCP server: which tools are offered, and the executors,
finder and resolvers that reach the upstream from the gate's worker threads.

- **Offered tools**: exactly the upstream tools that have a contract, each with the
  contract's description and argument schema and MCP annotations derived from it. An
  upstream tool without a contract is hidden and cannot be called (default deny).
- **Executors**: every contracted tool is executed by calling the upstream tool of the same
  name with the validated arguments; a write carries its operation ID in the call's
  ``_meta`` under ``callgate/operation_id`` (``OPERATION_ID_META``), to be used as the
  destination's idempotency key.
- **Finder** (reconciliation): a contract's ``reconcile.tool`` names an upstream tool that
  finds an operation by its ID; it is called with ``{reconcile.argument: ID}``. An empty
  answer (no content, an empty text, JSON ``null``, ``{}`` or ``[]``) means the operation
  is not there; anything else is ``found``, the look-up's whole result. A contract without
  ``reconcile.tool`` cannot be reconciled here: an unknown outcome goes to review.
- **Resolvers** (look-ups): a look-up's ``collection`` names an upstream read tool; it is
  called with ``{field: value}`` and its records are its answer — a JSON list, an object
  with a ``records`` list, or one object (structured content first, else the text as
  JSON); an empty answer is no record.

Results are kept whole, as the MCP tool result in JSON (``ToolAnswer``): the client given
the receipt again gets the answer as it came. Rules read its data (``pipeline.answers``):
the structured content when the tool gave one, else its text parsed as JSON when it is
JSON, else the text — ``result.id`` in a ``verify`` rule, ``found.status`` in
``reconcile.match``, the records of a look-up, all by that one rule.

``problems`` lists, at start, every contract that cannot work with this upstream: a tool
it lacks, a reconcile or look-up tool it lacks, an argument schema that disagrees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import mcp_types as types

from callgate_rules.documents.model import Contract, GateConfig, Idempotency
from callgate_rules.gateway.combined import Reachable
from callgate_rules.gateway.upstream import UpstreamError, dump
from callgate_rules.integrations.formats import mcp_tool
from callgate_rules.pipeline.answers import ToolAnswer, answer_data
from callgate_rules.pipeline.execute import ExecutionRequest, Executor, Finder, keeps_deadline
from callgate_rules.pipeline.validate import Resolver

OPERATION_ID_META = "callgate/operation_id"
LOOKUP_TIMEOUT_SECONDS = 10.0

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Bindings:
    """What ``Gate(...)`` needs to reach the upstream."""

    executors: dict[str, Executor]
    finder: Finder
    resolvers: dict[str, Resolver]


def bind(config: GateConfig, upstream: Reachable) -> Bindings:
    contracts = config.contracts
    executors: dict[str, Executor] = {
        name: _executor(upstream) for name, contract in contracts.items()
        if name in upstream.tools}
    collections = {lookup.collection for contract in contracts.values()
                   for lookup in contract.lookups}
    resolvers = {name: _resolver(upstream, name) for name in collections
                 if name in upstream.tools}
    return Bindings(executors, _finder(upstream, contracts), resolvers)


def _remaining(deadline: datetime) -> float:
    return max((deadline - datetime.now(UTC)).total_seconds(), 0.0)


def _executor(upstream: Reachable) -> Executor:
    # The upstream call gives up at the deadline itself (``Upstream.call_blocking``), so the
    # gate calls it in the calling thread, with no second thread to wait on.
    @keeps_deadline
    def execute(request: ExecutionRequest) -> Any:
        meta = {OPERATION_ID_META: request.operation_id} if request.operation_id else None
        # an answer over the bound raises ``AnswerTooLarge`` (``answer_too_large``): the
        # write machine hands a write to a person, a read is routed as the table says
        result = upstream.call_blocking(request.tool, request.arguments, meta,
                                        _remaining(request.deadline))
        if result.is_error:
            raise UpstreamError(request.tool, result)
        return ToolAnswer(dump(result))
    return execute


def _finder(upstream: Reachable, contracts: Mapping[str, Contract]) -> Finder:
    # the upstream call gives up by the contract's timeout itself (``call_blocking``)
    @keeps_deadline
    def find(tool: str, operation_id: str) -> Any:
        contract = contracts[tool]
        if contract.reconcile_tool is None:
            raise LookupError(f"{tool} declares no reconcile.tool: the upstream cannot be "
                              "asked whether the operation happened")
        timeout = min(contract.timeout_seconds, LOOKUP_TIMEOUT_SECONDS)
        result = upstream.call_blocking(
            contract.reconcile_tool, {contract.reconcile_argument: operation_id}, None,
            timeout)
        if result.is_error:
            raise UpstreamError(contract.reconcile_tool, result)
        return None if _is_empty(answer(result)) else ToolAnswer(dump(result))
    return find


def _resolver(upstream: Reachable, tool: str) -> Resolver:
    def resolve(field: str, value: Any) -> Sequence[Record]:
        result = upstream.call_blocking(tool, {field: value}, None, LOOKUP_TIMEOUT_SECONDS)
        if result.is_error:
            raise UpstreamError(tool, result)
        return records(answer(result))
    return resolve


def answer(result: types.CallToolResult) -> Any:
    """What a tool answered, as data: ``pipeline.answers``' one rule (structured content,
    else the text read as JSON, else the text, else ``None``), the same that ``verify`` and
    ``reconcile.match`` read."""
    return answer_data(dump(result))


def records(data: Any) -> list[Record]:
    if _is_empty(data):
        return []
    if isinstance(data, Mapping) and isinstance(data.get("records"), list):
        data = data["records"]
    if isinstance(data, list):
        return [item for item in data if isinstance(item, Mapping)]
    return [data] if isinstance(data, Mapping) else []


def _is_empty(data: Any) -> bool:
    return (data is None or (isinstance(data, str | list | dict) and not data) or
        (isinstance(data, str) and not data.strip()))


# What the clients see ----------------------------------------------------------------------


def offered(config: GateConfig, upstream: Reachable) -> list[types.Tool]:
    """The tools the gateway lists: every contracted upstream tool, as its contract says."""
    return [tool(contract) for name, contract in sorted(config.contracts.items())
            if name in upstream.tools]


def tool(contract: Contract) -> types.Tool:
    """A contract as an MCP tool (``formats.mcp_tool``: its title, and ``spec.result`` as
    the outputSchema when declared). Annotations follow from the contract: a read is
    ``readOnlyHint``; a write is ``destructiveHint`` (a contract does not say a write only
    adds) and ``idempotentHint`` only with ``idempotency: key`` (sent again under the same
    operation ID, the destination does nothing more)."""
    definition = mcp_tool(contract)
    write = contract.is_write
    annotations = types.ToolAnnotations(
        read_only_hint=not write, destructive_hint=write,
        idempotent_hint=not write or contract.idempotency == Idempotency.KEY)
    return types.Tool(name=definition["name"], title=definition["title"],
                      description=definition["description"],
                      input_schema=definition["inputSchema"],
                      output_schema=definition.get("outputSchema"), annotations=annotations)


def hidden(config: GateConfig, upstream: Reachable) -> list[str]:
    """Upstream tools no contract names: never offered, never callable. A tool only used
    to reconcile or to look records up is not offered either, but it is not hidden."""
    used = {c.reconcile_tool for c in config.contracts.values() if c.reconcile_tool} | {
        lookup.collection for c in config.contracts.values() for lookup in c.lookups}
    return sorted(name for name in upstream.tools
                  if name not in config.contracts and name not in used)


# Bad configuration, found at start ---------------------------------------------------------


def problems(config: GateConfig, upstream: Reachable) -> list[str]:
    """One line for each contract that cannot work with this upstream."""
    tools = upstream.tools
    found: list[str] = []
    for name, contract in sorted(config.contracts.items()):
        where = f"{contract.document.location}: {name}"
        if name not in tools:
            found.append(f"{where}: the upstream has no tool {name!r}")
            continue
        found += [f"{where}: {line}" for line in
                  schema_differences(contract.arguments_schema, tools[name].input_schema)]
        found += _reference_problems(where, contract, tools)
    return found


def _reference_problems(where: str, contract: Contract,
                        tools: Mapping[str, types.Tool]) -> list[str]:
    found = []
    if contract.reconcile_tool is not None:
        if contract.reconcile_tool not in tools:
            found.append(f"{where}: reconcile.tool {contract.reconcile_tool!r} is not a tool "
                         "of the upstream")
    for lookup in contract.lookups:
        if lookup.collection not in tools:
            found.append(f"{where}: look-up {lookup.name!r} reads collection "
                         f"{lookup.collection!r}, which is not a tool of the upstream")
    return found


def notes(config: GateConfig, upstream: Reachable) -> list[str]:
    """What works but an operator should know: writes whose unknown outcome goes to a
    person because nothing can be asked; ``verify`` rules that read a field the tool's
    ``outputSchema`` does not have (every such call would go to review)."""
    found = [f"{name}: no reconcile.tool; an unknown outcome goes to review"
             for name, contract in sorted(config.contracts.items())
             if name in upstream.tools and contract.is_write
             and contract.reconcile_tool is None]
    for name, contract in sorted(config.contracts.items()):
        tool = upstream.tools.get(name)
        if tool is None or contract.verify is None or not tool.output_schema:
            continue
        where = _verify_location(contract)
        for path in sorted(contract.verify.references):
            missing = (missing_field(tool.output_schema, path[1:]) if path[0] == "result"
                else None)
            if missing is not None:
                found.append(f"warning: {where}: {name} verify reads "
                             f"result.{'.'.join(missing)}, which the upstream tool's "
                             "outputSchema does not have; the rule reads the structured "
                             "content (else the text as JSON): name a field it has")
    return found


def missing_field(schema: Mapping[str, Any], path: Sequence[str]) -> list[str] | None:
    """The leading part of ``path`` up to the first field ``schema`` says an object does
    not have (its ``properties`` list it not); ``None`` when every step may be there."""
    node: Any = schema
    for depth, name in enumerate(path):
        if not isinstance(node, Mapping):
            return None
        properties = node.get("properties")
        if not isinstance(properties, Mapping):
            return None  # nothing said about its fields: anything may be there
        if name not in properties:
            open_object = node.get("additionalProperties", True) is not False
            return None if open_object and not properties else list(path[:depth + 1])
        node = properties[name]
    return None


def _verify_location(contract: Contract) -> str:
    """``file:line`` of the contract's ``verify`` (its document's place when the file
    cannot be read again)."""
    location = contract.document.location
    try:
        with open(location.path, encoding="utf-8") as source:
            for number, line in enumerate(source, start=1):
                if line.strip().startswith("verify:"):
                    return f"{location.path}:{number}"
    except OSError:
        pass
    return str(location)


def schema_differences(contract: Mapping[str, Any], upstream: Mapping[str, Any],
                       path: str = "arguments") -> list[str]:
    """Where the contract's schema lets through what the upstream's would reject, or
    names what the upstream does not know. Tightening (a pattern, a bound, a narrower
    enum, ``additionalProperties: false``, an integer for a number) is what contracts are
    for, and no difference."""
    found = _type_difference(contract, upstream, path)
    if found:
        return found
    ours, theirs = contract.get("properties") or {}, upstream.get("properties") or {}
    open_upstream = upstream.get("additionalProperties", True) is not False
    for name in sorted(set(ours) - set(theirs)):
        if not open_upstream or theirs:
            found.append(f"{path}.{name} is not an argument of the upstream tool")
    required = set(contract.get("required") or ())
    for name in sorted(set(upstream.get("required") or ()) - required):
        found.append(f"{path}.{name} is required by the upstream tool but optional in the "
                     "contract")
    for name in sorted(set(ours) & set(theirs)):
        if isinstance(ours[name], Mapping) and isinstance(theirs[name], Mapping):
            found += schema_differences(ours[name], theirs[name], f"{path}.{name}")
    enum, their_enum = contract.get("enum"), upstream.get("enum")
    if isinstance(enum, list) and isinstance(their_enum, list):
        extra = [value for value in enum if value not in their_enum]
        if extra:
            found.append(f"{path}: enum values {extra} are not accepted by the upstream tool")
    return found


def _type_difference(contract: Mapping[str, Any], upstream: Mapping[str, Any],
                     path: str) -> list[str]:
    ours, theirs = _types(contract.get("type")), _types(upstream.get("type"))
    if not ours or not theirs:
        return []
    widened = theirs | ({"integer"} if "number" in theirs else set())
    if ours <= widened:
        return []
    return [f"{path} is {'|'.join(sorted(ours))} in the contract but "
            f"{'|'.join(sorted(theirs))} upstream"]


def _types(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    return ({item for item in value if isinstance(item, str)} if isinstance(value, list)
        else set())
