"""A tool result as label expressions read it, and a result split into its items.

``parsed_result`` reads a result's text as label expressions see it (``result``): JSON;
else a YAML mapping or sequence (AgentDojo's tools, and many others, answer in YAML); else
the text itself. A result in which an object (a mapping) repeats a key is read as its
text, whole, in either format: JSON leaves the meaning of a repeated key open and YAML
forbids it, and were one copy to win, a label or an origin would depend on which one
(``{"sender": "x@outside.example", "sender": "ann@corp.example"}`` would lose its
``untrusted`` label). Read as text, every label expression over it fails and so gives its
label (``labels``: a label marks caution), to the whole result and every value in it.
Both parsers run within bounds: at most ``MAX_DEPTH`` levels of nesting
and, for YAML, ``MAX_YAML_CHARACTERS`` characters and ``MAX_YAML_NODES`` nodes. YAML is
read with the safe constructor and only its plain types (strings, numbers, booleans,
null, sequences, mappings); an alias (``*name``) makes the result text, so no expansion
can multiply what is read, and a date stays the string it was written as
(``2024-05-15``), as JSON would hold it. A result past a bound is its text.

``item_texts`` splits a parsed result into the text of each item a label's ``each``
yielded and the text of what lies outside every item: each item's leaves (mapping keys
and scalar values), one per line, so that a value is found in the item it sits in.
Items are found in the result by identity (``each`` returns parts of ``result`` itself);
an item that is not a part of it (a value ``each`` computed) is a text of its own, and
the result's own copy of it stays outside the items.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import yaml

from callgate_rules.canonical import RepeatedKey, unique_keys
from callgate_rules.provenance.reading import ReadingLimits

MAX_DEPTH = ReadingLimits.max_depth  # as a conversation's content
MAX_YAML_CHARACTERS = 1_000_000  # about a tenth of a second with libyaml
MAX_YAML_NODES = 100_000

_PLAIN_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in (
    "str", "int", "float", "bool", "null", "seq", "map"))


class _Resolver(yaml.resolver.Resolver):
    """YAML's implicit types without timestamps: a date stays the string written."""


_Resolver.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers
            if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()}

class _RepeatedYamlKey(yaml.YAMLError):
    """A YAML mapping of a result repeats a key."""


