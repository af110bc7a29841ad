"""The compiled documents: immutable, typed, and ready for the decision path.

The compiler (``compiler.py``) turns YAML into these objects once; the pipeline steps only
read them. Every object keeps the ``Location`` it came from, so a decision can name the
file and line of the rule that decided it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property, lru_cache
from typing import Any

from jsonschema.protocols import Validator

from callgate_rules.cel.expression import CompiledExpression
from callgate_rules.cel.json_numbers import Typing, number_typing
from callgate_rules.errors import Location
from callgate_rules.provenance import Thresholds
from callgate_rules.taxonomy import ErrorClass, Route


class Mode(StrEnum):
    """How a rule's verdict is applied (like Kubernetes' validationActions)."""

    ENFORCE = "enforce"  # the verdict decides the route
    WARN = "warn"  # the verdict is attached as a warning; the route does not change
    AUDIT = "audit"  # the verdict goes only to the log and counters


class OnError(StrEnum):
    FAIL_CLOSED = "fail_closed"  # a rule that cannot be evaluated counts as violated / denying
    IGNORE = "ignore"  # a rule that cannot be evaluated is treated as not applicable


class Idempotency(StrEnum):
    KEY = "key"  # the destination deduplicates by operation ID
    LOOKUP = "lookup"  # the destination can be asked whether an operation happened
    NONE = "none"  # neither: never retried automatically after sending


class LimitPath(StrEnum):
    PARTIAL_RESULT = "partial_result"
    HAND_OVER = "hand_over"
    REFUSE = "refuse"


PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}")


@dataclass(frozen=True)
class Template:
    """Message text with ``{args.field}``-style placeholders, split once at load."""

    text: str
    fields: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def of(cls, text: str) -> Template:
        fields = tuple(tuple(m.group(1).split(".")) for m in PLACEHOLDER.finditer(text))
        return cls(text, fields)

    def render(self, variables: Mapping[str, Any]) -> str:
        if not self.fields:
            return self.text
        literals, placeholders = _split(self.text)
        rendered = [literals[0]]
        for index, (path, spelling) in enumerate(placeholders, start=1):
            value: Any = variables
            for part in path:
                if isinstance(value, Mapping) and part in value:
                    value = value[part]
                else:
                    value = _UNFILLED
                    break
            rendered.append(spelling if value is _UNFILLED
                            else value if isinstance(value, str) else _compact_json(value))
            rendered.append(literals[index])
        return "".join(rendered)


_UNFILLED = object()


@lru_cache(maxsize=4096)
def _split(text: str) -> tuple[tuple[str, ...], tuple[tuple[tuple[str, ...], str], ...]]:
    """``text`` split at its placeholders once, so rendering is a join: the literal text
    around them, and each placeholder's path with its own spelling (kept when it cannot be
    filled). Cached by text rather than kept on the Template, so a Template's ``__dict__``
    holds its fields only."""
    parts = PLACEHOLDER.split(text)  # literal, path, literal, path, ..., literal
    return tuple(parts[0::2]), tuple((tuple(path.split(".")), f"{{{path}}}")
                                     for path in parts[1::2])


def _compact_json(value: Any) -> str:
    if type(value) is float and value.is_integer() and abs(value) < 2**53:
        # a number the schema types as a double (cel.json_numbers) reads as the model wrote it
        return str(int(value))
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


@dataclass(frozen=True)
class DocumentRef:
    """Which document, at which version, took part in a decision."""

    kind: str
    name: str
    version: str
    owner: str
    description: str
    location: Location

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class Lookup:
    name: str
    collection: str
    key: CompiledExpression
    fields: tuple[str, ...]  # a record matches when any of these equals the key
    when: CompiledExpression | None
    # which of the found records the actor may see (over ``record`` and the call's
    # variables); the others are dropped before anything counts or reads them
    visible: CompiledExpression | None
    many: str  # "ambiguous" or "list"
    candidate_fields: tuple[str, ...]
    record_schema: Mapping[str, Any] | None
    message: Template | None
    location: Location
    # labels: label → CEL over ``record``, ``args`` and ``actor``, true where a found record
    # carries it; a value of the call equal to one of its leaves (or the key) carries it
    labels: tuple[tuple[str, CompiledExpression], ...] = ()
    # with ``many: list``: the most records bound; more is ``ambiguous`` (None: MAX_RECORDS)
    max_records: int | None = None

    @cached_property
    def trace_subject(self) -> str:
        return f"lookup {self.name}"

    @cached_property
    def number_typing(self) -> Typing | None:
        """How a found record's numbers are typed for CEL (``cel.json_numbers``)."""
        return number_typing(self.record_schema)


