"""How a pipeline step ends a call early: it raises ``Rejection`` with a classified outcome.

Each step is a plain function that either returns what the next step needs or raises a
``Rejection``; the gate turns a rejection into a routed ``Decision`` in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from callgate_rules.taxonomy import ErrorClass, Route

if TYPE_CHECKING:
    from callgate_rules.pipeline.rejection_messages import Routed

# A message given as it is, or as what renders it when first read (most rejections are
# only routed, and rendering is a good part of their cost).
Message = str | Callable[[], str]


class Rejection(Exception):
    """A classified early end of a call. Only the fields a step knows are set on the
    instance; the others read their defaults from the class (one is raised for every
    rejected call, so it is made cheaply)."""

    error_class: ErrorClass
    detail: str  # for the log record: what exactly went wrong, technically
    rule: str | None = None  # the deciding rule, when a rule decided
    # None → the routing table's default.
    agent_message: Message | None = None
    user_message: Message | Callable[[], str | None] | None = None
    hint: str | None = None  # what a valid call looks like
    route: Route | None = None  # a rule may override the routing table
    candidates: tuple[Mapping[str, Any], ...] = ()
    retry_after: float | None = None
    contract: Any = None  # the Contract, when the call got far enough to have one
    # A denial that depends on a record speaks exactly like "not found" for that record.
    speaks_as: ErrorClass | None = None
    extra: Mapping[str, Any] = MappingProxyType({})  # shared, so read-only
    # Set on a rejection a tool's plan prepared (``prepared``): what makes it whole, with
    # its messages, from the values a call was decided on; what else those messages read
    # beside the arguments, the actor and the tool; and where it goes.
    prepare: Callable[[Mapping[str, Any]], Rejection] | None = None
    more_reads: tuple[str, ...] = ()
    routed: Routed | None = None

    def __init__(
        self,
        error_class: ErrorClass,
        detail: str,
        *,
        rule: str | None = None,
        agent_message: Message | None = None,
        user_message: Message | Callable[[], str | None] | None = None,
        hint: str | None = None,
        route: Route | None = None,
        candidates: tuple[Mapping[str, Any], ...] = (),
        retry_after: float | None = None,
        contract: Any = None,
        speaks_as: ErrorClass | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.error_class = error_class
        self.detail = detail
        if rule is not None:
            self.rule = rule
        if agent_message is not None:
            self.agent_message = agent_message
        if user_message is not None:
            self.user_message = user_message
        if hint is not None:
            self.hint = hint
        if route is not None:
            self.route = route
        if retry_after is not None:
            self.retry_after = retry_after
        if contract is not None:
            self.contract = contract
        if speaks_as is not None:
            self.speaks_as = speaks_as
        if candidates:
            self.candidates = candidates
        if extra:
            self.extra = extra

    def __str__(self) -> str:
        return f"{self.error_class}: {self.detail}"


def as_decided(values: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """The ``names`` of ``values`` (those a message will read), copied one level deep as
    the log record copies what the host handed in: a message rendered later then tells
    what the call was decided on, even if the host changes its actor, its records or the
    decision's arguments meanwhile."""
    copied = {}
    for name in names:
        if name in values:
            value = values[name]
            kind = type(value)
            if kind is dict or kind is list:
                value = kind(value)
            elif kind is not str and isinstance(value, Mapping):
                value = dict(value)
            elif kind is not str and isinstance(value, list):
                value = list(value)
            copied[name] = value
    return copied


def text_of(message: Message | Callable[[], str | None] | None) -> str | None:
    """A message of a rejection, rendered now if it was left for later."""
    return message() if callable(message) else message


def prepared(make: Callable[[Mapping[str, Any]], Rejection], reads: Iterable[str]) -> Rejection:
    """A rejection a tool's plan may return, made once when the plan is compiled: every
    field but its messages is the same for every call (rule, error class, detail, hint,
    route); ``make(values)`` makes the whole rejection from the values a call was decided
    on, and is called only when someone reads a message. ``reads`` names the values those
    messages may read; beside the arguments, the actor and the tool (which the gate copies
    for the log in any case), the gate copies those for the messages. So a rejected call
    costs about what a passed one does."""
    rejection = make({})
    rejection.prepare = make
    rejection.more_reads = tuple(sorted(set(reads) - {"args", "actor", "tool"}))
    return rejection
