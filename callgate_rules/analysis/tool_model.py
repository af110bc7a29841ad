"""When a call of one tool executes, as z3 formulas over the call's variables.

The pipeline's steps, as ``pipeline.plan`` orders them: the arguments, the actor and the
session must match their schemas (``encode.Symbols.domain``); each look-up must find its
record and the actor must be allowed to see it (``visible``); AUTHORIZE: no enforced deny
matches (a deny that fails to evaluate matches unless ``on_error: ignore``), some enforced
allow matches (an error never allows); VALIDATE: every enforced rule holds (an error counts
as a failure unless ``on_error: ignore``). Rules in ``warn`` or ``audit`` mode never change
the route. A rule with ``error_class: confirmation_required`` that fails, or the contract's
``confirmation.required``, turns "execute" into "await_confirmation" — when every other rule
holds, as the plan lets later rules speak after a confirmation rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import z3

from callgate_rules.analysis.encode import Encoder, NotEncoded, Opaque, Symbols
from callgate_rules.cel import syntax
from callgate_rules.cel.expression import CompiledExpression
from callgate_rules.documents.model import GateConfig, Lookup, Mode, OnError
from callgate_rules.errors import Location
from callgate_rules.taxonomy import ErrorClass

ROUTES = ("execute", "await_confirmation", "refused")


@dataclass(frozen=True)
class NotAnalysed:
    """A part of a rule the solver treats as unknown, and where it is."""

    what: str
    place: str  # file:line:col of the rule, and the place inside its expression
    subject: str  # the rule or look-up it belongs to


@dataclass
class Verdict:
    """One rule's condition: ``kind`` "rule", "allow", "deny" or "lookup"; ``holds`` and
    ``blocks`` as z3 formulas (a rule's error counted by its ``on_error``)."""

    name: str
    kind: str
    location: Location
    mode: str
    confirms: bool
    value: z3.BoolRef
    error: z3.BoolRef
    holds: z3.BoolRef  # the rule lets the call through (allow: matches)
    opaque: tuple[Opaque, ...] = ()
    # the field paths its CEL reads, encoded or not (``record`` in ``visible`` is named
    # by its look-up): what ``unread`` asks of a rule
    reads: frozenset[tuple[str, ...]] = frozenset()


@dataclass
class ToolModel:
    tool: str
    symbols: Symbols
    domain: z3.BoolRef  # schemas of args, actor, session and records
    found: z3.BoolRef  # every look-up found a record the actor may see
    authorized: z3.BoolRef
    rules_pass: z3.BoolRef  # every enforced rule that does not ask for confirmation holds
    confirmed: z3.BoolRef  # no confirmation is asked
    verdicts: list[Verdict]
    not_analysed: list[NotAnalysed] = field(default_factory=list)
    lookups: tuple[Lookup, ...] = ()
    unknowns: list[Opaque] = field(default_factory=list)

    @property
    def reached(self) -> z3.BoolRef:
        """The call passes its schemas and finds its records: the rules get to decide."""
        return z3.And(self.domain, self.found)

    def route(self, route: str) -> z3.BoolRef:
        passes = z3.And(self.reached, self.authorized, self.rules_pass)
        if route == "execute":
            return z3.And(passes, self.confirmed)
        if route == "await_confirmation":
            return z3.And(passes, z3.Not(self.confirmed))
        return z3.Not(passes)

    @property
    def opaque(self) -> list[Opaque]:
        seen: list[Opaque] = list(self.unknowns)
        for verdict in self.verdicts:
            seen.extend(o for o in verdict.opaque if o not in seen)
        return seen


def build(config: GateConfig, tool: str, opaque: dict[str, Opaque]) -> ToolModel:
    """The model of ``tool`` in ``config``; ``opaque`` is shared by the configurations
    compared, so the same unencoded text is the same unknown in both."""
    contract = config.contracts[tool]
    encoded = [lk for lk in contract.lookups if lk.many != "list" and lk.when is None]
    roots: dict[str, Mapping[str, Any] | None] = {
        "args": contract.arguments_schema,
        "actor": config.policies.actor_schema or {},
        "session": config.policies.session_schema or {},
        **{lk.name: lk.record_schema or {} for lk in encoded}}
    symbols = Symbols(roots)
    symbols.declare_required()
    verdicts: list[Verdict] = []
    unknowns: list[Opaque] = []  # look-ups not encoded: whether they succeed is unknown
    notes: list[NotAnalysed] = []

    def verdict(name: str, kind: str, location: Location, compiled: CompiledExpression,
                mode: Mode, on_error: OnError, confirms: bool = False,
                record: Lookup | None = None) -> Verdict:
        tree = compiled.tree
        # ``record`` in ``visible`` is the look-up's record
        encoder = Encoder(symbols if record is None else RecordAlias(symbols, record.name),
                          tool, opaque, record.name if record else "")
        if tree is None:
            value, error = encoder.condition(syntax.Ident("__missing_tree__"))
        else:
            value, error = encoder.condition(tree)
        for item in encoder.used:
            notes.append(NotAnalysed(item.what, f"{location} (expression {item.line}:"
                                     f"{item.column}: {item.text})", name))
        ignore = on_error == OnError.IGNORE
        if kind == "deny":
            holds = z3.Or(z3.And(value, z3.Not(error)), z3.And(error, z3.BoolVal(not ignore)))
        elif kind == "allow":
            holds = z3.And(value, z3.Not(error))
        else:
            holds = z3.Or(z3.And(value, z3.Not(error)), z3.And(error, z3.BoolVal(ignore)))
        reads = frozenset((record.name, *path[1:]) if record and path[0] == "record"
                          else path for path in compiled.references)
        made = Verdict(name, kind, location, str(mode), confirms, value, error, holds,
                       tuple(encoder.used), reads)
        verdicts.append(made)
        return made

    found: list[z3.BoolRef] = []
    for lookup in contract.lookups:
        if lookup in encoded:
            found.append(_lookup_found(symbols, tool, opaque, lookup, notes, unknowns))
            if lookup.visible is not None:
                seen = verdict(f"{lookup.name}.visible", "lookup", lookup.location,
                               lookup.visible, Mode.ENFORCE, OnError.FAIL_CLOSED,
                               record=lookup)
                found.append(seen.holds)
        else:
            why = "many: list" if lookup.many == "list" else "a when condition"
            what = f"look-up {lookup.name} with {why}"
            found.append(_unknown(opaque, unknowns, tool, f"{lookup.name} succeeds", what).value)
            notes.append(NotAnalysed(what, str(lookup.location), lookup.name))
    denies: list[z3.BoolRef] = []
    allows: list[z3.BoolRef] = []
    for rule in config.policies.rules_for(tool):
        made = verdict(rule.qualified_name, rule.effect, rule.location, rule.when,
                       rule.mode, rule.on_error)
        if rule.mode == Mode.ENFORCE:
            (denies if rule.effect == "deny" else allows).append(made.holds)
    blocking: list[z3.BoolRef] = []
    confirming: list[z3.BoolRef] = []
    for business in contract.rules:
        confirms = business.error_class == ErrorClass.CONFIRMATION_REQUIRED
        made = verdict(f"{tool}/{business.name}", "rule", business.location,
                       business.expression, business.mode, business.on_error, confirms)
        if business.mode == Mode.ENFORCE:
            (confirming if confirms else blocking).append(made.holds)
    confirmed = z3.And(*confirming, z3.BoolVal(not contract.confirmation.required))
    return ToolModel(
        tool, symbols, symbols.domain(), z3.And(*found),
        z3.And(z3.Not(z3.Or(*denies)), z3.Or(*allows)), z3.And(*blocking), confirmed,
        verdicts, notes, tuple(encoded), unknowns)


class RecordAlias(Symbols):
    """``symbols`` with ``record`` standing for one look-up's record (``visible``)."""

    def __init__(self, symbols: Symbols, name: str) -> None:
        super().__init__({**symbols.roots, "record": symbols.roots[name]})
        self.inner, self.name = symbols, name
        self.variables = symbols.variables

    def _real(self, path: tuple[str, ...]) -> tuple[str, ...]:
        return (self.name, *path[1:]) if path and path[0] == "record" else path

    def schema_at(self, path: tuple[str, ...]) -> Mapping[str, Any] | None:
        return self.inner.schema_at(self._real(path))

    def variable(self, path: tuple[str, ...], at: syntax.Position) -> Any:
        return self.inner.variable(self._real(path), at)


def _unknown(opaque: dict[str, Opaque], unknowns: list[Opaque], tool: str, text: str,
             what: str) -> Opaque:
    key = f"{tool}\x00lookup {text}"
    if key not in opaque:
        opaque[key] = Opaque(text, what, 0, 0, z3.Bool(f"lookup {tool}.{text}"),
                             z3.BoolVal(False))
    if opaque[key] not in unknowns:
        unknowns.append(opaque[key])
    return opaque[key]


def _lookup_found(symbols: Symbols, tool: str, opaque: dict[str, Opaque], lookup: Lookup,
                  notes: list[NotAnalysed], unknowns: list[Opaque]) -> z3.BoolRef:
    """The record's key field equals the key; a key that is not encoded is an unknown."""
    encoder = Encoder(symbols, tool, opaque)
    tree = lookup.key.tree
    try:
        if tree is None:
            raise NotEncoded("the key's syntax tree is not available", syntax.Position())
        key = encoder.term(tree)
        field_var = symbols.variable((lookup.name, lookup.fields[0]), syntax.Position())
        if key.kind != field_var.kind:
            raise NotEncoded(f"key of kind {key.kind} against {field_var.kind}",
                             syntax.Position())
        return z3.And(z3.Not(key.error), field_var.present, field_var.term == key.value)
    except NotEncoded as missing:
        notes.append(NotAnalysed(f"key of look-up {lookup.name}: {missing.what}",
                                 str(lookup.location), lookup.name))
        return _unknown(opaque, unknowns, tool, f"{lookup.name} finds its record",
                        missing.what).value
