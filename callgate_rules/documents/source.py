"""Reading YAML documents while remembering where every node came from.

PyYAML's composer already knows the line and column of each node; we keep them in a map
from the node's path (``("spec", "rules", 2, "expression")``) to its place, so any later
error — a schema violation, a CEL syntax error, an unknown field — can point at the file,
line and column a person has to edit.

Reading is bounded (``MAX_YAML_BYTES``, ``MAX_YAML_DEPTH``, ``MAX_YAML_NODES``): a file too
large, too deep, or that expands past the node bound through aliases (an alias bomb) is
refused with one ``InputError`` naming the file, in time and memory proportional to the
bound, before anything walks or constructs its data. Only YAML's safe tags are read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from callgate_rules.canonical import RepeatedKey, unique_keys
from callgate_rules.documents import cache
from callgate_rules.documents.files import check_inside, read_file_text, too_large
from callgate_rules.documents.yaml_errors import explain, place, written_word
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

    def written(self, node_path: NodePath) -> str | None:
        """The word written, unquoted, for the scalar at ``node_path`` (``no`` for a value
        YAML read as ``False``); ``None`` for a quoted, block or missing one."""
        style = self.scalars.get(tuple(node_path))
        place = self.places.get(tuple(node_path))
        if style is None or place is None or style[0]:  # plain: None, or "" from libyaml
            return None
        line, column = place
        return written_word(self.lines[line - 1], column) if line <= len(self.lines) else None

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


# Bounds -----------------------------------------------------------------------------------------

# Every YAML file callgate reads — documents, PolicyTests, scenarios, worlds, calls — is held
# to these, far above any real configuration (the largest file shipped is 9 KB, 9 levels
# deep, 640 nodes) and far below what would exhaust memory or the interpreter's stack. An
# alias counts as a copy of what it names: nine levels of ``&a [*a, *a, ...]`` are a few
# hundred bytes of text but 9**9 nodes to anything that walks the data.
MAX_YAML_BYTES = 4 * 1024 * 1024
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 100_000


def _refusal(path: str, mark: Any, problem: str) -> InputError:
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else path
    return InputError(f"{where}: error YAML {problem}")


def _too_large(path: str, size: int) -> InputError:
    return too_large(path, size, MAX_YAML_BYTES)


def _too_deep(path: str, mark: Any) -> InputError:
    return _refusal(path, mark, f"nested deeper than {MAX_YAML_DEPTH} levels (or an alias "
                    "names a node that holds it); no callgate document needs that many")


def _too_many(path: str, mark: Any) -> InputError:
    return _refusal(path, mark, f"more than {MAX_YAML_NODES:,} nodes once aliases are "
                    "expanded (an alias counts as a copy of what it names); no callgate "
                    "document needs that many")


def _check_events(text: str, path: str, loader: type[Any]) -> None:
    """Refuse nesting past ``MAX_YAML_DEPTH`` and more than ``MAX_YAML_NODES`` nodes from
    the parser's events, streamed and dropped (no recursion, memory independent of the
    text), before a composer holds every node of the text at once."""
    depth = nodes = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise _too_deep(path, event.start_mark)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            continue
        elif not isinstance(event, yaml.ScalarEvent | yaml.AliasEvent):
            continue
        nodes += 1
        if nodes > MAX_YAML_NODES:
            raise _too_many(path, event.start_mark)


def _may_hold_too_many_nodes(text: str) -> bool:
    """Whether ``text`` could compose into more than ``MAX_YAML_NODES`` nodes: YAML begins
    each node after one of these characters (or at the start), and a mapping's key and value
    share one, so twice their count bounds the nodes. Real files are far below it."""
    marks = sum(text.count(char) for char in "[{,:-?\n")
    return 2 * marks + 2 > MAX_YAML_NODES


class _Places:
    """The place of every node of one composed document, recorded before anything is
    constructed from it — and the refusal of a document that nests deeper than
    ``MAX_YAML_DEPTH`` or holds more than ``MAX_YAML_NODES`` nodes once its aliases are
    expanded (the walk follows aliases, so it stops at the bound, not at 9**9), or holds a
    key that is not a plain value."""

    def __init__(self, file: str, root: yaml.Node) -> None:
        self.file = file
        self.left = MAX_YAML_NODES
        self.places: dict[NodePath, tuple[int, int]] = {}
        self.scalars: dict[NodePath, tuple[str | None, int, int]] = {}
        self.record(root, ())

    def record(self, node: yaml.Node, path: NodePath) -> None:
        self.left -= 1
        if self.left < 0:
            raise _too_many(self.file, node.start_mark)
        start = node.start_mark
        self.places[path] = (start.line + 1, start.column + 1)
        if isinstance(node, yaml.ScalarNode):
            end = node.end_mark.line + (1 if node.end_mark.column else 0)
            self.scalars[path] = (node.style, start.line + 1, max(end, start.line + 1))
            return
        if len(path) >= MAX_YAML_DEPTH:  # also where an alias names a node holding it
            raise _too_deep(self.file, start)
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise _refusal(self.file, key_node.start_mark, "a key must be a plain "
                                   "value such as a name, not a list or a mapping")
                key = key_node.value
                self.record(value_node, (*path, key))
                # a key's own place is better than its value's for "unknown field" errors
                self.places[(*path, key, "<key>")] = (
                    key_node.start_mark.line + 1,
                    key_node.start_mark.column + 1,
                )
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self.record(item, (*path, index))


def _libyaml_bounds_nesting() -> bool:
    """libyaml refuses nesting past 1,000 levels since 0.2.5; older, its composer (C code)
    would recurse as deep as the text nests."""
    try:
        version = tuple(int(part) for part in yaml._yaml.get_version_string().split(".")[:3])
    except (AttributeError, ValueError):
        return False
    return version >= (0, 2, 5)


# libyaml composes about ten times faster; where it is missing (or too old to bound its own
# nesting), or the text has an error, the pure-Python composer runs, so every error message
# reads the same.
_FAST_COMPOSER: type[Any] | None = (getattr(yaml, "CSafeLoader", None)
    if _libyaml_bounds_nesting() else None)


def parse_yaml_text(text: str, path: str, key: str | None = None) -> list[SourceDocument]:
    """Every document in ``text``; raises ``InputError`` naming the line on a YAML error or
    on a broken bound (bytes, depth, nodes after alias expansion). ``key``: the text's
    ``cache.yaml_key``, when the caller has it already."""
    if len(text) > MAX_YAML_BYTES // 4:  # below that, no encoding can exceed the bound
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_YAML_BYTES:
            raise _too_large(path, size)
    key = key or cache.yaml_key(text, path)  # an unchanged file is read as last time
    stored = cache.PARSED_YAML.get(key)
    remembered = cache.parsed_documents(stored) if stored is not None else None
    if remembered is not None:
        lines = tuple(text.splitlines())
        return [SourceDocument(path, data, places, index, scalars, lines)
                for data, places, index, scalars in remembered]
    documents = None
    if _FAST_COMPOSER is not None:
        try:
            documents = _documents(text, path, _FAST_COMPOSER)
        except yaml.YAMLError:
            pass
    if documents is None:
        documents = _documents(text, path, _Loader)
    cache.remember_documents(key, [(document.data, dict(document.places), document.index,
                                    dict(document.scalars)) for document in documents])
    return documents


def _documents(text: str, path: str, composer: type[Any]) -> list[SourceDocument]:
    documents: list[SourceDocument] = []
    lines = tuple(text.splitlines())
    try:
        # the pure-Python composer recurses as deep as the text nests; either holds every node
        if composer is _Loader or _may_hold_too_many_nodes(text):
            _check_events(text, path, composer)
        for index, node in enumerate(yaml.compose_all(text, Loader=composer)):
            if node is None:
                continue
            recorded = _Places(path, node)  # bounded: before anything builds the data
            data = _Loader("").construct_document(node)
            documents.append(SourceDocument(path, data, recorded.places, index,
                                            recorded.scalars, lines))
    except yaml.MarkedYAMLError as error:
        if composer is not _Loader:
            raise
        raise _refusal(path, place(error), explain(error, lines)) from None  # plain words
    except yaml.YAMLError as error:
        if composer is not _Loader:
            raise
        raise InputError(f"{path}: error YAML {error}") from None
    return documents


def read_text(path: Path, what: str = "") -> str:
    """A file's text: a regular file, refused before reading if it is larger than
    ``MAX_YAML_BYTES`` (``files.read_file_text``: never a FIFO, a device or a socket)."""
    return read_file_text(path, MAX_YAML_BYTES, what)


def read_documents(path: Path) -> list[SourceDocument]:
    return parse_yaml_text(read_text(path), str(path))


def iter_yaml_files(paths: list[Path]) -> Iterator[Path]:
    """YAML files under ``paths`` (files as given, directories recursively, sorted). A file
    found in a folder that is a symbolic link out of the folder is refused
    (``files.check_inside``); links to folders are not walked into."""
    for path in paths:
        if path.is_dir():
            for found in sorted(p for p in path.rglob("*") if p.suffix in YAML_SUFFIXES):
                if found.is_symlink():
                    check_inside(found, path)
                yield found
        elif path.exists() or path.is_symlink():
            yield path
        else:
            raise InputError(f"{path}: no such file or directory")


def read_data_file(path: str, what: str) -> Any:
    """A JSON or YAML file a person hands to the CLI (``-`` is stdin); one clear error.
    Both are held to the YAML bounds; a JSON object may not repeat a key (as in YAML)."""
    import sys

    if path == "-":
        try:
            text = sys.stdin.read(MAX_YAML_BYTES + 1)
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"{path}: cannot read {what}: {error}") from None
        if len(text) > MAX_YAML_BYTES:
            raise _too_large(path, len(text.encode("utf-8", "surrogatepass")))
    else:
        text = read_text(Path(path), what)
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        return _read_json_data(text, path, what)
    documents = parse_yaml_text(text, path)
    if len(documents) != 1:
        raise InputError(f"{path}: {what} must hold exactly one document, found {len(documents)}")
    return documents[0].data


def _read_json_data(text: str, path: str, what: str) -> Any:
    try:
        value = json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as error:
        raise InputError(
            f"{path}:{error.lineno}:{error.colno}: {what} is not valid JSON: {error.msg}"
        ) from None
    except RepeatedKey as error:
        raise InputError(f"{path}: {what}: the key {error.args[0]!r} appears twice in one "
                         "object; which one is meant?") from None
    except RecursionError:
        raise _too_deep(path, None) from None
    except ValueError as error:  # an integer of thousands of digits
        raise InputError(f"{path}: {what} is not readable JSON: {error}") from None
    # iteratively, so the check itself cannot exhaust the stack
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > MAX_YAML_DEPTH:
                raise InputError(f"{path}: {what} is nested deeper than {MAX_YAML_DEPTH} "
                                 "levels")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return value
