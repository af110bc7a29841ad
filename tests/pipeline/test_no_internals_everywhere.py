"""No internals in any answer, on every interface (issue #37, item 7).

Connection strings, SQL, stack frames and a library's own error text go to the log only.
The service's answers are held to it in ``tests/server/test_boundary.py``; here the same
promise is held for the library (``Gate``, ``AsyncGate``, hosted writes), the three
framework adapters, and — against a real PostgreSQL whose connections are cut — the
library and the MCP gateway.

Every host function here fails with the same text: a store URL with a user, a password, a
host, a port and a database, PostgreSQL's words, an SQL statement and a stack frame. What
the model reads (the agent message, the tool result an adapter or the gateway hands back)
and what a person reads (the user message, a draft, the review queue's summaries and
payloads) must hold none of it; the decision's log must (that is where an engineer finds
it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from callgate_rules import Gate
from callgate_rules.harness.simulator import Simulator
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.integrations.formats import openai_tool_message, tool_result_text
from callgate_rules.pipeline.asynchronous import AsyncGate
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.execute import ExecutionRequest
from callgate_rules.store.base import ReceiptStore
from callgate_rules.taxonomy import ErrorClass

REPO = Path(__file__).resolve().parents[2]
CONTRACTS, POLICIES = REPO / "contracts", REPO / "policies"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WORLD = yaml.safe_load((REPO / "examples" / "world.yaml").read_text())
DANA = yaml.safe_load((REPO / "examples" / "actors" / "dana.yaml").read_text())

# What a failing driver, database or host function may say.
LEAKED = ('receipt store postgresql://callgate_svc:Hunter2-pw@db7.internal.example:6543/'
          'receipts_prod failed: ERROR:  relation "callgate_receipts" does not exist\n'
          'LINE 1: SELECT lease_owner FROM callgate_receipts WHERE operation_id = $1\n'
          'Traceback (most recent call last):\n'
          '  File "/srv/app/callgate_store.py", line 12, in claim')
# Each piece that must stay in the log: never in an answer.
INTERNALS = ("Hunter2-pw", "callgate_svc", "db7.internal.example", "receipts_prod",
             "postgresql://", "callgate_receipts", "SELECT ", "relation ", "Traceback",
             "/srv/app/", "line 12")

FOLLOW_UP = {"ticketId": "T-1001", "assigneeId": "U-7", "dueAt": "2026-12-03T09:00:00Z"}
STATUS = {"ticketId": "T-1001"}


def leaking(*arguments: Any) -> Any:
    """A resolver, an executor or a finder whose dependency failed and says so."""
    raise RuntimeError(LEAKED)


def assert_clean(*texts: Any) -> None:
    """None of ``texts`` (turned to JSON when not text) names an internal."""
    for text in texts:
        shown = text if isinstance(text, str) else json.dumps(text, default=str)
        for internal in INTERNALS:
            assert internal not in shown, (internal, shown)


def assert_logged(decision: Decision) -> None:
    """The engineer's record has it: the log's detail keeps what the dependency said."""
    assert "Hunter2-pw" in str(decision.log.get("detail")), decision.log


def read_by_people(store: ReceiptStore) -> list[Any]:
    """What the review queue shows a person: each item's summary and payload."""
    return [[item.summary, dict(item.payload), item.reason] for item in store.list_reviews()]


def model_reads(decision: Decision) -> list[Any]:
    """What the model and the user are handed of a decision."""
    return [decision.agent_message, decision.user_message, decision.draft,
            tool_result_text(decision), openai_tool_message(decision)]


class Bindings:
    """The reference domain's world, with the chosen host functions failing."""

    def __init__(self, *, resolvers: bool = False, executors: bool = False,
                 finder: bool = False) -> None:
        self.simulator = Simulator(WORLD)
        world = WorldResolvers(WORLD)
        self.resolvers: Any = {name: leaking for name in WORLD} if resolvers else world
        self.executors = {name: leaking for name in self.simulator.executors()} \
            if executors else self.simulator.executors()
        self.finder = leaking if finder else self.simulator.find

    def of_gate(self, store: str) -> dict[str, Any]:
        return dict(resolvers=self.resolvers, executors=self.executors, finder=self.finder,
                    store=store, clock=lambda: NOW, sleep=lambda seconds: None)


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'receipts.sqlite3'}"


