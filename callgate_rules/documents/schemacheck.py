"""A JSON Schema compiled once into a plain predicate: is this instance valid, yes or no.

``jsonschema`` builds a validation error, evolves a validator and resolves a resource for
every keyword of every subschema it visits, which made it the most expensive step of a
decision although nearly every call is valid. On the hot path the gate only needs the
verdict; the detailed error is asked of ``jsonschema`` afterwards, and only when this
predicate says "invalid". So ``jsonschema`` stays the source of truth for the messages, and
this module must give exactly its verdicts — ``tests/documents/test_schemacheck.py`` checks that
differentially. That ``jsonschema`` is ``GateValidator`` (``documents.gate_validator``):
Draft 2020-12 with the gate's format checker, whose ``pattern``, ``patternProperties`` and
``additionalProperties`` match with RE2 semantics in time linear in the text
(``callgate_rules.regex``), not with Python's backtracking ``re``; the compiled predicate
searches with the same patterns.

Covered: boolean schemas, ``type``, ``enum``, ``const``, ``properties``, ``required``,
``additionalProperties``, ``patternProperties``, ``propertyNames``, ``minProperties``,
``maxProperties``, ``dependentRequired``, ``dependentSchemas``, ``pattern``, ``format``,
``minLength``, ``maxLength``, ``minimum``, ``maximum``, ``exclusiveMinimum``,
``exclusiveMaximum``, ``multipleOf``, ``items``, ``prefixItems``, ``minItems``,
``maxItems``, ``contains`` (with ``minContains``/``maxContains``), ``allOf``, ``anyOf``,
``oneOf``, ``not`` and ``if``/``then``/``else``. A schema that uses any other validating
keyword (``$ref``, ``$dynamicRef``, ``uniqueItems``, ``unevaluatedItems``,
``unevaluatedProperties``) anywhere is not compiled: ``compile_check`` returns ``None`` and
``validity_check`` falls back to ``jsonschema`` for that whole schema. Keywords that
``jsonschema`` does not validate (``description``, ``title``, ``$defs``, ...) are ignored by
both, as are ``then``/``else`` without ``if`` and ``minContains``/``maxContains`` without
``contains``.

Subtleties kept as ``jsonschema`` has them: ``true``/``false`` are neither integers nor
numbers; ``1.0`` is an integer; lengths count code points; ``pattern`` searches, it does not
match; ``enum``/``const`` tell ``1`` from ``true``. And as ``GateValidator`` has it: a
pattern has RE2's meaning (``$`` only at the very end, ``\\d`` ASCII digits), and
``additionalProperties`` leaves a property alone when any ``patternProperties`` pattern
matches it.

How: the schema becomes Python source where every failed check is a ``return False``. A
subschema whose verdict is its parent's (``properties``, ``items``, ``allOf``, ...) is
inlined into its parent's code (down to ``_INLINED_DEPTH``); one whose verdict is a value
(``anyOf``, ``oneOf``, ``not``, ``if``, ``contains``) is a function of its own. Type tests
try the exact type first; ``additionalProperties: false`` without ``patternProperties``
counts the declared properties there instead of comparing keys. Values from the schema
enter the source only as names bound in the function's namespace, or, for property names,
as ``repr`` string literals.
"""

from __future__ import annotations

import marshal
import numbers
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from types import CodeType
from typing import Any

from jsonschema import FormatChecker
from jsonschema.protocols import Validator

from callgate_rules.cache import compiled

# Re-exported: the validator whose verdicts these are is part of this module's interface.
from callgate_rules.documents.gate_validator import GateValidator as GateValidator
from callgate_rules.regex import PatternError, compile_pattern

Check = Callable[[Any], bool]

