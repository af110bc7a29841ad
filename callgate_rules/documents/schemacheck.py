"""A JSON Schema compiled once into a plain predicate: is this instance valid, yes or no.

``jsonschema`` builds a validation error, evolves a validator and resolves a resource for
every keyword of every subschema it visits, which made it the most expensive step of a
decision although nearly every call is valid. On the hot path the gate only needs the
verdict; the detailed error is asked of ``jsonschema`` afterwards, and only when this
predicate says "invalid". So ``jsonschema`` stays the source of truth for the messages, and
this module must give exactly its verdicts — ``tests/test_schemacheck.py`` checks that
differentially. That ``jsonschema`` is ``GateValidator``, defined here: Draft 2020-12 with the
gate's format checker, whose ``pattern``, ``patternProperties`` and ``additionalProperties``
match with RE2 semantics in time linear in the text (``callgate_rules.regex``), not with
Python's backtracking ``re``; the compiled predicate searches with the same patterns.

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

How: the schema becomes Python source, one function per subschema that has subschemas of
its own, with the checks of leaf subschemas (a string with a pattern, a bounded number)
inlined into their parent; every failed check is a ``return False``. Values from the schema
enter the source only as names bound in the function's namespace, or, for property names,
as ``repr`` string literals.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend

from callgate_rules.cache import compiled
from callgate_rules.regex import PatternError, compile_pattern

Check = Callable[[Any], bool]

# Validating keywords of Draft 2020-12 this module does not compile. A keyword jsonschema
# does not validate is an annotation for both.
UNSUPPORTED = frozenset({
    "$ref", "$dynamicRef", "uniqueItems", "unevaluatedItems", "unevaluatedProperties",
})
# Keywords holding subschemas: a schema without any is a leaf, inlined into its parent.
APPLICATORS = frozenset({
    "properties", "patternProperties", "additionalProperties", "propertyNames",
    "dependentSchemas", "items", "prefixItems", "contains", "allOf", "anyOf", "oneOf", "not",
    "if",
})


class _Unsupported(Exception):
    """The schema needs something this module does not compile."""


# The validator whose verdicts these are: Draft 2020-12 with RE2 patterns -----------------------


# A keyword's function gets the validator itself (jsonschema's protocol does not declare the
# ``descend`` it calls), hence ``Any``.
def _pattern(validator: Any, pattern: str, instance: Any,
             schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not compile_pattern(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Mapping[str, Any], instance: Any,
                        schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        search = compile_pattern(pattern).search
        for key, value in instance.items():
            if search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any,
                           schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    """jsonschema's keyword, but a property is additional when it is not declared and no
    pattern of ``patternProperties`` matches it (jsonschema joins the patterns into one
    alternation for Python's ``re``, which a flag such as ``(?i)`` would change)."""
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    searches = [compile_pattern(each).search for each in schema.get("patternProperties", {})]
    extras = {key for key in instance
              if key not in declared and not any(search(key) for search in searches)}
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            names = sorted(extras, key=str)
            verb = "was" if len(names) == 1 else "were"
            yield ValidationError("Additional properties are not allowed "
                                  f"({', '.join(repr(name) for name in names)} {verb} "
                                  "unexpected)")


# ``extend`` makes a class of the same make as Draft202012Validator (not a subclass of it).
GateValidator: type[Draft202012Validator] = extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, validators={
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    })
GateValidator.__name__ = GateValidator.__qualname__ = "GateValidator"


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
    try:
        return _Generator(format_checker).compile(schema)
    except (_Unsupported, PatternError, RecursionError, SyntaxError):
        return None


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


_MISSING = object()

# Each type as Draft 2020-12's type checker defines it, as an expression over ``{}``.
TYPE_TESTS: Mapping[str, str] = {
    "array": "isinstance({}, list)",
    "boolean": "isinstance({}, bool)",
    "integer": "_is_integer({})",
    "null": "{} is None",
    "number": "(isinstance({0}, _Number) and not isinstance({0}, bool))",
    "object": "isinstance({}, dict)",
    "string": "isinstance({}, str)",
}


# The generator ----------------------------------------------------------------------------------


