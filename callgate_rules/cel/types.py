"""CEL types as values, for the type checker behind ``callgate lint`` (``cel.checker``).

A ``Type`` is a CEL type: ``int``, ``uint``, ``double``, ``bool``, ``string``, ``bytes``,
``null_type``, ``timestamp``, ``duration``, ``type``, ``dyn``, ``list(T)``, ``map(K, V)``,
``optional_type(T)``, a type parameter (``A``, ``K``...) while an overload is matched, an
opaque type a library defines (``url``), and ``object``: a JSON object whose fields a JSON
Schema declares (``Shape``). At run time an object is a ``map(string, dyn)``; the shape is
what lint knows about it, so ``args.amout`` can be named as a typo.

``from_schema`` reads JSON Schema as the documents write it (``type`` and type unions,
``properties``, ``required``, ``additionalProperties``, ``enum``/``const``, ``nullable``):
``integer`` is ``int`` and ``number`` is ``double``. Whatever it cannot read exactly
(``$ref``, ``anyOf``, a union of several types) is ``dyn``: the checker never reports an
error about a shape it does not know.

``parse`` reads the library's type strings (``list(T)``, ``map(string, dyn)``); ``unify``
matches an overload's parameter against an argument's type, binding type parameters;
``substitute`` puts the bindings into the result type.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from callgate_rules.cel.values import UInt

PRIMITIVES = ("int", "uint", "double", "bool", "string", "bytes", "null_type", "timestamp",
              "duration", "type", "dyn")
NUMERIC = frozenset({"int", "uint", "double"})
# the kinds whose values are plain scalars: comparing one with null can never be true
SCALARS = frozenset({"int", "uint", "double", "bool", "string", "bytes", "timestamp",
                     "duration"})


@dataclass(frozen=True, slots=True)
class Field:
    """One declared field of an object: its type and what its schema says of its values."""

    type: Type
    required: bool = False
    nullable: bool = False
    values: tuple[Any, ...] | None = None  # enum/const: the only values it can hold


@dataclass(frozen=True, slots=True)
class Shape:
    """What a JSON Schema declares of an object: its fields, and whether others may be there.

    ``declared``: the schema lists ``properties``, so a field it does not list is a typo or
    an undeclared field; ``closed``: it also sets ``additionalProperties: false``; ``rest``:
    the type of the fields it does not list (``additionalProperties`` as a schema)."""

    fields: tuple[tuple[str, Field], ...] = ()
    declared: bool = False
    closed: bool = False
    patterns: bool = False  # patternProperties: other names may be declared by pattern
    rest: Type | None = None

    def field(self, name: str) -> Field | None:
        for known, found in self.fields:
            if known == name:
                return found
        return None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(name for name, _ in self.fields))

    @property
    def checks_names(self) -> bool:
        """Whether a name not among ``fields`` is known not to be a field."""
        return self.declared and not self.patterns and self.rest is None


@dataclass(frozen=True, slots=True)
class Type:
    """A CEL type; ``kind`` is its name (``list``, ``map``, ``object``, ``param``...)."""

    kind: str
    parameters: tuple[Type, ...] = ()
    name: str = ""  # a type parameter's name
    shape: Shape | None = None  # for kind "object"

    def __str__(self) -> str:
        if self.kind == "param":
            return self.name
        if self.kind == "object":
            return "map(string, dyn)"
        if self.parameters:
            inner = ", ".join(str(parameter) for parameter in self.parameters)
            return f"{self.kind}({inner})"
        return self.kind

    @property
    def is_dyn(self) -> bool:
        return self.kind in ("dyn", "param")

    @property
    def is_numeric(self) -> bool:
        return self.kind in NUMERIC


DYN = Type("dyn")
INT = Type("int")
UINT = Type("uint")
DOUBLE = Type("double")
BOOL = Type("bool")
STRING = Type("string")
BYTES = Type("bytes")
NULL = Type("null_type")
TIMESTAMP = Type("timestamp")
DURATION = Type("duration")
TYPE = Type("type")


def list_of(element: Type) -> Type:
    return Type("list", (element,))


def map_of(key: Type, value: Type) -> Type:
    return Type("map", (key, value))


def optional_of(value: Type) -> Type:
    return Type("optional_type", (value,))


def object_of(shape: Shape) -> Type:
    return Type("object", shape=shape)


OPEN_OBJECT = object_of(Shape())


def describe(type_: Type) -> str:
    """The type as a sentence says it: ``an integer``, ``a list of strings``."""
    kind = type_.kind
    words = {"int": "an integer", "uint": "an unsigned integer",
             "double": "a double (a JSON number)", "bool": "a bool", "string": "a string",
             "bytes": "bytes", "null_type": "null", "timestamp": "a timestamp",
             "duration": "a duration", "type": "a type", "object": "an object",
             "dyn": "of any type", "param": "of any type"}
    if kind in words:
        return words[kind]
    if kind == "list":
        return f"a list of {plural(type_.parameters[0])}"
    if kind == "map":
        return f"a map from {plural(type_.parameters[0])} to {plural(type_.parameters[1])}"
    if kind == "optional_type":
        return f"an optional {type_.parameters[0]}"
    return f"a {kind}"


def plural(type_: Type) -> str:
    words = {"int": "integers", "uint": "unsigned integers", "double": "doubles",
              "bool": "bools", "string": "strings", "bytes": "bytes", "object": "objects",
              "timestamp": "timestamps", "duration": "durations", "dyn": "values",
              "param": "values", "null_type": "nulls", "type": "types"}
    return words.get(type_.kind, str(type_))


# Literals and JSON Schema ----------------------------------------------------------------------


def of_value(value: Any) -> Type:
    """The type of a literal in the runtime representation (``cel.values``)."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, UInt):
        return UINT
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, str):
        return STRING
    if isinstance(value, bytes):
        return BYTES
    if value is None:
        return NULL
    return DYN


