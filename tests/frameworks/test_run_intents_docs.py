"""The run-intent snippets of docs/how-to/frameworks.md ("Bounding a run by what the user
asked"), run as they stand there: pydantic-ai's ``FunctionModel`` and LangChain's fake chat
model propose the payment the user asked for and an e-mail they did not; the payment runs,
the e-mail waits for a person."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from callgate_rules.intent import INTENT_RULE
from tests.frameworks.conftest import (
    HOLDER,
    MAIL,
    RENT,
    REPO,
    Bank,
    banking_gate,
    example,
    needs,
)

PAGE = (REPO / "docs" / "how-to" / "frameworks.md").read_text(encoding="utf-8")
SECTION = PAGE.split("## Bounding a run by what the user asked\n", 1)[1].split("\n## ", 1)[0]
TURN, LANGGRAPH = re.findall(r"```python\n(.*?)```", SECTION, re.S)
USER_TEXT = "Pay my landlord the December rent, 950 euros, to DE89370400440532013000"


def _run(snippet: str, name: str, namespace: dict[str, Any]) -> None:
    code = compile(snippet, f"docs/how-to/frameworks.md ({name})", "exec",
                   flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    running = eval(code, namespace)  # noqa: S307 - the page's own code
    if running is not None:
        asyncio.run(running)


def test_the_turns_intent_holds_the_call_the_user_did_not_ask_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    needs("pydantic_ai", "pydantic-ai")
    from pydantic_ai import Agent, DeferredToolRequests
    from pydantic_ai.messages import ModelResponse, TextPart

    from callgate_rules.integrations.frameworks.pydantic_ai import Callgate
    monkeypatch.chdir(REPO)  # the snippet names the intent's file from the repository
    module = example("pydantic_ai_agent")
    bank, decisions = Bank(), []
    model = module.scripted([module.calls(("out", "sendEmail", MAIL), ("in", "sendMoney", RENT)),
                             ModelResponse(parts=[TextPart("paid")])])
    agent = Agent(model, deps_type=Any, output_type=[str, DeferredToolRequests],
                  capabilities=[Callgate(banking_gate(tmp_path, bank),
                                         on_decision=decisions.append)])
    namespace: dict[str, Any] = {"agent": agent, "actor": HOLDER, "user_text": USER_TEXT}
    _run(TURN, "Turn", namespace)
    assert namespace["turn"].intent_declared
    output = namespace["result"].output
    assert isinstance(output, DeferredToolRequests)
    assert [call.tool_call_id for call in output.approvals] == ["out"]
    assert bank.writes == [("sendMoney", RENT)]
    assert [d.rule for d in decisions if d.tool == "sendEmail"] == [INTENT_RULE]


def test_the_langgraph_config_carries_the_intent(tmp_path: Path) -> None:
    needs("langgraph", "langgraph")
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph

    from callgate_rules.integrations.frameworks.langgraph import CallgateToolNode, route_tools
    module = example("langgraph_agent")
    model = GenericFakeChatModel(messages=iter([module.calls(("out", "sendEmail", MAIL),
                                                             ("in", "sendMoney", RENT))]))

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}
    bank = Bank()
    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", CallgateToolNode(banking_gate(tmp_path, bank)))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route_tools)
    graph.add_edge("tools", "agent")
    intent = (REPO / "examples" / "intents" / "pay-the-rent.yaml").read_text()
    namespace: dict[str, Any] = {"app": graph.compile(checkpointer=InMemorySaver()),
                                 "actor": HOLDER, "user_text": USER_TEXT, "intent": intent}
    _run(LANGGRAPH, "LangGraph", namespace)
    [pending] = namespace["paused"]["__interrupt__"]
    assert pending.value["tool"] == "sendEmail"
    assert "goes beyond what was asked" in pending.value["draft"]
    assert bank.writes == []  # nothing runs before the person answered
