"""What lint says beyond a document's own errors: YAML that parses into something the
author almost surely did not mean, and variables whose fields nothing can check.

- ``yaml-bare-key``: a key written without a colon inside a flow mapping. YAML ends a flow
  entry at a comma, so ``{type: string, description: the name, as written}`` makes
  ``as written`` a key of its own with no value; in a schema, JSON Schema ignores it and the
  description the model reads is cut short.
- ``null-property``: a key under a schema's ``properties`` with nothing after its colon:
  the property has no schema at all (a forgotten ``{type: ...}``).
- ``undeclared-schema`` (a note): an expression reads fields of the actor, the session or
  a looked-up record whose schema nobody declared, so no typo among them can be found.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from callgate_rules.authoring.lint.expressions import (
    access_expressions,
    contract_expressions,
    read_at,
)
from callgate_rules.authoring.lint.places import item_paths
from callgate_rules.documents.compiler import Compilation, Finding, dotted
from callgate_rules.documents.source import NodePath, SourceDocument
from callgate_rules.errors import Location


def check_yaml_traps(compilation: Compilation) -> Iterator[Finding]:
    for source in compilation.sources:
        yield from _bare_keys(source)
        for root in _schema_roots(source):
            yield from _null_properties(source, root)


def explained_by_traps(findings: Iterable[Finding], traps: Iterable[Finding]) -> list[Finding]:
    """``findings`` without the compiler's generic "None is not of type" schema errors that
    a ``null-property`` finding in the same file already explains, at the key."""
    explained = {t.location.path for t in traps if t.code == "null-property"}
    return [f for f in findings if not (
        f.code == "schema" and f.location.path in explained
        and "None is not of type" in f.message)]


def _bare_keys(source: SourceDocument) -> Iterator[Finding]:
    for path, value in _mapping_entries(source.data, ()):
        if value is not None or not isinstance(path[-1], str):
            continue
        place = source.places.get((*path, "<key>"))
        if place is None:
            continue
        line, column = place
        text = source.lines[line - 1] if line <= len(source.lines) else ""
        after = text[column - 1 + len(path[-1]):].lstrip()
        if text[column - 1:].startswith(path[-1]) and not after.startswith(":"):
            owner = dotted(path[:-1]) or "the document"
            yield Finding(Location(source.path, line, column), "error", "yaml-bare-key",
                          f"{owner}: {path[-1]!r} is a key with no value: in a flow mapping "
                          "({...}) a comma ends the entry, so the text after it became a key "
                          "of its own. Quote the text that holds the comma (description: "
                          '"a, b"), or add the missing "key: value"')


def _mapping_entries(data: Any, path: NodePath) -> Iterator[tuple[NodePath, Any]]:
    """(path, value) of every mapping entry under ``data``, iteratively (YAML is bounded)."""
    pending: list[tuple[NodePath, Any]] = [(path, data)]
    while pending:
        prefix, node = pending.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                entry = (*prefix, str(key))
                yield entry, value
                pending.append((entry, value))
        elif isinstance(node, list):
            pending.extend(((*prefix, index), item) for index, item in enumerate(node))


def _schema_roots(source: SourceDocument) -> Iterator[NodePath]:
    """Where the JSON Schemas of a document are: arguments, record, actor, session."""
    data = source.data
    if not isinstance(data, Mapping) or not isinstance(data.get("spec"), Mapping):
        return
    spec = data["spec"]
    if data.get("kind") == "ToolContract":
        yield ("spec", "arguments")
        for path in item_paths(source, ("spec", "lookups")).values():
            yield (*path, "schema")
    elif data.get("kind") == "AccessPolicy":
        yield from (("spec", name) for name in ("actor", "session") if name in spec)


def _null_properties(source: SourceDocument, root: NodePath) -> Iterator[Finding]:
    node: Any = source.data
    for part in root:
        node = node.get(part) if isinstance(node, Mapping) else None
    for path, value in _mapping_entries(node, root):
        if value is None and len(path) >= 2 and path[-2] == "properties":
            key = source.locate((*path, "<key>"))
            yield Finding(key, "error", "null-property",
                          f"{dotted(path)} has no schema: nothing follows the colon, so "
                          f"YAML reads it as null. Give it one, e.g. {path[-1]}: "
                          "{type: string} (or {} for any value)")


def check_undeclared_schemas(compilation: Compilation) -> Iterator[Finding]:
    """A note where fields are read from a variable no schema describes."""
    read: dict[str, set[str]] = {}
    first: dict[str, Location] = {}
    places = [place for contract in compilation.contracts.values()
              for place in contract_expressions(compilation, contract)]
    for place in [*places, *access_expressions(compilation)]:
        contract = compilation.contracts[place.tool]
        undeclared = {lookup.name: lookup for lookup in contract.lookups
                      if lookup.record_schema is None}
        for path in place.expression.references:
            if len(path) < 2:
                continue
            root = path[0]
            if root == "record" and place.record is not None:
                root = place.record.name
            if (root == "actor" and compilation.actor_schema is None) or (
                    root == "session" and compilation.session_schema is None):
                subject = root
            elif root in undeclared:
                subject = f"{contract.name} lookup {root}"
                first.setdefault(subject, _lookup_name_place(compilation, contract.name,
                                                             undeclared[root].location))
            else:
                continue
            read.setdefault(subject, set()).add(f"{path[0]}.{path[1]}")
            if subject not in first:
                first[subject] = read_at(place, f"{path[0]}.{path[1]}")
    for subject, fields in sorted(read.items()):
        where = ("spec.actor of an AccessPolicy" if subject == "actor" else
                 "spec.session of an AccessPolicy" if subject == "session" else
                 "a schema on the look-up")
        yield Finding(first[subject], "note", "undeclared-schema",
                      f"{subject}: fields are read ({', '.join(sorted(fields))}) but no schema "
                      f"declares them; declare {where} (type: object, properties: ...) so "
                      "lint can check every field and a typo is an error here, not a refusal "
                      "at run time")


def _lookup_name_place(compilation: Compilation, tool: str, lookup: Location) -> Location:
    source = compilation.contract_sources[tool]
    path = item_paths(source, ("spec", "lookups")).get(lookup)
    return source.locate((*path, "name")) if path is not None else lookup