# Validating keywords of Draft 2020-12 this module does not compile. A keyword jsonschema
# does not validate is an annotation for both.
UNSUPPORTED = frozenset({
    "$ref", "$dynamicRef", "uniqueItems", "unevaluatedItems", "unevaluatedProperties",
})
# Keywords holding subschemas: a schema without any is a leaf, inlined into its parent at
# any depth; one with some is inlined down to ``_INLINED_DEPTH`` levels of indentation.
APPLICATORS = frozenset({
    "properties", "patternProperties", "additionalProperties", "propertyNames",
    "dependentSchemas", "items", "prefixItems", "contains", "allOf", "anyOf", "oneOf", "not",
    "if",
})
# A subschema with subschemas of its own is written into its parent's code down to this many
# levels of indentation and called as a function of its own deeper down: a call costs more
# than the checks of a short list, and Python refuses more than 20 nested loops a function.
_INLINED_DEPTH = 8


class _Unsupported(Exception):
    """The schema needs something this module does not compile."""


def validity_check(validator: Validator) -> Check:
    """The fastest exact verdict for ``validator``: the compiled predicate when the schema
    can be compiled, else ``validator.is_valid``."""
    if type(validator) is not GateValidator:  # other drafts and Python's re differ in details
        return validator.is_valid
    check = compile_check(validator.schema, getattr(validator, "format_checker", None))
    return check if check is not None else validator.is_valid


def compile_check(schema: Any, format_checker: FormatChecker | None = None) -> Check | None:
    """``schema`` compiled into a predicate with Draft 2020-12 verdicts, or ``None`` when it
    uses a validating keyword this module does not cover. ``format_checker`` checks
    ``format`` as a ``jsonschema`` validator given the same checker does (``None``: format is
    an annotation)."""
    generator = _Generator(format_checker)
    try:
        root = generator.function(schema)
        # compile(), from the cache: schemas of one shape share their code (the constants
        # are bound by name), so the code is keyed by the source, not by the schema
        code = compiled("\n".join(generator.functions), "<schemacheck>")
    except (_Unsupported, PatternError, RecursionError, SyntaxError):
        return None
    return _running(code, root, generator.recipes, format_checker)


# A constant of generated code as made again from plain data: ("value", the value), or
# ("pattern", its text), ("format", its name), ("multiple", the divisor) for a function.
Recipe = tuple[str, Any]
# What each compiled check is made from, so that a whole configuration's entry in the load
# cache (``documents.snapshot``) holds the check as that data, and no source is generated
# when it is read back.
_MADE_FROM: weakref.WeakKeyDictionary[
    Check, tuple[CodeType, str, Mapping[str, Recipe], FormatChecker | None]] = (
    weakref.WeakKeyDictionary())


def check_data(check: Any) -> tuple[bytes, FormatChecker | None] | None:
    """(``marshal`` data, format checker) that ``rebuilt_check`` makes ``check`` again from;
    None for anything but a compiled check, or one whose constants ``marshal`` cannot hold
    (a YAML date in an ``enum``)."""
    try:
        made = _MADE_FROM.get(check)
    except TypeError:  # not weakly referable: no compiled check
        return None
    if made is None:
        return None
    code, root, recipes, format_checker = made
    try:
        return marshal.dumps((code, root, dict(recipes))), format_checker
    except ValueError:
        return None


def rebuilt_check(data: bytes, format_checker: FormatChecker | None) -> Check:
    """The check ``check_data`` gave ``data`` of; raises ``ValueError`` (or what reading
    data that is not such data raises) for anything else."""
    code, root, recipes = marshal.loads(data)
    if not (isinstance(code, CodeType) and isinstance(root, str) and isinstance(recipes, dict)):
        raise ValueError("not the data of a compiled check")
    return _running(code, root, recipes, format_checker)


def _running(code: CodeType, root: str, recipes: Mapping[str, Recipe],
             format_checker: FormatChecker | None) -> Check:
    namespace = _namespace()
    for name, (kind, value) in recipes.items():
        namespace[name] = _made(kind, value, format_checker)
    exec(code, namespace)  # noqa: S102 - code this module generated, or its cached copy
    check: Check = namespace[root]
    _MADE_FROM[check] = (code, root, recipes, format_checker)
    return check


