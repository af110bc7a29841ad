"""Step 3 — VALIDATE: the argument schema, then referenced records, then business rules.

Business rules read record content ("the ticket is closed"), so the gate runs them only
after ``authorize`` has allowed the actor to see those records; otherwise the message for
another tenant's closed ticket would reveal that it exists.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jsonschema.exceptions import ValidationError, best_match

from callgate_rules.cel.expression import CelEvaluationError
from callgate_rules.documents.model import Contract, Lookup, Mode, OnError, Rule
from callgate_rules.pipeline.decision import Deferred, RawTraceEntry, ShadowVerdict
from callgate_rules.pipeline.outcome import Rejection, as_decided
from callgate_rules.taxonomy import ErrorClass

Record = Mapping[str, Any]
# Enum members are looked up through a descriptor in Python 3.11: the rule loop compares with
# these.
_ENFORCE = Mode.ENFORCE
_IGNORE = OnError.IGNORE
Resolver = Callable[[str, Any], Sequence[Record]]  # (field, value) → matching records
# (lookup, candidate record, variables) → may the actor act on this record?
MaySee = Callable[[Lookup, Record, Mapping[str, Any]], bool]


# 3a. Arguments against the contract's JSON Schema -------------------------------------------

SCHEMA_PASSED: RawTraceEntry = ("validate", "schema", "pass")


def arguments(contract: Contract, args: Mapping[str, Any], trace: list[RawTraceEntry]) -> None:
    # The compiled verdict first; jsonschema, the source of truth, explains a failure.
    error = None if contract.arguments_valid(args) else \
        best_match(contract.validator.iter_errors(args))
    if error is None:
        trace.append(SCHEMA_PASSED)
        return
    field = ".".join(str(p) for p in error.absolute_path) or _missing_field(error) or "arguments"
    problem = _describe(error)
    expected = expected_value(contract, field)
    trace.append(("validate", "schema", "fail", f"{field}: {problem}"))
    raise Rejection(
        ErrorClass.INVALID_ARGUMENT,
        f"argument {field!r}: {problem}",
        rule=f"{contract.name}/schema",
        agent_message=(
            f"Argument `{field}` of {contract.name} is invalid: {problem}. "
            f"A valid value: {expected}."
        ),
        hint=example_call(contract),
        extra={"field": field},
    )


def _missing_field(error: ValidationError) -> str | None:
    if error.validator == "required" and isinstance(error.message, str):
        return error.message.split("'")[1] if "'" in error.message else None
    return None


def _describe(error: ValidationError) -> str:
    if error.validator == "required":
        return "it is required but missing"
    if error.validator == "format":
        return f"{_short(error.instance)} is not a valid {error.validator_value}"
    if error.validator == "enum":
        return f"{_short(error.instance)} is not one of {_short(error.validator_value)}"
    if error.validator == "type":
        return f"{_short(error.instance)} is not of type {error.validator_value}"
    if error.validator == "pattern":
        return f"{_short(error.instance)} does not match {error.validator_value}"
    words = {"maxLength": "is longer than {} characters",
             "minLength": "is shorter than {} characters",
             "maximum": "is greater than the maximum of {}",
             "minimum": "is less than the minimum of {}",
             "exclusiveMaximum": "is not less than {}",
             "exclusiveMinimum": "is not greater than {}",
             "maxItems": "has more than {} items", "minItems": "has fewer than {} items",
             "const": "is not {}", "additionalProperties": "has fields the contract does not "
                                                           "declare ({})"}
    if error.validator in words:
        return f"{_short(error.instance)} " + words[str(error.validator)].format(
            _short(error.validator_value))
    # jsonschema's own text repeats the whole value; keep the prompt short
    return f"{_short(error.instance)} is not valid ({error.validator}: " \
           f"{_short(error.validator_value)})"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def expected_value(contract: Contract, field: str) -> str:
    """What a valid value of ``field`` looks like, from its schema and the examples."""
    schema: Any = contract.arguments_schema
    for part in field.split("."):
        schema = schema.get("properties", {}).get(part, {}) if isinstance(schema, Mapping) else {}
    parts: list[str] = []
    if not isinstance(schema, Mapping):
        schema = {}
    if "description" in schema:
        parts.append(str(schema["description"]).rstrip("."))
    if "enum" in schema:
        parts.append("one of " + ", ".join(_short(v) for v in schema["enum"]))
    elif "format" in schema:
        parts.append(f"a {schema['format']} string" + (
            " in RFC 3339, e.g. 2026-12-01T09:00:00Z" if schema["format"] == "date-time" else ""))
    elif "type" in schema:
        parts.append(f"a {schema['type']}")
    if "pattern" in schema:
        parts.append(f"matching {schema['pattern']}")
    for bound, words in (("minimum", "at least"), ("maximum", "at most"),
                         ("minLength", "at least {} characters"),
                         ("maxLength", "at most {} characters")):
        if bound in schema:
            parts.append(words.format(schema[bound]) if "{}" in words
                         else f"{words} {schema[bound]}")
    for example in contract.examples:
        value: Any = example.arguments
        for part in field.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value is not None:
            parts.append(f"for example {_short(value)}")
            break
    return "; ".join(parts) or "see the tool's description"


def example_call(contract: Contract) -> str:
    if not contract.examples:
        return ""
    arguments = json.dumps(contract.examples[0].arguments, ensure_ascii=False)
    return f"A valid call looks like: {contract.name}({arguments})"


# 3b. Referenced records ----------------------------------------------------------------------


def references(
    contract: Contract,
    variables: dict[str, Any],
    resolvers: Mapping[str, Resolver],
    may_see: MaySee,
    trace: list[RawTraceEntry],
    resume: Resume | None = None,
) -> None:
    """Look up each declared record and bind it in ``variables`` under the lookup's name.

    Records the actor may not see are dropped before counting, so "not found", "found one"
    and "ambiguous" are all answered from the actor's own view of the data. ``resume``:
    where the express lane stopped, the look-ups before it done, so that no resolver is
    asked twice.
    """
    start, resolved = resume if resume is not None else (0, None)
    for index, lookup in enumerate(contract.lookups):
        if index < start:
            continue
        if index == start and resolved is not None:
            key, found = resolved
            found = _candidates(lookup, found, variables, may_see)
        elif lookup.when is not None and not _truthy(lookup.when, variables):
            variables[lookup.name] = None
            trace.append(("validate", lookup.trace_subject, "skip", "when is false"))
            continue
        else:
            try:
                key = lookup.key.evaluate(variables)  # .evaluate: one call frame less
            except CelEvaluationError as error:
                raise Rejection(
                    ErrorClass.INVALID_ARGUMENT,
                    f"lookup {lookup.name}: key cannot be computed: {error}",
                    rule=f"{contract.name}/lookup.{lookup.name}",
                    hint=example_call(contract),
                ) from None
            resolver = resolvers.get(lookup.collection)
            if resolver is None:
                raise LookupError(
                    f"no resolver bound for collection {lookup.collection!r} "
                    f"(needed by {contract.name}); bind one with Gate(resolvers=...)"
                )
            found = _candidates(lookup, resolve(resolver, lookup.fields, key), variables,
                                may_see)
        if lookup.many == "list":
            variables[lookup.name] = found
            trace.append(("validate", lookup.trace_subject, "found",
                          f"{len(found)} record(s)"))
            continue
        if not found:
            fields = "|".join(lookup.fields)
            trace.append(("validate", lookup.trace_subject, "not_found",
                          f"{lookup.collection}.{fields} == {_short(key)}"))
            raise Rejection(
                ErrorClass.NOT_FOUND,
                f"no {lookup.collection} record with {'|'.join(lookup.fields)} == {_short(key)} "
                "visible to the actor",
                rule=f"{contract.name}/lookup.{lookup.name}",
                agent_message=unavailable_message(contract, lookup, variables),
                user_message=NOT_FOUND_USER_MESSAGE,
                extra={"lookup": lookup.name, "key": key},
            )
        if len(found) > 1:
            candidates = tuple(
                {f: record[f] for f in lookup.candidate_fields if f in record} for record in found
            )
            trace.append(("validate", lookup.trace_subject, "ambiguous",
                          f"{len(found)} matches"))
            raise Rejection(
                ErrorClass.AMBIGUOUS,
                f"{len(found)} {lookup.collection} records match {_short(key)}",
                rule=f"{contract.name}/lookup.{lookup.name}",
                agent_message=(
                    f"{_short(key)} matches {len(found)} {lookup.collection}: "
                    + "; ".join(_short(c) for c in candidates)
                    + "."
                ),
                candidates=candidates,
            )
        variables[lookup.name] = found[0]
        trace.append(("validate", lookup.trace_subject, "found",
                      f"{lookup.collection} {found[0].get('id', '')}"))


# Where the look-ups resume: the index of the first not done, and, when its records were
# already resolved, its key and those records.
Resume = tuple[int, "tuple[Any, Sequence[Record]] | None"]


def _candidates(lookup: Lookup, found: Sequence[Record], variables: Mapping[str, Any],
                may_see: MaySee) -> Sequence[Record]:
    if len(found) > 1 or lookup.many == "list":
        # Several matches: only those the actor may act on count as candidates. A single
        # match is kept, so that authorize denies it (forbidden) with the not-found text.
        return [record for record in found if may_see(lookup, record, variables)]
    return found


# Shown to the person both for a missing record and for one they may not access.
NOT_FOUND_USER_MESSAGE = "I couldn't find that record among the ones you can access."


def resolve(resolver: Resolver, fields: tuple[str, ...], key: Any) -> Sequence[Record]:
    if len(fields) == 1:
        records = resolver(fields[0], key)
        return records if type(records) is tuple or type(records) is list else list(records)
    found: list[Record] = []
    seen: set[int] = set()
    for field in fields:
        for record in resolver(field, key):
            if id(record) not in seen:
                seen.add(id(record))
                found.append(record)
    return found


def unavailable_message(contract: Contract, lookup: Lookup,
                        variables: Mapping[str, Any]) -> str:
    """What the model hears when ``lookup``'s record is missing *or* not the actor's.

    When the rights depend on several records (a ticket and an assignee), naming the one
    that failed would tell "missing" from "not yours" apart; so the answer names every
    reference the rights depend on, and never which one failed."""
    private = contract.private_lookups
    if lookup not in private or len(private) < 2:
        return not_found_message(lookup, variables)
    records = {each.name for each in contract.lookups}
    references = []
    for each in private:
        if records & each.key.variables:
            # A key read from another record would show that record's content when it is
            # not the actor's, and nothing when it is missing: name the reference only.
            references.append(each.name)
            continue
        try:
            references.append(f"{each.name} {_plain(each.key(variables))}")
        except CelEvaluationError:
            references.append(each.name)
    return (f"Not every record you referred to is available to you ({', '.join(references)}). "
            "Check these values with the user; do not guess others.")


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else _short(value)


def not_found_message(lookup: Lookup, variables: Mapping[str, Any]) -> str:
    """The one message for "missing" and "not yours": it may name only what the model sent."""
    if lookup.message is not None:
        safe = {"args": variables.get("args", {}), "tool": variables.get("tool")}
        return lookup.message.render(safe)
    return (
        f"No {lookup.collection} record that you can access matches the value you gave for "
        f"{lookup.name}. Do not guess another value: check it with the user or look it up first."
    )


def _truthy(expression: Any, variables: Mapping[str, Any]) -> bool:
    try:
        return expression(variables) is True
    except CelEvaluationError:
        return False


# 3c. Business rules --------------------------------------------------------------------------


def business_rules(
    contract: Contract,
    variables: Mapping[str, Any],
    trace: list[RawTraceEntry],
    shadow: list[ShadowVerdict],
    example: str | None = None,
) -> None:
    """Evaluate the contract's rules in declared order; the first enforced violation stops.

    A violated rule that asks for a person's confirmation (error class
    ``confirmation_required``) does not stop the others: every later rule must still pass,
    since the person confirms this call, not an exception from the rules. ``example``:
    ``example_call(contract)``, when the caller keeps it."""
    rejection = _violation(contract, variables, trace, shadow, example)
    if rejection is not None:
        try:
            raise rejection
        finally:
            # The traceback holds this frame: without this, frame and exception would form
            # a cycle left for the garbage collector, once per rejected call.
            del rejection


def _violation(
    contract: Contract,
    variables: Mapping[str, Any],
    trace: list[RawTraceEntry],
    shadow: list[ShadowVerdict],
    example: str | None,
) -> Rejection | None:
    """The rejection ``business_rules`` raises, if any."""
    needs_confirmation: list[Rejection] = []
    for rule in contract.rules:
        try:
            value = rule.expression.evaluate(variables)  # .evaluate: one call frame less
        except CelEvaluationError as failure:
            value = failure
        if value is True:  # the common case, kept to one constant trace entry
            trace.append(rule.passed)
            continue
        passed, error = _judged(rule, value)
        trace.append(("validate", rule.trace_subject, "pass" if passed else "error",
                      f"{error} ({rule.on_error})") if error else rule.failed)
        if passed:
            continue
        if rule.mode != _ENFORCE:
            shadow.append(ShadowVerdict(f"{contract.name}/{rule.name}", str(rule.mode),
                                        str(rule.error_class),
                                        _rule_messages(contract, rule, variables)[0]))
            continue
        rejection = violation(contract, rule, variables, error, example)
        if rule.error_class == ErrorClass.CONFIRMATION_REQUIRED:
            needs_confirmation.append(rejection)
            continue
        return rejection
    return needs_confirmation[0] if needs_confirmation else None


def violation(contract: Contract, rule: Rule, variables: Mapping[str, Any], error: str | None,
              example: str | None = None) -> Rejection:
    """The rejection for an enforced ``rule`` that did not hold (``error``: why it could not
    be evaluated, if that is why). ``example``: ``example_call(contract)``, when the caller
    keeps it."""
    messages = _RuleMessages(contract, rule, variables)
    return Rejection(
        rule.error_class,
        f"rule {rule.name} " + (f"failed to evaluate: {error}" if error else "is false"),
        rule=f"{contract.name}/{rule.name}",
        agent_message=Deferred(messages.agent),
        user_message=Deferred(messages.user),
        hint=rule.hint or (example if example is not None else example_call(contract)),
        route=rule.route,
        extra={"evaluation_error": error} if error else {},
    )


class _RuleMessages:
    """The agent and user messages of a violated rule, rendered (once) when first read:
    most rejections are only routed, and rendering is a good part of their cost."""

    __slots__ = ("contract", "rule", "variables", "rendered")

    def __init__(self, contract: Contract, rule: Rule, variables: Mapping[str, Any]) -> None:
        self.contract, self.rule = contract, rule
        self.variables = as_decided(variables, violation_reads(contract, rule))
        self.rendered: tuple[str, str | None] | None = None

    def both(self) -> tuple[str, str | None]:
        if self.rendered is None:
            self.rendered = _rule_messages(self.contract, self.rule, self.variables)
        return self.rendered

    def agent(self) -> str:
        return self.both()[0]

    def user(self) -> str | None:
        return self.both()[1]


def violation_reads(contract: Contract, rule: Rule) -> frozenset[str]:
    """The variables the messages of ``rule``'s violation may read."""
    if rule.error_class == ErrorClass.NOT_FOUND:  # may speak as a missing record
        return rule.message_reads | contract.unavailable_reads
    return rule.message_reads


