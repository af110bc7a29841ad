"""Acceptance on control requests: recorded model outputs scored against expected outcomes.

The source article's acceptance check ("Проверка сценария"): prepare control requests — a
correct number, a typo, another customer's record, a missing number, incomplete requests,
user corrections, same-named customers — fix the expected outcome of each in advance, then
score separately the choice of function, the quality of arguments and the final outcome,
count the wrong calls and the reasons for refusal, and report the share of correct actions.
Each recorded output goes through ``Gate.check`` (steps 1–4): nothing is executed.

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

Scoring, per request:

- **function choice** is right when the recorded call names the expected tool, or when
  there is no call and none was expected. An output the gate cannot read is a wrong choice.
- **arguments** are scored only for correctly chosen tools: right when every expected key
  holds the expected value; the keys that differ are reported.
- **outcome** is right when the gate's error class (and route, when expected) equals the
  expectation; with ``expect.tool: none`` the only right outcome is no call at all.
- a **correct action** is a right outcome and, when an execution was expected (error class
  ``none`` or ``confirmation_required``), the right tool with the right arguments. When a
  refusal was expected, the outcome alone decides: a wrong ID stopped by the gate is the
  gate doing its job.

Every request on which the model did not act as expected (a wrong function choice or wrong
arguments) counts as one **wrong call**, by the reason it went wrong:

- the gate's error class (``not_found``, ``forbidden``, ``invalid_argument``, ``malformed``,
  ``unknown_tool``, ...) when the gate stopped the call;
- ``wrong_tool`` — let through, but another tool than expected;
- ``wrong_arguments`` — let through, the right tool with an expected argument that differs;
- ``unneeded_call`` — let through, but no call was expected;
- ``missing_call`` — no call although one was expected (not a call, but a wrong action of
  the model, counted here so that every one appears once).

"Let through" means allowed or held for a person's confirmation. The calls let through are
the dangerous ones: the gate could not tell. Apart from that, **stopped by the gate** counts
every call the gate stopped, expected or not, by error class: the reasons for refusal.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from callgate_rules.documents.model import GateConfig, InputLimits
from callgate_rules.documents.source import NodePath, SourceDocument, read_data_file, read_documents
from callgate_rules.errors import InputError, Location
from callgate_rules.harness.scenarios import DEFAULT_NOW
from callgate_rules.harness.world import WorldResolvers, check_world
from callgate_rules.integrations.provenance import read_conversation
from callgate_rules.pipeline import propose
from callgate_rules.pipeline.canonical import canonical_json
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.gate import Gate
from callgate_rules.pipeline.outcome import Rejection
from callgate_rules.pipeline.validate import Record
from callgate_rules.taxonomy import ErrorClass, Route

NONE = "none"  # how a control set writes "no tool call" and "no error class"
CONTEXT_KEYS = frozenset({"actor", "world", "now", "session", "conversation"})
CONTROL_SET_KEYS = frozenset({"description", "requests"}) | CONTEXT_KEYS
REQUEST_KEYS = frozenset({"id", "request", "output", "expect"}) | CONTEXT_KEYS
EXPECT_KEYS = frozenset({"tool", "arguments", "error_class", "route"})
# Outcomes after which the call goes on towards execution: allowed, or held for a person.
LET_THROUGH: frozenset[ErrorClass | None] = frozenset({None, ErrorClass.CONFIRMATION_REQUIRED})
REQUEST_TEXT_WIDTH = 44
Member = TypeVar("Member", ErrorClass, Route)


# The control set ------------------------------------------------------------------------------


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
        return _describe_outcome(self.error_class, self.route)

    def as_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": dict(self.arguments),
                "error_class": _text(self.error_class), "route": _text(self.route)}


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
    if not isinstance(identifier, str | int) or isinstance(identifier, bool) or \
            not str(identifier).strip():
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
        read_conversation(conversation)
    except ValueError as error:
        raise InputError(f"{document.locate((*at, 'conversation'))}: {error}") from None
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


# Scoring -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Proposal:
    """What the model proposed, read apart from the gate's verdict on it."""

    called: bool
    tool: str | None  # None: no call, or a call whose tool name cannot be read
    arguments: Mapping[str, Any] | None  # None: not readable as a JSON object

    def describe(self) -> str:
        if not self.called:
            return "no call"
        return self.tool or "an unreadable call"


@dataclass(frozen=True)
class ArgumentDifference:
    key: str
    expected: Any
    actual: Any
    present: bool

    def __str__(self) -> str:
        actual = _json(self.actual) if self.present else "nothing"
        return f"{self.key} expected {_json(self.expected)}, got {actual}"