_JSON_TYPES: Mapping[str, Type] = {
    "string": STRING, "integer": INT, "number": DOUBLE, "boolean": BOOL, "null": NULL,
}


def from_schema(schema: Any) -> Type:
    """The CEL type of the values ``schema`` (JSON Schema) admits; ``dyn`` where unsure."""
    return field_of(schema, required=True).type


def field_of(schema: Any, *, required: bool) -> Field:
    """``schema`` as a field: its type, whether it may be null, the values it is held to."""
    if not isinstance(schema, Mapping):
        return Field(DYN, required, nullable=True)
    nullable = schema.get("nullable") is True
    values: tuple[Any, ...] | None = None
    if "const" in schema:
        values = (schema["const"],)
    elif isinstance(schema.get("enum"), list):
        values = tuple(schema["enum"])
    declared = schema.get("type")
    names = ([declared] if isinstance(declared, str) else
        list(declared) if isinstance(declared, list) else [])
    if "null" in names and len(names) > 1:
        nullable = True
        names.remove("null")
    if values is not None:
        if None in values:
            nullable = True
        if not names:
            kinds = {_json_kind(value) for value in values if value is not None}
            names = list(kinds) if len(kinds) == 1 else []
    if any(key in schema for key in ("$ref", "anyOf", "oneOf", "allOf", "not", "if")):
        return Field(DYN, required, nullable=True, values=values)
    if len(names) != 1:
        if not names and ("properties" in schema or "additionalProperties" in schema):
            names = ["object"]
        elif not names and "items" in schema:
            names = ["array"]
        else:
            return Field(DYN, required, nullable=nullable or not names, values=values)
    name = names[0]
    if name == "object":
        return Field(_object_type(schema), required, nullable, values)
    if name == "array":
        items = schema.get("items")
        element = from_schema(items) if isinstance(items, Mapping) else DYN
        return Field(list_of(element), required, nullable, values)
    return Field(_JSON_TYPES.get(name, DYN), required, nullable, values)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, Mapping) else "unknown"


def _object_type(schema: Mapping[str, Any]) -> Type:
    properties = schema.get("properties")
    required = schema.get("required", [])
    required_names = set(required) if isinstance(required, list) else set()
    fields = tuple(
        (name, field_of(sub, required=name in required_names))
        for name, sub in sorted(properties.items())
    ) if isinstance(properties, Mapping) else ()
    additional = schema.get("additionalProperties", True)
    rest = from_schema(additional) if isinstance(additional, Mapping) else None
    if not isinstance(properties, Mapping) and rest is not None:
        return map_of(STRING, rest)
    return object_of(Shape(
        fields=fields,
        declared=isinstance(properties, Mapping),
        closed=additional is False,
        patterns="patternProperties" in schema,
        rest=rest,
    ))


# The library's type strings --------------------------------------------------------------------


class TypeSyntaxError(ValueError):
    """A signature's type string does not read as a type."""


