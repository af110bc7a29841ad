"""Type-check a CEL syntax tree (``cel.syntax``) against the types of its variables.

``check(tree, environment)`` gives the expression's type and what is wrong with it, each
finding at the line and column of the node inside the expression:

- errors, which fail on every call that reaches them: ``unknown-function`` (with the
  nearest known name), ``no-overload`` (the function exists, but not for these argument
  types: ``args.name.split(" ")`` with ``name`` an integer), ``wrong-arity``,
  ``unknown-field`` (a field an object's schema does not declare, with the declared
  fields and the nearest one), ``not-a-condition`` (``&&`` on a non-bool);
- warnings: ``impossible-comparison``, a comparison that can never be true (or ``!=`` that
  is always true) for the declared types: ``string == int``, a value outside a field's
  ``enum``, ``null`` against a field that can never be null; ``unguarded-optional-field``,
  an optional field read where no ``has()`` makes sure of it (``cel.guards``).

Where a type is not known the checker says nothing: a variable without a schema, a field
of an open object, the result of ``dyn(...)`` are ``dyn``, which every overload accepts.
A node that has an error becomes ``dyn`` too, so one mistake is reported once, not again
by every expression around it. Macros bind their variables with the element type of the
range (``args.items.all(i, i.qty > 0)`` knows ``i`` is an item).

Signatures come from the function library (``cel.library.FUNCTIONS``); the operators CEL
defines on every type (``&&``, ``||``, ``!``, ``?:``, ``==``, ``!=``, the orderings, ``in``)
and indexing are typed here, by the spec's rules.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from callgate_rules.cel import guards, library, syntax
from callgate_rules.cel import types as t
from callgate_rules.cel.checker_macros import check_macro
from callgate_rules.cel.library import Function, Overload
from callgate_rules.cel.types import Field, Type
from callgate_rules.cel.unparse import OPERATOR_SPELLING, literal_text, render, signature

ORDERINGS = frozenset({"_<_", "_<=_", "_>_", "_>=_"})
ORDERED_KINDS = frozenset({"string", "bytes", "bool", "timestamp", "duration"})
TYPE_NAMES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map",
                        "null_type", "type", "dyn"})
COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "existsOne", "filter", "map",
                            "transformList", "transformMap", "transformMapEntry", "sortBy"})


@dataclass(frozen=True)
class CheckFinding:
    """One problem, at its place in the expression's text (1-based)."""

    severity: str  # "error" or "warning"
    code: str
    message: str
    line: int
    column: int
    suggestion: str | None = None


@dataclass(frozen=True)
class Environment:
    """What the expression may read: each variable's type, and the functions there are."""

    variables: Mapping[str, Type]
    functions: Mapping[str, Function] = field(default_factory=lambda: library.FUNCTIONS)