class _UniqueKeys(yaml.constructor.SafeConstructor):
    """The safe constructor, refusing a mapping that repeats a key (YAML lets the last copy
    win): the result is then read as its text (see the module docstring)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping = super().construct_mapping(node, deep=deep)
        if len(mapping) != len(node.value):
            raise _RepeatedYamlKey("a mapping repeats a key")
        return mapping


if yaml.__with_libyaml__:  # libyaml's parser: non-recursive, and ten times faster
    from yaml._yaml import CParser

    class _Loader(CParser, _UniqueKeys, _Resolver):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            _Resolver.__init__(self)
else:  # pragma: no cover - PyYAML built without libyaml
    class _Loader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser,  # type: ignore[no-redef]
                  yaml.composer.Composer, _UniqueKeys, _Resolver):
        def __init__(self, stream: str) -> None:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            _Resolver.__init__(self)


def parsed_result(text: str) -> Any:
    """The result as label expressions read it: JSON, a YAML mapping or sequence, or text."""
    return _parsed(text) if len(text) <= _REMEMBERED else _parse(text)


_REMEMBERED = 65_536  # results up to this size are parsed once for every proposal of a run


@lru_cache(maxsize=512)
def _parsed(text: str) -> Any:
    return _parse(text)


def _parse(text: str) -> Any:
    try:
        value = json.loads(text, object_pairs_hook=unique_keys)
    except (RecursionError, RepeatedKey):  # too deep, or a key twice: the text, whole
        return text
    except ValueError:
        return _yaml_or_text(text)
    return value if _within_depth(value) else text


def _within_depth(value: Any) -> bool:
    pending = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                return False
            members = item.values() if isinstance(item, dict) else item
            pending.extend((member, depth + 1) for member in members)
    return True


def _yaml_or_text(text: str) -> Any:
    if len(text) > MAX_YAML_CHARACTERS:
        return text
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if (node is None or node.tag not in ("tag:yaml.org,2002:seq", "tag:yaml.org,2002:map")
                or not _plain(node)):
            return text
        return loader.construct_document(node)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return text
    finally:
        loader.dispose()


def _plain(root: yaml.Node) -> bool:
    """Only plain types, no alias (a node reached twice), within depth and size."""
    seen: set[int] = set()
    pending: list[tuple[yaml.Node, int]] = [(root, 0)]
    while pending:
        node, depth = pending.pop()
        if (id(node) in seen or node.tag not in _PLAIN_TAGS or depth > MAX_DEPTH
                or len(seen) >= MAX_YAML_NODES):
            return False
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            pending.extend((member, depth + 1) for member in node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, member in node.value:
                pending.extend(((key, depth + 1), (member, depth + 1)))
    return True


@dataclass(frozen=True)
class ItemTexts:
    """A result split: ``outside`` (the text of what no item holds) and each item's text,
    with the index of the item that holds it (``-1``: none), for nested items."""

    outside: str
    items: tuple[str, ...]
    parents: tuple[int, ...]


def item_texts(result: Any, items: Sequence[Any]) -> ItemTexts:
    """The text of each item of ``result`` and of what lies outside them (see the module
    docstring), in one walk of the result, without recursion."""
    owner = {id(item): number for number, item in enumerate(items)
             if isinstance(item, Mapping | list)}
    lines: list[list[str]] = [[] for _ in range(len(items) + 1)]  # 0: outside every item
    parents = [-1] * len(items)
    reached: set[int] = set()
    pending: list[tuple[Any, int]] = [(result, 0)]
    while pending:
        node, at = pending.pop()
        if isinstance(node, Mapping | list):
            number = owner.get(id(node))
            if number is not None:
                parents[number], at = at - 1, number + 1
                reached.add(number)
            if isinstance(node, Mapping):
                for key, member in reversed(list(node.items())):
                    pending.append((member, at))
                    pending.append((key, at))
            else:
                pending.extend((member, at) for member in reversed(node))
        else:
            lines[at].append(_leaf_text(node))
    for number, item in enumerate(items):
        if number not in reached:  # a value ``each`` computed: a text of its own
            lines[number + 1].append(_leaf_text(item))
    return ItemTexts("\n".join(lines[0]), tuple("\n".join(found) for found in lines[1:]),
                     tuple(parents))


def _leaf_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, Mapping | list):
        return "\n".join(_leaf_text(leaf) for leaf in _leaves(value))
    return str(value)


def _leaves(value: Any) -> list[Any]:
    found, pending = [], [value]
    while pending:
        item = pending.pop()
        if isinstance(item, Mapping):
            for key, member in reversed(list(item.items())):
                pending.extend((member, key))
        elif isinstance(item, list):
            pending.extend(reversed(item))
        else:
            found.append(item)
    return found


@dataclass(frozen=True)
class Labelling:
    """The labels of one tool result: of the whole result, and of each of its items (all
    the items the labels' ``each`` yielded, those with no label of their own included:
    a value inside one of them does not sit in the others)."""

    labels: tuple[str, ...] = ()
    items: tuple[Any, ...] = ()
    item_labels: tuple[tuple[str, ...], ...] = ()


NO_LABELLING = Labelling()


class Labeller(Protocol):
    """The labels a configuration gives its reads' results (``labels.labeller_of``)."""

    def declares(self, tool: str) -> bool:
        """Whether results of ``tool`` may carry a label (else they are not parsed)."""

    def label(self, tool: str, result: Any, arguments: Any) -> Labelling:
        """The labels of one result (``parsed_result``) of a call with ``arguments``."""


class NoLabels:
    """A configuration that declares no label."""

    def declares(self, tool: str) -> bool:
        return False

    def label(self, tool: str, result: Any, arguments: Any) -> Labelling:
        return NO_LABELLING


no_labels = NoLabels()
