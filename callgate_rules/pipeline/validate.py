"""Step 3 — VALIDATE: the argument schema, then referenced records, then business rules.

The order of the checks is the tool's plan (``plan``), compiled once per tool; this module
holds what each check decides when it does not simply pass: the rejections, in the words
the model and the user get, and the trace entries.

Business rules read record content ("the ticket is closed"), so the gate runs them only
after ``authorize`` has allowed the actor to see those records; otherwise the message for
another tenant's closed ticket would reveal that it exists.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jsonschema.exceptions import ValidationError, best_match

from callgate_rules.cel.errors import CelEvaluationError, CostExceeded
from callgate_rules.documents.model import Contract, Lookup, Mode, OnError, Rule
from callgate_rules.pipeline.decision import RawTraceEntry, ShadowVerdict
from callgate_rules.pipeline.lookups import MAX_RECORDS
from callgate_rules.pipeline.outcome import Rejection, as_decided
from callgate_rules.pipeline.record import MASK
from callgate_rules.taxonomy import NOT_FOUND_USER_MESSAGE, ErrorClass

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


def schema_rejection(contract: Contract, args: Mapping[str, Any],
                     trace: list[RawTraceEntry]) -> Rejection | None:
    """The rejection of arguments the compiled schema check refused, in jsonschema's words
    (the source of truth explains the failure); ``None`` should jsonschema find none."""
    error = best_match(contract.validator.iter_errors(args))
    if error is None:
        return None
    field = ".".join(str(p) for p in error.absolute_path) or _missing_field(error) or "arguments"
    # A masked argument's value is not quoted: the detail goes to the log.
    masked = tuple(str(p) for p in error.absolute_path) in contract.mask
    problem = _describe(error, MASK if masked else _short(error.instance))
    expected = expected_value(contract, field)
    trace.append(("validate", "schema", "fail", f"{field}: {problem}"))
    return Rejection(
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


def _describe(error: ValidationError, shown: str) -> str:
    """What is wrong with the value, ``shown`` as given."""
    if error.validator == "required":
        return "it is required but missing"
    if error.validator == "format":
        return f"{shown} is not a valid {error.validator_value}"
    if error.validator == "enum":
        return f"{shown} is not one of {_short(error.validator_value)}"
    if error.validator == "type":
        return f"{shown} is not of type {error.validator_value}"
    if error.validator == "pattern":
        return f"{shown} does not match {error.validator_value}"
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
        return f"{shown} " + words[str(error.validator)].format(
            _short(error.validator_value))
    # jsonschema's own text repeats the whole value; keep the prompt short
    return (f"{shown} is not valid ({error.validator}: "
           f"{_short(error.validator_value)})")


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


def key_rejection(contract: Contract, lookup: Lookup, error: CelEvaluationError,
                  example: str) -> Rejection:
    """The rejection of a call whose look-up key cannot be computed from its arguments."""
    return Rejection(
        ErrorClass.INVALID_ARGUMENT,
        f"lookup {lookup.name}: key cannot be computed: {error}",
        rule=f"{contract.name}/lookup.{lookup.name}",
        hint=example,
    )


def no_resolver(contract: Contract, lookup: Lookup) -> LookupError:
    """What the host is told when it bound no resolver for a collection a look-up needs."""
    return LookupError(
        f"no resolver bound for collection {lookup.collection!r} "
        f"(needed by {contract.name}); bind one with Gate(resolvers=...)"
    )


def skipped(lookup: Lookup) -> RawTraceEntry:
    """The trace entry of a look-up whose ``when`` is not true."""
    return ("validate", lookup.trace_subject, "skip", "when is false")


def found_entry(lookup: Lookup, record: Record) -> RawTraceEntry:
    """The trace entry of a look-up that found its one record."""
    return ("validate", lookup.trace_subject, "found",
            f"{lookup.collection} {record.get('id', '')}")


def listed_entry(lookup: Lookup, records: Sequence[Record]) -> RawTraceEntry:
    """The trace entry of a listing look-up."""
    return ("validate", lookup.trace_subject, "found", f"{len(records)} record(s)")


def records_of(found: Any) -> Sequence[Record]:
    """What a resolver returned, as a list of records; ``TypeError`` for anything else (a
    record instead of a list of them, text, a number, None, objects that are not
    mappings, an endless generator)."""
    if isinstance(found, str | bytes | Mapping) or not isinstance(found, Iterable):
        raise TypeError(f"the resolver returned {type(found).__name__}, not a list of records")
    records = list(itertools.islice(found, MAX_RECORDS + 1))
    if len(records) > MAX_RECORDS:
        raise TypeError(f"the resolver returned more than {MAX_RECORDS:,} records")
    for record in records:
        if not isinstance(record, Mapping):
            raise TypeError(f"the resolver returned a {type(record).__name__}, not a record")
    return records


def visible_records(lookup: Lookup, found: Sequence[Record],
                    variables: Mapping[str, Any],
                    trace: list[RawTraceEntry] | None = None) -> list[Record]:
    """The found records the actor may see by the look-up's ``visible`` rule; one it
    cannot be evaluated on is not shown (fail closed). The others are absent for every
    rule, route and provenance after this: "not yours" reads exactly like "no record" —
    except in the trace (``check --explain``), which says how many were left out."""
    assert lookup.visible is not None
    kept = []
    for record in found:
        try:
            shown = lookup.visible.evaluate({**variables, "record": record}) is True
        except CelEvaluationError:
            shown = False
        if shown:
            kept.append(record)
    if trace is not None and len(kept) < len(found):
        trace.append(narrowed_entry(lookup, len(found), kept, "the visible rule lets the "
                                                              "actor see"))
    return kept


def narrowed_entry(lookup: Lookup, before: int, kept: Sequence[Record],
                   why: str) -> RawTraceEntry:
    """The trace entry of a look-up whose records were narrowed: how many it found, how
    many it kept and which (their ids), and how many it left out — never which, so the
    trace tells an operator what happened without naming records the actor may not see."""
    shown = ", ".join(str(record.get("id", "?")) for record in kept[:5])
    more = f" and {len(kept) - 5} more" if len(kept) > 5 else ""
    return ("validate", lookup.trace_subject, "narrowed",
            f"{before} {lookup.collection} found; {why} {len(kept)}"
            f"{': ' + shown + more if kept else ''}; {before - len(kept)} left out")


def resolver_failed(contract: Contract, lookup: Lookup, error: Exception) -> Rejection:
    """The rejection of a call whose records could not be read: the resolver raised or
    returned junk. The host's words stay in the log; the model hears only that the check
    could not be made now. A resolver whose answer was larger than the gate reads (the
    gateway's upstream) ends in that class of its own, which spends no failure of the run."""
    detail = (f"lookup {lookup.name}: the resolver for {lookup.collection} failed: "
              f"{type(error).__name__}: {str(error)[:300]}")
    rule = f"{contract.name}/lookup.{lookup.name}"
    if getattr(error, "error_class", None) == ErrorClass.ANSWER_TOO_LARGE:
        return Rejection(
            ErrorClass.ANSWER_TOO_LARGE, detail, rule=rule,
            agent_message=f"The records needed to check {contract.name} were larger than the "
                          "gate reads from one answer. Nothing was done; asking again brings "
                          "the same; narrow the call if a narrower one serves.",
            user_message=UNAVAILABLE_USER_MESSAGE)
    return Rejection(
        ErrorClass.TRANSIENT, detail, rule=rule,
        agent_message=f"The records needed to check {contract.name} could not be read right "
                      "now. Nothing was done; the same call may pass later.",
        user_message=UNAVAILABLE_USER_MESSAGE,
    )


def too_slow(contract: Contract, seconds: float, why: str | None = None) -> Rejection:
    """The rejection of a call whose look-ups took longer than the contract's timeout (or
    were given up at it, ``why``): an answer that late is not trusted to decide."""
    return Rejection(
        ErrorClass.TRANSIENT,
        f"the look-ups were given up: {why}" if why is not None else
        f"the look-ups took {seconds:.1f}s, more than the contract's timeout of "
        f"{contract.timeout_seconds:g}s",
        rule=f"{contract.name}/lookups",
        agent_message=f"The records needed to check {contract.name} took too long to read. "
                      "Nothing was done; the same call may pass later.",
        user_message=UNAVAILABLE_USER_MESSAGE,
    )


UNAVAILABLE_USER_MESSAGE = "The system is busy; this could not be checked right now."


def unmatched(contract: Contract, lookup: Lookup, key: Any, found: Sequence[Record],
              variables: Mapping[str, Any], trace: list[RawTraceEntry]) -> Rejection:
    """The rejection of a look-up that found, among the records the actor may see, no
    record (``not_found``) or several (``ambiguous``, with the candidates' permitted
    fields)."""
    if not found:
        fields = "|".join(lookup.fields)
        trace.append(("validate", lookup.trace_subject, "not_found",
                      f"{lookup.collection}.{fields} == {_short(key)}"))
        return Rejection(
            ErrorClass.NOT_FOUND,
            f"no {lookup.collection} record with {fields} == {_short(key)} "
            "visible to the actor",
            rule=f"{contract.name}/lookup.{lookup.name}",
            agent_message=unavailable_message(contract, lookup, variables),
            user_message=NOT_FOUND_USER_MESSAGE,
            extra={"lookup": lookup.name, "key": key},
        )
    candidates = tuple(
        {f: record[f] for f in lookup.candidate_fields if f in record} for record in found
    )
    trace.append(("validate", lookup.trace_subject, "ambiguous", f"{len(found)} matches"))
    return Rejection(
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


def candidates(lookup: Lookup, found: Sequence[Record], variables: Mapping[str, Any],
               may_see: MaySee, trace: list[RawTraceEntry] | None = None) -> Sequence[Record]:
    """The records of a look-up that count: all of a single match, else those the actor
    may act on (by the access rules); the trace says how many were left out."""
    if len(found) > 1 or lookup.many == "list":
        # Several matches: only those the actor may act on count as candidates. A single
        # match is kept, so that authorize denies it (forbidden) with the not-found text.
        kept = [record for record in found if may_see(lookup, record, variables)]
        if trace is not None and len(kept) < len(found):
            trace.append(narrowed_entry(lookup, len(found), kept,
                                        "the access rules let the actor act on"))
        return kept
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


# 3c. Business rules --------------------------------------------------------------------------


def rule_outcome(contract: Contract, rule: Rule, value: Any, variables: Mapping[str, Any],
                 trace: list[RawTraceEntry], shadow: list[ShadowVerdict], *,
                 example: str) -> Rejection | None:
    """What a business rule that did not simply hold decides: ``value`` is what its
    expression gave, or the ``CelEvaluationError`` it raised. ``None``: the call goes on
    (an error the rule ignores, a rule in shadow, which leaves a verdict); else the
    rejection, one asking for confirmation included (the caller keeps the first of those
    and checks the remaining rules: the person confirms this call, not an exception)."""
    passed, error = _judged(rule, value)
    trace.append(("validate", rule.trace_subject, "pass" if passed else "error",
                  f"{error} ({rule.on_error})") if error else rule.failed)
    if passed:
        return None
    if rule.mode != _ENFORCE:
        shadow.append(ShadowVerdict(f"{contract.name}/{rule.name}", str(rule.mode),
                                    str(rule.error_class),
                                    _rule_messages(contract, rule, variables,
                                                   error is not None)[0]))
        return None
    return violation(contract, rule, variables, error, example)


def violation(contract: Contract, rule: Rule, variables: Mapping[str, Any], error: str | None,
              example: str | None = None) -> Rejection:
    """The rejection for an enforced ``rule`` that did not hold (``error``: why it could not
    be evaluated, if that is why). ``example``: ``example_call(contract)``, when the caller
    keeps it."""
    messages = _RuleMessages(contract, rule, variables, error is not None)
    return Rejection(
        rule.error_class,
        f"rule {rule.name} " + (f"failed to evaluate: {error}" if error else "is false"),
        rule=f"{contract.name}/{rule.name}",
        agent_message=messages.agent,
        user_message=messages.user,
        hint=rule.hint or (example if example is not None else example_call(contract)),
        route=rule.route,
        extra={"evaluation_error": error} if error else {},
    )


class _RuleMessages:
    """The agent and user messages of a violated rule, rendered (once) when first read:
    most rejections are only routed, and rendering is a good part of their cost."""

    __slots__ = ("contract", "rule", "variables", "unchecked", "rendered")

    def __init__(self, contract: Contract, rule: Rule, variables: Mapping[str, Any],
                 unchecked: bool = False) -> None:
        """``unchecked``: the rule could not be evaluated, so it was not found false."""
        self.contract, self.rule, self.unchecked = contract, rule, unchecked
        self.variables = as_decided(variables, violation_reads(contract, rule))
        self.rendered: tuple[str, str | None] | None = None

    def both(self) -> tuple[str, str | None]:
        if self.rendered is None:
            self.rendered = _rule_messages(self.contract, self.rule, self.variables,
                                           self.unchecked)
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


def _rule_messages(contract: Contract, rule: Rule, variables: Mapping[str, Any],
                   unchecked: bool = False) -> tuple[str, str | None]:
    """The agent and user messages of a violated rule; of one that could not be evaluated
    (``unchecked``), messages that say so, and never assert what could not be checked."""
    hidden = _private_record_read(contract, rule)
    if rule.error_class == ErrorClass.NOT_FOUND and hidden is not None:
        # "deleted" must read exactly like "missing" and like "not yours"
        return unavailable_message(contract, hidden, variables), NOT_FOUND_USER_MESSAGE
    if unchecked:
        return (f"{contract.name} could not be checked: its rule `{rule.name}` could not be "
                "evaluated on this call's data, so the call is refused as a precaution. The "
                "same call will fail the same way; a call with other values may pass.",
                UNCHECKED_USER_MESSAGE)
    return (rule.message.render(variables),
            rule.user_message.render(variables) if rule.user_message else None)


# What the person hears of a rule that could not be evaluated: nothing is claimed about them.
UNCHECKED_USER_MESSAGE = "This request could not be checked right now, so it was not done."


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
    if isinstance(value, CostExceeded):  # past the cost budget: never ignored
        return False, str(value)
    if isinstance(value, CelEvaluationError):
        return rule.on_error == _IGNORE, str(value)
    return rule.on_error == _IGNORE, f"expression returned {type(value).__name__}, not bool"
