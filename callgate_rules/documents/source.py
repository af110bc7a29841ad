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

from callgate_rules.errors import InputError, Location

NodePath = tuple[str | int, ...]
YAML_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class SourceDocument:
    """One YAML document and the place of each of its nodes."""

    path: str
    data: Any
    places: Mapping[NodePath, tuple[int, int]] = field(repr=False)
    index: int = 0  # position of the document within its file (``---`` separated)
    # scalar node → (style, first line, last line), 1-based; and the file's lines, so a
    # place *inside* a multi-line scalar (a CEL error in a folded expression) can be found
    scalars: Mapping[NodePath, tuple[str | None, int, int]] = field(default_factory=dict,
                                                                   repr=False)
    lines: tuple[str, ...] = field(default=(), repr=False)

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

    def locate_in_scalar(self, node_path: NodePath, line: int, column: int) -> Location:
        """The file place of (``line``, ``column``), 1-based, within the scalar's value."""
        base = self.locate(node_path)
        style, first, last = self.scalars.get(tuple(node_path), (None, base.line, base.line))
        if first == last and style not in ("|", ">"):
            quote = 1 if style in ("'", '"') else 0
            return Location(base.path, base.line, base.column + quote + column - 1)
        pieces = self._scalar_pieces(style, first, last, base.column)
        if not pieces:
            return base
        separator = "\n" if style == "|" else " "
        value_lines = separator.join(text for _, _, text in pieces).split("\n")
        offset = sum(len(text) + 1 for text in value_lines[:line - 1]) + column - 1
        for number, start, text in pieces:
            if offset <= len(text):
                return Location(base.path, number, start + offset)
            offset -= len(text) + 1
        number, start, text = pieces[-1]
        return Location(base.path, number, start + len(text))

    def _scalar_pieces(self, style: str | None, first: int, last: int,
                       column: int) -> list[tuple[int, int, str]]:
        """(line, column of its first character, text) for each line of a scalar's value."""
        pieces: list[tuple[int, int, str]] = []
        if style in ("|", ">"):
            for number in range(first + 1, min(last, len(self.lines)) + 1):
                raw = self.lines[number - 1]
                if raw.strip():
                    indent = len(raw) - len(raw.lstrip())
                    pieces.append((number, indent + 1, raw.strip()))
            return pieces
        quote = 1 if style in ("'", '"') else 0
        for number in range(first, min(last, len(self.lines)) + 1):
            raw = self.lines[number - 1]
            if number == first:
                text = raw[column - 1 + quote:]
                pieces.append((number, column + quote, text.rstrip()))
            elif raw.strip():
                pieces.append((number, len(raw) - len(raw.lstrip()) + 1, raw.strip()))
        return pieces

    def sub(self, prefix: NodePath) -> SourceDocument:
        """The node at ``prefix`` as a document of its own, still pointing into this file."""
        size = len(prefix)
        data: Any = self.data
        for part in prefix:
            data = data[part]
        places = {path[size:]: place for path, place in self.places.items()
                  if path[:size] == tuple(prefix)}
        scalars = {path[size:]: info for path, info in self.scalars.items()
                   if path[:size] == tuple(prefix)}
        return SourceDocument(self.path, data, places, self.index, scalars, self.lines)


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
    node: yaml.Node, path: NodePath, places: dict[NodePath, tuple[int, int]],
    scalars: dict[NodePath, tuple[str | None, int, int]],
) -> None:
    places[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.ScalarNode):
        end = node.end_mark.line + (1 if node.end_mark.column else 0)
        scalars[path] = (node.style, node.start_mark.line + 1, max(end, node.start_mark.line + 1))
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            _record_places(value_node, (*path, key), places, scalars)
            # a key's own place is better than its value's for "unknown field" errors
            places[(*path, key, "<key>")] = (
                key_node.start_mark.line + 1,
                key_node.start_mark.column + 1,
            )
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _record_places(item, (*path, index), places, scalars)


# libyaml composes about ten times faster; where it is missing, or the text has an error,
# the pure-Python composer runs, so every error message reads the same.
_FAST_COMPOSER: type[Any] | None = getattr(yaml, "CSafeLoader", None)


def parse_yaml_text(text: str, path: str) -> list[SourceDocument]:
    """Every document in ``text``; raises ``InputError`` naming the line on a YAML error."""
    if _FAST_COMPOSER is not None:
        try:
            return _documents(text, path, _FAST_COMPOSER)
        except (yaml.YAMLError, InputError):
            pass
    return _documents(text, path, _Loader)


def _documents(text: str, path: str, composer: type[Any]) -> list[SourceDocument]:
    documents: list[SourceDocument] = []
    lines = tuple(text.splitlines())
    try:
        for index, node in enumerate(yaml.compose_all(text, Loader=composer)):
            if node is None:
                continue
            loader = _Loader("")
            data = loader.construct_document(node)
            places: dict[NodePath, tuple[int, int]] = {}
            scalars: dict[NodePath, tuple[str | None, int, int]] = {}
            _record_places(node, (), places, scalars)
            documents.append(SourceDocument(path, data, places, index, scalars, lines))
    except yaml.MarkedYAMLError as error:
        if composer is not _Loader:
            raise
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        raise InputError(f"{where}: error YAML {error.problem or error.context}") from None
    except yaml.YAMLError as error:
        if composer is not _Loader:
            raise
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
