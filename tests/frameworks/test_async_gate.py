"""AsyncGate is the synchronous gate driven from an event loop: held to it on the whole
scenario suite, with async executors, resolvers and finder, and with plain ones."""

from __future__ import annotations

import asyncio
import random
import re
import threading
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from callgate_rules import Gate, Run, keeps_deadline
from callgate_rules.harness.scenarios import FakeClock, Scenario, compare, load_scenarios
from callgate_rules.harness.simulator import Simulator
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.asynchronous import AsyncBindingError, AsyncGate
from callgate_rules.pipeline.execute import ExecutionRequest
from callgate_rules.store.sqlite import SqliteStore
from callgate_rules.taxonomy import ErrorClass, Route

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = load_scenarios([REPO / "examples" / "scenarios"])
SECRET = b"scenario-secret"


def _config() -> Any:
    from callgate_rules import load
    return load([REPO / "contracts", REPO / "policies"])


CONFIG = _config()

# What two runs of one scenario must agree on, field by field (the log's timestamps and
# timings, and the trace's timing notes, are the only things allowed to differ).
COMPARED = ("route", "error_class", "tool", "contract_version", "rule", "agent_message",
            "user_message", "arguments", "candidates", "operation_id", "result", "draft",
            "confirmation_token", "limit_path", "retry_after")


def _async_executor(executor: Callable[[ExecutionRequest], Any],
                    loops: list[asyncio.AbstractEventLoop]) -> Callable[..., Awaitable[Any]]:
    async def run(request: ExecutionRequest) -> Any:
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)  # really suspends on the caller's loop
        return executor(request)
    return run


class AsyncResolvers(Mapping[str, Any]):
    def __init__(self, world: Mapping[str, Any], loops: list[asyncio.AbstractEventLoop]):
        self.inner, self.loops = WorldResolvers(world), loops

    def __getitem__(self, name: str) -> Any:
        resolver = self.inner[name]

        async def resolve(field: str, value: Any) -> Any:
            self.loops.append(asyncio.get_running_loop())
            await asyncio.sleep(0)
            return resolver(field, value)
        return resolve

    def get(self, name: str, default: Any = None) -> Any:
        return self[name]

    def __iter__(self) -> Any:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


async def _drive(scenario: Scenario, store: SqliteStore, mode: str,
                 loops: list[asyncio.AbstractEventLoop]) -> tuple[list[Any], list[str], int]:
    """One scenario, as ``run_scenario`` runs it, through the sync gate or the async one
    (``async``: async bindings; ``async-plain``: the simulator's plain functions)."""
    simulator = Simulator(scenario.world, scenario.faults)
    clock = FakeClock(scenario.now)
    common = dict(store=store, clock=clock, sleep=clock.sleep, secret=SECRET,
                  rng=random.Random(7), worker="worker-1")
    if mode == "sync":
        gate: Any = Gate(CONFIG, resolvers=WorldResolvers(scenario.world),
                         executors=simulator.executors(), finder=simulator.find, **common)
    elif mode == "async":
        async def find(tool: str, operation_id: str) -> Any:
            loops.append(asyncio.get_running_loop())
            return simulator.find(tool, operation_id)
        gate = AsyncGate(CONFIG, resolvers=AsyncResolvers(scenario.world, loops),
                         executors={tool: _async_executor(executor, loops)
                                    for tool, executor in simulator.executors().items()},
                         finder=find, **common)
    else:
        gate = AsyncGate(CONFIG, resolvers=WorldResolvers(scenario.world),
                         executors=simulator.executors(), finder=simulator.find, **common)
    run = Run(started_at=clock())
    decisions, failures, token = [], [], None
    for index, step in enumerate(scenario.steps):
        actor = step.get("actor", scenario.actor)
        session = step.get("session", scenario.session)
        conversation = step.get("conversation", scenario.conversation)
        request_id = str(step.get("request_id", scenario.name))
        if "confirm" in step:
            confirm = step["confirm"] or {}
            chosen = confirm.get("token", token) if isinstance(confirm, dict) else token
            keywords = dict(actor=actor, session=session,
                            confirmed_by=str((confirm or {}).get("by", "user")))
            decision = gate.confirm(chosen, **keywords) if mode == "sync" \
                else await gate.aconfirm(chosen, **keywords)
        else:
            keywords = dict(actor=actor, request_id=request_id, run=run, session=session,
                            conversation=conversation)
            decision = gate.handle(step["propose"], **keywords) if mode == "sync" \
                else await gate.ahandle(step["propose"], **keywords)
        token = decision.confirmation_token or token
        decisions.append(decision)
        failures.extend(f"step {index + 1}: {failure}"
                        for failure in compare(step.get("expect", {}), decision, simulator))
    return decisions, failures, simulator.write_count()


