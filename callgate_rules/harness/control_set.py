"""Control sets: recorded model outputs, each with the outcome fixed for it in advance.

A control set is one YAML document::

    actor: actors/dana.yaml          # default actor: a path relative to this file, or a mapping
    world: world.yaml                # default world: a path or a mapping of collections
    now: "2026-11-29T12:00:00Z"      # default time of the decisions (default: the same as
                                     # scenarios', 2026-11-29T12:00:00Z)
    session: {authenticated: true}   # default session facts (optional; a path or a mapping)
    requests:
      - id: status-ordinary          # unique within the file
        request: What's the status of T-1001?   # the user's words, for people reading the report
        output: {name: getTicketStatus, arguments: {ticketId: T-1001}}
        expect:
          tool: getTicketStatus
          arguments: {ticketId: T-1001}
          error_class: none
          route: execute             # optional
        conversation: [...]          # optional: the messages that led to the output (OpenAI or
                                     # Anthropic format, or a path), so the gate can trace
                                     # where each argument value came from
        # actor, world, now, session, conversation: optional, override the defaults

- ``output`` is the model output recorded for the request, in any format the gate accepts
  (a mapping, a list or a JSON text), or ``none`` when the model answered without a tool
  call. A recorded message that holds only text is read by the gate as ``malformed``:
  record such an answer as ``none``. When a message holds several calls, the first one is
  the one scored (the gate itself rejects or takes the first, as its RoutingTable says).
- ``expect.tool`` is the tool that should be called, or ``none`` when the right action is
  to answer without a call (for instance to ask for a missing ticket number); with ``none``,
  ``arguments``, ``error_class`` and ``route`` are not given.
- ``expect.arguments`` is a subset: every key given must be in the call with an equal value
  (compared as canonical JSON: ``1`` equals ``1.0``, ``true`` does not equal ``1``, nested
  values compare whole); keys not given are not checked. Quote timestamps: an unquoted YAML
  timestamp is not a JSON value.
- ``expect.error_class`` is what the gate should decide (``none``: let the call through),
  required when a tool is expected; ``expect.route`` is optional and checked when given.

Reading a control set checks all of it; every error is an ``InputError`` naming file:line.
``evaluation`` scores a loaded set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from callgate_rules.canonical import canonical_json
from callgate_rules.documents.source import NodePath, SourceDocument, read_data_file, read_documents
from callgate_rules.errors import InputError, Location
from callgate_rules.harness.scenarios import DEFAULT_NOW
from callgate_rules.harness.world import check_world
from callgate_rules.pipeline.validate import Record
from callgate_rules.provenance import read_conversation
from callgate_rules.taxonomy import ErrorClass, Route

NONE = "none"  # how a control set writes "no tool call" and "no error class"
CONTEXT_KEYS = frozenset({"actor", "world", "now", "session", "conversation"})
CONTROL_SET_KEYS = frozenset({"description", "requests"}) | CONTEXT_KEYS
REQUEST_KEYS = frozenset({"id", "request", "output", "expect"}) | CONTEXT_KEYS
EXPECT_KEYS = frozenset({"tool", "arguments", "error_class", "route"})
# Outcomes after which the call goes on towards execution: allowed, or held for a person.
LET_THROUGH: frozenset[ErrorClass | None] = frozenset({None, ErrorClass.CONFIRMATION_REQUIRED})
Member = TypeVar("Member", ErrorClass, Route)


@dataclass(frozen=True)
class Expectation:
    tool: str | None  # None: the right action is no tool call
    arguments: Mapping[str, Any]
    error_class: ErrorClass | None
    route: Route | None

    @property
    def expects_call(self) -> bool:
        return self.tool is not None

    @property
    def expects_execution(self) -> bool:
        return self.expects_call and self.error_class in LET_THROUGH

    def describe_outcome(self) -> str:
        if not self.expects_call:
            return "no call"
        return outcome_text(self.error_class, self.route)

    def as_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": dict(self.arguments),
                "error_class": text_or_none(self.error_class), "route": text_or_none(self.route)}


@dataclass(frozen=True)
class ControlRequest:
    id: str
    request: str
    output: Any  # the recorded model output; None when the model answered without a call
    expect: Expectation
    actor: Mapping[str, Any]
    world: Mapping[str, Sequence[Record]]
    now: datetime
    location: Location
    session: Mapping[str, Any] = field(default_factory=dict)
    conversation: Any = None  # the messages before the output; None: provenance unknown


@dataclass(frozen=True)
class ControlSet:
    path: str
    requests: tuple[ControlRequest, ...]


@dataclass(frozen=True)
class _Defaults:
    actor: Mapping[str, Any] | None
    world: Mapping[str, Sequence[Record]]
    now: datetime
    session: Mapping[str, Any]
    conversation: Any


def load_control_set(path: str | Path) -> ControlSet:
    """Read and check a control set; every error is an ``InputError`` naming file:line."""
    file = Path(path)
    documents = read_documents(file)
    if len(documents) != 1:
        raise InputError(f"{file}: a control set is one YAML document, found {len(documents)}")
    document = documents[0]
    data = document.data
    if not isinstance(data, dict):
        raise InputError(f"{document.locate(())}: a control set is a mapping with requests: "
                         "[...]")
    _reject_unknown_keys(document, (), data, CONTROL_SET_KEYS, "control-set field")
    requests = data.get("requests")
    if not isinstance(requests, list) or not requests:
        raise InputError(f"{document.locate(('requests',))}: requests must be a non-empty list")
    defaults = _Defaults(
        actor=_actor(document, (), data, file) if "actor" in data else None,
        world=_world(document, (), data, file, {}),
        now=_now(document, (), data, DEFAULT_NOW),
        session=_session(document, (), data, file, {}),
        conversation=_conversation(document, (), data, file, None),
    )
    loaded: list[ControlRequest] = []
    seen: dict[str, Location] = {}
    for index, item in enumerate(requests):
        request = _request(document, index, item, file, defaults)
        if request.id in seen:
            raise InputError(f"{request.location}: duplicate id {request.id!r} (first at "
                             f"line {seen[request.id].line})")
        seen[request.id] = request.location
        loaded.append(request)
    return ControlSet(str(file), tuple(loaded))


def _request(document: SourceDocument, index: int, item: Any, file: Path,
             defaults: _Defaults) -> ControlRequest:
    at: NodePath = ("requests", index)
    where = document.locate(at)
    if not isinstance(item, dict):
        raise InputError(f"{where}: each request is a mapping with id, request, output and "
                         "expect")
    _reject_unknown_keys(document, at, item, REQUEST_KEYS, "request field")
    for key in ("id", "request", "output", "expect"):
        if key not in item:
            raise InputError(f"{where}: the request has no {key}")
    identifier = item["id"]
    if (not isinstance(identifier, str | int) or isinstance(identifier, bool) or
            not str(identifier).strip()):
        raise InputError(f"{document.locate((*at, 'id'))}: id must be a non-empty string")
    if not isinstance(item["request"], str):
        raise InputError(f"{document.locate((*at, 'request'))}: request must be the user's "
                         "text")
    actor = _actor(document, at, item, file) if "actor" in item else defaults.actor
    if actor is None:
        raise InputError(f"{where}: no actor: give actor at the top of the file or in the "
                         "request")
    return ControlRequest(
        id=str(identifier),
        request=item["request"],
        output=None if _is_none(item["output"]) else item["output"],
        expect=_expectation(document, (*at, "expect"), item["expect"]),
        actor=actor,
        world=_world(document, at, item, file, defaults.world),
        now=_now(document, at, item, defaults.now),
        location=where,
        session=_session(document, at, item, file, defaults.session),
        conversation=_conversation(document, at, item, file, defaults.conversation),
    )


def _expectation(document: SourceDocument, at: NodePath, data: Any) -> Expectation:
    where = document.locate(at)
    if not isinstance(data, dict):
        raise InputError(f"{where}: expect must be a mapping such as {{tool: getTicketStatus, "
                         "error_class: none}")
    _reject_unknown_keys(document, at, data, EXPECT_KEYS, "expectation")
    if "tool" not in data:
        raise InputError(f"{where}: expect needs tool (a tool name, or none for no call)")
    tool = data["tool"]
    if _is_none(tool):
        for key in ("arguments", "route"):
            if key in data:
                raise InputError(f"{document.locate((*at, key, '<key>'))}: expect.{key} "
                                 "makes no sense with tool: none")
        if not _is_none(data.get("error_class")):
            raise InputError(f"{document.locate((*at, 'error_class'))}: with tool: none "
                             "there is no gate decision; leave error_class out")
        return Expectation(None, {}, None, None)
    if not isinstance(tool, str) or not tool:
        raise InputError(f"{document.locate((*at, 'tool'))}: tool must be a tool name or none")
    if "error_class" not in data:
        raise InputError(f"{where}: expect needs error_class (none when the gate should let "
                         "the call through)")
    arguments = data.get("arguments", {})
    if not isinstance(arguments, dict):
        raise InputError(f"{document.locate((*at, 'arguments'))}: arguments must be a mapping")
    for key, value in arguments.items():
        try:
            canonical_json(value)
        except (TypeError, ValueError):
            raise InputError(f"{document.locate((*at, 'arguments', key))}: {key} is not a "
                             f"JSON value ({type(value).__name__}); quote it") from None
    return Expectation(
        tool=tool,
        arguments=arguments,
        error_class=_member(ErrorClass, document, (*at, "error_class"), data["error_class"]),
        route=_member(Route, document, (*at, "route"), data.get("route")),
    )


def _member(kind: type[Member], document: SourceDocument, at: NodePath,
            value: Any) -> Member | None:
    if _is_none(value):
        return None
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(member.value for member in kind)
        raise InputError(f"{document.locate(at)}: unknown {at[-1]} {value!r}; known: "
                         f"{known}") from None


def _actor(document: SourceDocument, at: NodePath, data: Mapping[str, Any],
           file: Path) -> Mapping[str, Any]:
    actor = _inline_or_file(data["actor"], file, "the actor")
    if not isinstance(actor, dict):
        raise InputError(f"{document.locate((*at, 'actor'))}: the actor must be a mapping "
                         "(or a file holding one) such as {id: U-7, tenant: acme, role: agent}")
    return actor


def _world(document: SourceDocument, at: NodePath, data: Mapping[str, Any], file: Path,
           default: Mapping[str, Sequence[Record]]) -> Mapping[str, Sequence[Record]]:
    if "world" not in data:
        return default
    return check_world(_inline_or_file(data["world"], file, "the world"),
                       str(document.locate((*at, "world"))))


def _session(document: SourceDocument, at: NodePath, data: Mapping[str, Any], file: Path,
             default: Mapping[str, Any]) -> Mapping[str, Any]:
    if "session" not in data:
        return default
    session = _inline_or_file(data["session"], file, "the session")
    if not isinstance(session, dict):
        raise InputError(f"{document.locate((*at, 'session'))}: the session must be a mapping "
                         "(or a file holding one) such as {authenticated: true}")
    return session


def _conversation(document: SourceDocument, at: NodePath, data: Mapping[str, Any],
                  file: Path, default: Any) -> Any:
    if "conversation" not in data:
        return default
    conversation = _inline_or_file(data["conversation"], file, "the conversation")
    try:
        unreadable = read_conversation(conversation).unreadable
    except ValueError as error:
        raise InputError(f"{document.locate((*at, 'conversation'))}: {error}") from None
    if unreadable:
        raise InputError(f"{document.locate((*at, 'conversation'))}: the conversation cannot "
                         f"be read: {unreadable}")
    return conversation


def _now(document: SourceDocument, at: NodePath, data: Mapping[str, Any],
         default: datetime) -> datetime:
    if "now" not in data:
        return default
    value = data["now"]
    where = document.locate((*at, "now"))
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InputError(f"{where}: now {data['now']!r} is not an RFC 3339 time such as "
                             "2026-11-29T12:00:00Z") from None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InputError(f"{where}: now must be an RFC 3339 time with a time zone, such as "
                         "2026-11-29T12:00:00Z")
    return value


def _inline_or_file(value: Any, file: Path, what: str) -> Any:
    if isinstance(value, str):
        return read_data_file(str(file.parent / value), what)
    return value


def _reject_unknown_keys(document: SourceDocument, at: NodePath, data: Mapping[str, Any],
                         known: frozenset[str], what: str) -> None:
    for key in sorted(set(data) - known, key=str):
        raise InputError(f"{document.locate((*at, key, '<key>'))}: unknown {what} {key!r}; "
                         f"known: {', '.join(sorted(known))}")


def _is_none(value: Any) -> bool:
    return value is None or value == NONE


def outcome_text(error_class: ErrorClass | None, route: Route | None) -> str:
    """An outcome as the report shows it: ``not_found (replan)``, ``allowed (execute)``."""
    described = str(error_class) if error_class else "allowed"
    return f"{described} ({route})" if route else described


def text_or_none(value: ErrorClass | Route | None) -> str | None:
    """An error class or route as JSON writes it; ``None`` stays ``null``."""
    return str(value) if value is not None else None
