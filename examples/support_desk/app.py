"""A small host application: a scripted model, the simulator, the SQLite receipt store.

It shows the full loop an agent application runs on every turn:

1. the model proposes a call (OpenAI Chat Completions format);
2. the gate decides, executes at most once, reconciles, routes;
3. the agent message goes back to the model as the tool result;
4. the model sends a corrected call, or the person confirms a draft.

Run it from the repository root:  python examples/support_desk/app.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from callgate_rules import Gate, Route, Run, WorldResolvers, open_store, openai_tool_message
from callgate_rules.harness.simulator import Simulator
from callgate_rules.integrations.formats import tool_definitions

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def scripted_model() -> Iterator[dict[str, Any]]:
    """Stands in for an LLM: each reply is an assistant message with one tool call. A real
    host would send `messages` and `tools` to the model API instead."""
    replies = [
        # A past due date: the gate asks for one corrected call.
        ("createFollowUp", {"ticketId": "T-1001", "assigneeId": "U-7",
                            "dueAt": "2025-12-15T09:00:00Z"}),
        # The corrected call: executed once under a runtime-made operation ID.
        ("createFollowUp", {"ticketId": "T-1001", "assigneeId": "U-7",
                            "dueAt": "2026-12-15T09:00:00Z", "note": "Call back about VAT"}),
        # An e-mail: never sent without the person's confirmation.
        ("sendEmail", {"to": "anna.petrova@northwind.example", "subject": "Your ticket T-1001",
                       "body": "Hello Anna, a colleague will call you back next week."}),
    ]
    for number, (name, arguments) in enumerate(replies, start=1):
        yield {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{number}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def main() -> int:
    world = yaml.safe_load((ROOT / "examples" / "world.yaml").read_text())
    actor = yaml.safe_load((ROOT / "examples" / "actors" / "dana.yaml").read_text())
    simulator = Simulator(world)
    with tempfile.TemporaryDirectory() as directory:
        store = open_store(f"sqlite:///{directory}/receipts.sqlite3")
        gate = Gate.from_paths(ROOT / "contracts", ROOT / "policies",
                               resolvers=WorldResolvers(world),
                               executors=simulator.executors(), finder=simulator.find,
                               store=store, clock=lambda: datetime(2026, 11, 29, 12, tzinfo=UTC))
        tools = tool_definitions(gate.config, "openai")
        names = ", ".join(t["function"]["name"] for t in tools)
        print(f"model is offered {len(tools)} tools: {names}")
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "Set a follow-up on T-1001 for Dana and e-mail Anna."}]
        run = Run(started_at=gate.clock())
        for reply in scripted_model():
            messages.append(reply)
            call = reply["tool_calls"][0]["function"]
            print(f"\nmodel proposes {call['name']}({call['arguments']})")
            decision = gate.handle(reply, actor=actor, request_id="req-42", run=run)
            print(f"  gate: {decision.route} {decision.error_class or ''}".rstrip())
            if decision.route == Route.AWAIT_CONFIRMATION and decision.confirmation_token:
                print("  draft for the person:\n    " + decision.draft.replace("\n", "\n    ")
                      if decision.draft else "")
                # The person presses "Send" in the UI; the server-side step runs it.
                decision = gate.confirm(decision.confirmation_token, actor=actor,
                                        confirmed_by=actor["id"])
                print(f"  confirmed by {actor['id']}: {decision.route}")
            tool_message = openai_tool_message(decision)
            messages.append(tool_message)
            print(f"  tool result for the model: {tool_message['content']}")
        print(f"\nwrites at the destination: {simulator.write_count()}")
        print(f"counters: {dict(gate.counters)}")
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