async def _on_one_loop(scenario: Scenario, store: SqliteStore, mode: str,
                       loops: list[asyncio.AbstractEventLoop]) -> Any:
    outcome = await _drive(scenario, store, mode, loops)
    assert all(loop is asyncio.get_running_loop() for loop in loops)
    return outcome


def _fields(decision: Any) -> dict[str, Any]:
    return {name: getattr(decision, name) for name in COMPARED}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_async_gate_decides_as_the_sync_gate(scenario: Scenario, tmp_path: Path) -> None:
    results = {}
    for mode in ("sync", "async", "async-plain"):
        store = SqliteStore(tmp_path / f"{mode}.sqlite3")
        loops: list[asyncio.AbstractEventLoop] = []
        try:
            results[mode] = asyncio.run(_on_one_loop(scenario, store, mode, loops))
        finally:
            store.close()
        if mode == "async" and results["sync"][2]:
            assert loops, "the async bindings were never awaited"
    sync_decisions, sync_failures, sync_writes = results["sync"]
    assert not sync_failures, "\n".join(sync_failures)
    for mode in ("async", "async-plain"):
        decisions, failures, writes = results[mode]
        assert not failures, f"{mode}: " + "\n".join(failures)
        assert writes == sync_writes
        assert [_fields(d) for d in decisions] == [_fields(d) for d in sync_decisions]
        assert [_steps(d) for d in decisions] == [_steps(d) for d in sync_decisions]


def _steps(decision: Any) -> list[tuple[str, str, str]]:
    """The trace's steps; a review item's ID is random, so only that it was queued counts."""
    return [(e.step, e.subject, re.sub(r"queued as \S+", "queued", e.result))
            for e in decision.trace]


def test_the_suite_holds_every_route_it_should() -> None:
    # The comparison above means something only if the suite reaches writes, confirmations,
    # retries and reconciliation.
    texts = " ".join(str(step) for s in SCENARIOS for step in s.steps)
    assert "confirm" in texts and len(SCENARIOS) >= 20


WORLD = yaml.safe_load((REPO / "examples" / "world.yaml").read_text())
DANA = yaml.safe_load((REPO / "examples" / "actors" / "dana.yaml").read_text())


def _follow_up(due: str = "2026-12-03T09:00:00Z") -> dict[str, Any]:
    return {"name": "createFollowUp",
            "arguments": {"ticketId": "T-1001", "assigneeId": "U-7", "dueAt": due}}


