"""``callgate init``: a new project from the templates, or draft contracts from tool lists.

``new_project`` copies ``templates/project`` (package data, so it works after ``pip
install``): one write tool and one read tool, an AccessPolicy and a RoutingTable, PolicyTests
that cover every reachable rule, route and error class, a world, a scenario and a README —
``callgate lint``, ``callgate test --coverage --fail-under 100`` and ``callgate simulate``
pass on it as written.

``draft_from_tools`` turns tool definitions a model already uses — OpenAI's (chat
completions or Responses API) or Anthropic's — into draft ToolContracts: the name,
description and input schema (tightened with ``additionalProperties: false``), an example
made from the schema. What only a person can decide says ``FILL-IN`` where the document
schema rejects it, so ``callgate lint`` points at each place until it is filled: whether
the tool reads or writes (neither API says), how a write is deduplicated, and an example
value the schema alone cannot make. The MCP import (``gateway/contracts.py``) drafts the same
way from ``tools/list``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from callgate_rules.documents.source import read_text
from callgate_rules.errors import InputError

MARK = "FILL-IN"
OWNER_PLACEHOLDER = "OWNER"
_FILE_NAME = re.compile(r"[^A-Za-z0-9_.-]")
_EXAMPLE_BY_FORMAT = {"date-time": "2030-01-01T09:00:00Z", "date": "2030-01-01",
                      "email": "someone@example.com", "uri": "https://example.com/"}
_TOOL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")


# A new project -------------------------------------------------------------------------------


def new_project(directory: Path, *, owner: str, force: bool = False) -> list[Path]:
    """Write the project template under ``directory``; the paths written. Nothing is
    written when one of the files is there already, unless ``force``."""
    template = resources.files("callgate_rules.authoring").joinpath("templates", "project")
    documents: dict[Path, str] = {}

    def collect(node: Any, relative: Path) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir():
                collect(child, relative / child.name)
            elif child.name.endswith((".yaml", ".json", ".md")):
                text = child.read_text(encoding="utf-8")
                documents[directory / relative / child.name] = text.replace(
                    OWNER_PLACEHOLDER, owner) if child.name.endswith(".yaml") else text

    collect(template, Path())
    return write_documents(documents, force)


def new_example(name: str, directory: Path, *, owner: str, force: bool = False) -> list[Path]:
    """Write the example project ``name`` (``example_sets.EXAMPLE_SETS``) under
    ``directory``; the paths written. The refunds example is the project template (its
    owner is ``owner``); the others are written as they are."""
    from callgate_rules.authoring.example_sets import example_set

    example = example_set(name)
    if example is None:
        raise InputError(f"no example named {name!r}; `callgate init --list` names them: "
                         f"{', '.join(example_names())}")
    if example.template:
        return new_project(directory, owner=owner, force=force)
    return write_documents({directory / relative: text
                            for relative, text in example_files(name)}, force)


def example_names() -> list[str]:
    from callgate_rules.authoring.example_sets import EXAMPLE_SETS

    return [example.name for example in EXAMPLE_SETS]


def example_files(name: str) -> list[tuple[Path, str]]:
    """The files of the example set ``name``: from the package (a wheel holds them under
    ``callgate_rules/examples/``), else from the source tree an editable install runs."""
    from callgate_rules.authoring.example_sets import (
        PACKAGED_FOLDER,
        example_set,
        skipped,
        source_files,
    )

    example = example_set(name)
    assert example is not None and not example.template
    packaged = resources.files("callgate_rules").joinpath(PACKAGED_FOLDER, name)
    files: list[tuple[Path, str]] = []
    if packaged.is_dir():
        def collect(node: Any, relative: Path) -> None:
            for child in sorted(node.iterdir(), key=lambda c: c.name):
                if skipped(relative / child.name):
                    continue
                if child.is_dir():
                    collect(child, relative / child.name)
                else:
                    files.append((relative / child.name, child.read_text(encoding="utf-8")))

        collect(packaged, Path())
        return files
    repository = Path(__file__).resolve().parents[2]
    if not (repository / "pyproject.toml").is_file():
        raise InputError(f"this installation of callgate-rules holds no example {name!r}; "
                         "install it from its wheel or its source tree")
    for relative, source in source_files(example, repository):
        files.append((relative, source.read_text(encoding="utf-8")))
    return files


def write_documents(documents: Mapping[Path, str], force: bool) -> list[Path]:
    existing = [str(path) for path in documents if path.exists()]
    if existing and not force:
        raise InputError(f"not overwriting {', '.join(existing)}; pass --force to replace")
    for path, text in documents.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(documents)


# Draft contracts from a model API's tool list ----------------------------------------------


@dataclass(frozen=True)
class ToolDefinition:
    """One tool as a model API declares it."""

    name: str
    description: str | None
    input_schema: Mapping[str, Any]
    read_only: bool | None = None  # None: the source does not say
    # what the tool answers (an MCP tool's outputSchema), kept as the contract's spec.result
    output_schema: Mapping[str, Any] | None = None


def read_tool_list(path: Path, api: str) -> list[ToolDefinition]:
    """The tools of ``path``, a JSON list (or ``{"tools": [...]}``) in ``api``'s format:
    ``openai`` (``{"type": "function", "function": {...}}`` or the Responses API's flat
    ``{"type": "function", "name": ...}``) or ``anthropic`` (``{"name", "input_schema"}``)."""
    text = read_text(path, "the tool list")  # bounded: refused unread when too large
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}:{error.lineno}:{error.colno}: not JSON: {error.msg}") from None
    except RecursionError:
        raise InputError(f"{path}: the tool list is nested too deeply to be a tool "
                         "list") from None
    if isinstance(data, Mapping) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list) or not data:
        raise InputError(f"{path}: expected a non-empty JSON list of {api} tool definitions "
                         'or {"tools": [...]}')
    tools = [_tool(item, api, f"{path}: tools[{index}]") for index, item in enumerate(data)]
    names = [tool.name for tool in tools]
    for name in names:
        if names.count(name) > 1:
            raise InputError(f"{path}: the tool {name!r} is defined {names.count(name)} times")
    return tools


def _tool(item: Any, api: str, where: str) -> ToolDefinition:
    if not isinstance(item, Mapping):
        raise InputError(f"{where}: a tool definition must be an object, not {item!r:.60}")
    if api == "openai":
        if item.get("type", "function") != "function":
            raise InputError(f"{where}: only function tools can be drafted, not type "
                             f"{item.get('type')!r}")
        body = item.get("function", item)
        schema_key = "parameters"
    else:
        body, schema_key = item, "input_schema"
    if not isinstance(body, Mapping):
        raise InputError(f"{where}: function must be an object")
    name = body.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        raise InputError(f"{where}: name must be a tool name such as issueRefund (letters, "
                         f"digits, _ . -; at most 64), not {name!r:.60}")
    schema = body.get(schema_key)
    if schema is None:
        schema = {"type": "object", "properties": {}}
    if not isinstance(schema, Mapping):
        raise InputError(f"{where}: {schema_key} must be a JSON Schema object")
    description = body.get("description")
    return ToolDefinition(name, description if isinstance(description, str) else None, schema)


def draft_from_tools(directory: Path, tools: Sequence[ToolDefinition], *, source: str,
                     owner: str = f"{MARK}@example.com", force: bool = False) -> list[Path]:
    """Write a draft contract per tool and a default-deny AccessPolicy under ``directory``."""
    try:
        documents = {directory / "contracts" / f"{_FILE_NAME.sub('_', tool.name)}.yaml":
                     contract_text(tool, owner, source) for tool in tools}
    except RecursionError:
        raise InputError("a tool's input schema is nested too deeply to draft") from None
    documents[directory / "policies" / "access.yaml"] = policy_text(
        [tool.name for tool in tools], owner, source)
    return write_documents(documents, force)


def contract(tool: ToolDefinition, owner: str) -> dict[str, Any]:
    """The draft ToolContract of one tool, as data."""
    arguments = tightened(tool.input_schema or {"type": "object"})
    effect = MARK if tool.read_only is None else ("read" if tool.read_only else "write")
    spec: dict[str, Any] = {"effect": effect}
    if effect != "read":
        spec["idempotency"] = MARK
    spec["arguments"] = arguments
    if tool.output_schema:  # lint types ``result`` in verify by it
        spec["result"] = copy.deepcopy(dict(tool.output_schema))
    spec["examples"] = [{"arguments": example(arguments)}]
    return {
        "apiVersion": "callgate/v1", "kind": "ToolContract",
        "metadata": {"name": tool.name, "version": "0.1.0", "owner": owner,
                     "description": tool.description or f"{MARK}: what the model is told "
                                                        "this tool does"},
        "spec": spec,
    }


def contract_text(tool: ToolDefinition, owner: str, source: str) -> str:
    header = [f"# Drafted by `callgate init {source}` from the tool {tool.name!r}."]
    if tool.read_only is None:
        header.append("# effect: read or write — the tool list does not say; a tool that "
                      "changes anything is a write.")
    else:
        header.append(f"# Effect {'read' if tool.read_only else 'write'}: from readOnlyHint "
                      "(absent or false counts as a write).")
    if not tool.read_only:
        header.append("# idempotency (writes; delete it for a read): key (the destination "
                      "deduplicates by the")
        header.append("#   operation ID the gate passes), lookup (it can be asked by "
                      "operation ID), or none (a person decides).")
    header.append("# Tighten the arguments (bounds, patterns, formats) and add look-ups and "
                  "rules; lint checks them.")
    return "\n".join(header) + "\n" + dump(contract(tool, owner))


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
        children = schema.get(key)
        if isinstance(children, dict):
            for child in children.values():
                _close(child)
    for key in ("items", "additionalProperties"):
        _close(schema.get(key))
    for key in ("anyOf", "oneOf", "allOf"):
        children = schema.get(key)
        if isinstance(children, list):
            for child in children:
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


def policy_text(tools: list[str], owner: str, source: str) -> str:
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
    return (f"# Drafted by `callgate init {source}`. Default deny: no call is allowed until\n"
            "# a rule allows it. Declare the fields of the actor your host passes under\n"
            "# spec.actor, then add rules such as:\n"
            "#   - name: members-may-read\n"
            "#     effect: allow\n"
            f"#     tools: [{names}]\n"
            "#     when: actor.role == \"member\"\n" + dump(policy))


def dump(document: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(document), sort_keys=False, allow_unicode=True, width=100)
