"""YAML documents in, one immutable ``GateConfig`` out — or findings that say what to fix.

Compilation happens once, at load. It validates each document against the JSON Schema
of its kind (``validators``), builds every argument validator, parses and prepares every
CEL expression, and splits message templates. Nothing on the decision path reads YAML or
parses CEL afterwards. This module reads the documents and builds the AccessPolicies; the
ToolContracts are built by ``contract_compiler``, the RoutingTable by ``routing``, findings
are said by ``findings``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from jsonschema.exceptions import SchemaError

from callgate_rules.cel.definitions import Definitions
from callgate_rules.cel.errors import CelSyntaxError
from callgate_rules.cel.expression import CompiledExpression, compile_expression
from callgate_rules.documents.contract_compiler import ContractCompiler
from callgate_rules.documents.definitions import (
    SharedDefinitions,
    cel_text,
    located,
    shared_definitions,
)
from callgate_rules.documents.durations import parse_duration
from callgate_rules.documents.findings import (
    Finding,
    dotted,
    finding_from_input_error,
    schema_error_messages,
)
from callgate_rules.documents.model import (
    AccessPolicies,
    AccessRule,
    Contract,
    DocumentRef,
    GateConfig,
    Mode,
    OnError,
    Routing,
    Template,
    records_read,
)
from callgate_rules.documents.routing import build_routing
from callgate_rules.documents.schemacheck import validity_check
from callgate_rules.documents.sequences import SequenceRule, compile_sequence
from callgate_rules.documents.snapshot import (
    COMPILATIONS,
    read_configuration,
    remember_compilation,
    remembered_compilation,
)
from callgate_rules.documents.source import NodePath, SourceDocument, parse_yaml_text
from callgate_rules.documents.validators import (
    FORMAT_CHECKER,
    argument_validator,
    check_json_schema,
    closed_objects,
    document_schema,
    document_valid,
    refused_patterns,
)
from callgate_rules.errors import ConfigError, InputError

# Imported from here across the repository; they live in the modules named above.
__all__ = [
    "FORMAT_CHECKER", "KINDS", "OTHER_KINDS", "Compilation", "Finding", "build_routing",
    "closed_objects", "compile_documents", "compile_paths", "document_schema", "dotted",
    "load", "parse_duration",
]

KINDS = ("ToolContract", "AccessPolicy", "RoutingTable", "Definitions")
# Where a RoutingTable may send a call outside its run's intent (``spec.intent.outside``):
# a person, a refusal, a question, another step; "rules": the rules decide.
INTENT_OUTSIDE = ("await_confirmation", "refuse", "clarify", "review", "replan", "rules")
# Documents that live beside the policies but are not part of the gate: PolicyTests are
# read by `callgate test`, PolicyAssertions by `callgate analyze check`; a RunIntent is
# declared for one run (``Gate.declare_intent``), an example of one may sit beside them.
OTHER_KINDS = ("PolicyTest", "PolicyAssertion", "RunIntent")


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


def load(paths: str | Path | Iterable[str | Path]) -> GateConfig:
    """Compile every document under ``paths`` (one path, or several); raise ``ConfigError``
    listing each problem."""
    compilation = compile_paths(paths)
    if compilation.errors or compilation.config is None:
        raise ConfigError(list(compilation.errors))
    return compilation.config


def load_config_for(contracts: str, policies: str) -> GateConfig:
    """The documents under both directories (the commands' ``--contracts`` and
    ``--policies``); a directory that is not there is an error, so a typo never silently
    yields a gate without contracts or without rights."""
    for option, path in (("--contracts", contracts), ("--policies", policies)):
        if not Path(path).exists():
            raise InputError(f"{option} {path}: no such directory; run from the directory "
                             f"that holds contracts/ and policies/, or pass {option}")
    return load([contracts, policies])


def compile_paths(paths: str | Path | Iterable[str | Path], *,
                  advanced: Callable[[int], None] | None = None) -> Compilation:
    # A single path is one path: a string is iterable, and its characters are not paths.
    listed = [paths] if isinstance(paths, str | Path) else list(paths)
    configuration = read_configuration(Path(p) for p in listed)
    key = configuration.key(COMPILATIONS)  # unchanged files: their compilation, whole
    if (kept := remembered_compilation(key, Compilation)) is not None:
        if advanced is not None:
            advanced(len({source.path for source in kept.sources}))
        return kept
    sources: list[SourceDocument] = []
    findings: list[Finding] = []
    for file in configuration.files:
        try:
            if file.error is not None:
                raise file.error
            sources.extend(parse_yaml_text(file.text or "", str(file.path), file.key))
        except InputError as error:
            findings.append(finding_from_input_error(str(error), str(file.path)))
    compilation = compile_documents(sources, advanced=advanced)
    compilation = replace(
        compilation,
        config=compilation.config if not findings else None,
        findings=tuple(findings) + compilation.findings,
    )
    remember_compilation(key, compilation)
    return compilation


def compile_documents(sources: Iterable[SourceDocument], *,
                      advanced: Callable[[int], None] | None = None) -> Compilation:
    """Compile ``sources``; ``advanced(1)`` after each file's last document (a progress
    bar's ``update``)."""
    compiler = _Compiler()
    sources = tuple(sources)
    compiler.define(located(sources))  # first: every rule may use them, in any file
    for index, source in enumerate(sources):
        compiler.add(source)
        if advanced is not None and (index + 1 == len(sources)
                                     or sources[index + 1].path != source.path):
            advanced(1)
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