def test_async_executor_runs_on_the_callers_loop_and_writes_once(tmp_path: Path) -> None:
    from callgate_rules.harness.scenarios import DEFAULT_NOW
    simulator = Simulator(WORLD)
    seen: list[tuple[asyncio.AbstractEventLoop, int]] = []

    async def create(request: ExecutionRequest) -> Any:
        seen.append((asyncio.get_running_loop(), threading.get_ident()))
        await asyncio.sleep(0.001)
        return simulator.executors()["createFollowUp"](request)

    async def main() -> tuple[Any, Any]:
        store = SqliteStore(tmp_path / "r.sqlite3")
        clock = FakeClock(DEFAULT_NOW)
        gate = AsyncGate(CONFIG, resolvers=WorldResolvers(WORLD),
                         executors={"createFollowUp": create}, store=store, clock=clock,
                         sleep=clock.sleep)
        first, again = await asyncio.gather(
            gate.ahandle(_follow_up(), actor=DANA, request_id="turn-1"),
            gate.ahandle(_follow_up(), actor=DANA, request_id="turn-1"))
        assert seen and all(loop is asyncio.get_running_loop() for loop, _ in seen)
        assert all(ident == threading.get_ident() for _, ident in seen)
        store.close()
        return first, again

    first, again = asyncio.run(main())
    routes = sorted(str(d.route) for d in (first, again))
    assert simulator.write_count() == 1
    assert str(Route.RETURN_RESULT) in routes


def test_deadline_keeping_executors_are_called_from_the_pipelines_own_thread(
        tmp_path: Path) -> None:
    """Marked with ``keeps_deadline``, a plain executor runs in the pipeline's worker thread
    and an async one is awaited on the caller's loop from there: no thread of their own."""
    from callgate_rules.harness.scenarios import DEFAULT_NOW
    from callgate_rules.pipeline.execute import DeadlineKeeping
    simulator = Simulator(WORLD)
    ran_in: list[str] = []
    loops: list[asyncio.AbstractEventLoop] = []

    @keeps_deadline
    def create(request: ExecutionRequest) -> Any:
        ran_in.append(threading.current_thread().name)
        return simulator.executors()["createFollowUp"](request)

    @keeps_deadline
    async def status(request: ExecutionRequest) -> Any:
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0.001)
        return simulator.executors()["getTicketStatus"](request)

    async def main() -> tuple[Any, Any, AsyncGate]:
        store = SqliteStore(tmp_path / "r.sqlite3")
        clock = FakeClock(DEFAULT_NOW)
        gate = AsyncGate(CONFIG, resolvers=WorldResolvers(WORLD),
                         executors={"createFollowUp": create, "getTicketStatus": status},
                         store=store, clock=clock, sleep=clock.sleep)
        written = await gate.ahandle(_follow_up(), actor=DANA, request_id="turn-1")
        read = await gate.ahandle({"name": "getTicketStatus",
                                   "arguments": {"ticketId": "T-1001"}},
                                  actor=DANA, request_id="turn-2")
        assert loops == [asyncio.get_running_loop()]
        store.close()
        return written, read, gate

    written, read, gate = asyncio.run(main())
    assert written.route == read.route == Route.RETURN_RESULT
    assert simulator.write_count() == 1
    assert len(ran_in) == 1 and ran_in[0].startswith("callgate-async")
    assert isinstance(gate.gate.executors["getTicketStatus"], DeadlineKeeping)


def test_an_async_executor_that_raises_is_classified_as_a_plain_one(tmp_path: Path) -> None:
    from callgate_rules.errors import BeforeSending
    from callgate_rules.harness.scenarios import DEFAULT_NOW

    async def refuse(request: ExecutionRequest) -> Any:
        await asyncio.sleep(0)
        raise BeforeSending("connection refused")

    async def main() -> Any:
        clock = FakeClock(DEFAULT_NOW)
        gate = AsyncGate(CONFIG, resolvers=WorldResolvers(WORLD),
                         executors={"createFollowUp": refuse},
                         store=SqliteStore(tmp_path / "r.sqlite3"), clock=clock,
                         sleep=clock.sleep, rng=random.Random(1))
        return await gate.ahandle(_follow_up(), actor=DANA, request_id="turn-1")

    decision = asyncio.run(main())
    assert decision.error_class == ErrorClass.TRANSIENT or decision.limit_path is not None


def test_an_async_resolver_on_the_sync_gate_is_a_clear_error(tmp_path: Path) -> None:
    from callgate_rules.pipeline.asynchronous import BridgedResolvers

    async def tickets(field: str, value: Any) -> Any:
        return []

    gate = Gate(CONFIG, resolvers=BridgedResolvers({"tickets": tickets}),
                store=SqliteStore(tmp_path / "r.sqlite3"))
    decision = gate.check(_follow_up(), actor=DANA)
    assert decision.error_class is not None
    assert AsyncBindingError.__name__ in str(decision.log) or "AsyncGate" in str(decision.log)


