"""Where in its source a field of a compiled rule, look-up or access rule is written.

The compiled documents keep only where each rule or look-up starts; a finding about its
expression or message should point at that field, so an editor jumps to the right line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from callgate_rules.documents.compiler import Compilation
from callgate_rules.documents.model import AccessRule
from callgate_rules.documents.source import NodePath, SourceDocument
from callgate_rules.errors import Location


def item_paths(source: SourceDocument, prefix: NodePath) -> dict[Location, NodePath]:
    """Where each item of the list at ``prefix`` starts → its node path. Compiled rules and
    look-ups keep only their location; this finds their fields (expression, message) again."""
    node: Any = source.data
    for part in prefix:
        node = node.get(part) if isinstance(node, Mapping) else None
    if not isinstance(node, list):
        return {}
    return {source.locate((*prefix, index)): (*prefix, index) for index in range(len(node))}


def field_at(source: SourceDocument, places: Mapping[Location, NodePath], item: Location,
             field: str) -> Location:
    """Where ``field`` of the item starting at ``item`` is written (the item itself when
    ``places``, from ``item_paths``, does not know it)."""
    path = places.get(item)
    return source.locate((*path, field)) if path is not None else item


def access_rule_places(compilation: Compilation) -> Callable[[AccessRule, str], Location]:
    """A function giving the place of one field of an access rule."""
    paths = access_rule_paths(compilation)

    def place(rule: AccessRule, field: str) -> Location:
        found = paths(rule)
        return found[0].locate((*found[1], field)) if found else rule.location

    return place


def access_rule_paths(compilation: Compilation
                      ) -> Callable[[AccessRule], tuple[SourceDocument, NodePath] | None]:
    """A function giving the document and node path where an access rule is written."""
    places: dict[Location, tuple[SourceDocument, NodePath]] = {}
    for source in compilation.sources:
        if isinstance(source.data, Mapping) and source.data.get("kind") == "AccessPolicy":
            for location, path in item_paths(source, ("spec", "rules")).items():
                places[location] = (source, path)
    return lambda rule: places.get(rule.location)
