"""Scenario suites: scripted model outputs run through the gate against the simulator.

A scenario file holds one or more YAML documents, each a scenario::

    name: timeout after sending
    actor: ../actors/dana.yaml        # a path (relative to this file) or a mapping
    world: ../world.yaml              # a path or a mapping of collections
    now: "2026-11-29T12:00:00Z"
    faults: {createFollowUp: {timeout_after_applying: 1}}
    destination: support-desk         # the simulated destination's configuration (optional,
                                      #   default generic: any tool, answers from arguments)
    results: {createFollowUp: {id: F-9, ticketId: "{args.ticketId}"}}  # declared answers
    session: {authenticated: true}    # facts about the session (optional)
    conversation: [...]               # the messages that led to the proposals (optional)
    steps:
      - propose: {name: createFollowUp, arguments: {...}}   # any accepted model format
        expect: {route: return_result, writes: 1}
      - confirm: {by: dana}            # confirm the last decision's draft
        expect: {route: return_result}
    expect: {writes: 1}               # checked after the last step

Expectations: ``route``, ``error_class`` (``null`` for none), ``rule``, ``writes`` (total
so far), ``writes_by_tool``, ``agent_message_contains`` / ``agent_message_excludes``,
``user_message_contains`` / ``user_message_excludes``, ``draft_contains``,
``candidates`` (how many), ``limit_path``, ``late_confirmation``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from callgate_rules.decision_log import DecisionLog

# load_config_for is re-exported: the suite commands and their tests reach it through here.
from callgate_rules.documents.compiler import load_config_for as load_config_for
from callgate_rules.documents.model import GateConfig
from callgate_rules.documents.source import (
    SourceDocument,
    iter_yaml_files,
    parse_yaml_text,
    read_data_file,
    read_text,
)
from callgate_rules.errors import InputError, Location
from callgate_rules.harness.simulator import (
    DESTINATIONS,
    Simulator,
    faults_by_tool,
    simulated_tools,
)
from callgate_rules.harness.world import WorldResolvers, check_world
from callgate_rules.pipeline.budgets import Run
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.execute import Executor
from callgate_rules.pipeline.gate import Gate
from callgate_rules.store import open_store
from callgate_rules.store.base import ReceiptStore

DEFAULT_NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
STEP_KEYS = frozenset({"propose", "confirm", "expect", "request_id", "actor", "session",
                       "conversation"})
EXPECT_KEYS = frozenset({
    "route", "error_class", "rule", "writes", "writes_by_tool", "agent_message_contains",
    "agent_message_excludes", "user_message_contains", "user_message_excludes",
    "draft_contains", "draft_excludes", "candidates", "limit_path", "late_confirmation",
})


class FakeClock:
    """Time that moves only when the gate sleeps, so backoff costs nothing in a scenario."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass(frozen=True)
class StepResult:
    index: int
    decision: Decision
    writes: int
    failures: tuple[str, ...]


@dataclass(frozen=True)
class ScenarioResult:
    name: str
    location: Location
    steps: tuple[StepResult, ...]
    failures: tuple[str, ...]  # every expectation that did not hold, expected vs actual
    writes: int

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def last(self) -> Decision | None:
        return self.steps[-1].decision if self.steps else None

    def as_dict(self) -> dict[str, Any]:
        last = self.last
        return {
            "name": self.name,
            "file": self.location.path,
            "line": self.location.line,
            "passed": self.passed,
            "route": str(last.route) if last else None,
            "error_class": str(last.error_class) if last and last.error_class else None,
            "writes": self.writes,
            "failures": list(self.failures),
            "steps": [
                {"route": str(s.decision.route),
                 "error_class": str(s.decision.error_class) if s.decision.error_class else None,
                 "rule": s.decision.rule, "writes": s.writes,
                 "agent_message": s.decision.agent_message}
                for s in self.steps
            ],
        }


@dataclass(frozen=True)
class Scenario:
    name: str
    source: SourceDocument
    actor: Mapping[str, Any]
    world: Mapping[str, Any]
    now: datetime
    faults: Mapping[str, Any]
    steps: tuple[Mapping[str, Any], ...]
    expect: Mapping[str, Any] = field(default_factory=dict)
    session: Mapping[str, Any] = field(default_factory=dict)
    conversation: Any = None  # the messages before the first step, if the scenario has any
    destination: str = "generic"  # the simulated destination's configuration (DESTINATIONS)
    results: Mapping[str, Any] = field(default_factory=dict)  # tool → its declared answer


