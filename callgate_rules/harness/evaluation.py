"""Acceptance on control requests: recorded model outputs scored against expected outcomes.

The source article's acceptance check ("Проверка сценария"): prepare control requests — a
correct number, a typo, another customer's record, a missing number, incomplete requests,
user corrections, same-named customers — fix the expected outcome of each in advance, then
score separately the choice of function, the quality of arguments and the final outcome,
count the wrong calls and the reasons for refusal, and report the share of correct actions.
Each recorded output goes through ``Gate.check`` (steps 1–4): nothing is executed.
The control set and its format are in ``control_set``.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callgate_rules.canonical import canonical_json
from callgate_rules.documents.model import GateConfig, InputLimits
from callgate_rules.errors import InputError
from callgate_rules.harness.control_set import (
    LET_THROUGH,
    ControlRequest,
    ControlSet,
    Expectation,
    outcome_text,
    text_or_none,
)
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline import propose
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.gate import Gate
from callgate_rules.pipeline.outcome import Rejection
from callgate_rules.taxonomy import Route

REQUEST_TEXT_WIDTH = 44


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
        return outcome_text(self.decision.error_class, self.decision.route)

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
                "error_class": text_or_none(decision.error_class) if decision else None,
                "route": text_or_none(decision.route) if decision else None,
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
        outcome_ok = (decision is not None and decision.error_class == expect.error_class and
            (expect.route is None or decision.route == expect.route))
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
    # of the calls expected to run (error class none or confirmation_required), those the
    # gate held for a person: how often a person is asked
    confirmations: Share = Share(0, 0)

    @property
    def confirmations_per_100(self) -> float | None:
        return self.confirmations.percent

    def as_dict(self) -> dict[str, Any]:
        per_100 = self.confirmations_per_100
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
            "confirmations": {"asked": self.confirmations.correct,
                              "calls_expected_to_run": self.confirmations.total,
                              "per_100": round(per_100, 1) if per_100 is not None else None},
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


def evaluate(control_set: ControlSet, config: GateConfig, *,
             advanced: Callable[[int], None] | None = None) -> Evaluation:
    """Run every recorded output through ``Gate.check`` and score it; nothing is executed.
    ``advanced(1)`` is called after each request (a progress bar's ``update``)."""
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
        if advanced is not None:
            advanced(1)
    return Evaluation(control_set.path, tuple(results), totals(results))


def totals(results: Sequence[RequestResult]) -> Totals:
    chosen = [r for r in results if r.arguments_ok is not None]
    expected_to_run = [r for r in results if r.request.expect.expects_execution]
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
        confirmations=Share(sum(r.decision is not None and
                                r.decision.route == Route.AWAIT_CONFIRMATION
                                for r in expected_to_run), len(expected_to_run)),
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
        f"confirmations      {_per_100(t.confirmations)}",
        f"correct actions    {t.correct_actions}",
    ]
    return lines


def _counts(counts: Mapping[str, int]) -> str:
    total = sum(counts.values())
    if not total:
        return "0"
    return f"{total}  ({', '.join(f'{reason} {n}' for reason, n in counts.items())})"


def _per_100(asked: Share) -> str:
    """``2 of 10 calls expected to run (20.0 per 100)``: how often a person is asked."""
    if not asked.total:
        return "0 (no call expected to run)"
    return (f"{asked.correct} of {asked.total} calls expected to run "
           f"({100 * asked.correct / asked.total:.1f} per 100)")


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > REQUEST_TEXT_WIDTH:
        text = text[:REQUEST_TEXT_WIDTH - 3] + "..."
    return f"{text:<{REQUEST_TEXT_WIDTH}}"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
