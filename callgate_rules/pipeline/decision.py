"""What the gate answers: a typed decision with its route, three messages and a trace."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any, Generic, TypeVar, overload

from callgate_rules.taxonomy import ErrorClass, Route

T = TypeVar("T")


@dataclass(frozen=True)
class TraceEntry:
    """One step or rule evaluated, with its result, for ``--explain``."""

    step: str  # propose, parse, validate, authorize, execute, reconcile, route
    subject: str  # what was checked: a rule name, a lookup, "schema", ...
    result: str  # "pass", "fail", "allow", "deny", "skip", "error", "match", ...
    detail: str = ""

    def __str__(self) -> str:
        detail = f" — {self.detail}" if self.detail else ""
        return f"{self.step:<9} {self.subject}: {self.result}{detail}"


# What the steps record while deciding: (step, subject, result) or (step, subject, result,
# detail). A plain tuple costs a fraction of a TraceEntry; ``Decision.trace`` turns them into
# entries when someone reads it.
RawTraceEntry = tuple[str, str, str] | tuple[str, str, str, str]


def trace_entries(raw: tuple[RawTraceEntry, ...]) -> tuple[TraceEntry, ...]:
    return tuple(TraceEntry(*entry) for entry in raw)


class Deferred(partial[T], Generic[T]):
    """A value worked out on first read: ``Deferred(function, *arguments)`` stands for
    ``function(*arguments)``. Most decisions' log records and traces are never read by
    anyone, and building them is a good part of a decision's cost. A ``partial``, so that
    making one is a single call into C."""

    __slots__ = ()


# A message of a pair: its text, or, when it could not be rendered, what fails again on
# each read of it, as a message of its own would (the other message is read all the same).
PairedMessage = str | Deferred[str]


class DeferredMessages(partial[tuple[PairedMessage, PairedMessage]]):
    """A rejection's agent and user messages, worked out together on the first read of
    either: ``DeferredMessages(function, *arguments)`` stands for ``function(*arguments)``,
    the pair (agent, user). Both fields are given the same object: one to make for a
    rejected call instead of one per message."""

    __slots__ = ()


MESSAGE_FIELDS = ("agent_message", "user_message")  # in a DeferredMessages' order


# One lock for every first read of a deferred field, so two threads reading one decision's
# log see the same record (it may hold a request ID drawn on that read).
_FIRST_READ = threading.Lock()


class _DeferredField(Generic[T]):
    """A dataclass field that may be given a ``Deferred``, computed once on first read; or,
    for the two messages, one ``DeferredMessages``, which the first read of either field
    turns into both messages.

    The value lives in the instance's ``__dict__`` under the field's own name; this data
    descriptor on the class comes first in attribute look-up, so every read goes through
    ``__get__``. ``dataclasses.replace``, ``fields``, ``asdict``, ``==`` and ``repr`` see
    the computed value, as if the field were an ordinary one."""

    def __init__(self, *default: T) -> None:
        self.default = default  # () when the field has no default

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type) -> T: ...

    @overload
    def __get__(self, instance: object, owner: type) -> T: ...

    def __get__(self, instance: object | None, owner: type) -> T:
        if instance is None:  # dataclass asks the class for the field's default
            if not self.default:
                raise AttributeError(self.name)
            return self.default[0]
        fields = instance.__dict__
        value = fields[self.name]
        if type(value) is Deferred or type(value) is DeferredMessages:
            with _FIRST_READ:
                value = fields[self.name]
                if type(value) is Deferred:
                    value = fields[self.name] = value()
                elif type(value) is DeferredMessages:
                    # each field the pair stands for gets its own message
                    for name, message in zip(MESSAGE_FIELDS, value(), strict=True):
                        if fields[name] is value:
                            fields[name] = message
                    value = fields[self.name]
                    if type(value) is Deferred:  # this one could not be rendered
                        value = value()
        result: T = value
        return result

    def __set__(self, instance: object, value: T | Deferred[T] | DeferredMessages) -> None:
        instance.__dict__[self.name] = value


class _TraceField(_DeferredField[tuple[TraceEntry, ...]]):
    """The trace: a ``_DeferredField``, which may also be given the raw entries the steps
    recorded as they are, a tuple of tuples, to become ``TraceEntry``s on first read. Every
    check and every executed call hands its trace over so: a ``Deferred`` to make and free
    would cost more than the tuple (a ``TraceEntry`` is no tuple, so a trace read already
    is never taken for raw entries)."""

    @overload
    def __get__(self, instance: None, owner: type) -> tuple[TraceEntry, ...]: ...

    @overload
    def __get__(self, instance: object, owner: type) -> tuple[TraceEntry, ...]: ...

    def __get__(self, instance: object | None, owner: type) -> tuple[TraceEntry, ...]:
        if instance is not None:
            fields = instance.__dict__
            value = fields[self.name]
            if type(value) is tuple and value and type(value[0]) is tuple:
                with _FIRST_READ:
                    value = fields[self.name]
                    if type(value) is tuple and value and type(value[0]) is tuple:
                        value = fields[self.name] = trace_entries(value)
                return value  # type: ignore[no-any-return]
        return super().__get__(instance, owner)


@dataclass(frozen=True)
class ShadowVerdict:
    """A verdict of a rule in ``warn`` or ``audit`` mode: recorded, not enforced."""

    rule: str
    mode: str
    error_class: str
    message: str


# Bound once: looked up on ``object`` by every ``Decision.of_check``, they cost a few hundred.
_new_object, _set_attribute = object.__new__, object.__setattr__


@dataclass(frozen=True)
class Decision:
    """The gate's answer to one proposal. ``error_class`` is ``None`` when all went well."""

    route: Route
    error_class: ErrorClass | None
    tool: str | None
    contract_version: str | None
    rule: str | None  # the rule that decided, as ``document/rule`` or ``tool/rule``
    # The three fields below are built when first read (a rejection's messages too): mypy
    # takes them for fields with a default; they have none: asked for one, the descriptor
    # raises AttributeError, which is how dataclasses tell a field without one.
    agent_message: _DeferredField[str] = _DeferredField()  # back into the model's context
    user_message: _DeferredField[str] = _DeferredField()  # safe to show the person in the chat
    # for engineers: masked, structured, one JSON line
    log: _DeferredField[Mapping[str, Any]] = _DeferredField()
    versions: Mapping[str, str]  # type: ignore[misc]  # every document that took part
    trace: _TraceField = _TraceField(())
    arguments: Mapping[str, Any] | None = None  # the validated arguments
    call_id: str | None = None  # the model's own call ID, to answer it in its format
    candidates: tuple[Mapping[str, Any], ...] = ()  # for ``ambiguous``: permitted fields only
    warnings: tuple[ShadowVerdict, ...] = ()
    operation_id: str | None = None
    result: Any = None  # the destination's original result, apart from the model's retelling
    draft: str | None = None  # what a person confirms, for ``await_confirmation``
    confirmation_token: str | None = None
    limit_path: str | None = None  # set when a budget's limit decided the route
    retry_after: float | None = None  # seconds to wait, for ``retry``
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of_check(
        cls,
        route: Route,
        error_class: ErrorClass | None,
        tool: str | None,
        contract_version: str | None,
        rule: str | None,
        agent_message: str | Deferred[str] | DeferredMessages,
        user_message: str | Deferred[str] | DeferredMessages,
        log: Mapping[str, Any] | Deferred[Mapping[str, Any]],
        versions: Mapping[str, str],
        trace: tuple[TraceEntry, ...] | tuple[RawTraceEntry, ...]
        | Deferred[tuple[TraceEntry, ...]],
        arguments: Mapping[str, Any] | None,
        call_id: str | None,
        candidates: tuple[Mapping[str, Any], ...],
        warnings: tuple[ShadowVerdict, ...],
    ) -> Decision:
        """The same decision as ``Decision(...)`` with these fields (in this order), made
        faster: a frozen dataclass's ``__init__`` sets every field through
        ``object.__setattr__``, a measurable part of a whole decision; this fills the
        instance's ``__dict__`` in one step, and leaves the fields a check never sets to
        their defaults on the class (so too ``candidates`` and ``warnings`` when empty: each
        key of that dict costs about 250 instructions of a decision's 120,000)."""
        decision = _new_object(cls)
        values: dict[str, Any] = {
            "route": route, "error_class": error_class, "tool": tool,
            "contract_version": contract_version, "rule": rule,
            "agent_message": agent_message, "user_message": user_message, "log": log,
            "versions": versions, "trace": trace, "arguments": arguments, "call_id": call_id,
            "extra": {},
        }
        if candidates:
            values["candidates"] = candidates
        if warnings:
            values["warnings"] = warnings
        _set_attribute(decision, "__dict__", values)
        return decision

    @property
    def allowed(self) -> bool:
        return self.error_class is None

    def __getstate__(self) -> dict[str, Any]:
        """What ``pickle`` and ``copy`` take: every field read, so that a decision still
        unread copies (its deferred parts may hold what cannot be pickled) and a copy and
        its original tell the same (the log's request ID is drawn once). A message that
        cannot be rendered is copied as it is, to fail again when the copy reads it."""
        state = {}
        for name in list(self.__dict__):
            if name == "sealer":  # holds a key: a copy seals with the default sealer
                continue
            try:
                state[name] = getattr(self, name)
            except Exception:
                state[name] = self.__dict__[name]
        return state

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``callgate check --format json``."""
        return {
            "route": str(self.route),
            "error_class": str(self.error_class) if self.error_class else None,
            "tool": self.tool,
            "contract_version": self.contract_version,
            "rule": self.rule,
            "agent_message": self.agent_message,
            "user_message": self.user_message,
            "versions": dict(self.versions),
            "arguments": self.arguments,
            "candidates": [dict(c) for c in self.candidates],
            "warnings": [w.__dict__ for w in self.warnings],
            "operation_id": self.operation_id,
            "result": self.result,
            "draft": self.draft,
            "confirmation_token": self.confirmation_token,
            "limit_path": self.limit_path,
            "log": dict(self.log),
            "trace": [entry.__dict__ for entry in self.trace],
        }


# ``Decision.of_check`` lists every field without a default, and ``extra``; the others it
# leaves to their defaults, which must be readable on the class: a field added to Decision
# must be added there, or have a plain default.
_OF_CHECK_FIELDS = ("route", "error_class", "tool", "contract_version", "rule", "agent_message",
                    "user_message", "log", "versions", "trace", "arguments", "call_id",
                    "candidates", "warnings")
_CLASS_DEFAULTS = ("operation_id", "result", "draft", "confirmation_token", "limit_path",
                   "retry_after")
_LEFT_WHEN_EMPTY = ("candidates", "warnings")  # of_check sets them only when not empty
if tuple(each.name for each in fields(Decision)) != \
        (*_OF_CHECK_FIELDS, *_CLASS_DEFAULTS, "extra") or \
        any(not hasattr(Decision, name) for name in (*_LEFT_WHEN_EMPTY, *_CLASS_DEFAULTS)):
    raise AssertionError("Decision's fields changed: update Decision.of_check")
