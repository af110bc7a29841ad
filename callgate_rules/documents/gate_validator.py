"""The ``jsonschema`` validator whose verdicts ``schemacheck`` compiles: Draft 2020-12 with the
gate's ``pattern``, ``patternProperties`` and ``additionalProperties``, which match with RE2
semantics in time linear in the text (``callgate_rules.regex``), not with Python's
backtracking ``re``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema.validators import extend

from callgate_rules.regex import compile_pattern

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