@dataclass(frozen=True)
class RequestResult:
    request: ControlRequest
    proposal: Proposal
    decision: Decision | None  # None when the model made no call
    function_ok: bool
    arguments_ok: bool | None  # None when not scored: a wrong function, or no call expected
    argument_differences: tuple[ArgumentDifference, ...]
    outcome_ok: bool
    correct: bool
    wrong_call: str | None  # the reason the model's action was wrong, or None

    def describe_outcome(self) -> str:
        if self.decision is None:
            return "no call"
        return _describe_outcome(self.decision.error_class, self.decision.route)

    def differences(self) -> list[str]:
        """Every score that is off, as ``what: expected X, got Y``."""
        expect = self.request.expect
        found: list[str] = []
        if not self.function_ok:
            found.append(f"tool: expected {expect.tool or 'no call'}, "
                         f"got {self.proposal.describe()}")
        if self.arguments_ok is False:
            if self.proposal.arguments is None:
                found.append("arguments: not readable as a JSON object")
            else:
                found.append("arguments: " + ", ".join(map(str, self.argument_differences)))
        if not self.outcome_ok:
            found.append(f"outcome: expected {expect.describe_outcome()}, "
                         f"got {self.describe_outcome()}")
        return found

    def as_dict(self) -> dict[str, Any]:
        decision = self.decision
        return {
            "id": self.request.id,
            "request": self.request.request,
            "line": self.request.location.line,
            "correct": self.correct,
            "function_choice": self.function_ok,
            "arguments_match": self.arguments_ok,
            "outcome_match": self.outcome_ok,
            "wrong_call": self.wrong_call,
            "differences": self.differences(),
            "argument_differences": [
                {"key": d.key, "expected": d.expected,
                 "actual": d.actual if d.present else None, "present": d.present}
                for d in self.argument_differences
            ],
            "expected": self.request.expect.as_dict(),
            "actual": {
                "called": self.proposal.called,
                "tool": self.proposal.tool,
                "arguments": dict(self.proposal.arguments)
                if self.proposal.arguments is not None else None,
                "error_class": _text(decision.error_class) if decision else None,
                "route": _text(decision.route) if decision else None,
                "rule": decision.rule if decision else None,
            },
        }


def read_proposal(output: Any, limits: InputLimits) -> Proposal:
    """The tool and arguments the model proposed (the first call when there are several)."""
    if output is None:
        return Proposal(called=False, tool=None, arguments=None)
    try:
        first = propose.read(output, limits)[0]
    except Rejection:
        return Proposal(called=True, tool=None, arguments=None)
    name = first.name if isinstance(first.name, str) and first.name else None
    return Proposal(called=True, tool=name, arguments=_decoded_arguments(first.arguments))


def _decoded_arguments(raw: Any) -> Mapping[str, Any] | None:
    # The same reading as step 2: no arguments, or an empty string, is an empty object.
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            return None
    return raw if isinstance(raw, dict) else None


def score(request: ControlRequest, proposal: Proposal, decision: Decision | None) -> RequestResult:
    """Score one request from what the model proposed and what the gate decided about it."""
    expect = request.expect
    function_ok = proposal.called == expect.expects_call and proposal.tool == expect.tool
    differences: tuple[ArgumentDifference, ...] = ()
    arguments_ok: bool | None = None
    if function_ok and expect.expects_call:
        differences = _argument_differences(expect.arguments, proposal.arguments or {})
        arguments_ok = proposal.arguments is not None and not differences
    if expect.expects_call:
        outcome_ok = decision is not None and decision.error_class == expect.error_class and \
            (expect.route is None or decision.route == expect.route)
    else:
        outcome_ok = decision is None
    correct = outcome_ok and (not expect.expects_execution or bool(function_ok and arguments_ok))
    return RequestResult(
        request=request, proposal=proposal, decision=decision, function_ok=function_ok,
        arguments_ok=arguments_ok, argument_differences=differences, outcome_ok=outcome_ok,
        correct=correct,
        wrong_call=_wrong_call(expect, proposal, decision, function_ok, arguments_ok),
    )


def _argument_differences(expected: Mapping[str, Any],
                          actual: Mapping[str, Any]) -> tuple[ArgumentDifference, ...]:
    differences = []
    for key, value in expected.items():
        present = key in actual
        if not present or not _same_json(value, actual[key]):
            differences.append(ArgumentDifference(key, value, actual.get(key), present))
    return tuple(differences)


def _same_json(expected: Any, actual: Any) -> bool:
    try:
        return canonical_json(expected) == canonical_json(actual)
    except (TypeError, ValueError):  # the model's value has no JSON form: it cannot be equal
        return False


def _wrong_call(expect: Expectation, proposal: Proposal, decision: Decision | None,
                function_ok: bool, arguments_ok: bool | None) -> str | None:
    if function_ok and arguments_ok is not False:
        return None
    if decision is None:
        return "missing_call"
    if decision.error_class not in LET_THROUGH:
        return str(decision.error_class)  # the gate stopped it: the reason for refusal
    if not expect.expects_call:
        return "unneeded_call"
    return "wrong_tool" if not function_ok else "wrong_arguments"


# The evaluation --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Share:
    correct: int
    total: int

    @property
    def percent(self) -> float | None:
        return 100 * self.correct / self.total if self.total else None

    def __str__(self) -> str:
        if self.percent is None:
            return f"{self.correct}/{self.total}      -"
        return f"{self.correct}/{self.total}  {self.percent:5.1f}%"

    def as_dict(self) -> dict[str, Any]:
        percent = self.percent
        return {"correct": self.correct, "total": self.total,
                "percent": round(percent, 2) if percent is not None else None}