@dataclass(frozen=True)
class ResultLabel:
    """One label of a read's results (``spec.labels``): on the whole result when ``whole``
    holds (CEL over ``result`` and ``args``), or on each item ``each`` yields (a list, or a
    map's values) for which ``where`` holds (CEL over ``item``, ``result`` and ``args``).
    See ``provenance.labels`` for what a label means where it fails."""

    name: str
    whole: CompiledExpression | None = None
    each: CompiledExpression | None = None
    where: CompiledExpression | None = None


@dataclass(frozen=True)
class Rule:
    """A business rule of a contract: ``expression`` must hold for the call to pass."""

    name: str
    expression: CompiledExpression
    error_class: ErrorClass
    route: Route | None
    message: Template
    user_message: Template | None
    hint: str | None
    mode: Mode
    on_error: OnError
    location: Location
    # approval_covers: the argument paths (``args.`` dropped) whose values, once a person
    # approved a call this rule held, cover later calls of the run with the same values
    # (``pipeline.approvals``); empty: every call it holds asks again
    approval_covers: tuple[tuple[str, ...], ...] = ()

    @cached_property
    def trace_subject(self) -> str:
        return f"rule {self.name}"

    @cached_property
    def message_reads(self) -> frozenset[str]:
        """The variables its messages may read: those its templates name, and the
        arguments and the tool, which any message may name."""
        return frozenset({"args", "tool"}).union(
            path[0] for template in (self.message, self.user_message)
            if template is not None for path in template.fields if path)

    @cached_property
    def passed(self) -> tuple[str, str, str, str]:
        """Its trace entry when it holds: the same for every call, so made once."""
        return ("validate", self.trace_subject, "pass",
                "" if self.mode == Mode.ENFORCE else str(self.mode))

    @cached_property
    def failed(self) -> tuple[str, str, str, str]:
        """Its trace entry when it is false (not when it fails to evaluate)."""
        return ("validate", self.trace_subject, "fail",
                "" if self.mode == Mode.ENFORCE else str(self.mode))


@dataclass(frozen=True)
class Example:
    arguments: Mapping[str, Any]
    description: str | None


@dataclass(frozen=True)
class ErrorMapping:
    """One row of a contract's executor-exception table; the most specific match wins."""

    exception: str | None  # class name, matched against the exception's MRO
    attribute: str | None
    equals: Any
    error_class: ErrorClass


