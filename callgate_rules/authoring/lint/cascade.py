"""What a broken document may have defined, so one broken file is reported once.

A contract that does not compile is missing from the compilation, and the healthy files
around it then look wrong: an access rule names an unknown tool, reads a variable nothing
looks up; a broken AccessPolicy leaves every tool without an allow rule; a broken
RoutingTable looks like no RoutingTable; a broken Definitions document leaves the rules
using its names with unknown functions and variables. ``Broken`` says what the documents
that did not compile (or whole files that are not YAML) may have defined, and the checks
that would report such a consequence ask it first: the root cause is the only finding.

A file that is not YAML is read with a lenient scan for its ``kind`` and
``metadata.name``; if even that finds nothing, it may have defined anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from callgate_rules.documents.compiler import KINDS, OTHER_KINDS, Compilation, Finding
from callgate_rules.documents.source import SourceDocument, read_text
from callgate_rules.errors import InputError


@dataclass(frozen=True)
class Broken:
    tools: frozenset[str] = frozenset()  # tools a document that did not compile defines
    any_tool: bool = False  # a broken document whose kind or name cannot be read
    policies: bool = False  # an AccessPolicy did not compile (or may not have)
    policy_tools: frozenset[str] = frozenset()  # tools of access rules that did not compile
    routing: bool = False  # a RoutingTable did not compile (or may not have)
    lookups: Mapping[str, frozenset[str]] = field(default_factory=dict)  # tool → dropped
    definitions: frozenset[str] = frozenset()  # names a broken Definitions document declares
    any_definition: bool = False  # a broken file that may hold any definition

    def may_define_name(self, name: str) -> bool:
        """Whether ``name`` (a constant or a function) may be a definition that did not
        compile."""
        return self.any_definition or name in self.definitions

    def explains(self, finding: Finding) -> bool:
        """Whether a compiler finding in a healthy document is a consequence: a rule
        calling a function that a broken Definitions document would have defined."""
        if finding.code not in ("unknown-function", "wrong-arity", "cel-compile"):
            return False
        named = re.search(r"unknown function '([^']+)'", finding.message)
        return named is not None and self.may_define_name(named.group(1))

    def may_define_tool(self, name: str) -> bool:
        return self.any_tool or name in self.tools

    def may_allow(self, tool: str) -> bool:
        """Whether an allow rule for ``tool`` may be among what did not compile."""
        return self.policies or bool({"*", tool} & self.policy_tools)

    def may_define_variable(self, tools: Iterable[str], name: str) -> bool:
        """Whether ``name`` may be a look-up of one of ``tools`` that did not compile."""
        tools = set(tools)
        if "*" in tools:
            return bool(self.tools) or self.any_tool or any(
                name in dropped for dropped in self.lookups.values())
        return any(self.may_define_tool(tool) or name in self.lookups.get(tool, ())
                   for tool in tools)


def broken(compilation: Compilation) -> Broken:
    errors = [f for f in compilation.findings if f.severity == "error"]
    tools: set[str] = set()
    policy_tools: set[str] = set()
    any_tool = policies = routing = False
    definitions: set[str] = set()
    any_definition = False
    for path in sorted({f.location.path for f in errors if f.code == "yaml"}):
        kinds, names = _scan(path)
        if not kinds or not kinds <= set(KINDS) | set(OTHER_KINDS):
            any_tool = policies = routing = any_definition = True
        any_definition |= "Definitions" in kinds
        tools |= names if "ToolContract" in kinds else set()
        policies |= "AccessPolicy" in kinds
        routing |= "RoutingTable" in kinds
    for source in compilation.sources:
        kind, name = _kind_and_name(source)
        if kind == "ToolContract" and compilation.contract_sources.get(name or "") is not source:
            if name is None:
                any_tool = True
            elif name not in compilation.contracts:
                tools.add(name)
        elif kind == "AccessPolicy" and _has_errors(source, errors):
            dropped = _dropped_rule_tools(compilation, source, errors)
            if dropped is None:
                policies = True
            policy_tools |= dropped or set()
        elif kind == "RoutingTable" and compilation.routing_source is None:
            routing = True
        elif kind == "Definitions" and _has_errors(source, errors):
            declared = _definition_names(source)
            any_definition |= declared is None
            definitions |= declared or set()
        elif kind not in (*KINDS, *OTHER_KINDS):
            any_tool = policies = routing = any_definition = True
    return Broken(frozenset(tools), any_tool, policies, frozenset(policy_tools), routing,
                  _dropped_lookups(compilation), frozenset(definitions), any_definition)


def _definition_names(source: SourceDocument) -> set[str] | None:
    """The names a Definitions document declares (``f(a, b)`` declares ``f``)."""
    spec = source.data.get("spec")
    declared = spec.get("definitions") if isinstance(spec, Mapping) else None
    if not isinstance(declared, Mapping):
        return None
    return {str(key).split("(", 1)[0].strip() for key in declared}


def _scan(path: str) -> tuple[set[str], set[str]]:
    """The kinds and metadata names a file that is not YAML seems to declare."""
    try:
        text = read_text(Path(path))
    except InputError:
        return set(), set()
    kinds = set(re.findall(r"^kind:\s*[\"']?([A-Za-z]+)", text, re.MULTILINE))
    names = set(re.findall(r"^metadata:\s*\{[^}\n]*?\bname:\s*[\"']?([\w.-]+)", text,
                           re.MULTILINE))
    names |= set(re.findall(r"^metadata:[ \t]*\n(?:[ \t]+.*\n)*?[ \t]+name:\s*[\"']?([\w.-]+)",
                            text, re.MULTILINE))
    return kinds, names


def _kind_and_name(source: SourceDocument) -> tuple[object, str | None]:
    data = source.data
    if not isinstance(data, Mapping):
        return None, None
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return data.get("kind"), name if isinstance(name, str) else None


def _has_errors(source: SourceDocument, errors: list[Finding],
                codes: tuple[str, ...] | None = None) -> bool:
    """Whether one of ``errors`` (of one of ``codes``) is inside the document."""
    lines = [line for line, _ in source.places.values()]
    first, last = min(lines, default=0), max(lines, default=0)
    return any(f.location.path == source.path and first <= f.location.line <= last
               and (codes is None or f.code in codes) for f in errors)


def _dropped_rule_tools(compilation: Compilation, source: SourceDocument,
                        errors: list[Finding]) -> set[str] | None:
    """The tools named by this AccessPolicy's rules that did not compile (a CEL error);
    ``None`` when the document as a whole did not (it does not match its schema)."""
    spec = source.data.get("spec")
    rules = spec.get("rules") if isinstance(spec, Mapping) else None
    if not isinstance(rules, list) or _has_errors(source, errors, ("schema", "yaml")):
        return None
    compiled = {rule.location for rule in compilation.access_rules}
    dropped = [rule for index, rule in enumerate(rules)
               if source.locate(("spec", "rules", index)) not in compiled]
    return {str(tool) for rule in dropped if isinstance(rule, Mapping)
            for tool in rule.get("tools", ()) or ()}


def _dropped_lookups(compilation: Compilation) -> dict[str, frozenset[str]]:
    """Per contract, the look-ups written in it that did not compile (a CEL error)."""
    dropped: dict[str, frozenset[str]] = {}
    for name, contract in compilation.contracts.items():
        spec = compilation.contract_sources[name].data.get("spec", {})
        written = {str(item.get("name")) for item in spec.get("lookups", ())
                   if isinstance(item, Mapping)}
        missing = written - {lookup.name for lookup in contract.lookups}
        if missing:
            dropped[name] = frozenset(missing)
    return dropped