def _made(kind: str, value: Any, format_checker: FormatChecker | None) -> Any:
    if kind == "pattern":
        return compile_pattern(value).find
    if kind == "format":
        if format_checker is None or value not in format_checker.checkers:
            raise ValueError(f"no format checker for {value!r}")
        return _format(*format_checker.checkers[value])
    if kind == "multiple":
        return _multiple_of(value)
    return value


# What generated code calls --------------------------------------------------------------------


def is_integer(value: Any) -> bool:
    """Draft 2020-12's integer: not a bool; an int, or a float with no fractional part."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def json_equal(one: Any, two: Any) -> bool:
    """Equality as jsonschema's ``equal``: 1 == 1.0, but 1 != true, recursively."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(
            json_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(
            key in two and json_equal(value, two[key]) for key, value in one.items())
    return bool(_unbool(one) == _unbool(two))


_TRUE, _FALSE = object(), object()


def _unbool(value: Any) -> Any:
    if value is True:
        return _TRUE
    if value is False:
        return _FALSE
    return value


def _multiple_of(divisor: Any) -> Check:
    """jsonschema's own arithmetic: float division for a float divisor, else ``%``."""
    if isinstance(divisor, float):
        def multiple(value: Any) -> bool:
            quotient = value / divisor
            try:
                return bool(int(quotient) == quotient)
            except OverflowError:
                return (Fraction(value) / Fraction(divisor)).denominator == 1

        return multiple
    return lambda value: not value % divisor


def _format(conforms: Callable[[Any], Any], raises: Any) -> Check:
    """A format checker's function as jsonschema calls it: a falsy result or one of its
    declared exceptions means "does not conform"."""
    if raises == ():
        return conforms

    def formatted(value: Any) -> bool:
        try:
            return bool(conforms(value))
        except raises:
            return False

    return formatted


def _always(value: Any) -> bool:
    return True


def _never(value: Any) -> bool:
    return False


# Each type as Draft 2020-12's type checker defines it, as an expression over ``{0}``: the
# exact type of a JSON value tested first, which is cheaper than ``isinstance`` (and much
# cheaper than an ``isinstance`` of an abstract class); bool has no subclasses.
TYPE_TESTS: Mapping[str, str] = {
    "array": "(type({0}) is list or isinstance({0}, list))",
    "boolean": "({0} is True or {0} is False)",
    "integer": "(type({0}) is int or _is_integer({0}))",
    "null": "{0} is None",
    "number": "(type({0}) is int or type({0}) is float or "
              "(isinstance({0}, _Number) and not isinstance({0}, bool)))",
    "object": "(type({0}) is dict or isinstance({0}, dict))",
    "string": "(type({0}) is str or isinstance({0}, str))",
}


# The generator ----------------------------------------------------------------------------------


def _namespace() -> dict[str, Any]:
    """What every generated check reads besides its own constants."""
    return {"_Number": numbers.Number, "_is_integer": is_integer,
            "_json_equal": json_equal, "_always": _always, "_never": _never}