# The library ------------------------------------------------------------------------------


def test_a_resolver_that_fails_with_a_secret_is_told_in_fixed_words(store_url: str) -> None:
    gate = Gate.from_paths(CONTRACTS, POLICIES, **Bindings(resolvers=True).of_gate(store_url))
    for tool, arguments in (("createFollowUp", FOLLOW_UP), ("getTicketStatus", STATUS)):
        decision = gate.handle({"name": tool, "arguments": arguments}, actor=DANA,
                               request_id=f"r-{tool}", now=NOW)
        assert decision.error_class == ErrorClass.TRANSIENT
        assert_clean(*model_reads(decision))
        assert_logged(decision)
    assert_clean(read_by_people(gate.store))


def test_a_write_whose_executor_and_finder_fail_reaches_a_person_in_fixed_words(
        store_url: str) -> None:
    gate = Gate.from_paths(CONTRACTS, POLICIES,
                           **Bindings(executors=True, finder=True).of_gate(store_url))
    decision = gate.handle({"name": "createFollowUp", "arguments": FOLLOW_UP}, actor=DANA,
                           request_id="r-write", now=NOW)
    # sent, its answer lost, and the destination could not be asked: a person checks
    assert decision.error_class == ErrorClass.RECONCILE_FAILED
    assert_clean(*model_reads(decision))
    assert_logged(decision)
    people = read_by_people(gate.store)
    assert people and "could not be asked whether it happened" in people[0][0]
    assert_clean(people)
    receipt = gate.store.get(decision.operation_id or "")
    assert receipt is not None and "Hunter2-pw" in (receipt.detail or "")  # the engineer's


def test_a_read_whose_executor_keeps_failing_reaches_a_person_in_fixed_words(
        store_url: str) -> None:
    gate = Gate.from_paths(CONTRACTS, POLICIES, **Bindings(executors=True).of_gate(store_url))
    decision = gate.handle({"name": "getTicketStatus", "arguments": STATUS}, actor=DANA,
                           request_id="r-read", now=NOW)
    assert decision.error_class == ErrorClass.BUDGET_EXHAUSTED  # retried to the limit
    assert_clean(*model_reads(decision))
    assert_logged(decision)
    people = read_by_people(gate.store)
    assert people and "transport retries" in people[0][0]
    assert_clean(people)


def test_a_run_limit_hands_a_person_no_internals(store_url: str) -> None:
    from callgate_rules import Run

    gate = Gate.from_paths(CONTRACTS, POLICIES, **Bindings(resolvers=True).of_gate(store_url))
    run = Run(started_at=NOW)
    decisions = [gate.handle({"name": "getTicketStatus", "arguments": STATUS}, actor=DANA,
                             request_id=f"r-limit-{index}", run=run, now=NOW)
                 for index in range(6)]  # the reference routing allows 4 failures a run
    assert decisions[-1].error_class == ErrorClass.BUDGET_EXHAUSTED
    assert_clean(*[text for decision in decisions for text in model_reads(decision)])
    people = read_by_people(gate.store)
    assert people and "failed calls in this run" in people[0][0]
    assert_clean(people)


def test_the_async_gate_tells_the_same_fixed_words(store_url: str) -> None:
    gate = AsyncGate.from_paths(CONTRACTS, POLICIES,
                                **Bindings(executors=True, finder=True).of_gate(store_url))

    async def both() -> list[Decision]:
        return [await gate.ahandle({"name": "createFollowUp", "arguments": FOLLOW_UP},
                                   actor=DANA, request_id="r-async", now=NOW),
                await gate.acheck({"name": "getTicketStatus", "arguments": STATUS},
                                  actor=DANA, request_id="r-async-check", now=NOW)]

    written, checked = asyncio.run(both())
    assert written.error_class == ErrorClass.RECONCILE_FAILED
    assert_clean(*model_reads(written), *model_reads(checked))
    assert_logged(written)
    assert_clean(read_by_people(gate.gate.store))