@lru_cache(maxsize=1024)
def parse(text: str) -> Type:
    """``list(map(string, V))`` → the type; single capital letters are type parameters.
    Cached: the library's few hundred signature strings are read on every call checked."""
    parsed, rest = _parse(text.replace(" ", ""))
    if rest:
        raise TypeSyntaxError(f"unexpected {rest!r} in type {text!r}")
    return parsed


def _parse(text: str) -> tuple[Type, str]:
    name_end = 0
    while name_end < len(text) and (text[name_end].isalnum() or text[name_end] in "_."):
        name_end += 1
    name, rest = text[:name_end], text[name_end:]
    if not name:
        raise TypeSyntaxError(f"a type name is missing at {text!r}")
    parameters: list[Type] = []
    if rest.startswith("("):
        rest = rest[1:]
        while True:
            parameter, rest = _parse(rest)
            parameters.append(parameter)
            if rest.startswith(","):
                rest = rest[1:]
                continue
            if not rest.startswith(")"):
                raise TypeSyntaxError(f"')' is missing in type {text!r}")
            rest = rest[1:]
            break
    if len(name) == 1 and name.isupper():
        return Type("param", name=name), rest
    if name == "null":
        name = "null_type"
    if name == "optional":
        name = "optional_type"
    return Type(name, tuple(parameters)), rest


# Matching overloads ----------------------------------------------------------------------------


def unify(parameter: Type, argument: Type, bindings: MutableMapping[str, Type]) -> bool:
    """Whether a value of type ``argument`` may be passed as ``parameter``; binds the type
    parameters of ``parameter`` in ``bindings``. ``dyn`` matches anything. A type parameter
    bound twice to different types widens to ``dyn`` rather than failing: the checker
    reports only what certainly fails at run time."""
    if parameter.kind == "param":
        bound = bindings.get(parameter.name)
        if bound is None:
            bindings[parameter.name] = argument
        elif bound != argument and not unify(bound, argument, {}):
            bindings[parameter.name] = DYN
        return True
    if parameter.kind == "dyn" or argument.is_dyn:
        _bind_all(parameter, bindings)
        return True
    if argument.kind == "object":
        if parameter.kind == "object":
            return True
        if parameter.kind != "map":
            return False
        return (unify(parameter.parameters[0], STRING, bindings)
                and unify(parameter.parameters[1], _object_values(argument), bindings))
    if parameter.kind != argument.kind or len(parameter.parameters) != len(
            argument.parameters):
        return False
    return all(unify(p, a, bindings) for p, a in zip(parameter.parameters, argument.parameters,
                                                   strict=True))


def _bind_all(parameter: Type, bindings: MutableMapping[str, Type]) -> None:
    """Bind every unbound type parameter in ``parameter`` to ``dyn``."""
    if parameter.kind == "param":
        bindings.setdefault(parameter.name, DYN)
    for inner in parameter.parameters:
        _bind_all(inner, bindings)


def _object_values(type_: Type) -> Type:
    """The value type of an object seen as a map: one type if all its fields share it."""
    shape = type_.shape
    if shape is None or not shape.fields or not shape.checks_names:
        return DYN
    kinds = {found.type for _, found in shape.fields}
    return kinds.pop() if len(kinds) == 1 else DYN


def substitute(type_: Type, bindings: Mapping[str, Type]) -> Type:
    """``type_`` with its type parameters replaced by their bindings (``dyn`` if unbound)."""
    if type_.kind == "param":
        return bindings.get(type_.name, DYN)
    if not type_.parameters:
        return type_
    return Type(type_.kind, tuple(substitute(p, bindings) for p in type_.parameters))


def join(types: list[Type]) -> Type:
    """The one type of several values (list elements, the branches of ``?:``); ``dyn`` if
    they differ."""
    if not types:
        return DYN
    first = types[0]
    if all(other == first for other in types[1:]):
        return first
    if all(other.kind == "object" for other in types):
        return OPEN_OBJECT
    return DYN


def may_equal(left: Type, right: Type) -> bool:
    """Whether a value of ``left`` can ever be equal to one of ``right`` under CEL's
    equality (numbers compare by value across int, uint and double)."""
    if left.is_dyn or right.is_dyn:
        return True
    if left.is_numeric and right.is_numeric:
        return True
    maps = ("map", "object")
    if left.kind in maps and right.kind in maps:
        return True
    if left.kind != right.kind:
        return False
    if left.kind in ("list", "optional_type"):
        return may_equal(left.parameters[0], right.parameters[0])
    if left.kind == "map":
        return all(may_equal(a, b) for a, b in zip(left.parameters, right.parameters,
                                                   strict=True))
    return True
