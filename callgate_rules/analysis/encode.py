"""CEL syntax trees (``cel.syntax``) to z3 terms, for the subset ``docs/reference/analyze.md``
lists.

Every CEL expression becomes a value and an error condition: CEL has errors (reading an
absent field) that ``&&`` and ``||`` absorb (``false && error`` is false), and the gate
treats an error by the rule's ``on_error``; so a rule's verdict needs both. A boolean
sub-expression outside the subset becomes an *opaque* pair of z3 booleans named by its
source text and the tool, so the same text in two configurations is the same unknown, and
its place is kept for the "not analysed" report; a non-boolean one makes the enclosing
boolean opaque.

Variables come from JSON Schemas: ``args`` (the contract's arguments), ``actor`` and
``session`` (the AccessPolicy's), one root per look-up (its record ``schema``). A scalar
field is a z3 constant named by its path, with a presence flag (``has()``) and its schema's
bounds as constraints (``Symbols.domain``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import z3

from callgate_rules.cel import syntax
from callgate_rules.cel.unparse import render

Path = tuple[str, ...]
SCALARS = {"integer": "int", "number": "double", "string": "string", "boolean": "bool"}


class NotEncoded(Exception):
    """A part of an expression outside the encoded subset: what, and where in its text."""

    def __init__(self, what: str, at: syntax.Position) -> None:
        super().__init__(what)
        self.what, self.line, self.column = what, at.line, at.column


@dataclass(frozen=True)
class Opaque:
    """A boolean sub-expression the solver treats as unknown (free in both value and
    error); ``what`` says why it is not encoded, ``line``/``column`` where (in the
    expression's text)."""

    text: str
    what: str
    line: int
    column: int
    value: z3.BoolRef
    error: z3.BoolRef


@dataclass
class Variable:
    path: Path
    kind: str  # "int", "double", "string", "bool"
    term: z3.ExprRef
    present: z3.BoolRef
    schema: Mapping[str, Any]


def _schema_kind(schema: Mapping[str, Any]) -> str | None:
    declared = schema.get("type")
    if isinstance(declared, str):
        return SCALARS.get(declared)
    if "enum" in schema and schema["enum"]:
        kinds = {_value_kind(v) for v in schema["enum"]}
        return kinds.pop() if len(kinds) == 1 else None
    return None


def _value_kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    return None


def _make(name: str, kind: str) -> z3.ExprRef:
    if kind == "int":
        return z3.Int(name)
    if kind == "double":
        return z3.Real(name)
    if kind == "string":
        return z3.String(name)
    return z3.Bool(name)


def literal_term(value: Any, kind: str) -> z3.ExprRef:
    if kind == "int":
        return z3.IntVal(value)
    if kind == "double":
        return z3.RealVal(Fraction(value))
    if kind == "string":
        return z3.StringVal(value)
    return z3.BoolVal(value)


class Symbols:
    """The z3 constants of one side of a question (one configuration, one tool): each
    root's schema, the variables made so far, and the constraints a valid value keeps."""

    def __init__(self, roots: Mapping[str, Mapping[str, Any] | None]) -> None:
        self.roots = dict(roots)
        self.variables: dict[Path, Variable] = {}

    def schema_at(self, path: Path) -> Mapping[str, Any] | None:
        schema = self.roots.get(path[0])
        for part in path[1:]:
            if schema is None or not isinstance(schema.get("properties"), Mapping):
                return None
            schema = schema["properties"].get(part)
        return schema if isinstance(schema, Mapping) else None

    def required(self, path: Path) -> bool:
        parent = self.schema_at(path[:-1])
        return parent is not None and path[-1] in (parent.get("required") or ())

    def variable(self, path: Path, at: syntax.Position) -> Variable:
        if path in self.variables:
            return self.variables[path]
        schema = self.schema_at(path)
        if schema is None:
            raise NotEncoded(f"{'.'.join(path)} has no declared schema", at)
        kind = _schema_kind(schema)
        if kind is None:
            raise NotEncoded(f"{'.'.join(path)} is not a scalar (type "
                             f"{schema.get('type', 'not declared')})", at)
        name = ".".join(path)
        made = Variable(path, kind, _make(name, kind), z3.Bool(f"has {name}"), schema)
        self.variables[path] = made
        return made

    def declare_required(self) -> None:
        """Variables for every required scalar of every root, so a model gives them a
        value even when no rule reads them (the call must pass its schema)."""
        for root, schema in self.roots.items():
            if isinstance(schema, Mapping):
                for name in schema.get("required") or ():
                    prop = (schema.get("properties") or {}).get(name)
                    if isinstance(prop, Mapping) and _schema_kind(prop) is not None:
                        self.variable((root, name), syntax.Position())

    def domain(self) -> z3.BoolRef:
        """What the schemas say of every variable made: presence (required, and a nested
        field only within a present parent), bounds, enum, lengths."""
        facts: list[z3.BoolRef] = []
        for path, var in self.variables.items():
            if self.required(path):
                facts.append(var.present)
            if len(path) > 2 and path[:-1] in self.variables:
                facts.append(z3.Implies(var.present, self.variables[path[:-1]].present))
            facts.extend(_bounds(var))
        return z3.And(*facts) if facts else z3.BoolVal(True)


def _bounds(var: Variable) -> list[z3.BoolRef]:
    schema, term, kind = var.schema, var.term, var.kind
    facts: list[Any] = []
    if isinstance(schema.get("enum"), list):
        options = [literal_term(v, kind) for v in schema["enum"] if _fits(v, kind)]
        facts.append(z3.Or(*[term == o for o in options]) if options else z3.BoolVal(False))
    if "const" in schema and _fits(schema["const"], kind):
        facts.append(term == literal_term(schema["const"], kind))
    if kind in ("int", "double"):
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            bound = schema.get(key)
            if isinstance(bound, int | float) and not isinstance(bound, bool):
                facts.append(BOUNDS[key](*_against(term, kind, bound)))
    if kind == "string":
        if isinstance(schema.get("maxLength"), int):
            facts.append(z3.Length(term) <= schema["maxLength"])
        if isinstance(schema.get("minLength"), int):
            facts.append(z3.Length(term) >= schema["minLength"])
    return [z3.Implies(var.present, f) for f in facts]


BOUNDS: Mapping[str, Callable[[Any, Any], Any]] = {
    "minimum": lambda a, b: a >= b, "maximum": lambda a, b: a <= b,
    "exclusiveMinimum": lambda a, b: a > b, "exclusiveMaximum": lambda a, b: a < b}


def _against(term: Any, kind: str, bound: int | float) -> tuple[Any, Any]:
    """``term`` and a numeric ``bound`` of a schema in one z3 sort."""
    if kind == "int" and isinstance(bound, int):
        return term, z3.IntVal(bound)
    return (z3.ToReal(term) if kind == "int" else term), z3.RealVal(Fraction(bound))


def _fits(value: Any, kind: str) -> bool:
    found = _value_kind(value)
    return found == kind or (kind == "double" and found == "int")


@dataclass
class Term:
    kind: str  # "int", "double", "string", "bool", "list"
    value: Any  # a z3 expression, or for "list" a list of Terms
    error: z3.BoolRef = field(default_factory=lambda: z3.BoolVal(False))


ORDER = {"_<_": lambda a, b: a < b, "_<=_": lambda a, b: a <= b,
         "_>_": lambda a, b: a > b, "_>=_": lambda a, b: a >= b}
ARITHMETIC = {"_+_": lambda a, b: a + b, "_-_": lambda a, b: a - b,
              "_*_": lambda a, b: a * b}
STRING_TESTS = {"startsWith": lambda s, p: z3.PrefixOf(p, s),
                "endsWith": lambda s, p: z3.SuffixOf(p, s),
                "contains": lambda s, p: z3.Contains(s, p)}


class Encoder:
    """Encodes the expressions of one tool over ``symbols``; ``opaque`` collects what it
    could not encode, keyed by tool and text so two configurations share the unknowns."""

    def __init__(self, symbols: Symbols, tool: str, opaque: dict[str, Opaque],
                 scope: str = "", names: Mapping[str, Term] | None = None) -> None:
        self.symbols, self.tool, self.opaque, self.scope = symbols, tool, opaque, scope
        self.used: list[Opaque] = []
        # identifiers that stand for a whole value (an assertion's ``route``)
        self.names = dict(names or {})

    def condition(self, tree: syntax.Node) -> tuple[z3.BoolRef, z3.BoolRef]:
        """(value, error) of a boolean expression: an expression that is not a bool
        (CEL: an error) is an error."""
        term = self._boolean(tree)
        return term.value, term.error

    def _boolean(self, node: syntax.Node) -> Term:
        try:
            term = self._encode(node)
        except NotEncoded as missing:
            return self._opaque(node, missing)
        if term.kind != "bool":
            return Term("bool", z3.BoolVal(False), z3.BoolVal(True))
        return term

    def _opaque(self, node: syntax.Node, missing: NotEncoded) -> Term:
        text = render(node)
        key = f"{self.tool}\x00{self.scope}\x00{text}"
        if key not in self.opaque:
            self.opaque[key] = Opaque(text, missing.what, missing.line, missing.column,
                                      z3.Bool(f"opaque {len(self.opaque)}: {text}"),
                                      z3.Bool(f"opaque error {len(self.opaque)}: {text}"))
        found = self.opaque[key]
        if found not in self.used:
            self.used.append(found)
        return Term("bool", found.value, found.error)

    def term(self, node: syntax.Node) -> Term:
        """The value of a (non-boolean) expression; ``NotEncoded`` outside the subset."""
        return self._encode(node)

    def _encode(self, node: syntax.Node) -> Term:
        if isinstance(node, syntax.Literal):
            kind = _value_kind(node.value)
            if kind is None:
                raise NotEncoded(f"literal {render(node)}", node.at)
            return Term(kind, literal_term(node.value, kind))
        if isinstance(node, syntax.Ident):
            if node.name == "tool":
                return Term("string", z3.StringVal(self.tool))
            if node.name in self.names:
                return self.names[node.name]
            raise NotEncoded(f"variable {node.name} as a whole", node.at)
        if isinstance(node, syntax.Select):
            return self._select(node)
        if isinstance(node, syntax.ListLiteral) and not node.optional_indices:
            return Term("list", [self._encode(e) for e in node.elements])
        if isinstance(node, syntax.Macro) and node.name == "has" and node.target is None:
            return self._has(node)
        if isinstance(node, syntax.Call):
            return self._call(node)
        raise NotEncoded(_describe(node), node.at)

    def _path(self, node: syntax.Node) -> Path | None:
        parts: list[str] = []
        while isinstance(node, syntax.Select) and not node.optional:
            parts.append(node.field)
            node = node.operand
        if not isinstance(node, syntax.Ident) or node.name not in self.symbols.roots:
            return None
        return (node.name, *reversed(parts))

    def _select(self, node: syntax.Select) -> Term:
        path = self._path(node)
        if path is None:
            raise NotEncoded(f"field {render(node)}", node.at)
        var = self.symbols.variable(path, node.at)
        # reading an absent field, or a field of an absent parent, is an error
        absent = [z3.Not(self.symbols.variable(path[:i], node.at).present)
                  for i in range(2, len(path)) if self.symbols.schema_at(path[:i]) is not None
                  and _schema_kind(self.symbols.schema_at(path[:i]) or {}) is not None]
        return Term(var.kind, var.term, z3.Or(z3.Not(var.present), *absent))

    def _has(self, node: syntax.Macro) -> Term:
        (inner,) = node.args
        path = self._path(inner) if isinstance(inner, syntax.Select) else None
        if path is None or len(path) < 2:
            raise NotEncoded(f"has({render(inner)})", node.at)
        if self.symbols.schema_at(path) is None:
            raise NotEncoded(f"{'.'.join(path)} has no declared schema", node.at)
        if len(path) > 2:
            raise NotEncoded(f"has() of a nested field {'.'.join(path)}", node.at)
        schema = self.symbols.schema_at(path) or {}
        if _schema_kind(schema) is None:
            raise NotEncoded(f"has() of a non-scalar field {'.'.join(path)}", node.at)
        return Term("bool", self.symbols.variable(path, node.at).present)

    def _call(self, node: syntax.Call) -> Term:
        name, args = node.function, node.args
        if name in ("_&&_", "_||_"):
            left, right = self._boolean(args[0]), self._boolean(args[1])
            return _junction(name == "_&&_", left, right)
        if name == "!_":
            inner = self._boolean(args[0])
            return Term("bool", z3.Not(inner.value), inner.error)
        if name == "_?_:_":
            test = self._boolean(args[0])
            yes, no = self._encode(args[1]), self._encode(args[2])
            if yes.kind != no.kind or yes.kind == "list":
                yes, no = _numeric(yes, no, node)
            return Term(yes.kind, z3.If(test.value, yes.value, no.value),
                        z3.Or(test.error, z3.If(test.value, yes.error, no.error)))
        if node.target is None and name in ("_==_", "_!=_", *ORDER, *ARITHMETIC, "@in"):
            left, right = self._encode(args[0]), self._encode(args[1])
            error = z3.Or(left.error, right.error)
            if name == "@in":
                return self._member(left, right, error, node)
            if name in ("_==_", "_!=_"):
                equal = self._equal(left, right, node)
                return Term("bool", equal if name == "_==_" else z3.Not(equal), error)
            a, b = _numeric(left, right, node)
            if name in ORDER:
                return Term("bool", ORDER[name](a.value, b.value), error)
            return Term(a.kind, ARITHMETIC[name](a.value, b.value), error)
        if name == "-_" and node.target is None:
            inner = self._encode(args[0])
            if inner.kind not in ("int", "double"):
                raise NotEncoded(f"negation of a {inner.kind}", node.at)
            return Term(inner.kind, -inner.value, inner.error)
        if name == "size" and len(args) + (node.target is not None) == 1:
            subject = self._encode(node.target if node.target is not None else args[0])
            if subject.kind != "string":
                raise NotEncoded(f"size() of a {subject.kind}", node.at)
            return Term("int", z3.Length(subject.value), subject.error)
        if name in STRING_TESTS and node.target is not None and len(args) == 1:
            subject, part = self._encode(node.target), self._encode(args[0])
            if subject.kind != "string" or part.kind != "string":
                raise NotEncoded(f"{name}() on a {subject.kind}", node.at)
            return Term("bool", STRING_TESTS[name](subject.value, part.value),
                        z3.Or(subject.error, part.error))
        raise NotEncoded(f"function {name}()", node.at)

    def _equal(self, left: Term, right: Term, node: syntax.Call) -> z3.BoolRef:
        if left.kind == right.kind and left.kind != "list":
            return left.value == right.value
        if {left.kind, right.kind} <= {"int", "double"}:
            a, b = _numeric(left, right, node)
            return a.value == b.value
        raise NotEncoded(f"== between {left.kind} and {right.kind}", node.at)

    def _member(self, item: Term, options: Term, error: z3.BoolRef,
                node: syntax.Call) -> Term:
        if options.kind != "list":
            raise NotEncoded("in over a value that is not a literal list", node.at)
        cases = [self._equal(item, option, node) for option in options.value]
        errors = [option.error for option in options.value]
        return Term("bool", z3.Or(*cases) if cases else z3.BoolVal(False),
                    z3.Or(error, *errors))


def _junction(conjunction: bool, left: Term, right: Term) -> Term:
    """CEL's commutative ``&&``/``||``: a deciding operand (false for ``&&``, true for
    ``||``) without an error decides, whatever the other does."""
    def decides(term: Term) -> z3.BoolRef:
        return z3.And(z3.Not(term.error),
                      z3.Not(term.value) if conjunction else term.value)
    decided = z3.Or(decides(left), decides(right))
    value = (z3.And(left.value, right.value) if conjunction
             else z3.Or(left.value, right.value))
    return Term("bool", value, z3.And(z3.Or(left.error, right.error), z3.Not(decided)))


def _numeric(left: Term, right: Term, node: syntax.Node) -> tuple[Term, Term]:
    kinds = {left.kind, right.kind}
    if not kinds <= {"int", "double"}:
        raise NotEncoded(f"{_operator(node)} on {left.kind} and {right.kind}", node.at)
    if len(kinds) == 1:
        return left, right
    return (Term("double", z3.ToReal(left.value) if left.kind == "int" else left.value,
                 left.error),
            Term("double", z3.ToReal(right.value) if right.kind == "int" else right.value,
                 right.error))


def _operator(node: syntax.Node) -> str:
    return node.function if isinstance(node, syntax.Call) else type(node).__name__


def _describe(node: syntax.Node) -> str:
    if isinstance(node, syntax.Macro):
        return f"macro {node.name}()"
    if isinstance(node, syntax.Index):
        return "indexing"
    return type(node).__name__.lower().replace("literal", " literal").strip()
