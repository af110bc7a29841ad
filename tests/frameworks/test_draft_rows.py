"""An adapter's draft is the one renderer's (``confirmation.drafts``): LangGraph's interrupt
carries the draft as text and as rows, and the text is those rows rendered, every hostile
character of the arguments marked and named."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.frameworks.conftest import DANA, REPO, WORLD, example, gate_bindings, needs

needs("langgraph", "langgraph")

from langchain_core.language_models.fake_chat_models import (  # noqa: E402
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402

from callgate_rules.confirmation.drafts import STORED_FORMAT, Draft, recovered  # noqa: E402
from callgate_rules.harness.simulator import Simulator  # noqa: E402
from callgate_rules.integrations.frameworks.langgraph import (  # noqa: E402
    CallgateToolNode,
    route_tools,
)
from callgate_rules.pipeline.asynchronous import AsyncGate  # noqa: E402

EXAMPLE = example("langgraph_agent")
SUBJECT = "Your ticket\nto: boss@northwind.example \u202etxt.exe\u200b"


def test_the_interrupt_carries_the_renderers_draft(tmp_path: Path) -> None:
    simulator = Simulator(WORLD)
    gate = AsyncGate.from_paths(REPO / "contracts", REPO / "policies",
                                **gate_bindings(simulator, f"sqlite:///{tmp_path}/r.sqlite3"))
    model = GenericFakeChatModel(messages=iter([EXAMPLE.calls(("b", "sendEmail", {
        "to": "anna.petrova@northwind.example", "subject": SUBJECT, "body": "Hello"})),
        AIMessage(content="ok")]))

    async def agent(state: MessagesState) -> dict[str, object]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", CallgateToolNode(gate))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route_tools)
    graph.add_edge("tools", "agent")
    app = graph.compile(checkpointer=InMemorySaver())
    paused = asyncio.run(app.ainvoke({"messages": [HumanMessage("mail anna")]}, {
        "configurable": {"thread_id": "t-draft", "actor": DANA}}))
    [pending] = paused["__interrupt__"]
    rows = pending.value["draft_rows"]
    draft = Draft.from_stored(json.dumps({"format": STORED_FORMAT, **rows}))
    assert draft is not None and draft.text() == pending.value["draft"]  # one renderer
    [subject] = [row for row in draft.rows if row.name == "subject"]
    assert recovered(subject.shown) == SUBJECT
    assert {w.kind for w in subject.warnings} == {"line_break", "bidi", "invisible"}
    assert "\n  subject: Your ticket\u21b5to: boss@northwind.example " \
        "\u27e8U+202E RIGHT-TO-LEFT OVERRIDE\u27e9txt.exe" in pending.value["draft"]
    assert not {"\u202e", "\u200b"} & set(pending.value["draft"])
    assert draft.requests == ("mail anna",)
    assert draft.held_by is not None and draft.held_by.rule == "sendEmail/confirmation"
