"""YAML documents in, one immutable ``GateConfig`` out — or findings that say what to fix.

Compilation happens once, at load. It validates each document against the JSON Schema
of its kind (shipped in ``schemas/``), builds every argument validator, parses and
prepares every CEL expression, and splits message templates. Nothing on the decision path
reads YAML or parses CEL afterwards.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from jsonschema.protocols import Validator

from callgate_rules.cel.expression import CelSyntaxError, CompiledExpression, compile_expression
from callgate_rules.documents.model import (
    AccessPolicies,
    AccessRule,
    Budgets,
    Confirmation,
    Contract,
    DocumentRef,
    ErrorMapping,
    Example,
    GateConfig,
    Idempotency,
    InputLimits,
    LimitPath,
    Lookup,
    MessagePair,
    Mode,
    OnError,
    Routing,
    Rule,
    Template,
)
from callgate_rules.documents.schemacheck import validity_check
from callgate_rules.documents.source import (
    NodePath,
    SourceDocument,
    iter_yaml_files,
    read_documents,
)
from callgate_rules.errors import ConfigError, InputError, Location
from callgate_rules.integrations.provenance import Thresholds
from callgate_rules.pipeline.authorize import records_read
from callgate_rules.taxonomy import ErrorClass, Route

KINDS = ("ToolContract", "AccessPolicy", "RoutingTable")
# Documents that live beside the policies but are not part of the gate.
OTHER_KINDS = ("PolicyTest",)

# The source article's default routes (SPEC §4); a RoutingTable overrides any of them.
DEFAULT_ROUTES: Mapping[ErrorClass, Route] = {
    ErrorClass.MALFORMED: Route.REGENERATE,
    ErrorClass.UNKNOWN_TOOL: Route.REFUSE,
    ErrorClass.UNEXPECTED_ARGUMENT: Route.REFUSE,
    ErrorClass.INVALID_ARGUMENT: Route.REGENERATE,
    ErrorClass.NOT_FOUND: Route.REPLAN,
    ErrorClass.AMBIGUOUS: Route.CLARIFY,
    ErrorClass.FORBIDDEN: Route.REFUSE,
    ErrorClass.CONFLICT: Route.REFUSE,
    ErrorClass.CONFIRMATION_REQUIRED: Route.AWAIT_CONFIRMATION,
    ErrorClass.TRANSIENT: Route.RETRY,
    ErrorClass.UNKNOWN_OUTCOME: Route.RECONCILE,
    ErrorClass.DUPLICATE: Route.RETURN_RECEIPT,
    ErrorClass.PERMANENT: Route.REFUSE,
    ErrorClass.RECONCILE_FAILED: Route.REVIEW,
    ErrorClass.BUDGET_EXHAUSTED: Route.REVIEW,
}


@dataclass(frozen=True)
class Finding:
    """One thing a person should fix (error) or look at (warning), at an exact place."""

    location: Location
    severity: str  # "error" or "warning"
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.severity} {self.code} {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.location.path,
            "line": self.location.line,
            "column": self.location.column,
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
        }


@dataclass(frozen=True)
class Compilation:
    """The result of compiling a set of documents: a config when there were no errors, and
    whatever did compile (for lint, which reports everything it can in one run)."""

    config: GateConfig | None
    findings: tuple[Finding, ...]
    sources: tuple[SourceDocument, ...]
    contracts: Mapping[str, Contract] = field(default_factory=dict)
    contract_sources: Mapping[str, SourceDocument] = field(default_factory=dict)
    access_rules: tuple[AccessRule, ...] = ()
    actor_schema: Mapping[str, Any] | None = None
    routing_source: SourceDocument | None = None
    session_schema: Mapping[str, Any] | None = None

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")


# Entry points ---------------------------------------------------------------------------------


def load(paths: Iterable[str | Path]) -> GateConfig:
    """Compile every document under ``paths``; raise ``ConfigError`` listing each problem."""
    compilation = compile_paths(paths)
    if compilation.errors or compilation.config is None:
        raise ConfigError(list(compilation.errors))
    return compilation.config


def compile_paths(paths: Iterable[str | Path]) -> Compilation:
    sources: list[SourceDocument] = []
    findings: list[Finding] = []
    for file in iter_yaml_files([Path(p) for p in paths]):
        try:
            sources.extend(read_documents(file))
        except InputError as error:
            findings.append(_finding_from_input_error(str(error), str(file)))
    compilation = compile_documents(sources)
    return replace(
        compilation,
        config=compilation.config if not findings else None,
        findings=tuple(findings) + compilation.findings,
    )


def compile_documents(sources: Iterable[SourceDocument]) -> Compilation:
    compiler = _Compiler()
    sources = tuple(sources)
    for source in sources:
        compiler.add(source)
    config = compiler.finish()
    return Compilation(
        config,
        tuple(compiler.findings),
        sources,
        contracts=dict(compiler.contracts),
        contract_sources=dict(compiler.contract_sources),
        access_rules=tuple(compiler.access_rules),
        actor_schema=compiler.actor_schema,
        routing_source=compiler.routing_source,
        session_schema=compiler.session_schema,
    )


def _finding_from_input_error(text: str, path: str) -> Finding:
    match = re.match(r"^(.*?):(\d+):(\d+): error YAML (.*)$", text)
    if match:
        return Finding(
            Location(match[1], int(match[2]), int(match[3])), "error", "yaml", match[4]
        )
    return Finding(Location(path), "error", "yaml", text.split(": ", 1)[-1])


# Helpers shared with lint ----------------------------------------------------------------------


@cache
def document_schema(kind: str) -> Draft202012Validator:
    schema = resources.files("callgate_rules.documents").joinpath(f"schemas/{kind}.json")
    text = schema.read_text("utf-8")
    return Draft202012Validator(json.loads(text))


@cache
def _document_valid(kind: str) -> Callable[[Any], bool]:
    return validity_check(document_schema(kind))


# Upper-case T and Z only: CEL's timestamp() (what rules call) accepts nothing else.
# Compiled once: this runs on every call with a date-time argument.
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def _is_rfc3339(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not _RFC3339.match(value):
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


FORMAT_CHECKER = FormatChecker()
# jsonschema accepts any date-time unless an optional package is installed; check it here.
FORMAT_CHECKER.checks("date-time")(_is_rfc3339)


def parse_duration(value: float | int | str) -> float:
    """``5``, ``"500ms"``, ``"5s"``, ``"2m"``, ``"1h"`` → seconds."""
    if isinstance(value, int | float):
        return float(value)
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)", value)
    if not match:
        raise ValueError(f"{value!r} is not a duration such as 500ms, 5s, 2m or 1h")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[match[2]]
    return float(match[1]) * scale


def closed_objects(schema: Any) -> Any:
    """A copy of ``schema`` where every object with ``properties`` defaults to
    ``additionalProperties: false`` — an undeclared field is rejected unless allowed."""
    if isinstance(schema, list):
        return [closed_objects(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: closed_objects(value) for key, value in schema.items()}
    if "properties" in result and "additionalProperties" not in result:
        result["additionalProperties"] = False
    return result


@cache
def _meta_validator() -> Draft202012Validator:
    return Draft202012Validator(Draft202012Validator.META_SCHEMA)


def check_json_schema(schema: Any) -> None:
    """``check_schema`` with the meta-schema validator built once, not once a contract."""
    validator = _meta_validator()
    if validator.is_valid(schema):
        return
    error = best_match(validator.iter_errors(schema))
    if error is not None:
        raise SchemaError.create_from(error)


def argument_validator(schema: Mapping[str, Any]) -> Validator:
    return Draft202012Validator(schema, format_checker=FORMAT_CHECKER)


# The compiler --------------------------------------------------------------------------------


class _Compiler:
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.contracts: dict[str, Contract] = {}
        self.contract_sources: dict[str, SourceDocument] = {}
        self.access_rules: list[AccessRule] = []
        self.policy_documents: list[DocumentRef] = []
        self.actor_schema: Mapping[str, Any] | None = None
        self.session_schema: Mapping[str, Any] | None = None
        self.routing: Routing | None = None
        self.routing_source: SourceDocument | None = None
        self.documents: list[DocumentRef] = []
        # Identical CEL (``args.ticketId``, ``!has(ticket.deleted_at)``) recurs across
        # contracts; a CompiledExpression is immutable, so one per distinct text is enough.
        self.compiled: dict[str, CompiledExpression] = {}

    # -- reporting

    def error(self, source: SourceDocument, path: NodePath, code: str, message: str) -> None:
        self.findings.append(Finding(source.locate(path), "error", code, message))

    def warning(self, source: SourceDocument, path: NodePath, code: str, message: str) -> None:
        self.findings.append(Finding(source.locate(path), "warning", code, message))

    # -- documents

    def add(self, source: SourceDocument) -> None:
        data = source.data
        if not isinstance(data, dict):
            self.error(source, (), "schema", "a document must be a mapping with apiVersion, "
                       "kind, metadata and spec")
            return
        kind = data.get("kind")
        if kind in OTHER_KINDS:
            return  # read by `callgate test`, not compiled into the gate
        if kind not in KINDS:
            self.error(source, ("kind",), "schema",
                       f"kind {kind!r} is not one of {', '.join(KINDS)}")
            return
        if not self._schema_valid(source, str(kind)):
            return
        ref = self._ref(source)
        self.documents.append(ref)
        if kind == "ToolContract":
            self._add_contract(source, ref)
        elif kind == "AccessPolicy":
            self._add_policy(source, ref)
        else:
            self._add_routing(source, ref)

    def _schema_valid(self, source: SourceDocument, kind: str) -> bool:
        if _document_valid(kind)(source.data):
            return True  # the compiled verdict; jsonschema lists the errors of the others
        errors = sorted(
            document_schema(kind).iter_errors(source.data),
            key=lambda e: (list(map(str, e.absolute_path)), e.message),
        )
        for error in errors:
            self._schema_finding(source, error)
        return not errors

    def _schema_finding(self, source: SourceDocument, error: ValidationError) -> None:
        path: NodePath = tuple(error.absolute_path)
        where = dotted(path) or "document"
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            schema = error.schema if isinstance(error.schema, Mapping) else {}
            allowed = set(schema.get("properties", {}))
            for key in sorted(set(error.instance) - allowed):
                known = ", ".join(sorted(allowed))
                self.error(source, (*path, key, "<key>"), "schema",
                           f"{dotted((*path, key))}: unknown field {key!r}; allowed here: {known}")
            return
        if error.validator == "required":
            self.error(source, path, "schema", f"{where}: {error.message}")
            return
        if error.validator == "enum":
            allowed_values = error.validator_value
            options = ", ".join(map(str, allowed_values)) \
                if isinstance(allowed_values, list) else str(allowed_values)
            self.error(source, path, "schema",
                       f"{where}: {error.instance!r} is not allowed; use one of: {options}")
            return
        if error.validator in ("oneOf", "anyOf") and error.context:
            best = min(error.context, key=lambda e: len(e.message))
            self.error(source, path, "schema", f"{where}: {best.message}")
            return
        self.error(source, path, "schema", f"{where}: {error.message}")

    def _ref(self, source: SourceDocument) -> DocumentRef:
        metadata = source.data["metadata"]
        return DocumentRef(
            kind=source.data["kind"],
            name=metadata["name"],
            version=str(metadata["version"]),
            owner=metadata["owner"],
            description=metadata["description"],
            location=source.locate(()),
        )

    # -- CEL and templates

    def expression(
        self, source: SourceDocument, path: NodePath, text: str
    ) -> CompiledExpression | None:
        if text in self.compiled:
            return self.compiled[text]
        try:
            compiled = self.compiled[text] = compile_expression(text)
            return compiled
        except CelSyntaxError as error:
            place = source.locate_in_scalar(path, error.line, error.column)
            self.findings.append(Finding(place, "error", "cel-syntax",
                                         f"{dotted(path)}: {error}"))
            return None

    # -- ToolContract

    def _add_contract(self, source: SourceDocument, ref: DocumentRef) -> None:
        spec = source.data["spec"]
        if ref.name in self.contracts:
            first = self.contracts[ref.name].document.location
            self.error(source, ("metadata", "name"), "duplicate-tool",
                       f"tool {ref.name!r} is already defined at {first}; tool names must be "
                       "unique")
            return
        schema = closed_objects(spec["arguments"])
        try:
            check_json_schema(schema)
        except SchemaError as error:
            self.error(source, ("spec", "arguments", *error.absolute_path), "schema",
                       f"spec.arguments is not a valid JSON Schema: {error.message}")
            return
        validator = argument_validator(schema)
        mode = Mode(spec.get("mode", "enforce"))
        on_error = OnError(spec.get("on_error", "fail_closed"))

        lookups = tuple(
            lookup
            for index, item in enumerate(spec.get("lookups", []))
            if (lookup := self._lookup(source, ("spec", "lookups", index), item)) is not None
        )
        rules = tuple(
            rule
            for index, item in enumerate(spec.get("rules", []))
            if (rule := self._rule(source, ("spec", "rules", index), item, mode, on_error))
            is not None
        )
        verify = spec.get("verify")
        verify_expression = (
            self.expression(source, ("spec", "verify", "expression"), verify["expression"])
            if verify else None
        )
        reconcile = spec.get("reconcile", {})
        reconcile_match = (
            self.expression(source, ("spec", "reconcile", "match"), reconcile["match"])
            if "match" in reconcile else None
        )
        confirmation = spec.get("confirmation", {})
        examples = tuple(
            Example(item["arguments"], item.get("description")) for item in spec["examples"]
        )
        errors = tuple(
            ErrorMapping(item.get("exception"), item.get("attribute"), item.get("equals"),
                         ErrorClass(item["error_class"]))
            for item in spec.get("errors", [])
        )
        contract = Contract(
            document=ref,
            effect=spec["effect"],
            arguments_schema=schema,
            validator=validator,
            arguments_valid=validity_check(validator),
            lookups=lookups,
            rules=rules,
            verify=verify_expression,
            verify_message=Template.of(verify["message"]) if verify and "message" in verify
            else None,
            reconcile_match=reconcile_match,
            timeout_seconds=parse_duration(spec.get("timeout", 10)),
            idempotency=Idempotency(spec.get("idempotency", "none")),
            confirmation=Confirmation(
                required=bool(confirmation.get("required", False)),
                summary=Template.of(confirmation["summary"]) if "summary" in confirmation
                else None,
                expires_seconds=parse_duration(confirmation["expires"])
                if "expires" in confirmation else None,
            ),
            mask=tuple(tuple(p.split(".")) for p in spec.get("mask", [])),
            examples=examples,
            errors=errors,
            mode=mode,
            on_error=on_error,
        )
        self.contracts[ref.name] = contract
        self.contract_sources[ref.name] = source

    def _lookup(self, source: SourceDocument, path: NodePath, item: Any) -> Lookup | None:
        key = self.expression(source, (*path, "key"), item["key"])
        when = self.expression(source, (*path, "when"), item["when"]) if "when" in item else None
        if key is None or ("when" in item and when is None):
            return None
        return Lookup(
            name=item["name"],
            collection=item["collection"],
            key=key,
            fields=_as_tuple(item.get("field", "id")),
            when=when,
            many=item.get("many", "ambiguous"),
            candidate_fields=tuple(item.get("candidate_fields", ("id",))),
            record_schema=item.get("schema"),
            message=Template.of(item["message"]) if "message" in item else None,
            location=source.locate(path),
        )

    def _rule(
        self, source: SourceDocument, path: NodePath, item: Any, mode: Mode, on_error: OnError
    ) -> Rule | None:
        expression = self.expression(source, (*path, "expression"), item["expression"])
        if expression is None:
            return None
        return Rule(
            name=item["name"],
            expression=expression,
            error_class=ErrorClass(item["error_class"]),
            route=Route(item["route"]) if "route" in item else None,
            message=Template.of(item["message"]),
            user_message=Template.of(item["user_message"]) if "user_message" in item else None,
            hint=item.get("hint"),
            mode=Mode(item.get("mode", mode)),
            on_error=OnError(item.get("on_error", on_error)),
            location=source.locate(path),
        )

    # -- AccessPolicy

    def _add_policy(self, source: SourceDocument, ref: DocumentRef) -> None:
        spec = source.data["spec"]
        self.policy_documents.append(ref)
        if "session" in spec:
            if self.session_schema is not None:
                self.error(source, ("spec", "session"), "duplicate-session-schema",
                           "the session schema is already declared by another AccessPolicy; "
                           "declare it once")
            else:
                try:
                    check_json_schema(spec["session"])
                    self.session_schema = spec["session"]
                except SchemaError as error:
                    self.error(source, ("spec", "session"), "schema",
                               f"spec.session is not a valid JSON Schema: {error.message}")
        if "actor" in spec:
            if self.actor_schema is not None:
                self.error(source, ("spec", "actor"), "duplicate-actor-schema",
                           "the actor schema is already declared by another AccessPolicy; "
                           "declare it once")
            else:
                try:
                    check_json_schema(spec["actor"])
                    self.actor_schema = spec["actor"]
                except SchemaError as error:
                    self.error(source, ("spec", "actor"), "schema",
                               f"spec.actor is not a valid JSON Schema: {error.message}")
        mode = Mode(spec.get("mode", "enforce"))
        on_error = OnError(spec.get("on_error", "fail_closed"))
        for index, item in enumerate(spec["rules"]):
            path = ("spec", "rules", index)
            when = self.expression(source, (*path, "when"), item["when"])
            if when is None:
                continue
            self.access_rules.append(AccessRule(
                name=item["name"],
                effect=item["effect"],
                tools=frozenset(item["tools"]),
                when=when,
                message=Template.of(item["message"]) if "message" in item else None,
                mode=Mode(item.get("mode", mode)),
                on_error=OnError(item.get("on_error", on_error)),
                document=ref,
                location=source.locate(path),
            ))

    # -- RoutingTable

    def _add_routing(self, source: SourceDocument, ref: DocumentRef) -> None:
        if self.routing is not None and self.routing_source is not None:
            self.error(source, (), "duplicate-routing-table",
                       f"a RoutingTable is already defined at {self.routing_source.locate(())}; "
                       "a gate uses exactly one")
            return
        self.routing = build_routing(source.data["spec"], ref)
        self.routing_source = source

    # -- the end

    def finish(self) -> GateConfig | None:
        if any(f.severity == "error" for f in self.findings):
            return None
        actor_validator = (
            argument_validator(self.actor_schema) if self.actor_schema is not None else None
        )
        session_validator = (
            argument_validator(self.session_schema) if self.session_schema is not None
            else None
        )
        contracts = {
            name: replace(contract, private_lookups=tuple(records_read(
                contract, tuple(rule for rule in self.access_rules if rule.applies_to(name)))))
            for name, contract in self.contracts.items()
        }
        return GateConfig(
            contracts=contracts,
            policies=AccessPolicies(
                rules=tuple(self.access_rules),
                actor_validator=actor_validator,
                actor_schema=self.actor_schema,
                documents=tuple(self.policy_documents),
                session_validator=session_validator,
                session_schema=self.session_schema,
                actor_valid=validity_check(actor_validator)
                if actor_validator is not None else None,
                session_valid=validity_check(session_validator)
                if session_validator is not None else None,
            ),
            routing=self.routing or build_routing({}, None),
            documents=tuple(self.documents),
        )


def build_routing(spec: Mapping[str, Any], ref: DocumentRef | None) -> Routing:
    routes = dict(DEFAULT_ROUTES)
    routes.update({ErrorClass(k): Route(v) for k, v in spec.get("routes", {}).items()})
    messages = {
        ErrorClass(k): MessagePair(
            Template.of(v["agent"]) if "agent" in v else None,
            Template.of(v["user"]) if "user" in v else None,
        )
        for k, v in spec.get("messages", {}).items()
    }
    budgets_spec = spec.get("budgets", {})
    backoff = budgets_spec.get("backoff", {})
    defaults = Budgets()
    budgets = Budgets(
        regenerations_per_call=budgets_spec.get(
            "regenerations_per_call", defaults.regenerations_per_call),
        retries_per_call=budgets_spec.get("retries_per_call", defaults.retries_per_call),
        backoff_base_seconds=parse_duration(backoff.get("base", defaults.backoff_base_seconds)),
        backoff_max_seconds=parse_duration(backoff.get("max", defaults.backoff_max_seconds)),
        backoff_multiplier=float(backoff.get("multiplier", defaults.backoff_multiplier)),
        call_deadline_seconds=parse_duration(
            budgets_spec.get("call_deadline", defaults.call_deadline_seconds)),
        calls_per_tool_per_run=budgets_spec.get(
            "calls_per_tool_per_run", defaults.calls_per_tool_per_run),
        failures_per_run=budgets_spec.get("failures_per_run", defaults.failures_per_run),
        run_deadline_seconds=parse_duration(
            budgets_spec.get("run_deadline", defaults.run_deadline_seconds)),
    )
    on_limit = spec.get("on_limit", {"path": "hand_over"})
    limits = InputLimits(**spec.get("input", {}))
    receipts = spec.get("receipts", {})
    return Routing(
        routes=routes,
        messages=messages,
        budgets=budgets,
        on_limit=LimitPath(on_limit["path"]),
        on_limit_messages=MessagePair(
            Template.of(on_limit["agent"]) if "agent" in on_limit else None,
            Template.of(on_limit["user"]) if "user" in on_limit else None,
        ),
        input_limits=limits,
        confirmation_expires_seconds=parse_duration(
            spec.get("confirmation", {}).get("expires", "15m")),
        lease_seconds=parse_duration(receipts.get("lease", "60s")),
        retention_seconds=parse_duration(receipts.get("retention", "720h")),
        document=ref,
        provenance=_thresholds(spec.get("provenance", {})),
    )


def _thresholds(spec: Mapping[str, Any]) -> Thresholds:
    defaults = Thresholds()
    common = spec.get("common_values")
    return Thresholds(
        min_string_length=spec.get("min_string_length", defaults.min_string_length),
        min_number_digits=spec.get("min_number_digits", defaults.min_number_digits),
        common_values=frozenset(v.casefold() for v in common) if common is not None
        else defaults.common_values,
    )


def _as_tuple(value: str | list[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def dotted(path: Iterable[str | int]) -> str:
    """("spec", "rules", 2, "when") → ``spec.rules[2].when``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part != "<key>":
            text += f".{part}" if text else str(part)
    return text


