"""LangGraph at its edges, against real LangGraph: a run resumed from a saved checkpoint in a
fresh graph object (the actor travels in the checkpointed state, not in ``configurable``),
the node as ``create_react_agent``'s tools, and approvals in LangChain's human-in-the-loop
shape — accept, edit (the edited call goes through the gate again) and reject."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.frameworks.conftest import DANA, REPO, WORLD, example, gate_bindings, needs

needs("langgraph", "langgraph")

from langchain_core.language_models.fake_chat_models import (  # noqa: E402
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import START, StateGraph  # noqa: E402
from langgraph.types import Command  # noqa: E402

from callgate_rules.harness.simulator import Simulator  # noqa: E402
from callgate_rules.integrations.frameworks.langgraph import (  # noqa: E402
    CallgateAgentState,
    CallgateState,
    CallgateToolNode,
    route_tools,
)
from callgate_rules.pipeline.asynchronous import AsyncGate  # noqa: E402

EXAMPLE = example("langgraph_agent")
EMAIL = ("sendEmail", {"to": "anna.petrova@northwind.example", "subject": "Hi",
                       "body": "Hello Anna"})
FOLLOW_UP = ("createFollowUp", {"ticketId": "T-1001", "assigneeId": "U-7",
                                "dueAt": "2026-12-03T09:00:00Z"})
THREAD: Any = {"configurable": {"thread_id": "t-1"}}  # no actor: it is in the state


def _gate(tmp_path: Path) -> tuple[AsyncGate, Simulator]:
    simulator = Simulator(WORLD)
    return AsyncGate.from_paths(REPO / "contracts", REPO / "policies", **gate_bindings(
        simulator, f"sqlite:///{tmp_path}/r.sqlite3")), simulator


def _graph(gate: AsyncGate, script: list[AIMessage], saver: Any) -> Any:
    """A graph over ``CallgateState``; a new object each call, as a new process builds."""
    model = GenericFakeChatModel(messages=iter(script))

    async def agent(state: CallgateState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(CallgateState)
    graph.add_node("agent", agent)
    graph.add_node("tools", CallgateToolNode(gate))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route_tools)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


def _turn(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)], "callgate": {"actor": DANA}}


def _replies(state: Any) -> dict[str, str]:
    return {m.tool_call_id: str(m.content) for m in state["messages"]
            if isinstance(m, ToolMessage)}


def _paused(tmp_path: Path) -> tuple[AsyncGate, Simulator, InMemorySaver, Any]:
    gate, simulator = _gate(tmp_path)
    saver = InMemorySaver()
    first = _graph(gate, [EXAMPLE.calls(("b", *EMAIL))], saver)
    paused = asyncio.run(first.ainvoke(_turn("mail Anna"), THREAD))
    [pending] = paused["__interrupt__"]
    return gate, simulator, saver, pending


def test_the_interrupt_is_a_human_interrupt_with_the_gates_draft(tmp_path: Path) -> None:
    _, simulator, _, pending = _paused(tmp_path)
    value = pending.value
    assert value["action_request"] == {"action": "sendEmail", "args": EMAIL[1]}
    assert value["config"] == {"allow_accept": True, "allow_edit": True,
                               "allow_respond": True, "allow_ignore": True}
    assert "anna.petrova@northwind.example" in value["description"]
    assert value["description"] == value["draft"] and value["call_id"] == "b"
    assert simulator.write_count() == 0


def test_a_checkpoint_resumed_in_a_fresh_graph_acts_for_the_same_actor(
        tmp_path: Path) -> None:
    # The run pauses; another graph object (a new worker) resumes it from the checkpoint
    # with nothing but the thread ID: the actor comes from the checkpointed state.
    gate, simulator, saver, _ = _paused(tmp_path)
    second = _graph(gate, [AIMessage(content="sent")], saver)
    state = asyncio.run(second.ainvoke(Command(resume={"type": "accept"}), THREAD))
    assert simulator.write_count("sendEmail") == 1
    assert _replies(state)["b"].startswith("sendEmail succeeded")
    assert state["callgate"]["actor"]["id"] == DANA["id"]


def test_accept_as_an_inbox_sends_it_a_list_of_one(tmp_path: Path) -> None:
    gate, simulator, saver, _ = _paused(tmp_path)
    second = _graph(gate, [AIMessage(content="sent")], saver)
    asyncio.run(second.ainvoke(Command(resume=[{"type": "accept", "args": None}]), THREAD))
    assert simulator.write_count("sendEmail") == 1


def test_an_edited_call_is_checked_again_and_runs_as_edited(tmp_path: Path) -> None:
    gate, simulator, saver, _ = _paused(tmp_path)
    edited = {**EMAIL[1], "subject": "Your ticket T-1001"}
    second = _graph(gate, [AIMessage(content="sent")], saver)
    asyncio.run(second.ainvoke(Command(resume={"type": "edit", "args": {
        "action": "sendEmail", "args": edited}}), THREAD))
    [write] = simulator.writes
    assert write.tool == "sendEmail" and write.arguments["subject"] == "Your ticket T-1001"


def test_an_edit_the_gate_refuses_runs_nothing(tmp_path: Path) -> None:
    # The person's edit sends the mail to an address nobody gave: the gate refuses it.
    gate, simulator, saver, _ = _paused(tmp_path)
    second = _graph(gate, [AIMessage(content="no")], saver)
    state = asyncio.run(second.ainvoke(Command(resume={"decisions": [{
        "type": "edit", "edited_action": {"name": "sendEmail", "args": {
            **EMAIL[1], "to": "billing@attacker.example"}}}]}), THREAD))
    assert simulator.write_count() == 0
    assert "succeeded" not in _replies(state)["b"]


@pytest.mark.parametrize("answer", [{"type": "ignore"}, {"type": "response", "args": "Not yet"},
                                    {"decisions": [{"type": "reject", "message": "Not yet"}]}])
def test_a_rejection_runs_nothing(tmp_path: Path, answer: dict[str, Any]) -> None:
    gate, simulator, saver, _ = _paused(tmp_path)
    second = _graph(gate, [AIMessage(content="ok")], saver)
    state = asyncio.run(second.ainvoke(Command(resume=answer), THREAD))
    reply = _replies(state)["b"]
    assert "not approved" in reply and simulator.write_count() == 0
    assert ("Not yet" in reply) == ("Not yet" in str(answer))


def test_without_an_actor_anywhere_the_gate_refuses(tmp_path: Path) -> None:
    gate, simulator = _gate(tmp_path)
    app = _graph(gate, [EXAMPLE.calls(("a", *FOLLOW_UP)), AIMessage(content="ok")],
                 InMemorySaver())
    state = asyncio.run(app.ainvoke({"messages": [HumanMessage("go")]}, THREAD))
    assert simulator.write_count() == 0 and "succeeded" not in _replies(state)["a"]


class _ToolCallingFake(GenericFakeChatModel):
    """LangChain's fake chat model, accepting ``bind_tools`` as a real one does."""

    bound: list[Any] = []

    def bind_tools(self, tools: Any, **keywords: Any) -> Any:
        type(self).bound = list(tools)
        return self