# The compiler --------------------------------------------------------------------------------


class _Compiler(ContractCompiler):
    """The state of one compilation: what each document added, and every finding so far."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.contracts: dict[str, Contract] = {}
        self.contract_sources: dict[str, SourceDocument] = {}
        self.access_rules: list[AccessRule] = []
        self.sequence_rules: list[SequenceRule] = []  # spec.sequences, added when finished
        self.policy_documents: list[DocumentRef] = []
        self.actor_schema: Mapping[str, Any] | None = None
        self.session_schema: Mapping[str, Any] | None = None
        self.routing: Routing | None = None
        self.routing_source: SourceDocument | None = None
        self.documents: list[DocumentRef] = []
        # Identical CEL (``args.ticketId``, ``!has(ticket.deleted_at)``) recurs across
        # contracts; a CompiledExpression is immutable, so one per distinct text is enough.
        self.compiled: dict[str, CompiledExpression] = {}
        self.shared = SharedDefinitions(Definitions({}, {}))
        self.definition_documents: list[DocumentRef] = []
        self.defined: set[int] = set()  # the Definitions documents valid against their schema

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
            return  # read by `callgate test` or `callgate analyze`, not part of the gate
        if kind not in KINDS:
            self.error(source, ("kind",), "schema",
                       f"kind {kind!r} is not one of {', '.join(KINDS)}")
            return
        if kind == "Definitions":  # read by ``define`` before any document
            if id(source) in self.defined:
                self.definition_documents.append(self._ref(source))
                self.documents.append(self.definition_documents[-1])
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
        if document_valid(kind)(source.data):
            return True  # the compiled verdict; jsonschema lists the errors of the others
        errors = sorted(
            document_schema(kind).iter_errors(source.data),
            key=lambda e: (list(map(str, e.absolute_path)), e.message),
        )
        for error in errors:
            for path, message in schema_error_messages(error, source.written):
                self.error(source, path, "schema", message)
        return not errors

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

    # -- Definitions

    def define(self, sources: list[SourceDocument]) -> None:
        """The configuration's named definitions; each compiled once on its own, so that
        an error in one is reported at its own place."""
        valid = [source for source in sources if self._schema_valid(source, "Definitions")]
        self.defined = {id(source) for source in valid}
        self.shared = shared_definitions(valid)
        self.findings.extend(self.shared.findings)
        definitions = self.shared.definitions
        for name, (source, key) in sorted(self.shared.places.items()):
            if name in definitions.names:
                self._compiled(source, ("spec", "definitions", key),
                               cel_text(source.data["spec"]["definitions"][key]))
        definitions.used.clear()  # compiled on their own: not yet used by any rule

    # -- CEL and templates

    def expression(
        self, source: SourceDocument, path: NodePath, text: str
    ) -> CompiledExpression | None:
        compiled = self.compiled.get(text)
        if compiled is None:
            compiled = self._compiled(source, path, text)
            if compiled is None:
                return None
            self.compiled[text] = compiled
        return compiled

    def _compiled(self, source: SourceDocument, path: NodePath,
                  text: str) -> CompiledExpression | None:
        """``text`` compiled with the configuration's definitions, or a finding at the
        place of what is wrong."""
        try:
            compiled = compile_expression(text, self.shared.definitions)
        except CelSyntaxError as error:
            place = source.locate_in_scalar(path, error.line, error.column)
            self.findings.append(Finding(place, "error", error.code,
                                         f"{dotted(path)}: {error}"))
            return None
        for problem, line, column in compiled.refused_patterns:
            place = source.locate_in_scalar(path, line, column)
            self.findings.append(Finding(place, "error", "regex", f"{dotted(path)}: {problem}"))
        return compiled

    # -- AccessPolicy

    def _add_policy(self, source: SourceDocument, ref: DocumentRef) -> None:
        spec = source.data["spec"]
        self.policy_documents.append(ref)
        self.session_schema = self._declared_schema(source, spec, "session", self.session_schema)
        self.actor_schema = self._declared_schema(source, spec, "actor", self.actor_schema)
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
        for index, item in enumerate(spec.get("sequences", ())):
            sequence = compile_sequence(item, source, ("spec", "sequences", index),
                                        self.expression, ref, mode, on_error)
            if sequence is not None:
                self.sequence_rules.append(sequence)

    def _declared_schema(self, source: SourceDocument, spec: Mapping[str, Any], name: str,
                         declared: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """The actor or session schema (``name``) once this AccessPolicy is read: the one
        ``declared`` by an earlier policy, else this policy's if it is a valid JSON Schema.
        Only one AccessPolicy may declare each."""
        if name not in spec:
            return declared
        if declared is not None:
            self.error(source, ("spec", name), f"duplicate-{name}-schema",
                       f"the {name} schema is already declared by another AccessPolicy; "
                       "declare it once")
            return declared
        try:
            check_json_schema(spec[name])
        except SchemaError as error:
            self.error(source, ("spec", name), "schema",
                       f"spec.{name} is not a valid JSON Schema: {error.message}")
            return None
        if not self._patterns_linear(source, ("spec", name), spec[name]):
            return None
        schema: Mapping[str, Any] = spec[name]
        return schema

    def _patterns_linear(self, source: SourceDocument, path: NodePath, schema: Any) -> bool:
        """Whether every pattern of a declared schema can be matched in linear time (RE2);
        an error at each one that cannot."""
        problems = list(refused_patterns(schema))
        for place, problem in problems:
            self.error(source, (*path, *place), "regex", f"{dotted((*path, *place))}: {problem}")
        return not problems

    # -- RoutingTable

    def _add_routing(self, source: SourceDocument, ref: DocumentRef) -> None:
        if self.routing is not None and self.routing_source is not None:
            self.error(source, (), "duplicate-routing-table",
                       f"a RoutingTable is already defined at {self.routing_source.locate(())}; "
                       "a gate uses exactly one")
            return
        self.routing = build_routing(source.data["spec"], ref)
        self.routing_source = source

    def _check_intent_tools(self) -> None:
        """Every tool the RoutingTable requires an intent for is a tool of the gate, and a
        call outside an intent goes where a call can wait or stop."""
        source, routing = self.routing_source, self.routing
        if source is None or routing is None or routing.intent is None:
            return
        if routing.intent.outside not in INTENT_OUTSIDE:
            self.error(source, ("spec", "intent", "outside"), "schema",
                       f"spec.intent.outside: {routing.intent.outside!r} cannot be where a "
                       f"call outside its run's intent goes; use one of: "
                       f"{', '.join(INTENT_OUTSIDE)}")
        for index, tool in enumerate(source.data["spec"]["intent"].get("required", ())):
            if tool != "*" and tool not in self.contracts:
                self.error(source, ("spec", "intent", "required", index), "unknown-tool",
                           f"spec.intent.required[{index}]: no tool named {tool!r}; the "
                           f"tools are: {', '.join(sorted(self.contracts))}")

    # -- the end

    def finish(self) -> GateConfig | None:
        self.findings.extend(self.shared.unused(self.shared.definitions.used))
        self._check_intent_tools()
        if any(f.severity == "error" for f in self.findings):
            return None
        actor_validator = (
            argument_validator(self.actor_schema) if self.actor_schema is not None else None
        )
        session_validator = (
            argument_validator(self.session_schema) if self.session_schema is not None
            else None
        )
        # a sequence rule is a deny access rule, or a business rule of each tool it names
        access_rules = (*self.access_rules,
                        *(s.deny for s in self.sequence_rules if s.deny is not None))
        contracts = {
            name: replace(contract, private_lookups=tuple(records_read(
                contract, tuple(rule for rule in access_rules if rule.applies_to(name)))),
                rules=(*contract.rules, *(s.confirm for s in self.sequence_rules
                                          if s.confirm is not None and s.applies_to(name))))
            for name, contract in self.contracts.items()
        }
        return GateConfig(
            contracts=contracts,
            policies=AccessPolicies(
                rules=access_rules,
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
            definition_documents=tuple(self.definition_documents),
        )
