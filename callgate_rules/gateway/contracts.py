"""``callgate init --from-mcp``: draft documents from an MCP server's ``tools/list``.

For each tool a ToolContract: its name and description, its input schema tightened with
``additionalProperties: false`` on every object that does not say otherwise, the effect
from ``readOnlyHint`` (a tool that does not say it only reads is a write: the careful
reading), and an example made from the schema. What only a person can decide is marked
``FILL-IN`` where the document schema rejects it, so ``callgate lint`` points at each
place (file, line, column) until it is filled: a write's ``idempotency``, and an example
value the schema alone cannot make (a ``pattern``). Beside them, ``policies/access.yaml``:
an AccessPolicy with an actor schema to complete and no allow rule, so every call is
denied until the owner writes one.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import yaml

from callgate_rules.errors import InputError
from callgate_rules.gateway.upstream import UpstreamSpec, connect

MARK = "FILL-IN"
_FILE_NAME = re.compile(r"[^A-Za-z0-9_.-]")
_EXAMPLE_BY_FORMAT = {"date-time": "2030-01-01T09:00:00Z", "date": "2030-01-01",
                      "email": "someone@example.com", "uri": "https://example.com/"}


def draft_from_mcp(directory: Path, *, command: str | None = None, url: str | None = None,
                   owner: str = f"{MARK}@example.com", force: bool = False) -> list[Path]:
    """Write the drafts for the MCP server at ``command`` or ``url`` under ``directory``;
    the paths written. Nothing is written when a file is there already, unless ``force``."""
    tools = anyio.run(_tools, UpstreamSpec(command=command, url=url))
    documents = {directory / "contracts" / f"{_FILE_NAME.sub('_', tool.name)}.yaml":
                 contract_text(tool, owner) for tool in tools}
    documents[directory / "policies" / "access.yaml"] = policy_text(
        [tool.name for tool in tools], owner)
    existing = [str(path) for path in documents if path.exists()]
    if existing and not force:
        raise InputError(f"not overwriting {', '.join(existing)}; pass --force to replace")
    for path, text in documents.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(documents)


async def _tools(spec: UpstreamSpec) -> list[types.Tool]:
    async with connect(spec) as upstream:
        return [upstream.tools[name] for name in sorted(upstream.tools)]


def contract(tool: types.Tool, owner: str) -> dict[str, Any]:
    """The draft ToolContract of one MCP tool, as data."""
    annotations = tool.annotations
    read = bool(annotations and annotations.read_only_hint)
    arguments = tightened(tool.input_schema or {"type": "object"})
    spec: dict[str, Any] = {"effect": "read" if read else "write"}
    if not read:
        spec["idempotency"] = MARK
    spec["arguments"] = arguments
    spec["examples"] = [{"arguments": example(arguments)}]
    return {
        "apiVersion": "callgate/v1", "kind": "ToolContract",
        "metadata": {"name": tool.name, "version": "0.1.0", "owner": owner,
                     "description": tool.description or f"{MARK}: what the model is told "
                                                        "this tool does"},
        "spec": spec,
    }


def contract_text(tool: types.Tool, owner: str) -> str:
    effect = "read" if tool.annotations and tool.annotations.read_only_hint else "write"
    header = [f"# Drafted by `callgate init --from-mcp` from the MCP tool {tool.name!r}.",
              f"# Effect {effect}: from readOnlyHint (absent or false counts as a write)."]
    if effect == "write":
        header.append("# idempotency: key (the server deduplicates by the operation ID in "
                      "_meta callgate/operation_id),")
        header.append("#   lookup (it can be asked by operation ID: add reconcile.tool), or "
                      "none (a person decides).")
    header.append("# Tighten the arguments (bounds, patterns, formats) and add look-ups and "
                  "rules; lint checks them.")
    return "\n".join(header) + "\n" + _dump(contract(tool, owner))


def tightened(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with ``additionalProperties: false`` on each object that does not set it."""
    result = copy.deepcopy(dict(schema))
    _close(result)
    return result


def _close(schema: Any) -> None:
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "object" or "properties" in schema:
        schema.setdefault("additionalProperties", False)
    for key in ("properties", "$defs", "definitions"):
        for child in (schema.get(key) or {}).values():
            _close(child)
    for key in ("items", "additionalProperties"):
        _close(schema.get(key))
    for key in ("anyOf", "oneOf", "allOf"):
        for child in schema.get(key) or ():
            _close(child)


def example(schema: Mapping[str, Any]) -> Any:
    """A value of ``schema`` made from it alone; ``FILL-IN`` where it cannot say (a
    pattern), so lint's check of the example points there."""
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    kind = next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        return {name: example(properties.get(name) or {})
                for name in schema.get("required") or () if isinstance(name, str)}
    if kind == "array":
        count = int(schema.get("minItems", 0))
        return [example(schema.get("items") or {}) for _ in range(count)]
    if kind in ("integer", "number"):
        return schema.get("minimum", schema.get("exclusiveMinimum", 0) + 1)
    if kind == "boolean":
        return True
    if kind == "string" and "pattern" not in schema:
        text = _EXAMPLE_BY_FORMAT.get(str(schema.get("format")), "example")
        return text.ljust(int(schema.get("minLength", 0)), "x")
    return MARK


def policy_text(tools: list[str], owner: str) -> str:
    policy = {
        "apiVersion": "callgate/v1", "kind": "AccessPolicy",
        "metadata": {"name": "access", "version": "0.1.0", "owner": owner,
                     "description": "Who may call which tool. Denies every call until "
                                    "allow rules are added."},
        "spec": {"actor": {"type": "object", "required": ["id"],
                           "properties": {"id": {"type": "string"}}},
                 "rules": []},
    }
    names = ", ".join(tools[:3]) or "toolName"
    return ("# Drafted by `callgate init --from-mcp`. Default deny: no call is allowed until\n"
            "# a rule allows it. Declare the fields of the actor your host passes under\n"
            "# spec.actor, then add rules such as:\n"
            "#   - name: members-may-read\n"
            "#     effect: allow\n"
            f"#     tools: [{names}]\n"
            "#     when: actor.role == \"member\"\n" + _dump(policy))


def _dump(document: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(document), sort_keys=False, allow_unicode=True, width=100)