@dataclass(frozen=True)
class Confirmation:
    required: bool
    summary: Template | None
    expires_seconds: float | None
    # approval_covers of ``required``: as a rule's (``Rule.approval_covers``)
    approval_covers: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class Contract:
    """One tool the model may propose, compiled."""

    document: DocumentRef
    effect: str  # "read" or "write"
    arguments_schema: Mapping[str, Any]
    validator: Validator = field(repr=False)
    # The validator's verdict alone, compiled (schemacheck): the hot path asks this first and
    # asks ``validator`` for the detailed error only when the arguments are invalid.
    arguments_valid: Callable[[Any], bool] = field(repr=False, compare=False)
    lookups: tuple[Lookup, ...]
    rules: tuple[Rule, ...]
    verify: CompiledExpression | None
    verify_message: Template | None
    reconcile_match: CompiledExpression | None
    timeout_seconds: float
    idempotency: Idempotency
    confirmation: Confirmation
    mask: tuple[tuple[str, ...], ...]
    examples: tuple[Example, ...]
    errors: tuple[ErrorMapping, ...]
    mode: Mode
    on_error: OnError
    # The look-ups whose records the access rules read: a denial may depend on them.
    private_lookups: tuple[Lookup, ...] = ()
    # reconcile.tool / reconcile.argument: the destination's look-up by operation ID
    reconcile_tool: str | None = None
    reconcile_argument: str = "operation_id"
    title: str | None = None  # spec.title: what people call the tool
    result_schema: Mapping[str, Any] | None = None  # spec.result: the result's JSON Schema
    # spec.labels: what this read's results carry (``confidential``, ``untrusted``), on the
    # whole result or per item; see ResultLabel and provenance.labels
    labels: tuple[ResultLabel, ...] = ()
    # spec.deduplication_window: a write by the same actor with the same arguments within
    # it is the earlier one (the MCP gateway's calls without a request ID); None: off
    deduplication_window_seconds: float | None = None

    # cached: read on every decision, and a property costs a call each time
    @cached_property
    def name(self) -> str:
        return self.document.name

    @cached_property
    def version(self) -> str:
        return self.document.version

    @cached_property
    def unavailable_reads(self) -> frozenset[str]:
        """The variables the not-found message of a record reads: the arguments, the tool,
        and what the keys of the look-ups the access rules guard read."""
        return frozenset({"args", "tool"}).union(
            *(lookup.key.variables for lookup in self.private_lookups))

    @cached_property
    def number_typing(self) -> Typing | None:
        """How the arguments' numbers are typed for CEL (``cel.json_numbers``): a
        ``number`` is a double however the model wrote it; ``None`` when none is declared."""
        return number_typing(self.arguments_schema)

    @cached_property
    def flat_fields(self) -> frozenset[str] | None:
        """``flat_fields(arguments_schema)``, worked out once."""
        return flat_fields(self.arguments_schema)

    @property
    def is_write(self) -> bool:
        return self.effect == "write"


def flat_fields(schema: Mapping[str, Any]) -> frozenset[str] | None:
    """For an argument schema with no object shapes below the top: the fields it declares
    when it is closed to others, ``FLAT_AND_OPEN`` when it is open; else ``None``. Step 2
    then finds an undeclared field by the top-level keys alone."""
    properties = schema.get("properties", {})
    if "patternProperties" in schema or not isinstance(properties, Mapping) or any(
            not isinstance(p, Mapping) or _SHAPES_OBJECTS.intersection(p)
            for p in properties.values()):
        return None
    return (frozenset(properties) if schema.get("additionalProperties") is False
        else FLAT_AND_OPEN)


FLAT_AND_OPEN: frozenset[str] = frozenset({"\0open"})  # a value no field name can equal
# Keywords under which a property schema could close a nested object to undeclared fields.
_SHAPES_OBJECTS = frozenset({"properties", "additionalProperties", "patternProperties",
                             "items", "prefixItems", "allOf", "anyOf", "oneOf", "$ref",
                             "if", "then", "else", "not", "dependentSchemas"})


@dataclass(frozen=True)
class AccessRule:
    name: str
    effect: str  # "allow" or "deny"
    tools: frozenset[str]  # "*" means every tool
    when: CompiledExpression
    message: Template | None
    mode: Mode
    on_error: OnError
    document: DocumentRef
    location: Location

    def applies_to(self, tool: str) -> bool:
        return "*" in self.tools or tool in self.tools

    @cached_property
    def qualified_name(self) -> str:
        return f"{self.document.name}/{self.name}"

    @cached_property
    def unmatched(self) -> tuple[str, str, str]:
        """Its trace entry when ``when`` is false: the same for every call, so made once."""
        return ("authorize", self.qualified_name, "no match" + self._mode_note)

    @cached_property
    def matched(self) -> tuple[str, str, str]:
        """Its trace entry when ``when`` is true."""
        return ("authorize", self.qualified_name, self.effect + self._mode_note)

    @property
    def _mode_note(self) -> str:
        return "" if self.mode == Mode.ENFORCE else f" ({self.mode})"