@dataclass(frozen=True)
class CheckResult:
    type: Type
    findings: tuple[CheckFinding, ...]

    @property
    def errors(self) -> tuple[CheckFinding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")


@dataclass(frozen=True)
class _Typed:
    """A node's type, and the declared field it reads, if it is one (for the warnings)."""

    type: Type
    field: Field | None = None


_DYN = _Typed(t.DYN)


def check(tree: syntax.Node, environment: Environment) -> CheckResult:
    """The type of ``tree`` and every finding, in source order."""
    checker = _Checker(environment)
    try:
        typed = checker.node(tree, {})
    except RecursionError:  # deeper than any rule is written; the compiler bounds depth
        return CheckResult(t.DYN, ())
    findings = sorted(set(checker.findings), key=lambda f: (f.line, f.column, f.code))
    return CheckResult(typed.type, tuple(findings))


class _Checker:
    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        self.functions = environment.functions
        self.findings: list[CheckFinding] = []
        self.guards: frozenset[str] = frozenset()  # what a has() has made sure of, here
        self.unguarded: set[str] = set()  # optional fields already reported

    # -- reporting

    def report(self, node: syntax.Node, severity: str, code: str, message: str,
               suggestion: str | None = None) -> None:
        self.findings.append(CheckFinding(severity, code, message, node.at.line,
                                          node.at.column, suggestion))

    # -- nodes

    def node(self, node: syntax.Node, scope: Mapping[str, Type]) -> _Typed:
        if isinstance(node, syntax.Literal):
            return _Typed(t.of_value(node.value))
        if isinstance(node, syntax.Ident):
            return self.ident(node, scope)
        if isinstance(node, syntax.Select):
            return self.select(node, scope)
        if isinstance(node, syntax.Index):
            return self.index(node, scope)
        if isinstance(node, syntax.Call):
            return self.call(node, scope)
        if isinstance(node, syntax.Macro):
            return self.macro(node, scope)
        if isinstance(node, syntax.ListLiteral):
            elements = [self.node(e, scope).type for e in node.elements]
            elements = [_present(e) if i in node.optional_indices else e
                        for i, e in enumerate(elements)]
            return _Typed(t.list_of(t.join(elements)))
        if isinstance(node, syntax.MapLiteral):
            keys = [self.node(entry.key, scope).type for entry in node.entries]
            values = [self.node(entry.value, scope).type for entry in node.entries]
            values = [_present(v) if entry.optional else v
                      for entry, v in zip(node.entries, values, strict=True)]
            return _Typed(t.map_of(t.join(keys), t.join(values)))
        for part in syntax.children(node):  # a message literal: the compiler refuses it
            self.node(part, scope)
        return _DYN

    def ident(self, node: syntax.Ident, scope: Mapping[str, Type]) -> _Typed:
        name = node.name
        if name.startswith("."):
            name = name[1:]
        elif name in scope:
            return _Typed(scope[name])
        found = self.environment.variables.get(name)
        if found is not None:
            return _Typed(found)
        if name in TYPE_NAMES:
            return _Typed(t.TYPE)
        return _DYN  # an unknown variable: lint's unknown-variable check names it

    def select(self, node: syntax.Select, scope: Mapping[str, Type]) -> _Typed:
        operand = self.node(node.operand, scope).type
        typed = self.field(node, operand, node.field, node.operand)
        if node.optional:
            inner = typed.type
            return _Typed(inner if inner.kind == "optional_type" else t.optional_of(inner))
        if typed.field is not None and not typed.field.required:
            self.optional_read(node)
        return typed

    def optional_read(self, node: syntax.Select) -> None:
        """An optional field read: a warning unless a has() guards it here."""
        path = syntax.qualified_name(node)
        if path is None or path in self.guards or any(
                path.startswith(f"{reported}.") or path == reported
                for reported in self.unguarded):
            return
        self.unguarded.add(path)
        self.report(node, "warning", "unguarded-optional-field",
                    f"{path} is optional but read without has(); when it is absent the rule "
                    f"fails to evaluate. Write has({path}) && ...")

    def has(self, node: syntax.Macro, scope: Mapping[str, Type]) -> _Typed:
        """``has(a.b)`` reads ``a`` (which must be there) and tests ``b``."""
        for argument in node.args:
            if isinstance(argument, syntax.Select):
                operand = self.node(argument.operand, scope).type
                self.field(argument, operand, argument.field, argument.operand)
            else:
                self.node(argument, scope)
        return _Typed(t.BOOL)

    def field(self, node: syntax.Node, operand: Type, name: str,
              owner: syntax.Node) -> _Typed:
        """The field ``name`` of a value of type ``operand`` (``owner`` is its node)."""
        if operand.kind == "optional_type":  # a.?b.c: the optional chain continues
            inner = self.field(node, operand.parameters[0], name, owner).type
            return _Typed(inner if inner.kind == "optional_type" else t.optional_of(inner))
        if operand.is_dyn:
            return _DYN
        if operand.kind == "map":
            return _Typed(operand.parameters[1])
        if operand.kind == "object" and operand.shape is not None:
            found = operand.shape.field(name)
            if found is not None:
                return _Typed(found.type, found)
            if operand.shape.checks_names:
                self.unknown_field(node, owner, name, operand.shape)
            return _Typed(operand.shape.rest or t.DYN)
        self.report(node, "error", "unknown-field",
                    f"{render(owner)} is {t.describe(operand)}, which has no fields; "
                    f"{render(owner)}.{name} fails on every call")
        return _DYN

    def unknown_field(self, node: syntax.Node, owner: syntax.Node, name: str,
                      shape: t.Shape) -> None:
        names = shape.names
        nearest = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        hint = f" (did you mean {nearest[0]}?)" if nearest else ""
        openness = "" if shape.closed else (
            "; the schema does not set additionalProperties: false, but a field it does not "
            "declare is almost surely a typo: declare it under properties if it is meant")
        self.report(node, "error", "unknown-field",
                    f"{render(owner)}.{name} is not declared{hint}; declared fields: "
                    f"{', '.join(names) or 'none'}{openness}",
                    nearest[0] if nearest else None)

    def index(self, node: syntax.Index, scope: Mapping[str, Type]) -> _Typed:
        operand = self.node(node.operand, scope).type
        key = self.node(node.index, scope).type
        chained = operand.kind == "optional_type"  # opt[k]: the optional chain continues
        if chained:
            operand = operand.parameters[0]
        typed = self.element(node, operand, key)
        if (node.optional or chained) and typed.type.kind != "optional_type":
            return _Typed(t.optional_of(typed.type))
        return typed

    def element(self, node: syntax.Index, operand: Type, key: Type) -> _Typed:
        if operand.is_dyn:
            return _DYN
        if operand.kind == "list":
            if not (key.is_dyn or key.kind in ("int", "uint")):
                self.report(node.index, "error", "no-overload",
                            f"{render(node)}: a list is indexed by an integer; "
                            f"{render(node.index)} is {t.describe(key)} here")
                return _DYN
            return _Typed(operand.parameters[0])
        if operand.kind == "map":
            if not t.may_equal(operand.parameters[0], key):
                self.report(node.index, "error", "no-overload",
                            f"{render(node)}: the keys of {render(node.operand)} are "
                            f"{t.describe(operand.parameters[0])}; {render(node.index)} is "
                            f"{t.describe(key)} here")
                return _DYN
            return _Typed(operand.parameters[1])
        if operand.kind == "object":
            if isinstance(node.index, syntax.Literal) and isinstance(node.index.value, str):
                return self.field(node, operand, node.index.value, node.operand)
            if not (key.is_dyn or key.kind == "string"):
                self.report(node.index, "error", "no-overload",
                            f"{render(node)}: the fields of {render(node.operand)} are named "
                            f"by strings; {render(node.index)} is {t.describe(key)} here")
            return _DYN
        self.report(node, "error", "no-overload",
                    f"{render(node)}: {render(node.operand)} is {t.describe(operand)}, which "
                    "cannot be indexed")
        return _DYN

    # -- calls

    def call(self, node: syntax.Call, scope: Mapping[str, Type]) -> _Typed:
        name, target = self.resolve(node, scope)
        arguments = self.arguments(node, scope)
        receiver = self.node(target, scope) if target is not None else None
        special = _SPECIAL.get(name) if target is None else None
        if special is not None:
            return special(self, node, arguments)
        function = self.functions.get(name)
        if function is None:
            if _is_operator(name):
                return _DYN  # the library does not describe it (yet): nothing to check
            self.unknown_function(node, name, target is not None)
            return _DYN
        return self.overload(node, function, receiver, arguments)

    def arguments(self, node: syntax.Call, scope: Mapping[str, Type]) -> list[_Typed]:
        """The arguments' types, each under the has() guards that hold where it decides."""
        if node.target is not None or node.function not in ("_&&_", "_||_", "_?_:_"):
            return [self.node(argument, scope) for argument in node.args]
        if node.function == "_?_:_" and len(node.args) == 3:
            condition, when_true, when_false = node.args
            return [self.node(condition, scope),
                    self.guarded(when_true, scope, guards.when_true(condition)),
                    self.guarded(when_false, scope, guards.when_false(condition))]
        made_sure = (guards.when_true(node) if node.function == "_&&_"
            else guards.when_false(node))
        return [self.guarded(argument, scope, made_sure) for argument in node.args]

    def guarded(self, node: syntax.Node, scope: Mapping[str, Type],
                paths: frozenset[str]) -> _Typed:
        outside = self.guards
        self.guards = outside | paths
        try:
            return self.node(node, scope)
        finally:
            self.guards = outside

    def resolve(self, node: syntax.Call, scope: Mapping[str, Type]
                ) -> tuple[str, syntax.Node | None]:
        """A namespaced global function (``math.greatest``) or a method on ``target``."""
        if node.target is None:
            return node.function, None
        qualified = syntax.qualified_name(node.target)
        if qualified is not None:
            root = qualified.split(".", 1)[0]
            if root not in scope and root not in self.environment.variables:
                dotted = f"{qualified}.{node.function}"
                if dotted in self.functions or node.function not in self.functions:
                    return dotted, None
        return node.function, node.target

    def unknown_function(self, node: syntax.Call, name: str, member: bool) -> None:
        known = [n for n in self.functions if not _is_operator(n)]
        nearest = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"; did you mean {nearest[0]}?" if nearest else ""
        kind = "method" if member else "function"
        self.report(node, "error", "unknown-function",
                    f"{render(node)}: unknown {kind} {name!r}{hint}",
                    nearest[0] if nearest else None)

    def overload(self, node: syntax.Call, function: Function, receiver: _Typed | None,
                 arguments: list[_Typed]) -> _Typed:
        member = receiver is not None
        given = [a.type for a in arguments]
        if receiver is not None:
            given.insert(0, receiver.type)
        shaped = [o for o in function.overloads if o.member == member
                  and _arity_fits(o, len(given), function.variadic)]
        if not shaped:
            self.wrong_shape(node, function, member, len(arguments))
            return _DYN
        results: list[Type] = []
        for candidate in shaped:
            bindings: dict[str, Type] = {}
            parameters = _parameters(candidate, len(given))
            if all(t.unify(t.parse(p), a, bindings) for p, a in zip(parameters, given,
                                                                     strict=True)):
                results.append(t.substitute(t.parse(candidate.result), bindings))
        if results:
            return _Typed(t.join(results))
        self.no_overload(node, function, shaped, receiver, arguments)
        return _DYN

    def wrong_shape(self, node: syntax.Call, function: Function, member: bool,
                    count: int) -> None:
        name = function.name
        other = [o for o in function.overloads if o.member != member]
        if other and not any(o.member == member for o in function.overloads):
            if member:
                how = f"{name}(...), not as a method"
            else:
                receivers = sorted({o.parameters[0] for o in other if o.parameters})
                how = f"as a method: x.{name}(...) with x {' or '.join(receivers)}"
            self.report(node, "error", "wrong-arity",
                        f"{render(node)}: {name} is called {how}")
            return
        counts = sorted({len(o.parameters) - (1 if o.member else 0)
                         for o in function.overloads if o.member == member})
        takes = " or ".join(map(str, counts))
        self.report(node, "error", "wrong-arity",
                    f"{render(node)}: {name} takes {takes} argument"
                    f"{'' if counts == [1] else 's'}, not {count}; "
                    + "; ".join(signature(name, o) for o in function.overloads))

    def no_overload(self, node: syntax.Call, function: Function, shaped: list[Overload],
                    receiver: _Typed | None, arguments: list[_Typed]) -> None:
        name = function.name
        spelled = OPERATOR_SPELLING.get(name, name)
        if receiver is not None and node.target is not None:
            receivers = {o.parameters[0] for o in shaped}
            if not any(t.unify(t.parse(r), receiver.type, {}) for r in receivers):
                wanted = " or ".join(t.describe(t.parse(r)) for r in sorted(receivers))
                kinds = " or ".join(sorted(r.split("(")[0] for r in receivers))
                self.report(node, "error", "no-overload",
                            f"{name} is {_article(kinds)} {kinds} method: {render(node)} "
                            f"needs {render(node.target)} to be {wanted}; it is "
                            f"{t.describe(receiver.type)} here")
                return
        given = ", ".join(str(a.type) for a in arguments)
        if receiver is not None:
            given = f"{receiver.type}" + (f", {given}" if given else "")
        advice = ""
        if _mixes_numbers([a.type for a in arguments]):
            advice = ("; CEL does not mix int and double in arithmetic: write 1.0 for a "
                      "double literal, or convert with double(...) or int(...)")
        self.report(node, "error", "no-overload",
                    f"{render(node)}: no overload of {spelled} takes ({given}); it has: "
                    + "; ".join(signature(name, o) for o in function.overloads) + advice)

    # -- the operators typed by the spec's own rules

    def logical(self, node: syntax.Call, arguments: list[_Typed]) -> _Typed:
        for part, typed in zip(node.args, arguments, strict=True):
            if not (typed.type.is_dyn or typed.type.kind == "bool"):
                spelled = OPERATOR_SPELLING[node.function]
                self.report(part, "error", "not-a-condition",
                            f"{render(part)} is {t.describe(typed.type)}, but {spelled} needs "
                            "a bool")
        return _Typed(t.BOOL)

    def conditional(self, node: syntax.Call, arguments: list[_Typed]) -> _Typed:
        condition = arguments[0].type if arguments else t.DYN
        if not (condition.is_dyn or condition.kind == "bool"):
            self.report(node.args[0], "error", "not-a-condition",
                        f"{render(node.args[0])} is {t.describe(condition)}, but the "
                        "condition of ?: needs a bool")
        return _Typed(t.join([a.type for a in arguments[1:]]))

    def equality(self, node: syntax.Call, arguments: list[_Typed]) -> _Typed:
        if len(arguments) == 2:
            self.compare(node, arguments[0], arguments[1], node.function == "_==_")
        return _Typed(t.BOOL)

    def compare(self, node: syntax.Call, left: _Typed, right: _Typed, equal: bool) -> None:
        outcome = "can never be true" if equal else "is always true"
        for side, other, other_node in ((left, right, node.args[1]),
                                        (right, left, node.args[0])):
            if other.type.kind == "null_type" and side.type.kind != "null_type":
                problem = _null_problem(side)
                if problem:
                    self.report(node, "warning", "impossible-comparison",
                                f"{render(node)} {outcome}: {problem}")
                return
            if side.field is not None and side.field.values is not None and isinstance(
                    other_node, syntax.Literal) and not _among(other_node.value,
                                                               side.field.values):
                allowed = ", ".join(literal_text(v) for v in side.field.values)
                self.report(node, "warning", "impossible-comparison",
                            f"{render(node)} {outcome}: {render(other_node)} is not one of "
                            f"the values its schema allows ({allowed})")
                return
        if not t.may_equal(left.type, right.type):
            self.report(node, "warning", "impossible-comparison",
                        f"{render(node)} {outcome}: {render(node.args[0])} is "
                        f"{t.describe(left.type)} and {render(node.args[1])} is "
                        f"{t.describe(right.type)}")

    def ordering(self, node: syntax.Call, arguments: list[_Typed]) -> _Typed:
        if len(arguments) != 2:
            return _Typed(t.BOOL)
        left, right = arguments[0].type, arguments[1].type
        if left.is_dyn or right.is_dyn or (left.is_numeric and right.is_numeric) or (
                left.kind == right.kind and left.kind in ORDERED_KINDS):
            return _Typed(t.BOOL)
        kinds = {left.kind, right.kind}
        advice = next((f"; convert the text with {name}(...)" for name in ("timestamp",
                       "duration") if kinds == {"string", name}), "")
        self.report(node, "error", "no-overload",
                    f"{render(node)}: {OPERATOR_SPELLING[node.function]} orders two numbers, "
                    "strings, bytes, bools, timestamps or durations of one kind; "
                    f"{render(node.args[0])} is {t.describe(left)} and "
                    f"{render(node.args[1])} is {t.describe(right)}{advice}")
        return _Typed(t.BOOL)

    def membership(self, node: syntax.Call, arguments: list[_Typed]) -> _Typed:
        if len(arguments) != 2:
            return _Typed(t.BOOL)
        item, container = arguments
        kind = container.type.kind
        if container.type.is_dyn:
            return _Typed(t.BOOL)
        if kind in ("list", "map"):
            element = container.type.parameters[0]
            if (isinstance(node.args[1], syntax.ListLiteral) and item.field is not None
                    and item.field.values is not None):
                self.enum_membership(node, item.field.values, node.args[1])
            elif not t.may_equal(item.type, element):
                what = "elements" if kind == "list" else "keys"
                self.report(node, "warning", "impossible-comparison",
                            f"{render(node)} can never be true: the {what} of "
                            f"{render(node.args[1])} are {t.plural(element)} "
                            f"and {render(node.args[0])} is {t.describe(item.type)}")
            return _Typed(t.BOOL)
        if kind == "object":
            return _Typed(t.BOOL)
        self.report(node, "error", "no-overload",
                    f"{render(node)}: in needs a list or a map on its right; "
                    f"{render(node.args[1])} is {t.describe(container.type)} here")
        return _Typed(t.BOOL)

    def enum_membership(self, node: syntax.Call, values: tuple[Any, ...],
                        listed: syntax.ListLiteral) -> None:
        literals = [e.value for e in listed.elements if isinstance(e, syntax.Literal)]
        if len(literals) == len(listed.elements) and literals and not any(
                _among(value, values) for value in literals):
            allowed = ", ".join(literal_text(v) for v in values)
            self.report(node, "warning", "impossible-comparison",
                        f"{render(node)} can never be true: none of the listed values is one "
                        f"its schema allows ({allowed})")

    # -- macros

    def macro(self, node: syntax.Macro, scope: Mapping[str, Type]) -> _Typed:
        if node.name == "has":
            return self.has(node, scope)
        return _Typed(check_macro(self, node, scope))

    def node_type(self, node: syntax.Node, scope: Mapping[str, Type]) -> Type:
        return self.node(node, scope).type


def _present(type_: Type) -> Type:
    """``[?x]``, ``{?k: v}``: the element is the optional's value."""
    return type_.parameters[0] if type_.kind == "optional_type" else type_


def _is_operator(name: str) -> bool:
    return name in OPERATOR_SPELLING or name.startswith("_") or name == "@not_strictly_false"


def _arity_fits(overload: Overload, count: int, variadic: bool) -> bool:
    size = len(overload.parameters)
    return count == size or (variadic and count >= size)


def _parameters(overload: Overload, count: int) -> tuple[str, ...]:
    """The parameter types for ``count`` arguments (a variadic last parameter repeats)."""
    parameters = overload.parameters
    if count > len(parameters) and parameters:
        parameters = parameters + (parameters[-1],) * (count - len(parameters))
    return parameters


def _mixes_numbers(given: list[Type]) -> bool:
    return len({g.kind for g in given if g.is_numeric}) > 1


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _null_problem(side: _Typed) -> str | None:
    """Why ``side == null`` can never be true, or ``None`` when it can."""
    declared = side.field
    if declared is not None:
        if declared.nullable or declared.type.is_dyn:
            return None
        if declared.required:
            return "the field is required and its schema does not allow null"
        return ("its schema does not allow null, and when the field is absent reading it is "
                "an error, not null: test has(...) instead")
    if side.type.kind in t.SCALARS:
        return f"it is {t.describe(side.type)}, never null"
    return None


def _among(value: Any, values: tuple[Any, ...]) -> bool:
    """CEL equality of a literal with one of a schema's values (numbers by value)."""
    for allowed in values:
        if isinstance(value, bool) or isinstance(allowed, bool):
            if type(value) is type(allowed) and value == allowed:
                return True
        elif value == allowed:
            return True
    return False


_SPECIAL = {
    "_&&_": _Checker.logical, "_||_": _Checker.logical, "!_": _Checker.logical,
    "_?_:_": _Checker.conditional, "_==_": _Checker.equality, "_!=_": _Checker.equality,
    "@in": _Checker.membership,
    **{name: _Checker.ordering for name in ORDERINGS},
}