def test_a_hosted_write_whose_host_reports_a_secret_is_told_in_fixed_words(
        store_url: str) -> None:
    from callgate_rules.documents.compiler import load
    from callgate_rules.pipeline.hosted import Action, Failure, HostedWrites

    hosted = HostedWrites(load([CONTRACTS, POLICIES]), resolvers=WorldResolvers(WORLD),
                          store=store_url, clock=lambda: NOW, sleep=lambda seconds: None)
    step = hosted.claim({"name": "createFollowUp", "arguments": FOLLOW_UP}, actor=DANA,
                        request_id="r-hosted", now=NOW)
    assert step.action == Action.EXECUTE and step.lease is not None, step
    # the host sent it and the destination refused, in its driver's words
    ended = hosted.finish(step.operation_id, step.lease, actor=DANA, failure=Failure(
        sent=True, detail=LEAKED, error_class=ErrorClass.PERMANENT))
    assert ended.action == Action.DONE and ended.decision is not None, ended
    assert ended.decision.error_class == ErrorClass.PERMANENT
    assert_clean(*model_reads(ended.decision))
    assert_logged(ended.decision)
    assert_clean(read_by_people(hosted.gate.store))


def test_the_executors_own_words_stay_out_of_a_receipt_free_answer(store_url: str) -> None:
    """A permanent refusal: the destination's reason is the log's, the model hears that it
    was refused."""
    from callgate_rules.errors import Refused

    def refusing(request: ExecutionRequest) -> Any:
        raise Refused(LEAKED)

    bindings = Bindings().of_gate(store_url)
    bindings["executors"] = {**bindings["executors"], "getTicketStatus": refusing}
    gate = Gate.from_paths(CONTRACTS, POLICIES, **bindings)
    decision = gate.handle({"name": "getTicketStatus", "arguments": STATUS}, actor=DANA,
                           request_id="r-refused", now=NOW)
    assert decision.error_class == ErrorClass.PERMANENT
    assert_clean(*model_reads(decision))
    assert_logged(decision)


# The framework adapters -------------------------------------------------------------------


@pytest.fixture
def failing_gate(store_url: str) -> Iterator[AsyncGate]:
    gate = AsyncGate.from_paths(CONTRACTS, POLICIES,
                                **Bindings(executors=True, finder=True).of_gate(store_url))
    yield gate
    gate.close()


def test_the_openai_agents_adapter_hands_the_model_no_internals(
        failing_gate: AsyncGate) -> None:
    pytest.importorskip("agents", reason="pip install 'callgate-rules[openai-agents]'")
    from agents import Agent, Runner

    from callgate_rules.integrations.frameworks import Turn
    from callgate_rules.integrations.frameworks.openai_agents import CallgateTools
    from tests.frameworks.conftest import example

    scripted = example("openai_agents_agent")
    decisions: list[Decision] = []
    callgate = CallgateTools(failing_gate, on_decision=decisions.append)
    model = scripted.ScriptedModel([[scripted.call("fc_1", "createFollowUp", **FOLLOW_UP)],
                                    [scripted.say("done")]])
    agent = Agent(name="desk", model=model, tools=callgate.tools)
    result = asyncio.run(Runner.run(agent, "follow up", context=Turn(DANA, "t-agents"),
                                    run_config=callgate.run_config(tracing_disabled=True)))
    outputs = [item.output for item in result.new_items
               if item.type == "tool_call_output_item"]
    assert outputs and decisions[0].error_class == ErrorClass.RECONCILE_FAILED
    assert_clean(outputs, [item.raw_item for item in result.new_items])
    assert_logged(decisions[0])