def test_the_node_is_create_react_agents_tools(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated for langchain's
        from langgraph.prebuilt import create_react_agent
    gate, simulator = _gate(tmp_path)
    model = _ToolCallingFake(messages=iter([
        EXAMPLE.calls(("a", *FOLLOW_UP)), EXAMPLE.calls(("b", *EMAIL)),
        AIMessage(content="done")]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = create_react_agent(model, CallgateToolNode(gate), checkpointer=InMemorySaver(),
                                 state_schema=CallgateAgentState)
    assert sorted(tool.name for tool in _ToolCallingFake.bound) == \
        sorted(gate.gate.config.contracts)
    paused = asyncio.run(app.ainvoke(_turn("follow up and mail Anna"), THREAD))
    assert simulator.write_count("createFollowUp") == 1
    [pending] = paused["__interrupt__"]
    assert pending.value["action_request"]["action"] == "sendEmail"
    state = asyncio.run(app.ainvoke(Command(resume={"type": "accept"}), THREAD))
    assert simulator.write_count("sendEmail") == 1 and state["messages"][-1].content == "done"


@pytest.mark.skipif(importlib.util.find_spec("langgraph.checkpoint.sqlite") is None,
                    reason="langgraph-checkpoint-sqlite is not installed")
def test_a_sqlite_checkpoint_resumes_in_a_fresh_graph(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async def scenario() -> None:
        gate, simulator = _gate(tmp_path)
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "c.sqlite")) as saver:
            first = _graph(gate, [EXAMPLE.calls(("b", *EMAIL))], saver)
            await first.ainvoke(_turn("mail Anna"), THREAD)
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "c.sqlite")) as saver:
            second = _graph(gate, [AIMessage(content="sent")], saver)
            await second.ainvoke(Command(resume={"type": "accept"}), THREAD)
        assert simulator.write_count("sendEmail") == 1
    asyncio.run(scenario())


def _worker(*arguments: str) -> Any:
    done = subprocess.run([sys.executable, str(REPO / "tests" / "frameworks" /
                                               "langgraph_resume.py"), *arguments],
                          cwd=REPO, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.integration  # starts interpreters
@pytest.mark.skipif(importlib.util.find_spec("langgraph.checkpoint.sqlite") is None,
                    reason="langgraph-checkpoint-sqlite is not installed")
def test_a_checkpoint_paused_in_one_process_is_accepted_in_another_once(
        tmp_path: Path) -> None:
    [draft] = _worker("pause", str(tmp_path))
    assert "anna.petrova@northwind.example" in draft
    assert not (tmp_path / "writes").exists()
    replies = _worker("resume", str(tmp_path), json.dumps({"type": "accept"}))
    assert replies["b"].startswith("sendEmail succeeded")
    assert (tmp_path / "writes").read_text().split() == ["sendEmail"]
