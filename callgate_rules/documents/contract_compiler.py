"""The ToolContract part of the document compiler: a contract's arguments and result
schemas checked, its lookups, rules, labels, confirmation and ``approval_covers`` compiled
into a ``Contract``.

``ContractCompiler`` is a part of ``documents.compiler``'s compiler, which brings the
findings (``error``), the CEL (``expression``) and the check of a schema's patterns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jsonschema.exceptions import SchemaError

from callgate_rules.documents.durations import parse_duration
from callgate_rules.documents.findings import dotted
from callgate_rules.documents.model import (
    Confirmation,
    Contract,
    DocumentRef,
    ErrorMapping,
    Example,
    Idempotency,
    Lookup,
    Mode,
    OnError,
    ResultLabel,
    Rule,
    Template,
)
from callgate_rules.documents.schemacheck import validity_check
from callgate_rules.documents.source import NodePath, SourceDocument
from callgate_rules.documents.validators import (
    argument_validator,
    check_json_schema,
    closed_objects,
)
from callgate_rules.taxonomy import ErrorClass, Route

if TYPE_CHECKING:
    from callgate_rules.cel.expression import CompiledExpression


class ContractCompiler:
    """The ToolContract methods of the compiler (see the module's docstring)."""

    contracts: dict[str, Contract]
    contract_sources: dict[str, SourceDocument]

    if TYPE_CHECKING:  # supplied by the compiler (documents.compiler)
        def error(self, source: SourceDocument, path: NodePath, code: str,
                  message: str) -> None: ...

        def expression(self, source: SourceDocument, path: NodePath,
                       text: str) -> CompiledExpression | None: ...

        def _patterns_linear(self, source: SourceDocument, path: NodePath,
                             schema: Any) -> bool: ...

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
        if not self._patterns_linear(source, ("spec", "arguments"), schema):
            return
        try:
            check_json_schema(spec.get("result", {}))
        except SchemaError as error:
            self.error(source, ("spec", "result", *error.absolute_path), "schema",
                       f"spec.result is not a valid JSON Schema: {error.message}")
            return
        self.contracts[ref.name] = self._contract(source, ref, spec, schema)
        self.contract_sources[ref.name] = source

    def _contract(self, source: SourceDocument, ref: DocumentRef, spec: Mapping[str, Any],
                  schema: Mapping[str, Any]) -> Contract:
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
        reconcile = spec.get("reconcile", {})
        return Contract(
            document=ref,
            effect=spec["effect"],
            arguments_schema=schema,
            validator=validator,
            arguments_valid=validity_check(validator),
            lookups=lookups,
            rules=rules,
            verify=self.expression(source, ("spec", "verify", "expression"),
                                   verify["expression"]) if verify else None,
            verify_message=Template.of(verify["message"]) if verify and "message" in verify
            else None,
            reconcile_match=self.expression(source, ("spec", "reconcile", "match"),
                                            reconcile["match"]) if "match" in reconcile
            else None,
            timeout_seconds=parse_duration(spec.get("timeout", 10)),
            idempotency=Idempotency(spec.get("idempotency", "none")),
            confirmation=_confirmation(spec.get("confirmation", {}), self._approval_covers(
                source, ("spec", "confirmation"), spec.get("confirmation", {}),
                bool(spec.get("confirmation", {}).get("required")), "required is not true")),
            mask=tuple(tuple(p.split(".")) for p in spec.get("mask", [])),
            examples=tuple(Example(item["arguments"], item.get("description"))
                           for item in spec["examples"]),
            errors=tuple(
                ErrorMapping(item.get("exception"), item.get("attribute"), item.get("equals"),
                             ErrorClass(item["error_class"]))
                for item in spec.get("errors", [])),
            mode=mode,
            on_error=on_error,
            reconcile_tool=reconcile.get("tool"),
            reconcile_argument=reconcile.get("argument", "operation_id"),
            title=spec.get("title"),
            result_schema=spec.get("result"),
            deduplication_window_seconds=parse_duration(spec["deduplication_window"])
            if "deduplication_window" in spec else None,
            labels=tuple(
                label for name, declared in spec.get("labels", {}).items()
                if (label := self._result_label(source, name, declared)) is not None),
        )

    def _result_label(self, source: SourceDocument, name: str,
                      declared: str | Mapping[str, str]) -> ResultLabel | None:
        """One of ``spec.labels``: a CEL text (the whole result) or ``{each, where}``."""
        path: NodePath = ("spec", "labels", name)
        if isinstance(declared, str):
            whole = self.expression(source, path, declared)
            return None if whole is None else ResultLabel(name, whole=whole)
        each = self.expression(source, (*path, "each"), declared["each"])
        where = self.expression(source, (*path, "where"), declared["where"])
        if each is None or where is None:
            return None
        return ResultLabel(name, each=each, where=where)

    def _lookup(self, source: SourceDocument, path: NodePath, item: Any) -> Lookup | None:
        key = self.expression(source, (*path, "key"), item["key"])
        when = self.expression(source, (*path, "when"), item["when"]) if "when" in item else None
        visible = (self.expression(source, (*path, "visible"), item["visible"])
            if "visible" in item else None)
        labels = tuple(
            (label, compiled) for label, text in item.get("labels", {}).items()
            if (compiled := self.expression(source, (*path, "labels", label), text))
            is not None)
        if "max_records" in item and item.get("many", "ambiguous") != "list":
            self.error(source, (*path, "max_records"), "max-records",
                       f"{dotted((*path, 'max_records'))}: bounds a list, and this look-up "
                       "binds one record (several are ambiguous); add many: list or remove "
                       "max_records")
        if (key is None or ("when" in item and when is None) or
                ("visible" in item and visible is None) or
                len(labels) < len(item.get("labels", {}))):
            return None
        return Lookup(
            name=item["name"],
            collection=item["collection"],
            key=key,
            fields=_as_tuple(item.get("field", "id")),
            when=when,
            visible=visible,
            many=item.get("many", "ambiguous"),
            max_records=item.get("max_records"),
            candidate_fields=tuple(item.get("candidate_fields", ("id",))),
            record_schema=item.get("schema"),
            message=Template.of(item["message"]) if "message" in item else None,
            location=source.locate(path),
            labels=labels,
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
            approval_covers=self._approval_covers(
                source, path, item, item["error_class"] == "confirmation_required",
                "error_class is not confirmation_required"),
        )

    def _approval_covers(self, source: SourceDocument, path: NodePath, item: Mapping[str, Any],
                         asks: bool, why_not: str) -> tuple[tuple[str, ...], ...]:
        """``approval_covers`` of a rule or of ``spec.confirmation`` (``asks``: whether it
        holds calls for a person; ``why_not``: what to say when it does not), each path
        checked against the arguments schema: a path that names no argument would read
        "absent" on every call, and so cover any value."""
        declared = item.get("approval_covers")
        if declared is None:
            return ()
        where = (*path, "approval_covers")
        if not asks:
            self.error(source, where, "approval-covers",
                       f"{dotted(where)}: only a question for a person can be covered by "
                       f"an earlier approval, and here {why_not}; remove approval_covers")
            return ()
        schema = source.data["spec"]["arguments"]
        paths = []
        for index, text in enumerate(declared):
            parts = tuple(text.split("."))[1:] if text.startswith("args.") else ()
            if not names_an_argument(schema, parts):
                self.error(source, (*where, index), "approval-covers-path",
                           f"{dotted(where)}[{index}]: {text!r} names no argument of this "
                           f"tool; name one its arguments declare (args.<name>): "
                           f"{', '.join('args.' + n for n in schema.get('properties', {}))}")
            elif touches_mask(parts, tuple(tuple(m.split("."))
                                           for m in source.data["spec"].get("mask", []))):
                self.error(source, (*where, index), "approval-covers-path",
                           f"{dotted(where)}[{index}]: {text!r} is masked (spec.mask); an "
                           "approval keeps a hash of the value it covers, and a secret's "
                           "hash is not kept: remove it from approval_covers")
            paths.append(parts)
        return tuple(paths)


def _confirmation(spec: Mapping[str, Any],
                  approval_covers: tuple[tuple[str, ...], ...] = ()) -> Confirmation:
    return Confirmation(
        required=bool(spec.get("required", False)),
        summary=Template.of(spec["summary"]) if "summary" in spec else None,
        expires_seconds=parse_duration(spec["expires"]) if "expires" in spec else None,
        approval_covers=approval_covers,
    )


def touches_mask(parts: tuple[str, ...], masks: tuple[tuple[str, ...], ...]) -> bool:
    """Is the argument at ``parts`` masked (``spec.mask``), inside a masked one, or does it
    hold a masked one?"""
    return any(parts[:len(masked)] == masked or masked[:len(parts)] == parts
               for masked in masks)


def names_an_argument(schema: Any, parts: tuple[str, ...]) -> bool:
    """Does the arguments schema declare the property at ``parts`` (through nested
    objects' ``properties``)?"""
    for part in parts:
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(properties, Mapping) or part not in properties:
            return False
        schema = properties[part]
    return bool(parts)


def _as_tuple(value: str | list[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)