def test_the_pydantic_ai_adapter_hands_the_model_no_internals(
        failing_gate: AsyncGate) -> None:
    pytest.importorskip("pydantic_ai", reason="pip install 'callgate-rules[pydantic-ai]'")
    from pydantic_ai import Agent, DeferredToolRequests
    from pydantic_ai.messages import ModelResponse, TextPart

    from callgate_rules.integrations.frameworks import Turn
    from callgate_rules.integrations.frameworks.pydantic_ai import Callgate
    from tests.frameworks.conftest import example

    scripted = example("pydantic_ai_agent")
    decisions: list[Decision] = []
    callgate = Callgate(failing_gate, on_decision=decisions.append)
    agent: Agent[Turn, Any] = Agent(
        scripted.scripted([scripted.calls(("pc_1", "createFollowUp", FOLLOW_UP)),
                           ModelResponse(parts=[TextPart("done")])]),
        deps_type=Turn, output_type=[str, DeferredToolRequests], capabilities=[callgate])
    result = asyncio.run(agent.run("follow up", deps=Turn(DANA, "t-pydantic")))
    assert decisions and decisions[0].error_class == ErrorClass.RECONCILE_FAILED
    assert_clean([str(message) for message in result.all_messages()])
    assert_logged(decisions[0])


def test_the_langgraph_adapter_hands_the_model_no_internals(failing_gate: AsyncGate) -> None:
    pytest.importorskip("langgraph", reason="pip install 'callgate-rules[langgraph]'")
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph

    from callgate_rules.integrations.frameworks.langgraph import CallgateToolNode, route_tools

    decisions: list[Decision] = []
    model = GenericFakeChatModel(messages=iter([
        AIMessage(content="", tool_calls=[{"id": "tc_1", "name": "createFollowUp",
                                           "args": FOLLOW_UP}]),
        AIMessage(content="done")]))

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", CallgateToolNode(failing_gate, on_decision=decisions.append))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route_tools)
    graph.add_edge("tools", "agent")
    app = graph.compile(checkpointer=InMemorySaver())
    state = asyncio.run(app.ainvoke({"messages": [HumanMessage("follow up")]}, {
        "configurable": {"thread_id": "t-langgraph", "actor": DANA}}))
    assert decisions and decisions[0].error_class == ErrorClass.RECONCILE_FAILED
    assert_clean([message.model_dump() for message in state["messages"]])
    assert_logged(decisions[0])


# A real PostgreSQL whose connections are cut mid-run ---------------------------------------


