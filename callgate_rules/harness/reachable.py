"""Which error classes and routes a configuration's tools can produce at all.

``callgate test --coverage`` counts only these, so a small domain can reach 100%: a
one-tool domain without look-ups cannot produce ``not_found``, one without a confirmation
cannot ``await_confirmation``. Each one left out comes with the reason, read from the
documents. The reading is deliberately conservative — when in doubt an item is left out —
and whatever a case actually produces counts as reachable whatever this module says, so a
test suite is never asked for something impossible and never loses credit for what it did.

What counts as reachable, by error class:

- ``malformed``, ``unknown_tool``, ``forbidden``: always (any text, any name, default deny);
- ``invalid_argument``: a contract declares argument properties or required fields, or a
  rule says so; ``unexpected_argument``: a contract closes an object of its arguments
  (``additionalProperties: false``);
- ``not_found``: a contract looks a record up; ``ambiguous``: a look-up by a field other than
  ``id`` that does not keep every match (``many: list``);
- ``conflict``, ``transient``, ``unknown_outcome``, ``permanent``, ``budget_exhausted``: any
  tool (the destination can refuse, fail, time out, and budgets always apply);
- ``confirmation_required``: a contract requires a confirmation;
- ``duplicate``: any write; ``reconcile_failed``: a write whose answer is checked
  (``verify``, ``reconcile.match``) or whose unknown outcome cannot be resent
  (``idempotency: lookup`` or ``none``);
- ``answer_too_large``: never counted: only an executor that bounds the bytes of its
  answer raises it (the MCP gateway's upstream calls), and a test's world does not.

A business rule makes its own error class (and route, if it names one) reachable. A route
is reachable when a reachable error class is routed to it by the RoutingTable, plus
``execute`` and ``return_result`` (any tool), ``return_receipt`` (``duplicate``),
``review`` (``reconcile_failed``, or a limit handed over), ``reconcile`` (a write whose
unknown outcome the RoutingTable reconciles) and ``retry`` (a reachable class routed there).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from callgate_rules.documents.model import Contract, GateConfig, Idempotency, LimitPath
from callgate_rules.taxonomy import ErrorClass, Route

_ANY_TOOL = (ErrorClass.CONFLICT, ErrorClass.TRANSIENT, ErrorClass.UNKNOWN_OUTCOME,
             ErrorClass.PERMANENT, ErrorClass.BUDGET_EXHAUSTED)
_LIMIT_ROUTES = {LimitPath.HAND_OVER: Route.REVIEW, LimitPath.REFUSE: Route.REFUSE,
                 LimitPath.PARTIAL_RESULT: Route.REFUSE}


@dataclass(frozen=True)
class Reachable:
    """The reachable error classes and routes; ``left_out`` says why each other one is not."""

    error_classes: frozenset[str]
    routes: frozenset[str]
    left_out: Mapping[str, str]  # "error class X" / "route Y" → why no case can produce it


def reachable(config: GateConfig) -> Reachable:
    contracts = list(config.contracts.values())
    classes: dict[ErrorClass, str] = {}  # reachable class → why (for the record)
    left_out: dict[str, str] = {}

    def consider(error_class: ErrorClass, why_reachable: str | None, why_not: str) -> None:
        if why_reachable is not None:
            classes.setdefault(error_class, why_reachable)
        else:
            left_out[f"error class {error_class}"] = why_not

    for always in (ErrorClass.MALFORMED, ErrorClass.UNKNOWN_TOOL, ErrorClass.FORBIDDEN):
        consider(always, "always", "")
    rule_classes = {rule.error_class for contract in contracts for rule in contract.rules}
    for error_class in rule_classes:
        consider(error_class, "a rule's error class", "")
    writes = [c for c in contracts if c.effect == "write"]
    consider(ErrorClass.INVALID_ARGUMENT, _first(c.name for c in contracts
                                                 if _constrains(c.arguments_schema)),
             "no contract declares argument properties or required arguments")
    consider(ErrorClass.UNEXPECTED_ARGUMENT, _first(c.name for c in contracts
                                                    if _closes(c.arguments_schema)),
             "no contract closes its arguments (additionalProperties: false), so an "
             "undeclared argument is never refused")
    consider(ErrorClass.NOT_FOUND, _first(c.name for c in contracts if _lookups(c)),
             "no contract looks a record up")
    consider(ErrorClass.AMBIGUOUS, _first(
        c.name for c in contracts for lookup in _lookups(c)
        if lookup.many == "ambiguous" and tuple(lookup.fields) != ("id",)),
        "every look-up is by id or keeps all matches (many: list)")
    for error_class in _ANY_TOOL:
        consider(error_class, _first(c.name for c in contracts), "no contract")
    consider(ErrorClass.CONFIRMATION_REQUIRED,
             _first(c.name for c in contracts if c.confirmation.required),
             "no contract requires a confirmation")
    consider(ErrorClass.DUPLICATE, _first(c.name for c in writes), "no write tool")
    reconciles = config.routing.routes.get(ErrorClass.UNKNOWN_OUTCOME) == Route.RECONCILE
    consider(ErrorClass.RECONCILE_FAILED, _first(
        c.name for c in writes
        if c.verify is not None or c.reconcile_match is not None
        or (reconciles and c.idempotency in (Idempotency.LOOKUP, Idempotency.NONE))),
        "no write's answer is checked (verify, reconcile.match) and every unknown outcome "
        "can be resent under the same operation ID (idempotency: key)")
    left_out[f"error class {ErrorClass.ANSWER_TOO_LARGE}"] = (
        "only an executor that bounds its answer's bytes raises it (the MCP gateway's "
        "upstream calls); a test's world answers whole")
    routes = _routes(config, set(classes), bool(writes), reconciles)
    for route in Route:
        if str(route) not in routes:
            routed_here = sorted(str(c) for c, r in config.routing.routes.items()
                                 if r == route)
            left_out[f"route {route}"] = (
                f"only {', '.join(routed_here)} {'is' if len(routed_here) == 1 else 'are'} "
                "routed to it, and left out" if routed_here
                else "the RoutingTable routes no error class to it")
    return Reachable(frozenset(str(c) for c in classes), frozenset(routes), left_out)


def _routes(config: GateConfig, classes: set[ErrorClass], any_write: bool,
            reconciles: bool) -> set[str]:
    routing = config.routing
    routes: set[Route] = set()
    if config.contracts:
        routes |= {Route.EXECUTE, Route.RETURN_RESULT}
    for error_class in classes:
        if error_class == ErrorClass.DUPLICATE:
            routes.add(Route.RETURN_RECEIPT)
        elif error_class == ErrorClass.RECONCILE_FAILED:
            routes.add(Route.REVIEW)
        elif error_class == ErrorClass.BUDGET_EXHAUSTED:
            routes.add(_LIMIT_ROUTES.get(routing.on_limit, Route.REVIEW))
        elif error_class == ErrorClass.UNKNOWN_OUTCOME:
            if any_write:
                routes.add(Route.RECONCILE if reconciles else Route.REVIEW)
        elif error_class in routing.routes:
            routes.add(routing.routes[error_class])
    for contract in config.contracts.values():
        routes |= {rule.route for rule in contract.rules
                   if rule.route is not None and rule.error_class in classes}
    return {str(route) for route in routes}


def _first(names: Iterator[str] | Any) -> str | None:
    return next(iter(names), None)


def _lookups(contract: Contract) -> tuple[Any, ...]:
    return tuple(contract.lookups)


def _constrains(schema: Any) -> bool:
    return isinstance(schema, Mapping) and bool(schema.get("properties") or
                                                schema.get("required"))


def _closes(schema: Any) -> bool:
    """An object somewhere in the arguments refuses undeclared members."""
    if isinstance(schema, Mapping):
        if (schema.get("additionalProperties") is False or
                schema.get("unevaluatedProperties") is False):
            return True
        return any(_closes(child) for child in schema.values())
    if isinstance(schema, list):
        return any(_closes(child) for child in schema)
    return False
