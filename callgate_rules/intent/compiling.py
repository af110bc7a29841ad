"""Reading a run's intent: from YAML text, a mapping, or a ``RunIntent`` already made, into
a ``RunIntent`` checked against the configuration it bounds.

An intent is written by a planner model, a form or a person, at run time: its errors are
said as the documents' are — the field (``tools.send_money.arguments.amount.maximum``),
with the line and column when it came as YAML — what is wrong and how to fix it, all of
them at once (``IntentError.problems``), never a traceback. Checked beyond its schema:

- every tool is one of the configuration's, every bounded argument one its contract
  declares, and a total's argument too (a number, never a masked one: the history keeps
  masked values masked, and a sum over them would be a guess);
- each ``when`` is CEL that reads only ``args``, and compiles;
- each argument ``schema`` is a valid JSON Schema whose patterns match in linear time;
- a range is not empty (``minimum`` above ``maximum``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from callgate_rules.cel.errors import CelSyntaxError
from callgate_rules.cel.expression import compile_expression
from callgate_rules.documents.contract_compiler import names_an_argument, touches_mask
from callgate_rules.documents.findings import dotted, schema_error_messages
from callgate_rules.documents.model import Contract, GateConfig
from callgate_rules.documents.source import NodePath, SourceDocument, parse_yaml_text
from callgate_rules.documents.validators import (
    argument_validator,
    check_json_schema,
    document_schema,
    refused_patterns,
)
from callgate_rules.errors import CallgateError, InputError
from callgate_rules.intent.model import (
    NOT_GIVEN,
    ArgumentBound,
    Condition,
    RunIntent,
    ToolBound,
    Total,
)

KIND = "RunIntent"
API_VERSION = "callgate/v1"
# Bounds on what is read: an intent is small; a planner's runaway output is refused whole.
MAX_INTENT_BYTES = 256 * 1024


class IntentError(CallgateError):
    """An intent that cannot be used, with every problem in ``problems`` (each names the
    field, and the line when the intent came as YAML)."""

    def __init__(self, problems: list[str],
                 heading: str = "the run intent is not valid") -> None:
        self.problems = problems
        super().__init__(f"{heading}:\n  " + "\n  ".join(problems))


IntentSource = RunIntent | Mapping[str, Any] | str


def compile_intent(written: IntentSource, config: GateConfig, *,
                   name: str = "intent") -> RunIntent:
    """``written`` as a ``RunIntent`` checked against ``config``; ``IntentError`` names each
    problem. ``written`` is YAML or JSON text (``name`` is the file it came from, for the
    places), a mapping (the whole ``RunIntent`` document or its ``spec``), or an intent
    already made (checked again, against this configuration)."""
    if isinstance(written, RunIntent):
        written = written.as_data()
    source = _source(written, name)
    spec, base = _spec(source)
    problems = _Problems(source, base)
    for path, message in _schema_problems(spec):
        problems.add(path, message)
    for path in _not_finite(spec, ()):
        problems.add(path, "not a finite number (NaN and infinities bound nothing)")
    problems.raise_any()
    intent = _Reader(config, problems).intent(spec)
    problems.raise_any()
    return intent


# Where the intent came from, and where its spec is ----------------------------------------


def _source(written: Mapping[str, Any] | str, name: str) -> SourceDocument:
    if isinstance(written, str):
        if len(written.encode("utf-8", "surrogatepass")) > MAX_INTENT_BYTES:
            raise IntentError([f"{name}: larger than {MAX_INTENT_BYTES:,} bytes"])
        try:
            documents = parse_yaml_text(written, name)
        except InputError as error:
            raise IntentError([str(error)]) from None
        if len(documents) != 1:
            raise IntentError([f"{name}: one intent per text, found {len(documents)}"])
        return documents[0]
    if not isinstance(written, Mapping):
        raise IntentError([f"{name}: an intent is a mapping (tools, totals, request), not "
                           f"{type(written).__name__}"])
    return SourceDocument(name, written, {})


def _spec(source: SourceDocument) -> tuple[Any, NodePath]:
    data = source.data
    if not isinstance(data, Mapping):
        raise IntentError([f"{source.locate(())}: an intent is a mapping with `tools`"])
    if "kind" not in data and "apiVersion" not in data:
        return data, ()
    wrong = [f"{source.locate((key,))}: {key} must be {want!r}"
             for key, want in (("apiVersion", API_VERSION), ("kind", KIND))
             if data.get(key) != want]
    unknown = sorted(set(data) - {"apiVersion", "kind", "metadata", "spec"})
    wrong += [f"{source.locate((key,))}: unknown field {key!r}; a RunIntent document has "
              "apiVersion, kind, metadata and spec" for key in unknown]
    if "spec" not in data:
        wrong.append(f"{source.locate(())}: a RunIntent document needs a spec")
    if wrong:
        raise IntentError(wrong)
    return data["spec"], ("spec",)


def _not_finite(value: Any, path: NodePath) -> Iterator[NodePath]:
    """Where ``value`` holds NaN or an infinity (YAML's ``.nan``, JSON's ``NaN``)."""
    if isinstance(value, float) and not math.isfinite(value):
        yield path
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _not_finite(item, (*path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _not_finite(item, (*path, index))


def _references(schema: Any, path: NodePath) -> Iterator[NodePath]:
    """Where an argument's schema refers elsewhere: an intent's schema stands alone."""
    if isinstance(schema, Mapping):
        for key, item in schema.items():
            if key in ("$ref", "$dynamicRef", "$recursiveRef"):
                yield (*path, str(key))
            else:
                yield from _references(item, (*path, str(key)))
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            yield from _references(item, (*path, index))


def _schema_problems(spec: Any) -> Iterator[tuple[NodePath, str]]:
    for error in document_schema(KIND).iter_errors(spec):
        yield from schema_error_messages(error)


class _Problems:
    """Every problem found, each at its place."""

    def __init__(self, source: SourceDocument, base: NodePath) -> None:
        self.source, self.base, self.found = source, base, list[str]()

    def add(self, path: NodePath, message: str) -> None:
        where = self.source.locate((*self.base, *path))
        field = dotted(path) or "intent"
        text = message if message.startswith(field) else f"{field}: {message}"
        self.found.append(f"{where}: {text}" if where.line else
                          f"{self.source.path}: {text}")

    def raise_any(self) -> None:
        if self.found:
            raise IntentError(self.found)


# The spec, beyond its schema --------------------------------------------------------------


class _Reader:
    def __init__(self, config: GateConfig, problems: _Problems) -> None:
        self.config, self.problems = config, problems

    def intent(self, spec: Mapping[str, Any]) -> RunIntent:
        tools = {name: self.tool(name, bound or {})
                 for name, bound in spec["tools"].items()}
        totals = tuple(self.total(name, total)
                       for name, total in spec.get("totals", {}).items())
        return RunIntent(tools=tools, totals=totals, request=spec.get("request"))

    def contract(self, tool: str, path: NodePath) -> Contract | None:
        contract = self.config.contracts.get(tool)
        if contract is None:
            known = ", ".join(sorted(self.config.contracts))
            self.problems.add(path, f"no tool named {tool!r}; the tools are: {known}")
        return contract

    def tool(self, tool: str, spec: Mapping[str, Any]) -> ToolBound:
        path: NodePath = ("tools", tool)
        contract = self.contract(tool, path)
        arguments = tuple(
            self.argument(contract, name, bound, (*path, "arguments", name))
            for name, bound in spec.get("arguments", {}).items())
        when = spec.get("when", ())
        texts = [when] if isinstance(when, str) else list(when)
        conditions = tuple(condition for index, text in enumerate(texts)
                           if (condition := self.condition(
                               text, (*path, "when") if isinstance(when, str)
                               else (*path, "when", index))) is not None)
        return ToolBound(tool=tool, calls=spec.get("calls"), arguments=arguments,
                         when=conditions)

    def argument(self, contract: Contract | None, name: str, spec: Mapping[str, Any],
                 path: NodePath) -> ArgumentBound:
        argument = tuple(name.split("."))
        if contract is not None and not names_an_argument(contract.arguments_schema, argument):
            self.problems.add(path, f"{contract.name} has no argument {name!r}")
        minimum, maximum = spec.get("minimum"), spec.get("maximum")
        if minimum is not None and maximum is not None and minimum > maximum:
            self.problems.add(path, f"minimum {minimum} is above maximum {maximum}: no value "
                              "is within it")
        schema, validator = spec.get("schema"), None
        if schema is not None:
            validator = self.schema(schema, (*path, "schema"))
        one_of = spec.get("one_of")
        return ArgumentBound(path=argument, equals=spec.get("equals", NOT_GIVEN),
                             one_of=None if one_of is None else tuple(one_of),
                             minimum=minimum, maximum=maximum, schema=schema,
                             validator=validator,
                             masked=contract is not None and touches_mask(argument, contract.mask))

    def schema(self, schema: Mapping[str, Any], path: NodePath) -> Any:
        referring = list(_references(schema, ()))
        for where in referring:
            self.problems.add((*path, *where), "an intent's schema stands alone: no $ref")
        if referring:
            return None
        try:
            check_json_schema(schema)
        except Exception as error:  # noqa: BLE001 - jsonschema's SchemaError, said here
            self.problems.add(path, f"not a valid JSON Schema: {getattr(error, 'message', error)}")
            return None
        refused = list(refused_patterns(schema))
        for where, problem in refused:
            self.problems.add((*path, *where), problem)
        return None if refused else argument_validator(schema)

    def condition(self, text: str, path: NodePath) -> Condition | None:
        try:
            expression = compile_expression(text)
        except CelSyntaxError as error:
            self.problems.add(path, f"{error} (line {error.line}, column {error.column} of "
                              "the expression)")
            return None
        other = sorted(expression.variables - {"args"})
        if other:
            self.problems.add(path, f"reads {', '.join(other)}: an intent's condition reads "
                              "only args, what the user asked being known before anything "
                              "else")
            return None
        for problem, _, _ in expression.refused_patterns:
            self.problems.add(path, problem)
        return Condition(text, expression)

    def total(self, name: str, spec: Mapping[str, Any]) -> Total:
        path: NodePath = ("totals", name)
        argument = tuple(spec["argument"].split("."))
        for index, tool in enumerate(spec["tools"]):
            contract = self.contract(tool, (*path, "tools", index))
            if contract is None:
                continue
            if not names_an_argument(contract.arguments_schema, argument):
                self.problems.add((*path, "argument"),
                                  f"{tool} has no argument {spec['argument']!r}")
            elif touches_mask(argument, contract.mask):
                self.problems.add((*path, "argument"),
                                  f"{tool} masks {spec['argument']!r} in the run's history: "
                                  "a total cannot be kept over a masked value")
        return Total(name=name, tools=frozenset(spec["tools"]), argument=argument,
                     at_most=spec["at_most"])