@pytest.fixture
def cut_store() -> Iterator[Any]:
    """A PostgreSQL receipt store reached through a proxy the test can close: ``cut()``
    terminates the store's backends (PostgreSQL's own FATAL text on the wire) and closes the
    way to them. Yields (store URL, cut, the internals its failure may name)."""
    import os
    import uuid
    from urllib.parse import urlsplit

    import psycopg

    from tests.server.test_boundary import ClosingProxy

    postgres = os.environ.get("CALLGATE_TEST_POSTGRES_URL")
    if postgres is None:
        pytest.skip("CALLGATE_TEST_POSTGRES_URL is not set; this test needs PostgreSQL")
    real = urlsplit(postgres)
    assert real.hostname is not None
    proxy = ClosingProxy(real.hostname, real.port or 5432)
    schema = f"cg_cut_{uuid.uuid4().hex[:10]}"
    user, database = real.username or "postgres", real.path.lstrip("/")
    url = f"postgresql://{user}@127.0.0.1:{proxy.port}/{database}?schema={schema}"

    def cut() -> None:
        ports = [each.getsockname()[1] for each in proxy.upstream()]
        with psycopg.connect(postgres, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE client_port = ANY(%s)", (ports,))
        proxy.close()

    internals = (f"127.0.0.1:{proxy.port}", f"{user}@", f"/{database}", schema,
                 "postgresql://", "psycopg", "connection refused", "connection failed",
                 "server closed", "terminating connection", "administrator command",
                 "FATAL", "couldn't get a connection", "Traceback", "SELECT ", "INSERT ")
    try:
        yield url, cut, internals
    finally:
        proxy.close()
        with psycopg.connect(postgres, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def assert_none_of(internals: tuple[str, ...], *texts: Any) -> None:
    for text in texts:
        shown = (text if isinstance(text, str) else json.dumps(text, default=str)).lower()
        for internal in internals:
            assert internal.lower() not in shown, (internal, shown)


@pytest.mark.integration
def test_the_library_with_its_store_cut_mid_write_tells_no_internals(cut_store: Any) -> None:
    from callgate_rules.store import open_store

    url, cut, internals = cut_store
    store = open_store(url)
    # The pool waits 30 s for a connection by default; the store is gone for good here, so
    # a shorter wait shows the same failure sooner.
    store._pool.timeout = 2.0  # type: ignore[attr-defined]
    simulator = Simulator(WORLD)
    apply = simulator.executors()["createFollowUp"]

    def create_follow_up(request: ExecutionRequest) -> Any:
        result = apply(request)  # the destination applied the write...
        cut()  # ...and the receipt store is gone before it is recorded
        return result

    gate = Gate.from_paths(CONTRACTS, POLICIES, resolvers=WorldResolvers(WORLD),
                           executors={**simulator.executors(),
                                      "createFollowUp": create_follow_up},
                           finder=simulator.find, store=store, clock=lambda: NOW,
                           sleep=lambda seconds: None)
    try:
        written = gate.handle({"name": "createFollowUp", "arguments": FOLLOW_UP}, actor=DANA,
                              request_id="r-cut", now=NOW)
        read = gate.handle({"name": "getTicketStatus", "arguments": STATUS}, actor=DANA,
                           request_id="r-cut-read", now=NOW)
        another = gate.handle({"name": "createFollowUp", "arguments": {
            **FOLLOW_UP, "dueAt": "2026-12-04T09:00:00Z"}}, actor=DANA,
            request_id="r-cut-2", now=NOW)
    finally:
        gate.close()
    # sent, no receipt: a person checks; a read and a new write: unavailable, nothing sent
    assert written.error_class == ErrorClass.RECONCILE_FAILED
    assert another.error_class == ErrorClass.TRANSIENT
    for decision in (written, read, another):
        assert_none_of(internals, *model_reads(decision))
    assert "couldn't get a connection" in str(written.log["detail"])  # the engineer's record
    assert "couldn't get a connection" in str(another.log["detail"])


@pytest.mark.integration
def test_the_gateway_with_its_store_cut_mid_run_tells_no_internals(
        cut_store: Any, tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="pip install 'callgate-rules[gateway]'")
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from tests.gateway.conftest import (
        ACTOR_FILE,
        DOCUMENTS,
        GATEWAY,
        text_of,
        unique,
        upstream_command,
    )

    url, cut, internals = cut_store
    parameters = StdioServerParameters(command=GATEWAY[0], args=[
        *GATEWAY[1:], "--upstream-command", upstream_command(tmp_path / "state"),
        "--store", url, "--actor", str(ACTOR_FILE), *DOCUMENTS], cwd=str(REPO))
    run = {"callgate/run_id": unique("run")}

    async def calls() -> tuple[list[Any], Any]:
        answers: list[Any] = []
        with (tmp_path / "gateway.log").open("a") as errlog:
            async with stdio_client(parameters, errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    first = await session.call_tool(
                        "createNote", {"notebookId": "NB-1", "title": unique("before")},
                        meta={**run, "callgate/request_id": unique("r")})
                    assert not first.is_error, text_of(first)
                    cut()  # the same run goes on with its store gone
                    for tool, arguments in (
                            ("createNote", {"notebookId": "NB-1", "title": unique("after")}),
                            ("getNotebook", {"id": "NB-1"})):
                        answers.append(await session.call_tool(
                            tool, arguments, meta={**run, "callgate/request_id": unique("r")}))
                    return answers, await session.list_tools()

    answers, listed = asyncio.run(calls())
    assert [tool.name for tool in listed.tools]  # the session still answers
    # the write met the store gone: nothing sent, in fixed words; the read needs no store
    assert (answers[0].meta or {})["callgate/error_class"] == "transient"
    assert not answers[1].is_error
    for answer in answers:
        assert_none_of(internals, text_of(answer), answer.structured_content,
                       answer.meta, answer.model_dump(mode="json"))
    # the gateway's log (its stderr) is where an operator finds the store's address
    assert internals[0] in (tmp_path / "gateway.log").read_text()
