"""A run's intent: what the user asked for, as a typed bound on what the run may do.

Made from the user's request alone — by a planner model (``intent.drafting``), a form, or a
person — before the run reads any tool output, and bound to the run in the store
(``Gate.declare_intent``), an intent says:

- which tools the run may call (``tools``), and for each at most how many calls (``calls``),
  bounds on its arguments (``arguments``: a value, a set, a range, a JSON Schema), and CEL
  conditions over ``args`` (``when``);
- totals over the run (``totals``): the sum of one argument over the calls of some tools
  that ran, at most so much (the amounts sent, whatever the number of payees).

A call outside the intent is not refused by the intent itself: it goes where the
RoutingTable's ``spec.intent.outside`` says (a person's confirmation by default), and the
draft names the part of the intent it leaves. Once bound, an intent can only be narrowed
(``intent.narrowing``): what a later, injected instruction could add is never added.

Everything here is plain data, compared by value: the canonical JSON of ``as_data`` is what
the store keeps, and what ``compile_intent`` reads back.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema.protocols import Validator

from callgate_rules.cel.expression import CompiledExpression


class _NotGiven:
    """``ArgumentBound.equals`` when the bound names no value (``equals: null`` is one)."""

    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __reduce__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN: Any = _NotGiven()


def value_key(value: Any) -> Hashable:
    """A key two JSON values share exactly when they are the same value: numbers by value
    (100 and 100.0), never a boolean for a number, strings exactly, lists item by item,
    objects key by key. What ``one_of`` is looked up by, in one step whatever its size."""
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, int | float):
        return ("number", value)  # 1 == 1.0 and hash(1) == hash(1.0); never NaN here
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list | tuple):
        return ("list", tuple(value_key(item) for item in value))
    if isinstance(value, Mapping):
        return ("object", frozenset((key, value_key(item)) for key, item in value.items()))
    return ("other", repr(value))


@dataclass(frozen=True)
class ArgumentBound:
    """What one argument of a call may be: every part given must hold (a conjunction).
    ``path`` is the argument's path below ``args`` (``("recipient",)``, ``("to", "email")``).
    """

    path: tuple[str, ...]
    equals: Any = NOT_GIVEN  # exactly this value (a number equal in value: 100 == 100.0)
    one_of: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    schema: Mapping[str, Any] | None = None  # a JSON Schema of the value
    validator: Validator | None = field(default=None, repr=False, compare=False)
    # the contract masks it: its values are never written in what people or the log read
    masked: bool = field(default=False, compare=False)
    # ``one_of`` by ``value_key``: a value is looked up in one step
    one_of_keys: frozenset[Hashable] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.one_of is not None and self.one_of_keys is None:
            object.__setattr__(self, "one_of_keys",
                               frozenset(value_key(allowed) for allowed in self.one_of))

    @property
    def name(self) -> str:
        return ".".join(self.path)

    def as_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.equals is not NOT_GIVEN:
            data["equals"] = self.equals
        if self.one_of is not None:
            data["one_of"] = list(self.one_of)
        if self.minimum is not None:
            data["minimum"] = self.minimum
        if self.maximum is not None:
            data["maximum"] = self.maximum
        if self.schema is not None:
            data["schema"] = dict(self.schema)
        return data


@dataclass(frozen=True)
class Condition:
    """A CEL condition over the call's ``args`` that must be true."""

    text: str
    expression: CompiledExpression = field(repr=False, compare=False)


@dataclass(frozen=True)
class ToolBound:
    """What the run may do with one tool."""

    tool: str
    calls: int | None = None  # at most this many calls of it run in the run
    arguments: tuple[ArgumentBound, ...] = ()
    when: tuple[Condition, ...] = ()

    def as_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.calls is not None:
            data["calls"] = self.calls
        if self.arguments:
            data["arguments"] = {bound.name: bound.as_data() for bound in self.arguments}
        if self.when:
            data["when"] = [condition.text for condition in self.when]
        return data


@dataclass(frozen=True)
class Total:
    """The sum of one argument over the run's calls of ``tools`` that ran (a write held for
    a person counts once it runs), this call's included: at most ``at_most``."""

    name: str
    tools: frozenset[str]
    argument: tuple[str, ...]
    at_most: float

    def as_data(self) -> dict[str, Any]:
        return {"tools": sorted(self.tools), "argument": ".".join(self.argument),
                "at_most": self.at_most}


@dataclass(frozen=True)
class RunIntent:
    """A run's intent (see the module's docstring). ``request`` is the user's words it was
    made from, shown to a person who confirms a call outside it."""

    tools: Mapping[str, ToolBound]
    totals: tuple[Total, ...] = ()
    request: str | None = None

    def as_data(self) -> dict[str, Any]:
        """The intent as JSON-ready data: what the store keeps and ``compile_intent`` reads."""
        data: dict[str, Any] = {"tools": {name: bound.as_data()
                                          for name, bound in sorted(self.tools.items())}}
        if self.totals:
            data["totals"] = {total.name: total.as_data() for total in self.totals}
        if self.request is not None:
            data["request"] = self.request
        return data

    def bounded_by_history(self, tool: str) -> bool:
        """Whether judging a call of ``tool`` needs the run's earlier calls: a cap on its
        calls, or a total it counts in."""
        bound = self.tools.get(tool)
        return ((bound is not None and bound.calls is not None)
                or any(tool in total.tools for total in self.totals))


@dataclass(frozen=True)
class BoundIntent:
    """An intent as the store holds it for a run: its version (1 when first declared, one
    more each time it was narrowed), who declared the latest version, and when."""

    run_id: str
    version: int
    intent: RunIntent
    declared_by: str
    declared_at: Any  # datetime; Any keeps this module free of the store's imports

    def as_variable(self) -> dict[str, Any]:
        """The CEL variable ``intent`` (before this call's verdict is added)."""
        return {"declared": True, "version": self.version, "declared_by": self.declared_by,
                **self.intent.as_data()}


# The rule a decision names when its run's intent routed it (``pipeline.intents``).
INTENT_RULE = "callgate/run-intent"
NO_INTENT: Mapping[str, Any] = {"declared": False, "tools": {}, "totals": {}}
