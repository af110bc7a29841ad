"""Reading YAML documents while remembering where every node came from.

PyYAML's composer already knows the line and column of each node; we keep them in a map
from the node's path (``("spec", "rules", 2, "expression")``) to its place, so any later
error — a schema violation, a CEL syntax error, an unknown field — can point at the file,
line and column a person has to edit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import InputError, Location

NodePath = tuple[str | int, ...]
YAML_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class SourceDocument:
    """One YAML document and the place of each of its nodes."""

    path: str
    data: Any
    places: Mapping[NodePath, tuple[int, int]] = field(repr=False)
    index: int = 0  # position of the document within its file (``---`` separated)

    def locate(self, node_path: NodePath) -> Location:
        """The place of ``node_path``, or of its nearest ancestor that has one."""
        probe = tuple(node_path)
        while probe:
            if probe in self.places:
                line, column = self.places[probe]
                return Location(self.path, line, column)
            probe = probe[:-1]
        line, column = self.places.get((), (1, 1))
        return Location(self.path, line, column)

    def sub(self, prefix: NodePath) -> SourceDocument:
        """The node at ``prefix`` as a document of its own, still pointing into this file."""
        size = len(prefix)
        data: Any = self.data
        for part in prefix:
            data = data[part]
        places = {path[size:]: place for path, place in self.places.items()
                  if path[:size] == tuple(prefix)}
        return SourceDocument(self.path, data, places, self.index)


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, which YAML silently lets the last one win."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _record_places(
    node: yaml.Node, path: NodePath, places: dict[NodePath, tuple[int, int]]
) -> None:
    places[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            _record_places(value_node, (*path, key), places)
            # a key's own place is better than its value's for "unknown field" errors
            places[(*path, key, "<key>")] = (
                key_node.start_mark.line + 1,
                key_node.start_mark.column + 1,
            )
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _record_places(item, (*path, index), places)


def parse_yaml_text(text: str, path: str) -> list[SourceDocument]:
    """Every document in ``text``; raises ``InputError`` naming the line on a YAML error."""
    documents: list[SourceDocument] = []
    try:
        for index, node in enumerate(yaml.compose_all(text, Loader=_Loader)):
            if node is None:
                continue
            loader = _Loader("")
            data = loader.construct_document(node)
            places: dict[NodePath, tuple[int, int]] = {}
            _record_places(node, (), places)
            documents.append(SourceDocument(path, data, places, index))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        raise InputError(f"{where}: error YAML {error.problem or error.context}") from None
    except yaml.YAMLError as error:
        raise InputError(f"{path}: error YAML {error}") from None
    return documents


def read_documents(path: Path) -> list[SourceDocument]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: cannot read: {error}") from None
    return parse_yaml_text(text, str(path))


def iter_yaml_files(paths: list[Path]) -> Iterator[Path]:
    """YAML files under ``paths`` (files as given, directories recursively, sorted)."""
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.suffix in YAML_SUFFIXES)
        elif path.exists():
            yield path
        else:
            raise InputError(f"{path}: no such file or directory")


def read_data_file(path: str, what: str) -> Any:
    """A JSON or YAML file a person hands to the CLI (``-`` is stdin); one clear error."""
    import sys

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: cannot read {what}: {error}") from None
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise InputError(
                f"{path}:{error.lineno}:{error.colno}: {what} is not valid JSON: {error.msg}"
            ) from None
    documents = parse_yaml_text(text, path)
    if len(documents) != 1:
        raise InputError(f"{path}: {what} must hold exactly one document, found {len(documents)}")
    return documents[0].data