class _Generator:
    def __init__(self, format_checker: FormatChecker | None) -> None:
        self.format_checker = format_checker
        self.namespace: dict[str, Any] = {
            "_MISSING": _MISSING, "_Number": numbers.Number, "_is_integer": is_integer,
            "_json_equal": json_equal, "_always": _always, "_never": _never,
        }
        self.functions: list[str] = []
        self.counter = 0

    def compile(self, schema: Any) -> Check:
        root = self.function(schema)
        source = "\n".join(self.functions)
        exec(compiled(source, "<schemacheck>"), self.namespace)  # compile(), from the cache
        check: Check = self.namespace[root]
        return check

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def constant(self, value: Any) -> str:
        name = self.name("_k")
        self.namespace[name] = value
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
        """Statements checking ``var`` against a subschema: inlined for a leaf, else a call;
        none when the subschema accepts everything."""
        if isinstance(schema, dict) and not APPLICATORS.intersection(schema):
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
        if "enum" in schema:
            yield self.fail(self.enum_fails(schema["enum"], var), depth)
        if "const" in schema:
            constant = schema["const"]
            test = f"{var} == {self.constant(constant)}" if isinstance(constant, str) \
                else f"_json_equal({var}, {self.constant(constant)})"
            yield self.fail(f"not ({test})", depth)
        groups = {
            "string": list(self.string_checks(schema, var, depth + 1)),
            "number": list(self.number_checks(schema, var, depth + 1)),
            "object": list(self.object_checks(schema, var, depth + 1)),
            "array": list(self.array_checks(schema, var, depth + 1)),
        }
        # When ``type`` names one type, the type test guards its group with no extra test.
        single = kinds[0] if kinds is not None and len(kinds) == 1 else None
        if kinds is not None:
            tests = " or ".join(TYPE_TESTS[kind].format(var) for kind in kinds)
            yield self.fail(f"not ({tests})", depth)
        for kind, lines in groups.items():
            if not lines:
                continue
            if kind == single:
                yield from (line[4:] for line in lines)  # one level up: no guard needed
            elif kinds is not None and kind not in kinds and \
                    not (kind == "number" and "integer" in kinds):
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
            return f"not (isinstance({var}, str) and {var} in {strings})"
        options = self.constant(tuple(members))
        return f"not any(_json_equal(option, {var}) for option in {options})"

    def format_check(self, name: Any) -> str | None:
        assert self.format_checker is not None
        if not isinstance(name, str) or name not in self.format_checker.checkers:
            return None  # jsonschema lets an unknown format pass
        conforms, raises = self.format_checker.checkers[name]
        return self.constant(_format(conforms, raises))

    # -- one group per type; ``var`` is known to be of that type

    def string_checks(self, schema: Mapping[str, Any], var: str, depth: int) -> Iterator[str]:
        if "pattern" in schema:
            find = self.constant(compile_pattern(_str(schema["pattern"])).find)
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
            multiple = self.constant(_multiple_of(_number(schema["multipleOf"])))
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
        for name, subschema in _dict(schema.get("properties", {})).items():
            item = self.name("item")
            if name in required:  # known to be there: the check above returned otherwise
                body = self.child(subschema, item, depth)
                yield from self.block(f"{pad}{item} = {var}[{_str(name)!r}]", body)
            else:
                body = self.child(subschema, item, depth + 1)
                if body:
                    yield f"{pad}{item} = {var}.get({_str(name)!r}, _MISSING)"
                    yield f"{pad}if {item} is not _MISSING:"
                    yield from body
        patterns = _dict(schema.get("patternProperties", {}))
        if patterns:
            key, item = self.name("key"), self.name("item")
            matching: list[str] = []
            for pattern, subschema in patterns.items():
                find = self.constant(compile_pattern(_str(pattern)).find)
                matching += self.block(f"{pad}    if {find}({key}):",
                                       self.child(subschema, item, depth + 2))
            yield from self.block(f"{pad}for {key}, {item} in {var}.items():", matching)
        if "additionalProperties" in schema:
            yield from self.additional(schema, var, depth)
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

    def additional(self, schema: Mapping[str, Any], var: str, depth: int) -> Iterator[str]:
        extra = schema["additionalProperties"]
        if extra is True:
            return
        pad = "    " * depth
        declared = self.constant(frozenset(_dict(schema.get("properties", {}))))
        patterns = _dict(schema.get("patternProperties", {}))
        if extra is False and not patterns:
            yield self.fail(f"not {var}.keys() <= {declared}", depth)
            return
        key, item = self.name("key"), self.name("item")
        matched = "".join(f" or {self.constant(compile_pattern(_str(pattern)).find)}({key})"
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
