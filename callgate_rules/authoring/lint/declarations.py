"""What the documents declare beside their CEL: the RoutingTable's routes, each contract's
examples, and writes whose unknown outcome only a person can settle."""

from __future__ import annotations

from collections.abc import Iterator

from callgate_rules.authoring.lint.cascade import broken
from callgate_rules.documents.compiler import Compilation, Finding, dotted
from callgate_rules.documents.model import Idempotency
from callgate_rules.pipeline.parse import first_undeclared
from callgate_rules.taxonomy import ErrorClass


def check_routes(compilation: Compilation) -> Iterator[Finding]:
    source = compilation.routing_source
    if source is None:
        if compilation.contracts and not broken(compilation).routing:
            first = next(iter(compilation.contract_sources.values()))
            yield Finding(first.locate(()), "warning", "no-routing-table",
                          "no RoutingTable among the documents; the built-in default routes "
                          "and budgets apply")
        return
    routes = source.data.get("spec", {}).get("routes", {})
    for error_class in ErrorClass:
        if str(error_class) not in routes:
            yield Finding(source.locate(("spec", "routes")), "warning", "missing-route",
                          f"error class {error_class} has no route; the built-in default "
                          "applies. Add it to spec.routes")


def check_examples(compilation: Compilation) -> Iterator[Finding]:
    for name, contract in compilation.contracts.items():
        source = compilation.contract_sources[name]
        for index, example in enumerate(contract.examples):
            path = ("spec", "examples", index, "arguments")
            undeclared = first_undeclared(dict(example.arguments), contract.arguments_schema, ())
            if undeclared is not None:
                yield Finding(source.locate(path), "error", "example-invalid",
                              f"{name} example {index + 1}: argument {'.'.join(undeclared)!r} "
                              "is not declared")
                continue
            for error in contract.validator.iter_errors(example.arguments):
                where = dotted(("arguments", *error.absolute_path))
                yield Finding(source.locate((*path, *error.absolute_path)), "error",
                              "example-invalid",
                              f"{name} example {index + 1}: {where}: {error.message}")


def check_unknown_outcomes(compilation: Compilation) -> Iterator[Finding]:
    """A write whose destination can neither deduplicate nor be asked hands every unknown
    outcome (a timeout after sending) to a person; with a confirmation a person takes part
    anyway. ``lookup`` without ``reconcile.match`` is not reported: the operation ID is
    derived from the call's canonical arguments, so what the destination holds under it is
    this call, and ``match`` only guards against a destination that mixes up IDs."""
    for name, contract in compilation.contracts.items():
        if (contract.is_write and contract.idempotency == Idempotency.NONE
                and not contract.confirmation.required):
            source = compilation.contract_sources[name]
            yield Finding(source.locate(("spec", "idempotency")), "warning",
                          "outcome-needs-person",
                          f"{name} writes with idempotency none and no confirmation: after a "
                          "timeout or a lost connection the destination can neither "
                          "deduplicate nor be asked, so an unknown outcome will always need a "
                          "person. Declare idempotency key or lookup if the destination "
                          "supports it, or set confirmation.required")