@dataclass(frozen=True)
class AccessPolicies:
    """Every AccessPolicy document's rules, merged, in document then declaration order."""

    rules: tuple[AccessRule, ...]
    actor_validator: Validator | None = field(repr=False)
    actor_schema: Mapping[str, Any] | None
    documents: tuple[DocumentRef, ...]
    session_validator: Validator | None = field(default=None, repr=False)
    session_schema: Mapping[str, Any] | None = None
    # The validators' verdicts alone, compiled (schemacheck); None where there is no schema.
    actor_valid: Callable[[Any], bool] | None = field(default=None, repr=False, compare=False)
    session_valid: Callable[[Any], bool] | None = field(default=None, repr=False,
                                                        compare=False)

    def rules_for(self, tool: str) -> tuple[AccessRule, ...]:
        return tuple(rule for rule in self.rules if rule.applies_to(tool))

    @cached_property
    def actor_typing(self) -> Typing | None:
        """How the actor's numbers are typed for CEL (``cel.json_numbers``)."""
        return number_typing(self.actor_schema)

    @cached_property
    def session_typing(self) -> Typing | None:
        """How the session's numbers are typed for CEL (``cel.json_numbers``)."""
        return number_typing(self.session_schema)


@dataclass(frozen=True)
class Budgets:
    regenerations_per_call: int = 1
    retries_per_call: int = 3
    backoff_base_seconds: float = 0.2
    backoff_max_seconds: float = 5.0
    backoff_multiplier: float = 2.0
    call_deadline_seconds: float = 30.0
    calls_per_tool_per_run: int = 10
    failures_per_run: int = 5
    run_deadline_seconds: float = 300.0


@dataclass(frozen=True)
class InputLimits:
    max_bytes: int = 64 * 1024
    max_depth: int = 16
    max_string_length: int = 8 * 1024
    max_calls: int = 16
    multiple_calls: str = "reject"  # or "first"


@dataclass(frozen=True)
class MessagePair:
    agent: Template | None = None
    user: Template | None = None


@dataclass(frozen=True)
class IntentRouting:
    """A RoutingTable's ``spec.intent``: run intents are read, and where a call outside its
    run's intent goes (``outside``: a route, or ``"rules"``: the rules decide, reading
    ``intent``); ``required``: the tools a run must have an intent for (``"*"``: all)."""

    outside: str = "await_confirmation"
    required: frozenset[str] = frozenset()

    def requires(self, tool: str) -> bool:
        return tool in self.required or "*" in self.required


@dataclass(frozen=True)
class Routing:
    routes: Mapping[ErrorClass, Route]
    messages: Mapping[ErrorClass, MessagePair]
    budgets: Budgets
    on_limit: LimitPath
    on_limit_messages: MessagePair
    input_limits: InputLimits
    confirmation_expires_seconds: float
    lease_seconds: float
    retention_seconds: float
    document: DocumentRef | None  # None: the built-in defaults
    provenance: Thresholds = Thresholds()
    intent: IntentRouting | None = None  # None: run intents are off

    def route_for(self, error_class: ErrorClass) -> Route:
        return self.routes[error_class]


@dataclass(frozen=True)
class GateConfig:
    """Everything a gate needs to decide, compiled once and never changed."""

    contracts: Mapping[str, Contract]
    policies: AccessPolicies
    routing: Routing
    documents: tuple[DocumentRef, ...]
    # The Definitions documents: their names may be used by any rule (already expanded in
    # every compiled expression), so each takes part in every decision.
    definition_documents: tuple[DocumentRef, ...] = ()

    def versions_for(self, tool: str | None) -> dict[str, str]:
        """The version of every document that takes part in a decision about ``tool``."""
        versions: dict[str, str] = {}
        if tool and tool in self.contracts:
            ref = self.contracts[tool].document
            versions[ref.key] = ref.version
        for ref in (*self.policies.documents, *self.definition_documents):
            versions[ref.key] = ref.version
        if self.routing.document:
            versions[self.routing.document.key] = self.routing.document.version
        return versions


def records_read(contract: Contract, rules: tuple[AccessRule, ...]) -> list[Lookup]:
    """The looked-up records that ``rules`` read: when a denial depends on one, it must
    speak as if that record did not exist."""
    return [lookup for lookup in contract.lookups
            if any(lookup.name in r.when.variables for r in rules)]
