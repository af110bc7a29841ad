"""The LangGraph adapter against real LangGraph, driven by LangChain's fake chat model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.frameworks.conftest import DANA, REPO, WORLD, example, gate_bindings, needs, run_example

needs("langgraph", "langgraph")

from langchain_core.language_models.fake_chat_models import (  # noqa: E402
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402
from langgraph.types import Command  # noqa: E402

from callgate_rules.harness.simulator import Simulator  # noqa: E402
from callgate_rules.integrations.frameworks.langgraph import (  # noqa: E402
    CallgateToolNode,
    route_tools,
)
from callgate_rules.pipeline.asynchronous import AsyncGate  # noqa: E402

EXAMPLE = example("langgraph_agent")
FOLLOW_UP = ("createFollowUp", {"ticketId": "T-1001", "assigneeId": "U-7",
                                "dueAt": "2026-12-03T09:00:00Z"})
EMAIL = ("sendEmail", {"to": "anna.petrova@northwind.example", "subject": "Hi",
                       "body": "Hello Anna"})


def _app(tmp_path: Path, script: list[AIMessage]) -> tuple[Any, Simulator, list[Any]]:
    simulator = Simulator(WORLD)
    gate = AsyncGate.from_paths(REPO / "contracts", REPO / "policies",
                                **gate_bindings(simulator, f"sqlite:///{tmp_path}/r.sqlite3"))
    decisions: list[Any] = []
    model = GenericFakeChatModel(messages=iter(script))

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", CallgateToolNode(gate, on_decision=decisions.append))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route_tools)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemorySaver()), simulator, decisions


CONFIG: Any = {"configurable": {"thread_id": "t-1", "actor": DANA}}


def _tool_messages(state: Any) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in state["messages"] if isinstance(m, ToolMessage)}


def test_the_example_runs_offline_and_prints_each_route(capsys: Any, tmp_path: Path) -> None:
    assert asyncio.run(EXAMPLE.main(str(tmp_path))) == 0
    assert capsys.readouterr().out.split("\n") == [
        "createFollowUp return_result", "sendEmail refuse", "deleteTicket refuse",
        "sendEmail await_confirmation", "sendEmail return_result", "2", ""]


def test_the_example_as_a_process() -> None:
    done = run_example("langgraph_agent")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "2"


def test_a_resumed_node_returns_the_same_result_and_writes_once(tmp_path: Path) -> None:
    # One AI message: a write that runs at once and one that needs a person. LangGraph
    # re-runs the whole node on resume; the follow-up must still be written once and the
    # model must read its result, not "already done".
    script = [EXAMPLE.calls(("a", *FOLLOW_UP), ("b", *EMAIL)), AIMessage(content="done")]
    app, simulator, decisions = _app(tmp_path, script)
    paused = asyncio.run(app.ainvoke({"messages": [HumanMessage("go")]}, CONFIG))
    [pending] = paused["__interrupt__"]
    assert pending.value["tool"] == "sendEmail" and "anna.petrova" in pending.value["draft"]
    assert simulator.write_count() == 0  # nothing runs before the person answered
    state = asyncio.run(app.ainvoke(Command(resume={"approved": True, "by": "dana"}), CONFIG))
    answers = _tool_messages(state)
    assert simulator.write_count("createFollowUp") == 1 and simulator.write_count("sendEmail") == 1
    assert answers["a"].startswith("createFollowUp succeeded. Result: ")
    assert "already" not in answers["a"]
    assert [str(d.route) for d in decisions] == ["await_confirmation", "return_result",
                                                 "return_result"]
    assert answers["a"] == decisions[1].agent_message  # what executing it answered


def test_a_declined_confirmation_executes_nothing(tmp_path: Path) -> None:
    app, simulator, _ = _app(tmp_path, [EXAMPLE.calls(("b", *EMAIL)), AIMessage(content="ok")])
    asyncio.run(app.ainvoke({"messages": [HumanMessage("go")]}, CONFIG))
    state = asyncio.run(app.ainvoke(Command(resume=False), CONFIG))
    assert "not approved" in _tool_messages(state)["b"]
    assert simulator.write_count() == 0


def test_the_request_id_is_per_user_turn(tmp_path: Path) -> None:
    # The same call in two user messages is two writes; twice in one message, one.
    script = [EXAMPLE.calls(("a", *FOLLOW_UP), ("a2", *FOLLOW_UP)), AIMessage(content="1"),
              EXAMPLE.calls(("c", *FOLLOW_UP)), AIMessage(content="2")]
    app, simulator, decisions = _app(tmp_path, script)
    asyncio.run(app.ainvoke({"messages": [HumanMessage("first")]}, CONFIG))
    assert simulator.write_count() == 1
    assert [str(d.route) for d in decisions] == ["return_result", "return_receipt"]
    asyncio.run(app.ainvoke({"messages": [HumanMessage("again, please")]}, CONFIG))
    assert simulator.write_count() == 2


def test_malformed_and_unknown_calls_get_the_gates_message(tmp_path: Path) -> None:
    broken = AIMessage(content="", invalid_tool_calls=[
        {"id": "x", "name": "createFollowUp", "args": '{"ticketId": ', "error": "bad json"}],
        tool_calls=[{"id": "y", "name": "deleteTicket", "args": {}}])
    app, simulator, decisions = _app(tmp_path, [broken, AIMessage(content="ok")])
    state = asyncio.run(app.ainvoke({"messages": [HumanMessage("go")]}, CONFIG))
    answers = _tool_messages(state)
    assert set(answers) == {"x", "y"}
    assert {str(d.error_class) for d in decisions} == {"malformed", "unknown_tool"}
    by_class = {str(d.error_class): d.agent_message for d in decisions}
    assert by_class["malformed"] in answers["x"] and by_class["unknown_tool"] in answers["y"]
    assert simulator.write_count() == 0


def test_a_synchronous_graph_runs_the_same_node(tmp_path: Path) -> None:
    simulator = Simulator(WORLD)
    gate = AsyncGate.from_paths(REPO / "contracts", REPO / "policies",
                                **gate_bindings(simulator, f"sqlite:///{tmp_path}/r.sqlite3"))
    model = GenericFakeChatModel(messages=iter([EXAMPLE.calls(("a", *FOLLOW_UP)),
                                                AIMessage(content="done")]))
    graph = StateGraph(MessagesState)
    graph.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_node("tools", CallgateToolNode(gate))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route_tools)
    graph.add_edge("tools", "agent")
    state = graph.compile().invoke({"messages": [HumanMessage("go")]}, CONFIG)
    assert state["messages"][-1].content == "done" and simulator.write_count() == 1


def test_the_actor_comes_from_the_config(tmp_path: Path) -> None:
    app, simulator, decisions = _app(tmp_path, [EXAMPLE.calls(("a", *FOLLOW_UP)),
                                                AIMessage(content="ok")])
    other: Any = {"configurable": {"thread_id": "t-2",
                                   "actor": {**DANA, "id": "U-90", "tenant": "globex"}}}
    asyncio.run(app.ainvoke({"messages": [HumanMessage("go")]}, other))
    assert decisions[0].error_class is not None and simulator.write_count() == 0


def test_a_turns_intent_holds_a_call_outside_it_and_runs_one_within(tmp_path: Path) -> None:
    # The intent comes with the turn's config; the run is resumed by another node (another
    # process: a new gate on the same store, the same checkpoints) with no intent in its
    # config, and is still the same run, bounded by the intent the store keeps.
    from callgate_rules.intent import INTENT_RULE
    from tests.frameworks.conftest import HOLDER, MAIL, PAY_THE_RENT, RENT, Bank, banking_gate
    bank, saver = Bank(), InMemorySaver()
    decisions: list[Any] = []
    gates: list[Any] = []

    def app(script: list[AIMessage]) -> Any:
        model = GenericFakeChatModel(messages=iter(script))

        async def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(state["messages"])]}
        graph = StateGraph(MessagesState)
        graph.add_node("agent", agent)
        gates.append(banking_gate(tmp_path, bank))
        graph.add_node("tools", CallgateToolNode(gates[-1], on_decision=decisions.append))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", route_tools)
        graph.add_edge("tools", "agent")
        return graph.compile(checkpointer=saver)

    first = app([EXAMPLE.calls(("out", "sendEmail", MAIL), ("in", "sendMoney", RENT))])
    config: Any = {"configurable": {"thread_id": "t-1", "actor": HOLDER,
                                    "intent": PAY_THE_RENT}}
    paused = asyncio.run(first.ainvoke({"messages": [HumanMessage("Pay the rent")]}, config))
    [pending] = paused["__interrupt__"]  # the e-mail waits for a person
    assert pending.value["tool"] == "sendEmail"
    assert "goes beyond what was asked" in pending.value["draft"]
    assert (decisions[0].route, decisions[0].rule) == ("await_confirmation", INTENT_RULE)
    assert bank.writes == []  # nothing runs before the person answered
    resumed: Any = {"configurable": {"thread_id": "t-1", "actor": HOLDER}}
    state = asyncio.run(app([AIMessage(content="rent paid")]).ainvoke(
        Command(resume={"type": "ignore"}), resumed))
    answers = _tool_messages(state)
    assert "not approved" in answers["out"] and answers["in"].startswith("sendMoney succeeded")
    assert bank.writes == [("sendMoney", RENT)]  # the payment it asked for ran, once
    # (sendMoney needs an intent, spec.intent.required: without one it would wait too)
    first_gate, second_gate = gates
    assert first_gate.gate.counters["intent_declared"] == 1
    assert second_gate.gate.counters["intent_declared"] == 0
    assert second_gate.gate.counters["intent_narrowed"] == 0
