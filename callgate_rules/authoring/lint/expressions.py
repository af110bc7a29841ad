"""What the CEL expressions read: variables not defined where an expression runs, message
placeholders that name nothing; and where each expression runs (``ExpressionPlace``), for
the type checker (``typecheck``), which also finds undeclared fields and optional fields
read without ``has()``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from callgate_rules.authoring.lint.cascade import broken
from callgate_rules.authoring.lint.places import access_rule_paths, access_rule_places, item_paths
from callgate_rules.cel import syntax
from callgate_rules.cel.errors import CelSyntaxError
from callgate_rules.cel.expression import CompiledExpression
from callgate_rules.cel.parser import parse as parse_cel
from callgate_rules.documents.compiler import Compilation, Finding
from callgate_rules.documents.model import Contract, Lookup
from callgate_rules.documents.source import NodePath, SourceDocument
from callgate_rules.errors import Location

BASE_VARIABLES = frozenset({"args", "actor", "now", "tool", "session", "provenance",
                            "history", "origins", "reads", "intent"})


@dataclass(frozen=True)
class ExpressionPlace:
    """One CEL expression where it runs: for which tool, what it may read, where it is
    written (``path`` within ``source``), and whether it must give a bool."""

    tool: str
    label: str  # "rules.not-closed", "lookups.ticket.key", "access rule anyone"
    expression: CompiledExpression
    allowed: frozenset[str]  # the variables defined where it runs
    source: SourceDocument
    path: NodePath
    condition: bool = True
    record: Lookup | None = None  # a look-up's ``visible``: ``record`` is one of its records

    @property
    def location(self) -> Location:
        return self.source.locate(self.path)


def contract_expressions(compilation: Compilation, contract: Contract
                         ) -> Iterator[ExpressionPlace]:
    """Every CEL of a contract, in the order it runs; the place is the expression itself,
    so an editor jumps to the right line."""
    source = compilation.contract_sources[contract.name]
    lookups = item_paths(source, ("spec", "lookups"))
    rules = item_paths(source, ("spec", "rules"))
    known = set(BASE_VARIABLES)

    def place(label: str, expression: CompiledExpression, path: NodePath, *,
              more: frozenset[str] = frozenset(), condition: bool = True,
              record: Lookup | None = None, only: bool = False) -> ExpressionPlace:
        allowed = more if only else frozenset(known | more)  # only: just ``more`` there
        return ExpressionPlace(contract.name, label, expression, allowed, source, path,
                               condition, record)

    for lookup in contract.lookups:
        at = lookups.get(lookup.location, ())
        yield place(f"lookups.{lookup.name}.key", lookup.key, (*at, "key"), condition=False)
        if lookup.when is not None:
            yield place(f"lookups.{lookup.name}.when", lookup.when, (*at, "when"))
        if lookup.visible is not None:  # over each found record, before it is bound
            yield place(f"lookups.{lookup.name}.visible", lookup.visible, (*at, "visible"),
                        more=frozenset({"record"}), record=lookup)
        for name, expression in lookup.labels:  # over each found record it may see
            yield place(f"lookups.{lookup.name}.labels.{name}", expression,
                        (*at, "labels", name), more=frozenset({"record", "args", "actor"}),
                        record=lookup, only=True)
        known.add(lookup.name)
    for rule in contract.rules:
        yield place(f"rules.{rule.name}", rule.expression,
                    (*rules.get(rule.location, ()), "expression"))
    if contract.verify is not None:
        yield place("verify", contract.verify, ("spec", "verify", "expression"),
                    more=frozenset({"result"}))
    for label in contract.labels:  # over each result of this read, or each of its items
        written: NodePath = ("spec", "labels", label.name)
        over = frozenset({"result", "args"})  # all a label expression is given
        if label.whole is not None:
            yield place(f"labels.{label.name}", label.whole, written, more=over, only=True)
        if label.each is not None:
            yield place(f"labels.{label.name}.each", label.each, (*written, "each"),
                        more=over, condition=False, only=True)
        if label.where is not None:
            yield place(f"labels.{label.name}.where", label.where, (*written, "where"),
                        more=over | {"item"}, only=True)
    if contract.reconcile_match is not None:
        yield place("reconcile.match", contract.reconcile_match, ("spec", "reconcile", "match"),
                    more=frozenset({"found"}))


def access_expressions(compilation: Compilation) -> Iterator[ExpressionPlace]:
    """Every access rule's ``when``, once for each contract it applies to."""
    paths = access_rule_paths(compilation)
    for rule in compilation.access_rules:
        found = paths(rule)
        if found is None:
            continue
        source, path = found
        for contract in compilation.contracts.values():
            if rule.applies_to(contract.name):
                allowed = BASE_VARIABLES | {lookup.name for lookup in contract.lookups}
                yield ExpressionPlace(contract.name, f"access rule {rule.name}", rule.when,
                                      frozenset(allowed), source, (*path, "when"))


