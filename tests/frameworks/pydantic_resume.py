"""One side of pydantic-ai's pause-in-one-process, approve-in-another flow, run as its own
interpreter by ``test_pydantic_ai_resume.py``:

    python tests/frameworks/pydantic_resume.py pause  DIRECTORY   # run until the approval
    python tests/frameworks/pydantic_resume.py resume DIRECTORY   # load, approve, resume
    python tests/frameworks/pydantic_resume.py deny   DIRECTORY   # load, deny, resume
    python tests/frameworks/pydantic_resume.py resume DIRECTORY REQUEST_ID  # under another ID

Both sides use the reference contracts, the same SQLite receipt store and the same secret
in ``DIRECTORY``; every call the destination receives is appended to ``DIRECTORY/writes``,
so the count of writes spans processes. ``pause`` saves the run's messages with
pydantic-ai's own serializer as ``messages.json`` and the request ID and the pending
approvals (call ID and draft) as ``pending.json``; ``resume`` prints what it saw as one
JSON line.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolReturnPart,
)

from callgate_rules.harness.simulator import Simulator  # noqa: E402
from callgate_rules.integrations.frameworks import Turn  # noqa: E402
from callgate_rules.integrations.frameworks.pydantic_ai import Callgate  # noqa: E402
from callgate_rules.pipeline.asynchronous import AsyncGate  # noqa: E402
from tests.frameworks.conftest import DANA, WORLD, example, gate_bindings  # noqa: E402

EXAMPLE = example("pydantic_ai_agent")
SECRET = "the secret both workers share"  # CALLGATE_SECRET in a deployment
MAIL = {"to": "anna.petrova@northwind.example", "subject": "Your ticket T-1001",
        "body": "Hello Anna, we are on it."}


def counted(directory: Path, tool: str, executor: Callable[..., Any]) -> Callable[..., Any]:
    def send(*arguments: Any) -> Any:
        with (directory / "writes").open("a") as writes:
            writes.write(tool + "\n")
        return executor(*arguments)
    return send


def setup(directory: Path, script: list[ModelResponse]) -> Agent[Turn, Any]:
    """The same agent in every process: same contracts, policies, store and secret."""
    simulator = Simulator(WORLD)
    bindings = gate_bindings(simulator, f"sqlite:///{directory}/receipts.sqlite3")
    bindings["executors"] = {tool: counted(directory, tool, executor)
                             for tool, executor in bindings["executors"].items()}
    gate = AsyncGate.from_paths(REPO / "contracts", REPO / "policies", secret=SECRET,
                                **bindings)
    return Agent(EXAMPLE.scripted(script), deps_type=Turn,
                 output_type=[str, DeferredToolRequests], capabilities=[Callgate(gate)])


async def pause(directory: Path) -> None:
    agent = setup(directory, [EXAMPLE.calls(("pc_4", "sendEmail", MAIL))])
    turn = Turn(DANA, "turn-1")
    result = await agent.run("Tell Anna (anna.petrova@northwind.example) we are on it.",
                             deps=turn)
    requests = result.output
    assert isinstance(requests, DeferredToolRequests), "the e-mail waits for a person"
    (directory / "messages.json").write_bytes(
        ModelMessagesTypeAdapter.dump_json(result.all_messages()))
    (directory / "pending.json").write_text(json.dumps({  # the request the operation is part of
        "request_id": turn.request_id,
        "approvals": [{"call_id": call.tool_call_id, "tool": call.tool_name,
                       "draft": requests.metadata[call.tool_call_id]["draft"]}
                      for call in requests.approvals]}))


async def resume(directory: Path, approve: bool = True, request_id: str | None = None) -> None:
    answer = "The e-mail to Anna is sent." if approve else "The e-mail was not sent."
    agent = setup(directory, [ModelResponse(parts=[TextPart(answer)])])
    messages = ModelMessagesTypeAdapter.validate_json((directory / "messages.json").read_bytes())
    saved = json.loads((directory / "pending.json").read_text())
    pending = saved["approvals"]
    approved = DeferredToolResults(approvals={each["call_id"]: approve for each in pending},
                                   metadata={each["call_id"]: {"by": "dana"}
                                             for each in pending})
    result = await agent.run(deps=Turn(DANA, request_id or saved["request_id"]), message_history=messages,
                             deferred_tool_results=approved)
    outputs = [part.content for message in result.new_messages()
               if isinstance(message, ModelRequest) for part in message.parts
               if isinstance(part, ToolReturnPart)]
    print(json.dumps({"asked": len(pending), "drafts": [each["draft"] for each in pending],
                      "outputs": outputs, "final": result.output}, default=str))


if __name__ == "__main__":
    side, where, *request_id = sys.argv[1], Path(sys.argv[2]), *sys.argv[3:]
    asyncio.run(pause(where) if side == "pause"
                else resume(where, side == "resume", *request_id))