def test_a_hanging_async_executor_times_out_and_the_loop_keeps_running(tmp_path: Path) -> None:
    from dataclasses import replace

    from callgate_rules.harness.scenarios import DEFAULT_NOW
    contract = replace(CONFIG.contracts["getTicketStatus"], timeout_seconds=0.1)
    config = replace(CONFIG, contracts={**CONFIG.contracts, "getTicketStatus": contract})

    async def hang(request: ExecutionRequest) -> Any:
        await asyncio.sleep(30)

    async def main() -> tuple[Any, int]:
        clock = FakeClock(DEFAULT_NOW)
        gate = AsyncGate(config, resolvers=WorldResolvers(WORLD),
                         executors={"getTicketStatus": hang},
                         store=SqliteStore(tmp_path / "r.sqlite3"), clock=clock,
                         sleep=clock.sleep, rng=random.Random(1))
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1
        ticker = asyncio.create_task(tick())
        decision = await gate.ahandle({"name": "getTicketStatus",
                                       "arguments": {"ticketId": "T-1001"}},
                                      actor=DANA, request_id="turn-1")
        ticker.cancel()
        return decision, ticks

    decision, ticks = asyncio.run(main())
    assert decision.error_class in (ErrorClass.UNKNOWN_OUTCOME, ErrorClass.BUDGET_EXHAUSTED) \
        or decision.limit_path is not None
    assert ticks >= 5  # the event loop ran on while the pipeline waited in its thread


def test_adeclare_intent_binds_the_runs_intent_and_aintent_of_reads_it(tmp_path: Path) -> None:
    from callgate_rules.intent import INTENT_RULE
    from callgate_rules.pipeline.intents import IntentWidened
    from tests.frameworks.conftest import HOLDER, MAIL, PAY_THE_RENT, RENT, Bank, banking_gate
    bank = Bank()
    gate = banking_gate(tmp_path, bank)
    run = Run(started_at=datetime(2026, 11, 29, 12, tzinfo=UTC))

    async def scenario() -> None:
        assert await gate.aintent_of(run) is None
        bound = await gate.adeclare_intent(run, PAY_THE_RENT, declared_by="planner")
        assert (bound.version, set(bound.intent.tools)) == (1, {"sendMoney"})
        outside = await gate.ahandle({"name": "sendEmail", "arguments": MAIL}, actor=HOLDER,
                                     request_id="r1", run=run)
        assert (outside.route, outside.rule) == (Route.AWAIT_CONFIRMATION, INTENT_RULE)
        within = await gate.ahandle({"name": "sendMoney", "arguments": RENT}, actor=HOLDER,
                                    request_id="r2", run=run)
        assert within.route == Route.RETURN_RESULT
        # the same intent again changes nothing and is taken; a narrower one narrows it; a
        # wider one is refused
        again = await gate.adeclare_intent(run.run_id, PAY_THE_RENT, declared_by="planner")
        assert (again.version, again.intent.as_data()) == (1, bound.intent.as_data())
        narrower = {"tools": {"sendMoney": {"calls": 1, "arguments": {
            "recipient": {"equals": RENT["recipient"]}, "amount": {"maximum": 500}}}},
            "totals": {"paid": {"tools": ["sendMoney"], "argument": "amount", "at_most": 500}}}
        assert (await gate.adeclare_intent(run, narrower, declared_by="planner")).version == 2
        with pytest.raises(IntentWidened):
            await gate.adeclare_intent(run, PAY_THE_RENT, declared_by="planner")
        now = await gate.aintent_of(run.run_id)
        assert now is not None and now.version == 2

    asyncio.run(scenario())
    assert bank.writes == [("sendMoney", RENT)]
