"""What a refusal may reveal: a forbidden outcome whose message shows record data, or whose
route lets the model try again and learn from each answer which records exist."""

from __future__ import annotations

from collections.abc import Iterator

from callgate_rules.authoring.lint.cascade import broken
from callgate_rules.authoring.lint.places import field_at, item_paths
from callgate_rules.documents.compiler import Compilation, Finding
from callgate_rules.documents.model import Template
from callgate_rules.taxonomy import ErrorClass, Route


def check_disclosure(compilation: Compilation) -> Iterator[Finding]:
    """A forbidden outcome must not carry record data: it would reveal the record exists."""
    for contract in compilation.contracts.values():
        records = {lookup.name for lookup in contract.lookups}
        for rule in contract.rules:
            if rule.error_class != ErrorClass.FORBIDDEN:
                continue
            for template in (rule.message, rule.user_message):
                for fields in template.fields if template else ():
                    if fields[0] in records:
                        yield Finding(rule.location, "error", "forbidden-leak",
                                      f"{contract.name} rule {rule.name}: its forbidden message "
                                      f"uses {{{'.'.join(fields)}}}, a field of a looked-up "
                                      "record; use only args and actor")
    all_records = {lk.name for c in compilation.contracts.values() for lk in c.lookups}
    for access in compilation.access_rules:
        for fields in access.message.fields if access.message else ():
            if fields[0] in all_records:
                yield Finding(access.location, "error", "forbidden-leak",
                              f"access rule {access.name}: its message uses "
                              f"{{{'.'.join(fields)}}}, a field of a looked-up record; "
                              "use only args and actor")
    yield from _routing_message_leaks(compilation)
    yield from _not_found_message_leaks(compilation)


# What a message about a refusal may show: what the model sent and who is asking. Anything
# else ({detail}, a record, an evaluation error) differs between a missing record and one the
# actor may not see, and so tells the model the record exists.
FORBIDDEN_MESSAGE_ROOTS = frozenset({"args", "actor", "tool", "tools"})


# A look-up's not-found text is also the text for "exists, but not yours"; it is rendered
# with only args and the tool's name (validate.not_found_message).
NOT_FOUND_MESSAGE_ROOTS = frozenset({"args", "tool"})


def _routing_message_leaks(compilation: Compilation) -> Iterator[Finding]:
    source = compilation.routing_source
    if source is None:
        return
    pair = source.data.get("spec", {}).get("messages", {}).get(str(ErrorClass.FORBIDDEN), {})
    for audience in ("agent", "user"):
        text = pair.get(audience)
        if not isinstance(text, str):
            continue
        for fields in Template.of(text).fields:
            if fields[0] not in FORBIDDEN_MESSAGE_ROOTS:
                yield Finding(source.locate(("spec", "messages", "forbidden", audience)),
                              "error", "forbidden-leak",
                              f"RoutingTable messages.forbidden.{audience} uses "
                              f"{{{'.'.join(fields)}}}, which can differ between a missing "
                              "record and one the actor may not see; use only {args.*}, "
                              "{actor.*} and {tool}")


def _not_found_message_leaks(compilation: Compilation) -> Iterator[Finding]:
    for name, contract in compilation.contracts.items():
        source = compilation.contract_sources[name]
        places = item_paths(source, ("spec", "lookups"))
        for lookup in contract.lookups:
            for fields in lookup.message.fields if lookup.message else ():
                if fields[0] not in NOT_FOUND_MESSAGE_ROOTS:
                    yield Finding(field_at(source, places, lookup.location, "message"), "error",
                                  "forbidden-leak",
                                  f"{name} lookup {lookup.name}: its not-found message uses "
                                  f"{{{'.'.join(fields)}}}; the same text answers for a record "
                                  "the actor may not see, so it may name only what the model "
                                  "sent: use {args.*}")


# A forbidden call must end here: any other route goes on with it, or lets the model try again
# and learn from each answer which records exist.
FORBIDDEN_ROUTES = frozenset({Route.REFUSE, Route.REVIEW})


def check_forbidden_routes(compilation: Compilation) -> Iterator[Finding]:
    advice = "route it to refuse (or to review, to hand it to a person)"
    source = compilation.routing_source
    if source is not None:
        route = source.data.get("spec", {}).get("routes", {}).get(str(ErrorClass.FORBIDDEN))
        if route is not None and route not in FORBIDDEN_ROUTES:
            yield Finding(source.locate(("spec", "routes", "forbidden")), "error",
                          "forbidden-route",
                          f"RoutingTable routes forbidden to {route}, which goes on with a "
                          f"refused call or lets the model try again and probe which records "
                          f"exist; {advice}")
    for name, contract in compilation.contracts.items():
        contract_source = compilation.contract_sources[name]
        places = item_paths(contract_source, ("spec", "rules"))
        for rule in contract.rules:
            if (rule.error_class == ErrorClass.FORBIDDEN and rule.route is not None
                    and rule.route not in FORBIDDEN_ROUTES):
                yield Finding(field_at(contract_source, places, rule.location, "route"), "error",
                              "forbidden-route",
                              f"{name} rule {rule.name}: a forbidden rule routed to "
                              f"{rule.route} goes on with a refused call or lets the model try "
                              f"again and probe which records exist; {advice}")


def check_unnarrowed_lookups(compilation: Compilation) -> Iterator[Finding]:
    """A look-up whose records no access rule reads and no ``visible`` narrows reaches the
    rules, the routes and provenance whatever the actor may see: another tenant's record
    then answers differently from no record, which tells the model it exists."""
    cascade = broken(compilation)
    for name, contract in compilation.contracts.items():
        source = compilation.contract_sources[name]
        places = item_paths(source, ("spec", "lookups"))
        applying = [rule for rule in compilation.access_rules if rule.applies_to(name)]
        # no rights at all (denied by default: another check says so), or an access rule
        # that did not compile may read the records
        if not applying or cascade.may_allow(name):
            continue
        reading = {variable for rule in applying for variable in rule.when.variables}
        for lookup in contract.lookups:
            if lookup.visible is not None or lookup.name in reading:
                continue
            yield Finding(field_at(source, places, lookup.location, "name"), "warning",
                          "unnarrowed-lookup",
                          f"{name} lookup {lookup.name}: no access rule reads {lookup.name} "
                          "and it declares no `visible`, so records the actor may not see "
                          "reach the rules, routes and provenance; add e.g. `visible: "
                          "record.tenant == actor.tenant` (or an access rule reading "
                          f"{lookup.name})")