def check_variables(compilation: Compilation) -> Iterator[Finding]:
    """Variables not defined where they are read, tools no contract defines: unless a
    document that did not compile may define them (its errors are the findings then)."""
    cascade = broken(compilation)
    for contract in compilation.contracts.values():
        dropped = cascade.lookups.get(contract.name, frozenset())
        for place in contract_expressions(compilation, contract):
            for name in sorted(place.expression.variables - place.allowed - dropped):
                if cascade.may_define_name(name):
                    continue
                yield Finding(place.location, "error", "unknown-variable",
                              f"{contract.name} {place.label}: {name!r} is not defined here; "
                              f"known: {', '.join(sorted(place.allowed))}")
    tools = compilation.contracts
    where = access_rule_places(compilation)
    for rule in compilation.access_rules:
        applies = [c for c in tools.values() if rule.applies_to(c.name)]
        for name in sorted(rule.when.variables - BASE_VARIABLES):
            if cascade.may_define_variable(rule.tools, name) or cascade.may_define_name(name):
                continue
            missing = [c.name for c in applies if name not in {lk.name for lk in c.lookups}]
            if not applies or len(missing) == len(applies):
                yield Finding(where(rule, "when"), "error", "unknown-variable",
                              f"access rule {rule.name}: {name!r} is not a variable of any tool "
                              "it applies to")
            elif missing:
                yield Finding(where(rule, "when"), "warning", "unknown-variable",
                              f"access rule {rule.name}: {name!r} is not looked up by "
                              f"{', '.join(missing)}; there the rule fails to evaluate")
        for tool in sorted(rule.tools - {"*"} - set(tools)):
            if cascade.may_define_tool(tool):
                continue
            yield Finding(rule.location, "warning", "unknown-tool",
                          f"access rule {rule.name} names tool {tool!r}, which no contract "
                          "defines")


def read_at(place: ExpressionPlace, dotted_path: str) -> Location:
    """Where the expression first reads ``dotted_path`` (its last field's name), else where
    the expression starts."""
    tree = place.expression.tree
    if tree is None:
        try:
            tree = parse_cel(place.expression.source)
        except CelSyntaxError:
            return place.location
    for node in syntax.walk(tree):
        if isinstance(node, syntax.Select) and syntax.qualified_name(node) == dotted_path:
            return place.source.locate_in_scalar(place.path, node.at.line, node.at.column)
    return place.location


def check_message_fields(compilation: Compilation) -> Iterator[Finding]:
    for contract in compilation.contracts.values():
        known = set(BASE_VARIABLES) | {lookup.name for lookup in contract.lookups}
        for rule in contract.rules:
            for template in (rule.message, rule.user_message):
                for fields in template.fields if template else ():
                    if fields[0] not in known:
                        yield Finding(rule.location, "warning", "unknown-placeholder",
                                      f"{contract.name} rule {rule.name}: placeholder "
                                      f"{{{'.'.join(fields)}}} names no variable; it is shown "
                                      "as written")
