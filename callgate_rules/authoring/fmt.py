"""``callgate fmt``: one canonical layout for callgate's YAML documents, comments kept.

The layout
----------
- Documents are separated by ``---``; the file has no leading ``---`` and ends with one
  newline. Two-space indentation everywhere; a block sequence is indented under its key
  (``  rules:`` then ``    - name: ...``).
- Keys follow ``KEY_ORDER`` below: ``apiVersion, kind, metadata, spec``; ``metadata`` as
  ``name, version, owner, description, labels``; each kind's ``spec`` in the order of the
  README's tables. Keys a kind does not know keep their order after the known ones. Inside
  JSON Schemas (``arguments``, ``actor``, a look-up's ``schema``) and example arguments
  the author's order stays: it is the order the model and the catalogue show.
- CEL expressions (a look-up's ``key`` and ``when``, a rule's ``expression``,
  ``verify.expression``, ``reconcile.match``, an access rule's ``when``) are written
  *plain* when YAML reads them back unchanged, otherwise *single-quoted* (CEL's own
  strings use double quotes, so nothing needs escaping). An expression that does not fit
  in 100 columns is *folded* (``>-``), breaking before ``&&`` and ``||`` where it can; one
  that is already folded keeps its author's line breaks; one that fits is unfolded. Inside
  a flow mapping (``{...}``) an expression is never folded.
- Every other scalar keeps the style its author chose (quotes, folding), and a flow
  collection (``{...}``, ``[...]``) stays one, on one line.
- Comments stay with the key or list item they stand above, indented like it; a comment at
  the end of a line stays at the end of that line (after two spaces). Runs of blank lines
  become one; no blank line opens a mapping or a document. A comment after a document's
  last line closes the document, at the first column.

Formatting never changes the data (checked on every file: the documents are read before and
after and compared), never loses a comment (counted before and after), and is idempotent.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import Comment, CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError as RuamelYAMLError
from ruamel.yaml.scalarstring import (
    FoldedScalarString,
    LiteralScalarString,
    PlainScalarString,
    SingleQuotedScalarString,
)

from callgate_rules.documents.source import iter_yaml_files, parse_yaml_text, read_text
from callgate_rules.errors import CallgateError, InputError
from callgate_rules.taxonomy import ErrorClass

API_VERSION = "callgate/v1"
# libyaml when PyYAML has it: fmt reads every file several times (layout, checks)
_FAST_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
WIDTH = 100  # the longest line fmt writes for a CEL expression, as the project's code


class FormatError(CallgateError):
    """fmt could not lay a file out without changing its data or losing a comment."""


# Key order ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """The key order of a mapping (or of every mapping in a sequence) and of its fields."""

    order: tuple[str, ...] = ()
    fields: Mapping[str, Shape] = field(default_factory=dict)
    cel: frozenset[str] = frozenset()  # keys whose values are CEL expressions


_METADATA = Shape(("name", "version", "owner", "description", "labels"))

_TOOL_CONTRACT_SPEC = Shape(
    ("effect", "title", "arguments", "result", "labels", "lookups", "rules", "verify", "reconcile",
     "timeout", "idempotency", "confirmation", "mask", "examples", "errors", "mode",
     "on_error"),
    {
        # message before schema: the look-up's short fields together, the nested block last
        "lookups": Shape(("name", "collection", "key", "field", "when", "many",
                          "candidate_fields", "message", "schema"),
                         cel=frozenset({"key", "when"})),
        "rules": Shape(("name", "expression", "error_class", "route", "message",
                        "user_message", "hint", "mode", "on_error"),
                       cel=frozenset({"expression"})),
        "verify": Shape(("expression", "message"), cel=frozenset({"expression"})),
        "reconcile": Shape(("tool", "argument", "match"), cel=frozenset({"match"})),
        "confirmation": Shape(("required", "summary", "expires")),
        "examples": Shape(("description", "arguments")),
        "errors": Shape(("exception", "attribute", "equals", "error_class")),
    },
)

_SEQUENCE_STEP = Shape(("tools", "where"), cel=frozenset({"where"}))
_ACCESS_POLICY_SPEC = Shape(
    ("actor", "session", "rules", "sequences", "mode", "on_error"),
    {"rules": Shape(("name", "description", "effect", "tools", "when", "message", "mode",
                     "on_error"), cel=frozenset({"when"})),
     # a sequence rule reads in its order: after this, forbid or confirm that
     "sequences": Shape(("name", "description", "after", "forbid", "confirm", "message",
                         "mode", "on_error"),
                        {"after": _SEQUENCE_STEP, "forbid": _SEQUENCE_STEP,
                         "confirm": _SEQUENCE_STEP})},
)

_ERROR_CLASSES = tuple(str(error_class) for error_class in ErrorClass)
_ROUTING_TABLE_SPEC = Shape(
    ("routes", "messages", "budgets", "on_limit", "input", "confirmation", "receipts"),
    {
        "routes": Shape(_ERROR_CLASSES),
        "messages": Shape(_ERROR_CLASSES,
                          {name: Shape(("agent", "user")) for name in _ERROR_CLASSES}),
        "budgets": Shape(("regenerations_per_call", "retries_per_call", "backoff",
                          "call_deadline", "calls_per_tool_per_run", "failures_per_run",
                          "run_deadline"),
                         {"backoff": Shape(("base", "max", "multiplier"))}),
        "on_limit": Shape(("path", "agent", "user")),
        "input": Shape(("max_bytes", "max_depth", "max_string_length", "max_calls",
                        "multiple_calls")),
        "confirmation": Shape(("expires",)),
        "receipts": Shape(("lease", "retention")),
    },
)


def _document(spec: Shape) -> Shape:
    return Shape(("apiVersion", "kind", "metadata", "spec"),
                 {"metadata": _METADATA, "spec": spec})


KEY_ORDER: Mapping[str, Shape] = {
    "ToolContract": _document(_TOOL_CONTRACT_SPEC),
    "AccessPolicy": _document(_ACCESS_POLICY_SPEC),
    "RoutingTable": _document(_ROUTING_TABLE_SPEC),
}
_ANY_KIND = _document(Shape())


def _arrange(node: Any, shape: Shape, path: tuple[str | int, ...]) -> None:
    """Put the keys of ``node`` in ``shape``'s order and lay out its CEL expressions."""
    if isinstance(node, CommentedSeq):
        for index, item in enumerate(node):
            _arrange(item, shape, (*path, index))
        return
    if not isinstance(node, CommentedMap):
        return
    known = [key for key in shape.order if key in node]
    for key in known + [key for key in node if key not in shape.order]:
        node.move_to_end(key)
    for key, child in shape.fields.items():
        if key in node:
            _arrange(node[key], child, (*path, key))
    for key in shape.cel:
        value = node.get(key)
        if isinstance(value, str):
            # every level of nesting indents by two columns (a list item's "- " included)
            node[key] = cel_scalar(value, key, 2 * len(path), node.fa.flow_style())


