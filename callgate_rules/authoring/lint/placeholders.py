"""Message placeholders that read a field no call can have: ``{args.dayz}`` where the
arguments declare ``days``, ``{ticket.statsu}`` where the look-up's record schema declares
``status``. A placeholder that cannot be filled is shown to the model as written, braces
and all, so each is an error at the place it is written (file:line:col).

A field is missing when the object it is read from is closed (``additionalProperties:
false``) and declares no such property, or when it is read from inside a value that is not
an object (a string, a list); an open object, a ``$ref`` to another document or a
combination (``anyOf`` and the like) could hold it, and is left alone. Which roots exist at
all is ``expressions.check_message_fields``' business.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from callgate_rules.authoring.lint.places import item_paths
from callgate_rules.documents.compiler import Compilation, Finding
from callgate_rules.documents.model import PLACEHOLDER, Contract
from callgate_rules.documents.source import NodePath, SourceDocument

# The message fields of a contract, by where they are written
_RULE_MESSAGES = ("message", "user_message")
_COMBINATIONS = ("anyOf", "oneOf", "allOf", "not", "if", "$ref", "$dynamicRef")


def check_placeholder_fields(compilation: Compilation) -> Iterator[Finding]:
    """Every placeholder of a contract's messages, and of the access policies' messages,
    read against the schema of what it names."""
    for contract in compilation.contracts.values():
        source = compilation.contract_sources.get(contract.name)
        if source is None:
            continue
        schemas = _schemas(contract)
        for path in _contract_message_paths(source):
            yield from _check(source, path, [schemas], contract.name)
    for source in compilation.sources:
        data = source.data
        if not isinstance(data, Mapping) or data.get("kind") != "AccessPolicy":
            continue
        for section in ("rules", "sequences"):
            for path in item_paths(source, ("spec", section)).values():
                item = _node(source.data, path)
                tools = _tools(item) if isinstance(item, Mapping) else set()
                applying = [{"args": c.arguments_schema} for c in compilation.contracts.values()
                            if "*" in tools or c.name in tools]
                if applying:
                    name = f"{data.get('metadata', {}).get('name', 'access policy')}"
                    yield from _check(source, (*path, "message"), applying, name)


def _schemas(contract: Contract) -> dict[str, Mapping[str, Any]]:
    """What a contract's placeholders can read, by root: the arguments, and each look-up
    that finds one record and declares its schema."""
    schemas: dict[str, Mapping[str, Any]] = {"args": contract.arguments_schema}
    for lookup in contract.lookups:
        if lookup.record_schema is not None and lookup.many != "list":
            schemas[lookup.name] = lookup.record_schema
    return schemas


def _contract_message_paths(source: SourceDocument) -> Iterator[NodePath]:
    for path in item_paths(source, ("spec", "rules")).values():
        for key in _RULE_MESSAGES:
            yield (*path, key)
    for path in item_paths(source, ("spec", "lookups")).values():
        yield (*path, "message")
    yield ("spec", "verify", "message")
    yield ("spec", "confirmation", "summary")


def _check(source: SourceDocument, path: NodePath,
           candidates: Sequence[Mapping[str, Mapping[str, Any]]],
           owner: str) -> Iterator[Finding]:
    """The placeholders of the message at ``path`` that no schema of ``candidates`` (root →
    schema; one per tool the message can be about) can fill."""
    text = _node(source.data, path)
    if not isinstance(text, str):
        return
    for match in PLACEHOLDER.finditer(text):
        fields = match.group(1).split(".")
        problems = [_missing(schemas[fields[0]], fields[0], fields[1:])
                    for schemas in candidates if fields[0] in schemas]
        if not problems or any(problem is None for problem in problems):
            continue  # a root it does not know, or a schema that may hold the field
        start = match.start()
        line = text.count("\n", 0, start) + 1
        column = start - (text.rfind("\n", 0, start) + 1) + 1
        where = source.locate_in_scalar(path, line, column)
        yield Finding(where, "error", "unknown-placeholder-field",
                      f"{owner} {_label(source, path)}: placeholder {{{match.group(1)}}} "
                      f"can never be filled: {problems[0]}; it would reach the model as "
                      "written")


def _missing(schema: Mapping[str, Any], root: str, fields: Sequence[str]) -> str | None:
    """Why ``fields`` cannot be read from ``root``, a value of ``schema``, or None if they
    may be."""
    node: Any = schema
    read: list[str] = [root]
    for name in fields:
        if not isinstance(node, Mapping) or any(key in node for key in _COMBINATIONS):
            return None
        kind = node.get("type")
        properties = node.get("properties")
        if kind not in (None, "object") and not (isinstance(kind, list) and "object" in kind):
            where = ".".join(read)
            return (f"{where} is {kind if isinstance(kind, str) else ' or '.join(kind)}, "
                   "not an object with fields")
        if isinstance(properties, Mapping) and name in properties:
            node = properties[name]
            read.append(name)
            continue
        if node.get("additionalProperties") is False and not node.get("patternProperties"):
            declared = sorted(properties) if isinstance(properties, Mapping) else []
            where = ".".join(read)
            known = f"; declared: {', '.join(declared)}" if declared else ""
            return f"{where} declares no field {name!r}{known}"
        return None
    return None


def _label(source: SourceDocument, path: NodePath) -> str:
    """``rule not-refunded message``, ``lookup order message``, ``verify message``."""
    if len(path) == 4 and isinstance(path[2], int):
        item = _node(source.data, path[:3])
        name = item.get("name", path[2]) if isinstance(item, Mapping) else path[2]
        kind = {"rules": "rule", "lookups": "lookup", "sequences": "sequence"}.get(
            str(path[1]), str(path[1]))
        return f"{kind} {name} {path[3]}"
    return " ".join(str(part) for part in path[1:])


def _tools(item: Mapping[str, Any]) -> set[str]:
    """The tools an access rule or a sequence rule's message can be about."""
    found: set[str] = set()
    if isinstance(item.get("tools"), list):
        found.update(str(tool) for tool in item["tools"])
    for key, value in item.items():
        if key != "after" and isinstance(value, Mapping) and isinstance(value.get("tools"),
                                                                        list):
            found.update(str(tool) for tool in value["tools"])
    return found


def _node(data: Any, path: NodePath) -> Any:
    for part in path:
        if isinstance(data, Mapping) and isinstance(part, str):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return None
    return data