class _Generator:
    def __init__(self, format_checker: FormatChecker | None) -> None:
        self.format_checker = format_checker
        self.recipes: dict[str, Recipe] = {}  # each constant's name: what makes it
        self.functions: list[str] = []
        self.counter = 0

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def constant(self, value: Any, kind: str = "value") -> str:
        """A name for a constant, made by ``_made(kind, value, ...)``: the check itself is
        made from the recipes, on its first compile as from the cache."""
        if kind == "pattern":
            compile_pattern(value)  # a pattern RE2 refuses leaves the schema uncompiled
        name = self.name("_k")
        self.recipes[name] = (kind, value)
        return name

    def function(self, schema: Any) -> str:
        """Define a function for ``schema``; return its name."""
        if schema is True:
            return "_always"
        if schema is False:
            return "_never"
        name = self.name("_schema")
        body = list(self.statements(schema, "value", 1))
        self.functions.append("\n".join([f"def {name}(value):", *body, "    return True", ""]))
        return name

    def child(self, schema: Any, var: str, depth: int) -> list[str]:
        """Statements checking ``var`` against a subschema whose failure fails its parent:
        inlined, or a call once the parent's code is nested deep (Python bounds a function's
        nested loops); none when the subschema accepts everything."""
        if isinstance(schema, dict) and (
                depth <= _INLINED_DEPTH or not APPLICATORS.intersection(schema)):
            return list(self.statements(schema, var, depth))
        if schema is True:
            return []
        return [self.fail(f"not {self.function(schema)}({var})", depth)]

    @staticmethod
    def block(header: str, body: list[str]) -> list[str]:
        """``header`` over ``body``, or nothing at all when there is nothing to check."""
        return [header, *body] if body else []

    @staticmethod
    def fail(condition: str, depth: int) -> str:
        return f"{'    ' * depth}if {condition}: return False"

    def statements(self, schema: Any, var: str, depth: int) -> Iterator[str]:
        """Statements that return False when ``var`` is not valid under ``schema``."""
        pad = "    " * depth
        if schema is True:
            return
        if schema is False:
            yield f"{pad}return False"
            return
        if not isinstance(schema, dict):
            raise _Unsupported("a schema is an object or a boolean")
        if UNSUPPORTED.intersection(schema):
            raise _Unsupported("keyword not compiled")
        kinds = _types(schema.get("type"))
        # An enum of strings passes strings only: a ``type`` naming "string" adds no test.
        implied = False
        if "enum" in schema:
            yield self.fail(self.enum_fails(schema["enum"], var), depth)
            implied = (kinds is not None and "string" in kinds and
                all(isinstance(member, str) for member in schema["enum"]))
        if "const" in schema:
            constant = schema["const"]
            test = (f"{var} == {self.constant(constant)}" if isinstance(constant, str)
                else f"_json_equal({var}, {self.constant(constant)})")
            yield self.fail(f"not ({test})", depth)
        groups = {
            "string": list(self.string_checks(schema, var, depth + 1)),
            "number": list(self.number_checks(schema, var, depth + 1)),
            "object": list(self.object_checks(schema, var, depth + 1)),
            "array": list(self.array_checks(schema, var, depth + 1)),
        }
        # When ``type`` names one type, the type test guards its group with no extra test.
        single = kinds[0] if kinds is not None and len(kinds) == 1 else None
        if kinds is not None and not implied:
            tests = " or ".join(TYPE_TESTS[kind].format(var) for kind in kinds)
            yield self.fail(f"not ({tests})", depth)
        for kind, lines in groups.items():
            if not lines:
                continue
            if kind == single:
                yield from (line[4:] for line in lines)  # one level up: no guard needed
            elif (kinds is not None and kind not in kinds and
                    not (kind == "number" and "integer" in kinds)):
                continue  # the type test already failed any value of this kind
            else:
                yield f"{pad}if {TYPE_TESTS[kind].format(var)}:"
                yield from lines
        if "format" in schema and self.format_checker is not None:
            checker = self.format_check(schema["format"])
            if checker is not None:
                yield self.fail(f"not {checker}({var})", depth)
        yield from self.combinators(schema, var, depth)

    # -- enum, const, format

    def enum_fails(self, members: Any, var: str) -> str:
        if not isinstance(members, list):
            raise _Unsupported("enum is a list")
        if all(isinstance(member, str) for member in members):
            # equal() of a string with anything is ==, so a set lookup gives its verdict.
            strings = self.constant(frozenset(members))
            return f"not ({TYPE_TESTS['string'].format(var)} and {var} in {strings})"
        options = self.constant(tuple(members))
        return f"not any(_json_equal(option, {var}) for option in {options})"

    def format_check(self, name: Any) -> str | None:
        assert self.format_checker is not None
        if not isinstance(name, str) or name not in self.format_checker.checkers:
            return None  # jsonschema lets an unknown format pass
        return self.constant(name, "format")

    # -- one group per type; ``var`` is known to be of that type

    def string_checks(self, schema: Mapping[str, Any], var: str, depth: int) -> Iterator[str]:
        if "pattern" in schema:
            find = self.constant(_str(schema["pattern"]), "pattern")
            yield self.fail(f"not {find}({var})", depth)
        if "minLength" in schema:
            yield self.fail(f"len({var}) < {self.number(schema['minLength'])}", depth)
        if "maxLength" in schema:
            yield self.fail(f"len({var}) > {self.number(schema['maxLength'])}", depth)

    def number_checks(self, schema: Mapping[str, Any], var: str, depth: int) -> Iterator[str]:
        for keyword, failure in (("minimum", "<"), ("maximum", ">"),
                                 ("exclusiveMinimum", "<="), ("exclusiveMaximum", ">=")):
            if keyword in schema:
                yield self.fail(f"{var} {failure} {self.number(schema[keyword])}", depth)
        if "multipleOf" in schema:
            multiple = self.constant(_number(schema["multipleOf"]), "multiple")
            yield self.fail(f"not {multiple}({var})", depth)

    def object_checks(self, schema: Mapping[str, Any], var: str, depth: int) -> Iterator[str]:
        pad = "    " * depth
        required = [_str(name) for name in _list(schema.get("required", []))]
        if required:
            yield self.fail(" or ".join(f"{name!r} not in {var}" for name in required), depth)
        if "minProperties" in schema:
            yield self.fail(f"len({var}) < {self.number(schema['minProperties'])}", depth)
        if "maxProperties" in schema:
            yield self.fail(f"len({var}) > {self.number(schema['maxProperties'])}", depth)
        # How many declared properties the object has: those required, and one term for each
        # other one (whether it is there)
        there: list[str] = []
        for name, subschema in _dict(schema.get("properties", {})).items():
            item = self.name("item")
            if name in required:  # known to be there: the check above returned otherwise
                body = self.child(subschema, item, depth)
                yield from self.block(f"{pad}{item} = {var}[{_str(name)!r}]", body)
            else:
                # ``in`` and ``[]``: cheaper than ``get`` when it is there, much when not
                there.append(f"({_str(name)!r} in {var})")
                body = self.child(subschema, item, depth + 1)
                yield from self.block(f"{pad}if {name!r} in {var}:", [
                    f"{pad}    {item} = {var}[{name!r}]", *body] if body else [])
        patterns = _dict(schema.get("patternProperties", {}))
        if patterns:
            key, item = self.name("key"), self.name("item")
            matching: list[str] = []
            for pattern, subschema in patterns.items():
                find = self.constant(_str(pattern), "pattern")
                matching += self.block(f"{pad}    if {find}({key}):",
                                       self.child(subschema, item, depth + 2))
            yield from self.block(f"{pad}for {key}, {item} in {var}.items():", matching)
        if "additionalProperties" in schema:
            declared = len(set(required).intersection(schema.get("properties", {})))
            yield from self.additional(schema, var, depth, [str(declared), *there])
        if "propertyNames" in schema:
            key = self.name("key")
            yield from self.block(f"{pad}for {key} in {var}:",
                                  self.child(schema["propertyNames"], key, depth + 1))
        for name, needed in _dict(schema.get("dependentRequired", {})).items():
            missing = " or ".join(f"{_str(each)!r} not in {var}" for each in _list(needed))
            if missing:
                yield self.fail(f"{_str(name)!r} in {var} and ({missing})", depth)
        for name, subschema in _dict(schema.get("dependentSchemas", {})).items():
            yield from self.block(f"{pad}if {_str(name)!r} in {var}:",
                                  self.child(subschema, var, depth + 1))

    def additional(self, schema: Mapping[str, Any], var: str, depth: int,
                   declared_there: list[str]) -> Iterator[str]:
        """``declared_there``: terms whose sum is how many declared properties ``var`` has."""
        extra = schema["additionalProperties"]
        if extra is True:
            return
        pad = "    " * depth
        patterns = _dict(schema.get("patternProperties", {}))
        if extra is False and not patterns:
            # No other property: as many properties as declared ones there (cheaper than
            # comparing the keys with the declared names)
            yield self.fail(f"len({var}) != {' + '.join(declared_there)}", depth)
            return
        declared = self.constant(frozenset(_dict(schema.get("properties", {}))))
        key, item = self.name("key"), self.name("item")
        matched = "".join(f" or {self.constant(_str(pattern), 'pattern')}({key})"
                          for pattern in patterns)
        body = self.child(extra, item, depth + 2)
        if body:
            yield f"{pad}for {key}, {item} in {var}.items():"
            yield f"{pad}    if not ({key} in {declared}{matched}):"
            yield from body

    def array_checks(self, schema: Mapping[str, Any], var: str, depth: int) -> Iterator[str]:
        pad = "    " * depth
        if "minItems" in schema:
            yield self.fail(f"len({var}) < {self.number(schema['minItems'])}", depth)
        if "maxItems" in schema:
            yield self.fail(f"len({var}) > {self.number(schema['maxItems'])}", depth)
        prefix = _list(schema.get("prefixItems", []))
        for index, subschema in enumerate(prefix):
            item = self.name("item")
            body = self.child(subschema, item, depth + 1)
            if body:
                yield f"{pad}if len({var}) > {index}:"
                yield f"{pad}    {item} = {var}[{index}]"
                yield from body
        if "items" in schema:
            item = self.name("item")
            rest = f"{var}[{len(prefix)}:]" if prefix else var
            yield from self.block(f"{pad}for {item} in {rest}:",
                                  self.child(schema["items"], item, depth + 1))
        if "contains" in schema:
            matches = self.function(schema["contains"])
            count, item = self.name("count"), self.name("item")
            yield f"{pad}{count} = 0"
            yield f"{pad}for {item} in {var}:"
            yield f"{pad}    if {matches}({item}):"
            yield f"{pad}        {count} += 1"
            if "maxContains" in schema:  # like jsonschema, stop at the first match too many
                yield self.fail(f"{count} > {self.number(schema['maxContains'])}", depth + 2)
            yield self.fail(f"{count} < {self.number(schema.get('minContains', 1))}", depth)

    # -- combinators

    def combinators(self, schema: Mapping[str, Any], var: str, depth: int) -> Iterator[str]:
        pad = "    " * depth
        for subschema in _list(schema.get("allOf", [])):
            yield from self.child(subschema, var, depth)
        if "anyOf" in schema:
            options = [self.function(each) for each in _list(schema["anyOf"])]
            yield self.fail(f"not ({' or '.join(f'{each}({var})' for each in options)})",
                            depth)
        if "oneOf" in schema:
            # The functions return True or False, so their sum counts the valid ones.
            options = [self.function(each) for each in _list(schema["oneOf"])]
            yield self.fail(f"({' + '.join(f'{each}({var})' for each in options)}) != 1",
                            depth)
        if "not" in schema:
            yield self.fail(f"{self.function(schema['not'])}({var})", depth)
        if "if" in schema:
            yield f"{pad}if {self.function(schema['if'])}({var}):"
            yield f"{pad}    pass"
            yield from self.child(schema.get("then", True), var, depth + 1)
            yield f"{pad}else:"
            yield f"{pad}    pass"
            yield from self.child(schema.get("else", True), var, depth + 1)

    def number(self, value: Any) -> str:
        return self.constant(_number(value))


# Shapes a valid schema has; anything else is left to jsonschema ------------------------------


def _types(declared: Any) -> tuple[str, ...] | None:
    if declared is None:
        return None
    kinds = (declared,) if isinstance(declared, str) else tuple(_list(declared))
    if not kinds or any(kind not in TYPE_TESTS for kind in kinds):
        raise _Unsupported("unknown type")
    return kinds


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise _Unsupported("expected a string")
    return value


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _Unsupported("expected an array")
    return value


def _dict(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Unsupported("expected an object")
    return value


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise _Unsupported("expected a number")
    return value