# CEL expressions ------------------------------------------------------------------------------


def cel_scalar(text: str, key: str, key_column: int, in_flow: bool = False) -> str:
    """``text`` in the scalar style fmt writes CEL in, as the value of ``key`` written at
    ``key_column``."""
    if "\n" in text or text != text.strip() or not text:
        return text  # a multi-line or space-padded expression keeps its author's style
    plain = str(text)
    one_line: str
    if _plain_keeps(plain, in_flow):
        # a ScalarString: ruamel keeps the old quotes when a bare str replaces a quoted value
        one_line, length = PlainScalarString(plain), len(plain)
    else:
        one_line, length = SingleQuotedScalarString(plain), len(plain) + 2 + plain.count("'")
    if in_flow or key_column + len(key) + 2 + length <= WIDTH:
        return one_line
    if isinstance(text, FoldedScalarString) and getattr(text, "fold_pos", None):
        return text
    folded: FoldedScalarString = FoldedScalarString(plain)
    # a folded scalar's lines are indented two columns past its key
    folded.fold_pos = fold_positions(plain, WIDTH - key_column - 2)  # type: ignore[attr-defined]
    return folded


def _plain_keeps(text: str, in_flow: bool) -> bool:
    """Does YAML (PyYAML, as callgate reads its documents) read ``text`` back unchanged as a
    plain scalar?"""
    document = f"{{k: {text}}}" if in_flow else f"k: {text}"
    try:
        read_back: object = yaml.load(document, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        return False
    return read_back == {"k": text}


def fold_positions(text: str, width: int) -> list[int]:
    """Indexes of the spaces where ``text`` breaks into lines of at most ``width`` characters
    (when it can): before ``&&`` or ``||`` first, any other space outside a string literal
    next. A folded scalar turns each break back into one space, so only a single space
    between two other characters may break."""
    operator_breaks: list[int] = []
    other_breaks: list[int] = []
    quote: str | None = None
    escaped = False
    for index, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
            continue
        if char in "\"'":
            quote = char
        elif (char == " " and 0 < index < len(text) - 1 and not text[index - 1].isspace()
              and not text[index + 1].isspace()):
            is_operator = text.startswith(("&& ", "|| "), index + 1)
            (operator_breaks if is_operator else other_breaks).append(index)
    positions: list[int] = []
    start = 0
    while len(text) - start > width:
        for candidates in (operator_breaks, other_breaks):
            fitting = [i for i in candidates if start < i <= start + width]
            if fitting:
                positions.append(fitting[-1])
                break
        else:
            later = [i for i in sorted(operator_breaks + other_breaks) if i > start]
            if not later:
                break
            positions.append(later[0])  # an overlong piece: break as soon as possible
        start = positions[-1] + 1
    return positions


# Where things are in a text -------------------------------------------------------------------

NodePath = tuple[str | int, ...]


@dataclass
class _DocumentMap:
    """Where each key and list item of one document starts, as PyYAML composes it."""

    first_line: int
    starts: dict[NodePath, tuple[int, int]] = field(default_factory=dict)
    in_block: set[NodePath] = field(default_factory=set)  # its parent is a block collection
    first_in_parent: set[NodePath] = field(default_factory=set)

    def owners(self) -> tuple[dict[int, NodePath], dict[int, NodePath]]:
        """For each line where something starts: the path a comment *above* the line belongs
        to (the outermost one starting there) and the path a comment at the *end* of the line
        belongs to (the innermost one starting there in a block collection)."""
        above: dict[int, NodePath] = {}
        ranked: dict[int, tuple[tuple[int, int], NodePath]] = {}
        for path, (line, column) in self.starts.items():
            if line not in above or len(path) < len(above[line]):
                above[line] = path
            rank = (column, len(path)) if path in self.in_block else (-1, -len(path))
            if line not in ranked or rank > ranked[line][0]:
                ranked[line] = (rank, path)
        return above, {line: path for line, (_, path) in ranked.items()}


@dataclass
class _TextMap:
    """A YAML text's lines, which columns of them lie inside scalars, and its documents."""

    lines: list[str]
    documents: list[_DocumentMap] = field(default_factory=list)
    inside_scalars: dict[int, list[tuple[int, int | None]]] = field(default_factory=dict)

    def is_free(self, line: int, column: int) -> bool:
        """Is this character outside every scalar (so a ``#`` there starts a comment)?"""
        return not any(start <= column and (stop is None or column < stop)
                       for start, stop in self.inside_scalars.get(line, ()))

    def comment_at(self, line: int) -> int | None:
        """The column where a comment starts on ``line``, if one does."""
        text = self.lines[line]
        for column, char in enumerate(text):
            if (char == "#" and (column == 0 or text[column - 1] in " \t")
                    and self.is_free(line, column)):
                return column
        return None

    def is_blank(self, line: int) -> bool:
        return not self.lines[line].strip() and self.is_free(line, 0)

    def is_marker(self, line: int) -> bool:
        """``---`` (or ``...``) starting or ending a document."""
        return self.lines[line].startswith(("---", "...")) and self.is_free(line, 0)

    def comments(self) -> list[str]:
        return [self.lines[n][c:].rstrip() for n in range(len(self.lines))
                if (c := self.comment_at(n)) is not None]

    # -- building

    def cover(self, node: yaml.ScalarNode) -> None:
        start, end = node.start_mark, node.end_mark
        if node.style in ("|", ">"):
            # The header line (``>-  # comment``) is syntax. Blank lines after the content
            # are not the scalar's, unless it keeps them (``|+``).
            last = end.line if end.column else end.line - 1
            header = self.lines[start.line][start.column:].split(" ", 1)[0]
            if "+" not in header:
                while last > start.line and not self.lines[last].strip():
                    last -= 1
            for line in range(start.line + 1, last + 1):
                self._add(line, 0, end.column if line == end.line else None)
        elif start.line == end.line:
            self._add(start.line, start.column, end.column)
        else:
            self._add(start.line, start.column, None)
            for line in range(start.line + 1, end.line):
                self._add(line, 0, None)
            self._add(end.line, 0, end.column)

    def _add(self, line: int, start: int, stop: int | None) -> None:
        self.inside_scalars.setdefault(line, []).append((start, stop))


def _map_text(text: str) -> _TextMap:
    text_map = _TextMap(text.split("\n"))

    def enter(child: NodePath, mark: yaml.Mark, block: bool, first: bool,
              document: _DocumentMap) -> None:
        document.starts[child] = (mark.line, mark.column)
        if block:
            document.in_block.add(child)
        if first:
            document.first_in_parent.add(child)

    def walk(node: yaml.Node, path: NodePath, document: _DocumentMap) -> None:
        if isinstance(node, yaml.ScalarNode):
            text_map.cover(node)
        elif isinstance(node, yaml.MappingNode):
            for index, (key, value) in enumerate(node.value):
                child = (*path, str(key.value))
                enter(child, key.start_mark, not node.flow_style, index == 0, document)
                walk(key, child, document)
                walk(value, child, document)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                child = (*path, index)
                enter(child, item.start_mark, not node.flow_style, index == 0, document)
                walk(item, child, document)

    for root in yaml.compose_all(text, Loader=_FAST_LOADER):
        # an empty document (``---`` followed by nothing) holds nothing callgate reads
        if root is not None and root.tag != "tag:yaml.org,2002:null":
            document = _DocumentMap(root.start_mark.line)
            walk(root, (), document)
            text_map.documents.append(document)
    return text_map


# Comments -------------------------------------------------------------------------------------


@dataclass
class _Comments:
    """One document's comments (and blank lines, as ``""``), by what they belong to."""

    head: list[str] = field(default_factory=list)  # above the document's first line
    tail: list[str] = field(default_factory=list)  # after its last line
    above: dict[NodePath, list[str]] = field(default_factory=dict)
    end: dict[NodePath, list[str]] = field(default_factory=dict)


def _collect_comments(source: _TextMap, path: str) -> list[_Comments]:
    documents = source.documents
    collected = [_Comments() for _ in documents]
    owners = [document.owners() for document in documents]
    pending: list[str] = []  # comment and blank lines waiting for the next line with content
    for number, line in enumerate(source.lines):
        if line.startswith("%") and source.is_free(number, 0):
            raise InputError(f"{path}:{number + 1}: fmt does not rewrite files with YAML "
                             "directives; remove the directive or lay the file out by hand")
        index = max((i for i, d in enumerate(documents) if d.first_line <= number), default=-1)
        column = source.comment_at(number)
        comment = line[column:].rstrip() if column is not None else ""
        if source.is_marker(number):
            if index >= 0:  # what came before the marker ends the previous document
                collected[index].tail.extend(pending)
                pending = []
            if comment:
                pending.append(comment)
            continue
        if source.is_blank(number) or (column is not None and not line[:column].strip()):
            pending.append(comment)
            continue
        above, end = owners[index]
        if pending:
            if number == documents[index].first_line:
                collected[index].head.extend(pending)
            else:
                owner = above[number] if number in above else _owner_before(above, number)
                collected[index].above.setdefault(owner, []).extend(pending)
            pending = []
        if comment:
            owner = end[number] if number in end else _owner_before(end, number)
            collected[index].end.setdefault(owner, []).append(comment)
    if collected:
        collected[-1].tail.extend(pending)
    return collected


def _owner_before(owners: Mapping[int, NodePath], line: int) -> NodePath:
    """The owner of the nearest line at or before ``line`` (a line that continues a value)."""
    earlier = [start for start in owners if start <= line]
    return owners[max(earlier)] if earlier else owners[min(owners)]


def _tidy(lines: Iterable[str], *, drop_leading: bool, drop_trailing: bool) -> list[str]:
    """Runs of blank lines become one; a blank line at either end is dropped if asked."""
    result: list[str] = []
    for line in lines:
        if line or not result or result[-1]:
            result.append(line)
    if drop_leading:
        while result and not result[0]:
            result.pop(0)
    if drop_trailing:
        while result and not result[-1]:
            result.pop()
    return result


def _place_comments(bare: str, comments: _Comments) -> str:
    """Insert one document's comments into its laid-out text, which has none."""
    document = _map_text(bare).documents[0]
    above_at: dict[int, list[str]] = {}
    end_at: dict[int, list[str]] = {}
    orphans: list[str] = []  # a path the layout wrote differently: keep its comment at the end
    for path, block in comments.above.items():
        if path not in document.starts:
            orphans.extend(block)
            continue
        opens_mapping = path in document.first_in_parent
        above_at.setdefault(document.starts[path][0], []).extend(
            _tidy(block, drop_leading=opens_mapping, drop_trailing=False))
    for path, texts in comments.end.items():
        if path not in document.starts:
            orphans.extend(texts)
            continue
        end_at.setdefault(document.starts[path][0], []).extend(texts)
    out = _tidy(comments.head, drop_leading=True, drop_trailing=False)
    for number, text in enumerate(bare.rstrip("\n").split("\n")):
        indent = text[: len(text) - len(text.lstrip(" "))]
        block = _tidy(above_at.get(number, []), drop_leading=not out, drop_trailing=False)
        out.extend(f"{indent}{comment}" if comment else "" for comment in block)
        out.append(f"{text}  {' '.join(end_at[number])}" if number in end_at else text)
    tail = _tidy(orphans + comments.tail, drop_leading=False, drop_trailing=True)
    if any(tail):
        out.extend(tail)
    return "\n".join(out)


# Formatting -----------------------------------------------------------------------------------


def _yaml() -> YAML:
    handler = YAML()  # round-trip: keeps quotes, folds and flow styles
    handler.preserve_quotes = True
    handler.indent(mapping=2, sequence=4, offset=2)
    handler.width = 1 << 30  # never re-wrap a line; fmt folds CEL itself
    handler.brace_single_entry_mapping_in_flow_sequence = True  # [{a: 1}], not [a: 1]
    return handler


def _strip_comments(node: Any) -> None:
    """Comments are placed by line afterwards; ruamel's own would move with the wrong key."""
    if isinstance(node, CommentedMap | CommentedSeq):
        setattr(node, Comment.attrib, Comment())
        for child in node.values() if isinstance(node, CommentedMap) else node:
            _strip_comments(child)
    if isinstance(node, LiteralScalarString | FoldedScalarString):
        # a comment after the block scalar's ``|`` or ``>`` (ruamel declares it in __slots__)
        node.comment = None  # type: ignore[union-attr]


def is_callgate_document(data: Any) -> bool:
    return isinstance(data, Mapping) and data.get("apiVersion") == API_VERSION


def format_text(text: str, path: str) -> str | None:
    """``text`` in the canonical layout, or None when it holds no callgate document.

    Raises ``InputError`` for YAML that cannot be read (naming the line) and ``FormatError``
    if the layout would change the data or drop a comment (the file is then left alone).
    """
    before = [source.data for source in parse_yaml_text(text, path)]
    if not any(is_callgate_document(data) for data in before):
        return None
    handler = _yaml()
    try:
        documents = [data for data in handler.load_all(text) if data is not None]
    except RuamelYAMLError as error:  # YAML that PyYAML reads and ruamel does not: rare
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise InputError(f"{where}: error YAML {problem}") from None
    source = _map_text(text)
    comments = _collect_comments(source, path)
    parts = []
    for data, document_comments in zip(documents, comments, strict=True):
        _strip_comments(data)
        if is_callgate_document(data):
            _arrange(data, KEY_ORDER.get(str(data.get("kind")), _ANY_KIND), ())
        stream = io.StringIO()
        handler.dump(data, stream)
        parts.append(_place_comments(stream.getvalue(), document_comments))
    formatted = "\n---\n".join(parts) + "\n"
    _check_unchanged(text, formatted, source, path)
    return formatted


def _documents(text: str) -> list[Any]:
    """The documents as callgate reads them: empty ones do not count."""
    return [data for data in yaml.load_all(text, Loader=_FAST_LOADER) if data is not None]


def _check_unchanged(text: str, formatted: str, source: _TextMap, path: str) -> None:
    try:
        after = _documents(formatted)
        after_comments = _map_text(formatted).comments()
    except yaml.YAMLError as error:
        raise FormatError(f"{path}: fmt produced YAML it cannot read ({error}); the file is "
                          "left unchanged — please report this") from None
    if after != _documents(text):
        raise FormatError(f"{path}: fmt would change the data of this file; it is left "
                          "unchanged — please report this")
    lost = Counter(source.comments()) - Counter(after_comments)
    if lost:
        raise FormatError(f"{path}: fmt cannot keep the comment {next(iter(lost))!r}; the "
                          "file is left unchanged — move the comment onto its own line above "
                          "a key")


@dataclass(frozen=True)
class FormatResult:
    path: Path
    original: str
    formatted: str | None  # None: no callgate document in the file; it is left alone

    @property
    def changed(self) -> bool:
        return self.formatted is not None and self.formatted != self.original


def format_paths(paths: Sequence[str | Path]) -> list[FormatResult]:
    """Lay out every YAML file under ``paths`` in memory; nothing is written, so a bad file
    stops the run before any file changes."""
    results = []
    for file in iter_yaml_files([Path(p) for p in paths]):
        text = read_text(file)  # a regular file, bounded (documents.files)
        results.append(FormatResult(file, text, format_text(text, str(file))))
    return results


def write_formatted(results: Iterable[FormatResult]) -> None:
    for result in results:
        if result.changed and result.formatted is not None:
            try:
                result.path.write_text(result.formatted, encoding="utf-8")
            except OSError as error:
                raise InputError(f"{result.path}: cannot write: {error}") from None