@dataclass(frozen=True)
class Totals:
    function_choice: Share
    arguments: Share  # among the requests whose tool was chosen correctly
    outcome: Share
    correct_actions: Share
    wrong_calls: Mapping[str, int]  # reason → count
    stopped_by_gate: Mapping[str, int]  # error class → count, expected or not

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.function_choice.total,
            "function_choice": self.function_choice.as_dict(),
            "arguments": self.arguments.as_dict(),
            "outcome": self.outcome.as_dict(),
            "correct_actions": self.correct_actions.as_dict(),
            "wrong_calls": {"total": sum(self.wrong_calls.values()),
                            "by_reason": dict(self.wrong_calls)},
            "stopped_by_gate": {"total": sum(self.stopped_by_gate.values()),
                                "by_error_class": dict(self.stopped_by_gate)},
        }


@dataclass(frozen=True)
class Evaluation:
    path: str
    results: tuple[RequestResult, ...]
    totals: Totals

    def below(self, percent: float) -> bool:
        """Is the share of correct actions below ``percent``? (Compared without rounding.)"""
        share = self.totals.correct_actions
        return share.correct * 100 < percent * share.total

    def as_dict(self) -> dict[str, Any]:
        return {"control_set": self.path,
                "requests": [result.as_dict() for result in self.results],
                "totals": self.totals.as_dict()}


def evaluate(control_set: ControlSet, config: GateConfig) -> Evaluation:
    """Run every recorded output through ``Gate.check`` and score it; nothing is executed."""
    for request in control_set.requests:
        tool = request.expect.tool
        if tool is not None and tool not in config.contracts:
            raise InputError(f"{request.location}: expect.tool {tool!r} is not a contract; "
                             f"known: {', '.join(sorted(config.contracts))}")
    gates: dict[int, Gate] = {}  # one per world object: the default world is shared
    results = []
    for request in control_set.requests:
        gate = gates.setdefault(id(request.world),
                                Gate(config, resolvers=WorldResolvers(request.world)))
        proposal = read_proposal(request.output, config.routing.input_limits)
        decision = None if request.output is None else gate.check(
            request.output, actor=request.actor, now=request.now,
            request_id=f"eval-{request.id}", session=request.session,
            conversation=request.conversation)
        results.append(score(request, proposal, decision))
    return Evaluation(control_set.path, tuple(results), totals(results))


def totals(results: Sequence[RequestResult]) -> Totals:
    chosen = [r for r in results if r.arguments_ok is not None]
    wrong_calls = Counter(r.wrong_call for r in results if r.wrong_call is not None)
    stopped = Counter(str(r.decision.error_class) for r in results
                      if r.decision is not None and r.decision.error_class not in LET_THROUGH)
    return Totals(
        function_choice=Share(sum(r.function_ok for r in results), len(results)),
        arguments=Share(sum(bool(r.arguments_ok) for r in chosen), len(chosen)),
        outcome=Share(sum(r.outcome_ok for r in results), len(results)),
        correct_actions=Share(sum(r.correct for r in results), len(results)),
        wrong_calls=_most_first(wrong_calls),
        stopped_by_gate=_most_first(stopped),
    )


def _most_first(counts: Counter[str]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def report_lines(evaluation: Evaluation) -> list[str]:
    """The text report: one line per request, then the totals."""
    width = max(len(result.request.id) for result in evaluation.results)
    lines = []
    for result in evaluation.results:
        verdict = "ok  " if result.correct else "FAIL"
        line = f"{verdict}  {result.request.id:<{width}}  {_shorten(result.request.request)}"
        differences = result.differences()
        if differences:
            line += "  " + "; ".join(differences)
        lines.append(line.rstrip())
    t = evaluation.totals
    lines += [
        "",
        f"function choice    {t.function_choice}",
        f"arguments          {t.arguments}  (among correctly chosen tools)",
        f"outcome            {t.outcome}",
        f"wrong calls        {_counts(t.wrong_calls)}",
        f"stopped by gate    {_counts(t.stopped_by_gate)}",
        f"correct actions    {t.correct_actions}",
    ]
    return lines


def _counts(counts: Mapping[str, int]) -> str:
    total = sum(counts.values())
    if not total:
        return "0"
    return f"{total}  ({', '.join(f'{reason} {n}' for reason, n in counts.items())})"


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > REQUEST_TEXT_WIDTH:
        text = text[:REQUEST_TEXT_WIDTH - 3] + "..."
    return f"{text:<{REQUEST_TEXT_WIDTH}}"


def _describe_outcome(error_class: ErrorClass | None, route: Route | None) -> str:
    described = str(error_class) if error_class else "allowed"
    return f"{described} ({route})" if route else described


def _text(value: ErrorClass | Route | None) -> str | None:
    return str(value) if value is not None else None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