def load_scenarios(paths: Iterable[str | Path]) -> list[Scenario]:
    scenarios: list[Scenario] = []
    for file in iter_yaml_files([Path(p) for p in paths]):
        text = read_text(file)  # bounded: refused unread when too large
        for document in parse_yaml_text(text, str(file)):
            scenarios.append(scenario_of(document, file))
    return scenarios


SCENARIO_KEYS = frozenset({"name", "description", "actor", "world", "now", "faults", "steps",
                           "expect", "session", "conversation", "destination", "results"})


def scenario_of(document: SourceDocument, file: Path,
              defaults: Mapping[str, Any] | None = None) -> Scenario:
    """One scenario; ``defaults`` fills actor, world, now and faults it does not give."""
    data = document.data
    where = document.locate(())
    if not isinstance(data, dict) or "name" not in data or "steps" not in data:
        raise InputError(f"{where}: a scenario needs at least name and steps")
    data = {**(defaults or {}), **data}
    unknown = set(data) - SCENARIO_KEYS
    if unknown:
        raise InputError(f"{document.locate((sorted(unknown)[0], '<key>'))}: unknown scenario "
                         f"field {sorted(unknown)[0]!r}")
    steps = data["steps"]
    if not isinstance(steps, list) or not steps:
        raise InputError(f"{document.locate(('steps',))}: steps must be a non-empty list")
    for index, step in enumerate(steps):
        if not isinstance(step, dict) or not ({"propose", "confirm"} & set(step)):
            raise InputError(f"{document.locate(('steps', index))}: each step needs propose "
                             "or confirm")
        for key in set(step) - STEP_KEYS:
            raise InputError(f"{document.locate(('steps', index, key, '<key>'))}: unknown "
                             f"step field {key!r}")
        for key in set(step.get("expect", {})) - EXPECT_KEYS:
            known = ", ".join(sorted(EXPECT_KEYS))
            raise InputError(f"{document.locate(('steps', index, 'expect', key, '<key>'))}: "
                             f"unknown expectation {key!r}; known: {known}")
    now = data.get("now", DEFAULT_NOW)
    if isinstance(now, str):
        now = datetime.fromisoformat(now.replace("Z", "+00:00"))
    world = _resolve(data.get("world", {}), file, "the world", document, "world")
    try:
        faults = faults_by_tool(data.get("faults") or {})
    except ValueError as error:
        raise InputError(f"{document.locate(('faults',))}: {error}") from None
    destination = data.get("destination", "generic")
    if not isinstance(destination, str) or destination not in DESTINATIONS:
        raise InputError(f"{document.locate(('destination',))}: unknown destination "
                         f"{destination!r}; known: {', '.join(sorted(DESTINATIONS))}")
    results = data.get("results") or {}
    if not isinstance(results, Mapping):
        raise InputError(f"{document.locate(('results',))}: results must map tool names to "
                         "the answers the destination gives, e.g. {issueRefund: {id: R-1}}")
    return Scenario(
        name=str(data["name"]),
        source=document,
        actor=_resolve(data.get("actor", {}), file, "the actor", document, "actor"),
        world=check_world(world, str(file)),
        now=now,
        faults=faults,
        steps=tuple(steps),
        expect=data.get("expect", {}),
        session=data.get("session") or {},
        conversation=_resolve(data.get("conversation"), file, "the conversation", document,
                              "conversation"),
        destination=str(destination),
        results=results,
    )


def _resolve(value: Any, file: Path, what: str, document: SourceDocument | None = None,
             key: str = "") -> Any:
    """``value``, or the data of the file it names (relative to ``file``'s folder); a file
    that is not there is named with the place that names it, never a bare OS error."""
    if isinstance(value, str) and value.endswith((".yaml", ".yml", ".json")):
        target = file.parent / value
        if not target.is_file() and document is not None:
            why = "is a folder" if target.is_dir() else "is not there"
            raise InputError(f"{document.locate((key,))}: {what} file {value} {why} (looked "
                             f"for {os.path.normpath(target)}; a path is relative to the "
                             f"folder of {file})")
        return read_data_file(str(target), what)
    return value


def run_scenarios(scenarios: Iterable[Scenario], config: GateConfig,
                  store_url: str | None = None,
                  executors: Mapping[str, Executor] | None = None, *,
                  decision_log: DecisionLog | None = None,
                  advanced: Callable[[int], None] | None = None) -> list[ScenarioResult]:
    """Run each scenario with a store of its own (or the one ``store_url`` names);
    ``decision_log`` gets every decision's line, ``advanced(1)`` is called after each
    scenario (a progress bar's ``update``)."""
    with tempfile.TemporaryDirectory(prefix="callgate-scenarios-") as directory:
        results = []
        for index, scenario in enumerate(scenarios):
            url = store_url or f"sqlite:///{directory}/receipts-{index}.sqlite3"
            store = open_store(url)
            try:
                results.append(run_scenario(scenario, config, store,
                                            request_prefix=f"{index}-" if store_url else "",
                                            executors=executors, decision_log=decision_log))
            finally:
                store.close()
            if advanced is not None:
                advanced(1)
        return results