def _rule_messages(contract: Contract, rule: Rule,
                   variables: Mapping[str, Any]) -> tuple[str, str | None]:
    """The agent and user messages of a violated rule."""
    hidden = _private_record_read(contract, rule)
    if rule.error_class == ErrorClass.NOT_FOUND and hidden is not None:
        # "deleted" must read exactly like "missing" and like "not yours"
        return unavailable_message(contract, hidden, variables), NOT_FOUND_USER_MESSAGE
    return (rule.message.render(variables),
            rule.user_message.render(variables) if rule.user_message else None)


def _private_record_read(contract: Contract, rule: Rule) -> Lookup | None:
    """The first record the access rules guard that ``rule`` reads, if any."""
    for lookup in contract.private_lookups:
        if lookup.name in rule.expression.variables:
            return lookup
    return None


def _judged(rule: Rule, value: Any) -> tuple[bool, str | None]:
    """(passed, evaluation error) for what ``rule``'s expression gave: a value, or the
    ``CelEvaluationError`` it raised. A non-boolean result is an error too."""
    if value is True:
        return True, None
    if value is False:
        return False, None
    if isinstance(value, CelEvaluationError):
        return rule.on_error == _IGNORE, str(value)
    return rule.on_error == _IGNORE, f"expression returned {type(value).__name__}, not bool"