def run_scenario(scenario: Scenario, config: GateConfig, store: ReceiptStore,
                 request_prefix: str = "",
                 executors: Mapping[str, Executor] | None = None,
                 decision_log: DecisionLog | None = None) -> ScenarioResult:
    """Run one scenario against a simulated destination for every contract of ``config``;
    ``executors`` (tool → the host's own executor) replace the simulated ones they name."""
    try:
        tools = simulated_tools(config, scenario.destination, scenario.results)
        simulator = Simulator(scenario.world, scenario.faults, tools)
    except ValueError as error:
        raise InputError(f"{scenario.source.locate(())}: {error}") from None
    clock = FakeClock(scenario.now)
    gate = Gate(config, resolvers=WorldResolvers(scenario.world),
                executors={**simulator.executors(), **(executors or {})},
                finder=simulator.find, store=store,
                clock=clock, sleep=clock.sleep, secret=b"scenario-secret",
                decision_log=decision_log)
    run = Run(started_at=clock())
    steps: list[StepResult] = []
    failures: list[str] = []
    last: Decision | None = None
    draft_token: str | None = None  # the newest draft's token, for `confirm` steps
    for index, step in enumerate(scenario.steps):
        actor = step.get("actor", scenario.actor)
        session = step.get("session", scenario.session)
        conversation = step.get("conversation", scenario.conversation)
        request_id = request_prefix + str(step.get("request_id", scenario.name))
        if "confirm" in step:
            confirm = step["confirm"] or {}
            token = (confirm.get("token", draft_token) if isinstance(confirm, dict)
                else draft_token)
            if not token:
                failures.append(f"step {index + 1}: nothing to confirm (no draft before it)")
                break
            decision = gate.confirm(token, actor=actor, session=session,
                                    confirmed_by=str((confirm or {}).get("by", "user")))
        else:
            decision = gate.handle(step["propose"], actor=actor, request_id=request_id,
                                   run=run, session=session, conversation=conversation)
        last = decision
        draft_token = decision.confirmation_token or draft_token
        writes = simulator.write_count()
        step_failures = tuple(
            f"step {index + 1} ({scenario.source.locate(('steps', index))}): {failure}"
            for failure in compare(step.get("expect", {}), decision, simulator)
        )
        failures.extend(step_failures)
        steps.append(StepResult(index, decision, writes, step_failures))
    if last is not None:
        failures.extend(f"end: {failure}" for failure in
                        compare(scenario.expect, last, simulator))
    return ScenarioResult(scenario.name, scenario.source.locate(()), tuple(steps),
                          tuple(failures), simulator.write_count())


def compare(expect: Mapping[str, Any], decision: Decision, simulator: Simulator) -> list[str]:
    """Every expectation that does not hold, as ``field: expected X, got Y``."""
    failures: list[str] = []

    def check(name: str, expected: Any, actual: Any) -> None:
        if expected != actual:
            failures.append(f"{name}: expected {expected!r}, got {actual!r}")

    if "route" in expect:
        check("route", expect["route"], str(decision.route))
    if "error_class" in expect:
        check("error_class", expect["error_class"],
              str(decision.error_class) if decision.error_class else None)
    if "rule" in expect:
        check("rule", expect["rule"], decision.rule)
    if "writes" in expect:
        check("writes", expect["writes"], simulator.write_count())
    for tool, count in expect.get("writes_by_tool", {}).items():
        check(f"writes of {tool}", count, simulator.write_count(tool))
    if "limit_path" in expect:
        check("limit_path", expect["limit_path"], decision.limit_path)
    if "candidates" in expect:
        check("candidates", expect["candidates"], len(decision.candidates))
    if "late_confirmation" in expect:
        check("late_confirmation", expect["late_confirmation"],
              decision.log.get("detail") == "late confirmation")
    for key, text in (("agent_message", decision.agent_message),
                      ("user_message", decision.user_message),
                      ("draft", decision.draft or "")):
        for needle in _as_list(expect.get(f"{key}_contains")):
            if needle not in text:
                failures.append(f"{key}: expected to contain {needle!r}, got {text!r}")
        for needle in _as_list(expect.get(f"{key}_excludes")):
            if needle in text:
                failures.append(f"{key}: expected not to contain {needle!r}, got {text!r}")
    return failures


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]
